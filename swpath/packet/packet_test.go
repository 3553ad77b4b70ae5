package packet_test

import (
	"net/netip"
	"testing"

	"github.com/scrubd/scrubd/swpath/packet"
	"github.com/scrubd/scrubd/swpath/rule"
	"github.com/scrubd/scrubd/swpath/traffic"
)

var (
	s4 = netip.MustParseAddr("198.51.100.9")
	d4 = netip.MustParseAddr("203.0.113.7")
	s6 = netip.MustParseAddr("2001:db8::1")
	d6 = netip.MustParseAddr("2001:db8:ffff::2")
)

func TestParse(t *testing.T) {
	udp4 := traffic.Frame{Family: rule.IPv4, Src: s4, Dst: d4, Proto: rule.ProtoUDP, SrcPort: 53, DstPort: 1500, DSCP: 46, Size: 100}
	wantUDP4 := rule.Fields{Family: rule.IPv4, Proto: rule.ProtoUDP, L4: true, Frag: rule.NotFragment, DSCP: 46,
		SrcPort: 53, DstPort: 1500, Length: 86, Src: rule.AddrFrom(s4), Dst: rule.AddrFrom(d4)}
	with := func(fr traffic.Frame, mod func(*traffic.Frame)) traffic.Frame { mod(&fr); return fr }
	want := func(f rule.Fields, mod func(*rule.Fields)) rule.Fields { mod(&f); return f }
	tcp6 := traffic.Frame{Family: rule.IPv6, Src: s6, Dst: d6, Proto: rule.ProtoTCP, SrcPort: 4000, DstPort: 80, TCPFlags: rule.SYN | rule.ACK, DSCP: 10, Size: 200}
	wantTCP6 := rule.Fields{Family: rule.IPv6, Proto: rule.ProtoTCP, L4: true, Frag: rule.NotFragment, DSCP: 10, TCPFlags: rule.SYN | rule.ACK,
		SrcPort: 4000, DstPort: 80, Length: 186, Src: rule.AddrFrom(s6), Dst: rule.AddrFrom(d6)}
	ext := func(ts ...uint8) []traffic.Ext {
		var e []traffic.Ext
		for _, t := range ts {
			e = append(e, traffic.Ext{Type: t, Len: 16})
		}
		return e
	}
	tests := []struct {
		name   string
		fr     traffic.Frame
		status packet.Status
		want   rule.Fields
	}{
		{"udp4", udp4, packet.OK, wantUDP4},
		{"udp4 short frame padded", with(udp4, func(f *traffic.Frame) { f.Size = 0 }), packet.OK, want(wantUDP4, func(f *rule.Fields) { f.Length = 28 })},
		{"udp4 vlan", with(udp4, func(f *traffic.Frame) { f.Tags = []uint16{0x8100} }), packet.OK, want(wantUDP4, func(f *rule.Fields) { f.Length = 82 })},
		{"udp4 qinq", with(udp4, func(f *traffic.Frame) { f.Tags = []uint16{0x88a8, 0x8100} }), packet.OK, want(wantUDP4, func(f *rule.Fields) { f.Length = 78 })},
		{"udp4 three tags", with(udp4, func(f *traffic.Frame) { f.Tags = []uint16{0x88a8, 0x8100, 0x8100} }), packet.TooManyTags, rule.Fields{}},
		{"udp4 options", with(udp4, func(f *traffic.Frame) { f.IPv4Options = 40 }), packet.OK, wantUDP4},
		{"udp4 options truncated", with(udp4, func(f *traffic.Frame) { f.IPv4Options = 40; f.Truncate = 14 + 56 }), packet.Truncated, rule.Fields{}},
		{"ipv4 header truncated", with(udp4, func(f *traffic.Frame) { f.Truncate = 14 + 19 }), packet.Truncated, rule.Fields{}},
		{"ipv4 bad version", with(udp4, func(f *traffic.Frame) { f.Version = 6 }), packet.Malformed, rule.Fields{}},
		{"ipv4 ihl 4", with(udp4, func(f *traffic.Frame) { f.IHL = 4 }), packet.Malformed, rule.Fields{}},
		{"udp4 l4 truncated", with(udp4, func(f *traffic.Frame) { f.Truncate = 14 + 20 + 7 }), packet.OK,
			want(wantUDP4, func(f *rule.Fields) { f.L4, f.SrcPort, f.DstPort = false, 0, 0 })},
		{"udp4 l4 exactly", with(udp4, func(f *traffic.Frame) { f.Truncate = 14 + 20 + 8 }), packet.OK, wantUDP4},
		{"first fragment", with(udp4, func(f *traffic.Frame) { f.MF, f.DF = true, true }), packet.OK,
			want(wantUDP4, func(f *rule.Fields) { f.Frag = rule.FirstFragment | rule.DontFragment })},
		{"middle fragment", with(udp4, func(f *traffic.Frame) { f.MF, f.FragOffset = true, 185 }), packet.OK,
			want(wantUDP4, func(f *rule.Fields) { f.Frag, f.L4, f.SrcPort, f.DstPort = rule.IsFragment, false, 0, 0 })},
		{"last fragment", with(udp4, func(f *traffic.Frame) { f.FragOffset = 1 }), packet.OK,
			want(wantUDP4, func(f *rule.Fields) {
				f.Frag, f.L4, f.SrcPort, f.DstPort = rule.IsFragment|rule.LastFragment, false, 0, 0
			})},
		{"icmp4", traffic.Frame{Family: rule.IPv4, Src: s4, Dst: d4, Proto: rule.ProtoICMP, ICMPType: 8, ICMPCode: 3}, packet.OK,
			rule.Fields{Family: rule.IPv4, Proto: rule.ProtoICMP, L4: true, Frag: rule.NotFragment, ICMPType: 8, ICMPCode: 3, Length: 28, Src: rule.AddrFrom(s4), Dst: rule.AddrFrom(d4)}},
		{"icmpv6 in ipv4 has no icmp fields", traffic.Frame{Family: rule.IPv4, Src: s4, Dst: d4, Proto: rule.ProtoICMPv6, ICMPType: 8}, packet.OK,
			rule.Fields{Family: rule.IPv4, Proto: rule.ProtoICMPv6, Frag: rule.NotFragment, Length: 28, Src: rule.AddrFrom(s4), Dst: rule.AddrFrom(d4)}},
		{"gre4", traffic.Frame{Family: rule.IPv4, Src: s4, Dst: d4, Proto: rule.ProtoGRE, Size: 80}, packet.OK,
			rule.Fields{Family: rule.IPv4, Proto: rule.ProtoGRE, Frag: rule.NotFragment, Length: 66, Src: rule.AddrFrom(s4), Dst: rule.AddrFrom(d4)}},
		{"sctp4 truncated at 11", traffic.Frame{Family: rule.IPv4, Src: s4, Dst: d4, Proto: rule.ProtoSCTP, SrcPort: 1, DstPort: 2, Truncate: 14 + 20 + 11}, packet.OK,
			rule.Fields{Family: rule.IPv4, Proto: rule.ProtoSCTP, Frag: rule.NotFragment, Length: 32, Src: rule.AddrFrom(s4), Dst: rule.AddrFrom(d4)}},
		{"tcp6", tcp6, packet.OK, wantTCP6},
		{"tcp6 tcp truncated", with(tcp6, func(f *traffic.Frame) { f.Truncate = 14 + 40 + 19 }), packet.OK,
			want(wantTCP6, func(f *rule.Fields) { f.L4, f.SrcPort, f.DstPort, f.TCPFlags = false, 0, 0, 0 })},
		{"tcp6 four ext headers", with(tcp6, func(f *traffic.Frame) { f.Ext = ext(0, 43, 60, 60) }), packet.OK, wantTCP6},
		{"tcp6 five ext headers", with(tcp6, func(f *traffic.Frame) { f.Ext = ext(0, 43, 60, 60, 60) }), packet.OK,
			want(wantTCP6, func(f *rule.Fields) { f.Proto, f.L4, f.SrcPort, f.DstPort, f.TCPFlags = 60, false, 0, 0, 0 })},
		{"tcp6 ext truncated", with(tcp6, func(f *traffic.Frame) { f.Ext = ext(0, 43); f.Truncate = 14 + 40 + 16 + 15 }), packet.OK,
			want(wantTCP6, func(f *rule.Fields) { f.Proto, f.L4, f.SrcPort, f.DstPort, f.TCPFlags = 43, false, 0, 0, 0 })},
		{"tcp6 first fragment", with(tcp6, func(f *traffic.Frame) { f.Ext = ext(0, 44); f.MF = true }), packet.OK,
			want(wantTCP6, func(f *rule.Fields) { f.Frag = rule.FirstFragment })},
		{"tcp6 df ignored", with(tcp6, func(f *traffic.Frame) { f.Ext = ext(44); f.DF = true }), packet.OK, wantTCP6},
		{"tcp6 middle fragment", with(tcp6, func(f *traffic.Frame) { f.Ext = ext(44, 60); f.MF, f.FragOffset = true, 100 }), packet.OK,
			want(wantTCP6, func(f *rule.Fields) {
				f.Proto, f.Frag, f.L4, f.SrcPort, f.DstPort, f.TCPFlags = 60, rule.IsFragment, false, 0, 0, 0
			})},
		{"tcp6 last fragment", with(tcp6, func(f *traffic.Frame) { f.Ext = ext(44); f.FragOffset = 100 }), packet.OK,
			want(wantTCP6, func(f *rule.Fields) {
				f.Frag, f.L4, f.SrcPort, f.DstPort, f.TCPFlags = rule.IsFragment|rule.LastFragment, false, 0, 0, 0
			})},
		{"icmpv6", traffic.Frame{Family: rule.IPv6, Src: s6, Dst: d6, Proto: rule.ProtoICMPv6, ICMPType: 128, Ext: ext(60)}, packet.OK,
			rule.Fields{Family: rule.IPv6, Proto: rule.ProtoICMPv6, L4: true, Frag: rule.NotFragment, ICMPType: 128, Length: 64, Src: rule.AddrFrom(s6), Dst: rule.AddrFrom(d6)}},
		{"ipv6 truncated", with(tcp6, func(f *traffic.Frame) { f.Truncate = 14 + 39 }), packet.Truncated, rule.Fields{}},
		{"ipv6 bad version", with(tcp6, func(f *traffic.Frame) { f.Version = 4 }), packet.Malformed, rule.Fields{}},
		{"arp", traffic.Frame{EtherType: 0x0806}, packet.NotIP, rule.Fields{}},
		{"arp in vlan", traffic.Frame{EtherType: 0x0806, Tags: []uint16{0x8100}}, packet.NotIP, rule.Fields{}},
		{"vlan truncated", traffic.Frame{Tags: []uint16{0x8100, 0x8100}, Truncate: 19}, packet.Truncated, rule.Fields{}},
	}
	for _, tt := range tests {
		b := traffic.AppendFrame(nil, &tt.fr)
		f := rule.Fields{Proto: 99} // must be overwritten
		st := packet.Parse(b, &f)
		if st != tt.status || f != tt.want {
			t.Errorf("%s: Parse = %v %+v\nwant %v %+v", tt.name, st, f, tt.status, tt.want)
		}
	}
	var f rule.Fields
	if st := packet.Parse(make([]byte, 13), &f); st != packet.Truncated {
		t.Errorf("13-byte frame: %v", st)
	}
}

