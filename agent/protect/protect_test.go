package protect

import (
	"math/rand/v2"
	"net/netip"
	"testing"

	"github.com/scrubd/scrubd/swpath/rule"
)

func mustRule(t testing.TB, y string) rule.Rule {
	t.Helper()
	r, err := rule.ParseRule("t", []byte(y), rule.Rule{}.Expires)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func list(t testing.TB) *List {
	mg := netip.MustParsePrefix("192.0.2.10/32")
	return &List{Entries: []Entry{
		{Rule: rule.Rule{ID: "p-peer", Action: rule.Accept, Match: rule.Match{Src: netip.MustParsePrefix("192.0.2.1/32"), Dst: mg}}, Note: "peer"},
		{Rule: rule.Rule{ID: "p-dst", Action: rule.Accept, Match: rule.Match{Dst: mg}}, Note: "mgmt"},
		{Rule: rule.Rule{ID: "bgp", Action: rule.Accept, Match: rule.Match{Dst: netip.MustParsePrefix("198.51.100.0/24"), Proto: []uint8{rule.ProtoTCP}, Port: rule.Ranges{{Lo: 179, Hi: 179}}}}, Note: "bgp"},
	}}
}

func TestCheck(t *testing.T) {
	l := list(t)
	for _, tc := range []struct {
		yaml string
		want Verdict
	}{
		{`{id: a, action: drop, match: {dst: 203.0.113.0/24}}`, Clear},
		{`{id: a, action: drop, match: {dst: 192.0.2.10/32, proto: udp}}`, Refused},
		{`{id: a, action: drop, match: {dst: 192.0.2.0/24}}`, Narrowed},
		{`{id: a, action: drop, match: {proto: udp, dst_port: "53"}}`, Narrowed},
		{`{id: a, action: drop, match: {dst: 2001:db8::/32}}`, Clear},
		{`{id: a, action: drop, match: {dst: 198.51.100.7/32, proto: tcp, dst_port: "179"}}`, Refused},
		{`{id: a, action: drop, match: {dst: 198.51.100.7/32, proto: tcp, dst_port: "80", src_port: "1000"}}`, Clear},
		{`{id: a, action: drop, match: {dst: 198.51.100.7/32, proto: udp}}`, Clear},
		{`{id: a, action: accept, match: {dst: 192.0.2.10/32}}`, Clear},
	} {
		r := mustRule(t, tc.yaml)
		if v, why := l.Check(&r); v != tc.want {
			t.Errorf("%s: %v (%s), want %v", tc.yaml, v, why, tc.want)
		}
	}
}

// Property: Overlaps never misses a shared packet, and Covers never claims a
// packet that p does not match. Checked with the rule package's Matches on
// random packets near the prefixes in play.
func TestAgainstMatches(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	addrs := []string{"10.0.0.0", "10.0.0.1", "10.0.1.0", "10.1.0.0", "10.0.0.255"}
	prefix := func() netip.Prefix {
		if rng.IntN(3) == 0 {
			return netip.Prefix{}
		}
		a := netip.MustParseAddr(addrs[rng.IntN(len(addrs))])
		return netip.PrefixFrom(a, []int{8, 16, 24, 31, 32}[rng.IntN(5)]).Masked()
	}
	ports := func() rule.Ranges {
		if rng.IntN(2) == 0 {
			return nil
		}
		lo := uint32(rng.IntN(6))
		return rule.Ranges{{Lo: lo, Hi: lo + uint32(rng.IntN(3))}}
	}
	protos := func() []uint8 {
		switch rng.IntN(4) {
		case 0:
			return []uint8{rule.ProtoTCP}
		case 1:
			return []uint8{rule.ProtoUDP, rule.ProtoTCP}
		}
		return nil
	}
	for iter := 0; iter < 3000; iter++ {
		var p, m rule.Match
		if rng.IntN(2) == 0 {
			p.Src = prefix()
		} else {
			p.Dst = prefix()
		}
		p.Proto = protos()
		if p.Proto != nil && rng.IntN(2) == 0 {
			p.Port = ports()
		}
		m.Src, m.Dst = prefix(), prefix()
		if m.Src.IsValid() && m.Dst.IsValid() && m.Src.Addr().Is4() != m.Dst.Addr().Is4() {
			continue
		}
		m.Proto = protos()
		if m.Proto != nil {
			m.SrcPort, m.DstPort = ports(), ports()
			if rng.IntN(3) == 0 {
				m.Port = ports()
			}
		}
		ov, cv := Overlaps(&p, &m), Covers(&p, &m)
		for k := 0; k < 200; k++ {
			f := rule.Fields{Family: rule.IPv4, Proto: []uint8{rule.ProtoTCP, rule.ProtoUDP, rule.ProtoICMP}[rng.IntN(3)], L4: true,
				SrcPort: uint16(rng.IntN(8)), DstPort: uint16(rng.IntN(8)),
				Src: rule.AddrFrom(netip.MustParseAddr(addrs[rng.IntN(len(addrs))])),
				Dst: rule.AddrFrom(netip.MustParseAddr(addrs[rng.IntN(len(addrs))]))}
			if rng.IntN(2) == 0 {
				f.Src.Hi += uint64(rng.IntN(4)) << 32
			}
			mm, pm := m.Matches(&f), p.Matches(&f)
			if mm && pm && !ov {
				t.Fatalf("Overlaps(%s, %s) = false but %+v matches both", p.String(), m.String(), f)
			}
			if mm && !pm && cv {
				t.Fatalf("Covers(%s, %s) = true but %+v matches only m", p.String(), m.String(), f)
			}
		}
	}
}

// TestPortsAgainstLinearReference checks Overlaps and Covers against
// rule.Match.Matches over every packet of a small universe that holds a
// representative of every class the generated conditions can tell apart
// (addresses 10.0.0.0-7 for the /29-/32 prefixes, 10.0.1.0, 10.1.0.0 and
// 11.0.0.0 for the /8 and /16 ones; ports 0-5 for the ranges, 179 and 60000
// outside them; TCP, UDP, SCTP, ICMP and a later TCP fragment). Protect rules
// carry source and destination prefixes together and source, destination
// or either-side ports, as the automatic BGP rules do. Over such a universe
// the answers must be exact: Overlaps true iff some packet matches both,
// Covers true iff every packet m matches also matches p.
func TestPortsAgainstLinearReference(t *testing.T) {
	var addrs []rule.Addr
	for i := range 8 {
		addrs = append(addrs, rule.AddrFrom(netip.AddrFrom4([4]byte{10, 0, 0, byte(i)})))
	}
	for _, s := range []string{"10.0.1.0", "10.1.0.0", "11.0.0.0"} {
		addrs = append(addrs, rule.AddrFrom(netip.MustParseAddr(s)))
	}
	portVals := []uint16{0, 1, 2, 3, 4, 5, 179, 60000}
	type l4 struct {
		proto uint8
		l4    bool
	}
	kinds := []l4{{rule.ProtoTCP, true}, {rule.ProtoUDP, true}, {rule.ProtoSCTP, true}, {rule.ProtoICMP, true}, {rule.ProtoTCP, false}}
	var universe []rule.Fields
	for _, s := range addrs {
		for _, d := range addrs {
			for _, k := range kinds {
				for _, sp := range portVals {
					for _, dp := range portVals {
						f := rule.Fields{Family: rule.IPv4, Proto: k.proto, L4: k.l4, Src: s, Dst: d}
						if k.l4 && k.proto != rule.ProtoICMP {
							f.SrcPort, f.DstPort = sp, dp
						} else if sp != 0 || dp != 0 {
							continue
						}
						universe = append(universe, f)
					}
				}
			}
		}
	}
	rng := rand.New(rand.NewPCG(14, 179))
	prefix := func() netip.Prefix {
		if rng.IntN(3) == 0 {
			return netip.Prefix{}
		}
		a := netip.AddrFrom4([4]byte{10, 0, 0, byte(rng.IntN(8))})
		return netip.PrefixFrom(a, []int{8, 16, 29, 30, 31, 32}[rng.IntN(6)]).Masked()
	}
	ports := func() rule.Ranges {
		if rng.IntN(2) == 0 {
			return nil
		}
		lo := uint32(rng.IntN(6))
		rs := rule.Ranges{{Lo: lo, Hi: min(5, lo+uint32(rng.IntN(3)))}}
		if rng.IntN(4) == 0 {
			rs = append(rs, rule.Range{Lo: 179, Hi: 179})
		}
		return rs
	}
	protos := func() []uint8 {
		switch rng.IntN(4) {
		case 0:
			return []uint8{rule.ProtoTCP}
		case 1:
			return []uint8{rule.ProtoTCP, rule.ProtoUDP}
		case 2:
			return []uint8{rule.ProtoICMP}
		}
		return nil
	}
	var nOv, nCv int
	for iter := 0; iter < 1200; iter++ {
		var p, m rule.Match
		p.Src, p.Dst = prefix(), prefix()
		if !p.Src.IsValid() && !p.Dst.IsValid() {
			p.Dst = netip.MustParsePrefix("10.0.0.1/32")
		}
		p.Proto = protos()
		if rng.IntN(3) > 0 {
			p.SrcPort, p.DstPort = ports(), ports()
			if rng.IntN(2) == 0 {
				p.Port = ports()
			}
		}
		m.Src, m.Dst = prefix(), prefix()
		m.Proto = protos()
		if rng.IntN(3) > 0 {
			m.SrcPort, m.DstPort = ports(), ports()
			if rng.IntN(2) == 0 {
				m.Port = ports()
			}
		}
		var both, mOnly, mAny bool
		for i := range universe {
			mm := m.Matches(&universe[i])
			if !mm {
				continue
			}
			mAny = true
			if p.Matches(&universe[i]) {
				both = true
			} else {
				mOnly = true
			}
		}
		if !mAny {
			continue // m matches nothing (ports with ICMP): no claim
		}
		ov, cv := Overlaps(&p, &m), Covers(&p, &m)
		if ov != both {
			t.Errorf("Overlaps(%s, %s) = %v, reference %v", p.String(), m.String(), ov, both)
		}
		if cv != !mOnly {
			t.Errorf("Covers(%s, %s) = %v, reference %v", p.String(), m.String(), cv, !mOnly)
		}
		if both {
			nOv++
		}
		if !mOnly {
			nCv++
		}
	}
	if nOv < 50 || nCv < 20 {
		t.Fatalf("too few overlapping (%d) or covered (%d) cases to mean anything", nOv, nCv)
	}
	t.Logf("%d packets; %d overlapping and %d covered cases", len(universe), nOv, nCv)
}

// TestBGPSessionCover: a drop rule written with `port` (either side) on the
// BGP session's addresses is covered by the session's two protect rules
// together (one per port direction), and so refused; the same rule with a
// wider source is only narrowed, and a rule on another destination is
// clear.
func TestBGPSessionCover(t *testing.T) {
	peer, local := netip.MustParsePrefix("192.0.2.1/32"), netip.MustParsePrefix("192.0.2.10/32")
	p179 := rule.Ranges{{Lo: 179, Hi: 179}}
	l := &List{Entries: []Entry{
		{Rule: rule.Rule{ID: "bgp-in", Action: rule.Accept, Match: rule.Match{Src: peer, Dst: local, Proto: []uint8{rule.ProtoTCP}, DstPort: p179}}, Note: "in"},
		{Rule: rule.Rule{ID: "bgp-out", Action: rule.Accept, Match: rule.Match{Src: peer, Dst: local, Proto: []uint8{rule.ProtoTCP}, SrcPort: p179}}, Note: "out"},
	}}
	for _, tc := range []struct {
		yaml string
		want Verdict
	}{
		{`{id: a, action: drop, match: {src: 192.0.2.1/32, dst: 192.0.2.10/32, proto: tcp, port: "179"}}`, Refused},
		{`{id: a, action: drop, match: {src: 192.0.2.1/32, dst: 192.0.2.10/32, proto: tcp, dst_port: "179"}}`, Refused},
		{`{id: a, action: drop, match: {src: 192.0.2.1/32, dst: 192.0.2.10/32, proto: tcp, src_port: "179", dst_port: "1000-2000"}}`, Refused},
		{`{id: a, action: drop, match: {src: 192.0.2.1/32, dst: 192.0.2.10/32, proto: tcp}}`, Narrowed},
		{`{id: a, action: drop, match: {src: 192.0.2.1/32, dst: 192.0.2.10/32, proto: tcp, port: "179-180"}}`, Narrowed},
		{`{id: a, action: drop, match: {src: 192.0.2.0/24, proto: tcp, port: "179"}}`, Narrowed},
		{`{id: a, action: drop, match: {src: 192.0.2.1/32, dst: 192.0.2.10/32, proto: udp, port: "179"}}`, Clear},
		{`{id: a, action: drop, match: {src: 192.0.2.1/32, proto: tcp, src_port: "80", dst_port: "80"}}`, Clear},
		{`{id: a, action: drop, match: {dst: 203.0.113.0/24, proto: tcp}}`, Clear},
	} {
		r := mustRule(t, tc.yaml)
		if v, why := l.Check(&r); v != tc.want {
			t.Errorf("%s: %v (%s), want %v", tc.yaml, v, why, tc.want)
		}
	}
}