func TestParseAllocs(t *testing.T) {
	frames := [][]byte{
		traffic.AppendFrame(nil, &traffic.Frame{Family: rule.IPv4, Src: s4, Dst: d4, Proto: rule.ProtoUDP, Tags: []uint16{0x8100}}),
		traffic.AppendFrame(nil, &traffic.Frame{Family: rule.IPv6, Src: s6, Dst: d6, Proto: rule.ProtoTCP, Ext: []traffic.Ext{{Type: 0, Len: 8}, {Type: 44}}}),
	}
	var f rule.Fields
	n := testing.AllocsPerRun(100, func() {
		for _, b := range frames {
			packet.Parse(b, &f)
		}
	})
	if n != 0 {
		t.Fatalf("Parse allocates %v times per run", n)
	}
}

func checkConsistent(t *testing.T, b []byte, st packet.Status, f *rule.Fields) {
	t.Helper()
	if st != packet.OK {
		if *f != (rule.Fields{}) {
			t.Fatalf("status %v but fields %+v", st, f)
		}
		return
	}
	if f.Family != rule.IPv4 && f.Family != rule.IPv6 {
		t.Fatalf("OK with family %d", f.Family)
	}
	base := f.Frag &^ rule.DontFragment
	switch base {
	case rule.NotFragment, rule.FirstFragment, rule.IsFragment, rule.IsFragment | rule.LastFragment:
	default:
		t.Fatalf("fragment state %v", f.Frag)
	}
	if f.Family == rule.IPv6 && f.Frag&rule.DontFragment != 0 {
		t.Fatal("IPv6 with dont-fragment")
	}
	if f.L4 && f.Frag&rule.IsFragment != 0 {
		t.Fatal("L4 present in a non-first fragment")
	}
	if !f.L4 && (f.SrcPort|f.DstPort != 0 || f.TCPFlags|f.ICMPType|f.ICMPCode != 0) {
		t.Fatalf("L4 fields without L4: %+v", f)
	}
	if f.L4 && !f.HasPorts() && !f.HasICMP() {
		t.Fatalf("L4 for proto %d family %d", f.Proto, f.Family)
	}
	if f.Proto != rule.ProtoTCP && f.TCPFlags != 0 {
		t.Fatal("TCP flags on non-TCP")
	}
	if f.DSCP > 63 {
		t.Fatal("DSCP > 63")
	}
	if f.Family == rule.IPv6 && f.Length < 40 {
		t.Fatal("IPv6 length < 40")
	}
	if f.Family == rule.IPv4 && (f.Src.Lo|f.Dst.Lo != 0 || f.Src.Hi&0xffffffff != 0 || f.Dst.Hi&0xffffffff != 0) {
		t.Fatal("IPv4 address outside the top 32 bits")
	}
	if f.L4 {
		// More captured bytes never change a packet whose L4 header is present.
		var g rule.Fields
		packet.Parse(append(b[:len(b):len(b)], make([]byte, 64)...), &g)
		if g != *f {
			t.Fatalf("appending bytes changed %+v to %+v", f, g)
		}
	}
}

func FuzzParse(f *testing.F) {
	seeds := []traffic.Frame{
		{Family: rule.IPv4, Src: s4, Dst: d4, Proto: rule.ProtoUDP, SrcPort: 53, DstPort: 80},
		{Family: rule.IPv4, Src: s4, Dst: d4, Proto: rule.ProtoTCP, IPv4Options: 8, Tags: []uint16{0x88a8, 0x8100}, TCPFlags: 2},
		{Family: rule.IPv4, Src: s4, Dst: d4, Proto: rule.ProtoICMP, MF: true, FragOffset: 3},
		{Family: rule.IPv6, Src: s6, Dst: d6, Proto: rule.ProtoSCTP, Ext: []traffic.Ext{{Type: 0, Len: 8}, {Type: 44}}, MF: true},
		{Family: rule.IPv6, Src: s6, Dst: d6, Proto: rule.ProtoICMPv6, Ext: []traffic.Ext{{Type: 0}, {Type: 43}, {Type: 60}, {Type: 60}, {Type: 44}}},
		{Family: rule.IPv6, Src: s6, Dst: d6, Proto: rule.ProtoTCP, Truncate: 60},
		{EtherType: 0x0806},
	}
	for i := range seeds {
		f.Add(traffic.AppendFrame(nil, &seeds[i]))
	}
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		var fl rule.Fields
		st := packet.Parse(b, &fl)
		checkConsistent(t, b, st, &fl)
		var g rule.Fields
		gst := packet.ParseSlow(b, &g)
		if gst != st || g != fl {
			t.Fatalf("fast path %v %+v, general parser %v %+v", st, fl, gst, g)
		}
	})
}

// TestFastPathMatchesGeneral compares Parse (fast path for untagged IPv4
// without options at offset 0, any protocol) with the general parser on
// frames around the fast path's edges: every truncation, DF/MF/offset
// combinations, IHL values, every protocol number, tags, and random bytes
// in the fields it reads.
func TestFastPathMatchesGeneral(t *testing.T) {
	var frames [][]byte
	for _, proto := range []uint8{rule.ProtoUDP, rule.ProtoTCP, rule.ProtoICMP, rule.ProtoSCTP, 0, 255} {
		for _, df := range []bool{false, true} {
			for _, mf := range []bool{false, true} {
				for _, off := range []uint16{0, 1, 0x1fff} {
					for _, opts := range []int{0, 4} {
						fr := traffic.Frame{Family: rule.IPv4, Src: s4, Dst: d4, Proto: proto, SrcPort: 1234, DstPort: 53,
							TCPFlags: rule.SYN | rule.FIN, DSCP: 63, DF: df, MF: mf, FragOffset: off, IPv4Options: opts, Size: 64}
						frames = append(frames, traffic.AppendFrame(nil, &fr))
						fr.Tags = []uint16{0x8100}
						frames = append(frames, traffic.AppendFrame(nil, &fr))
					}
				}
			}
		}
	}
	for proto := range 256 {
		for _, df := range []bool{false, true} {
			fr := traffic.Frame{Family: rule.IPv4, Src: s4, Dst: d4, Proto: uint8(proto), SrcPort: 0xfedc, DstPort: 0xba98,
				ICMPType: 0xa5, ICMPCode: 0x5a, TCPFlags: 0xff, DF: df, Size: 64}
			frames = append(frames, traffic.AppendFrame(nil, &fr))
		}
	}
	g := traffic.NewGenerator(traffic.Config{Seed: 7, Rules: traffic.SourceWorkload(), RuleFraction: 0.5, IPv6Fraction: 0.2})
	frames = append(frames, g.Frames(2000)...)
	rng := uint64(0x9E3779B97F4A7C15)
	var fast, slow rule.Fields
	check := func(b []byte) {
		t.Helper()
		st := packet.Parse(b, &fast)
		sst := packet.ParseSlow(b, &slow)
		if st != sst || fast != slow {
			t.Fatalf("frame % x:\nfast    %v %+v\ngeneral %v %+v", b, st, fast, sst, slow)
		}
	}
	fastHits := 0
	for _, b := range frames {
		for n := 0; n <= len(b); n++ {
			check(b[:n])
		}
		if len(b) >= 54 && b[12] == 8 && b[13] == 0 && b[14] == 0x45 && b[20]&0x1f == 0 && b[21] == 0 {
			fastHits++
		}
		// Random values in the bytes the fast path reads.
		m := append([]byte(nil), b...)
		for k := 0; k < 20; k++ {
			rng ^= rng << 13
			rng ^= rng >> 7
			rng ^= rng << 17
			i := 12 + int(rng%uint64(min(len(m)-12, 40)+1))
			if i < len(m) {
				m[i] = byte(rng >> 32)
			}
			check(m)
		}
	}
	if fastHits < 600 {
		t.Fatalf("only %d frames reach the fast path", fastHits)
	}
}
