package tcflower

import (
	"encoding/binary"
	"errors"
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/mdlayher/netlink"
)

func u32ne(v uint32) []byte { return binary.NativeEndian.AppendUint32(nil, v) }
func u16ne(v uint16) []byte { return binary.NativeEndian.AppendUint16(nil, v) }

func gactParmsBytes(index uint32, verdict int32) []byte {
	b := make([]byte, 20)
	binary.NativeEndian.PutUint32(b[0:], index)
	binary.NativeEndian.PutUint32(b[8:], uint32(verdict))
	return b
}

var ignoreLen = cmpopts.IgnoreFields(netlink.Attribute{}, "Length")

func mustAttrs(t testing.TB, attrs []netlink.Attribute) []byte {
	t.Helper()
	b, err := netlink.MarshalAttributes(attrs)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func v4filter() Filter {
	f := Filter{
		Ifindex:  7,
		Chain:    3,
		Prio:     10,
		Protocol: ProtoIPv4,
		Handle:   0x2a,
		Flags:    SkipHW,
		Key: Key{
			EthType:      ProtoIPv4,
			IPProto:      IPProtoTCP,
			Src:          Prefix(netip.MustParsePrefix("10.1.0.0/16")),
			Dst:          AddrMask{Addr: netip.MustParseAddr("192.0.0.7"), Mask: netip.MustParseAddr("255.255.0.255")},
			SrcPort:      PortMask{Port: 0x0400, Mask: 0xfc00},
			DstPort:      PortMask{Port: 80, Mask: 0xffff},
			TCPFlags:     0x02,
			TCPFlagsMask: 0x12,
			IPFlags:      IPFlagFrag,
			IPFlagsMask:  IPFlagFrag,
		},
		Actions: []Action{Drop(MakeCookie(0xdeadbeef01))},
	}
	f.Key.DSCP(46)
	return f
}

// TestMarshalExactAttributes pins every byte the encoder sends for a
// filter using most keys: byte orders (be16 ports, host-order flags), masks
// and nesting.
func TestMarshalExactAttributes(t *testing.T) {
	f := v4filter()
	b, err := f.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	h, err := parseTcmsg(b)
	if err != nil {
		t.Fatal(err)
	}
	wantH := tcmsg{Ifindex: 7, Handle: 0x2a, Parent: 0xFFFFFFF2, Info: 10<<16 | uint32(htons(0x0800))}
	if h != wantH {
		t.Fatalf("tcmsg = %+v, want %+v", h, wantH)
	}
	// On little-endian the info low half must read 0x0008 (ETH_P_IP big-endian).
	if binary.NativeEndian == binary.ByteOrder(binary.LittleEndian) && uint16(h.Info) != 0x0008 {
		t.Fatalf("info low half %#x, want 0x0008", uint16(h.Info))
	}
	top, err := netlink.UnmarshalAttributes(b[tcmsgLen:])
	if err != nil {
		t.Fatal(err)
	}
	cookie := MakeCookie(0xdeadbeef01)
	wantOpts := []netlink.Attribute{
		{Type: flowerEthType, Data: []byte{0x08, 0x00}},
		{Type: flowerIPProto, Data: []byte{6}},
		{Type: flowerIPv4Src, Data: []byte{10, 1, 0, 0}},
		{Type: flowerIPv4SrcMask, Data: []byte{255, 255, 0, 0}},
		{Type: flowerIPv4Dst, Data: []byte{192, 0, 0, 7}},
		{Type: flowerIPv4DstMask, Data: []byte{255, 255, 0, 255}},
		{Type: flowerTCPSrc, Data: []byte{0x04, 0x00}},
		{Type: flowerTCPSrcMask, Data: []byte{0xfc, 0x00}},
		{Type: flowerTCPDst, Data: []byte{0, 80}},
		{Type: flowerTCPDstMask, Data: []byte{0xff, 0xff}},
		{Type: flowerTCPFlags, Data: []byte{0, 0x02}},
		{Type: flowerTCPFlagsMask, Data: []byte{0, 0x12}},
		{Type: flowerKeyFlags, Data: []byte{0, 0, 0, 1}},
		{Type: flowerKeyFlagsMask, Data: []byte{0, 0, 0, 1}},
		{Type: flowerIPTOS, Data: []byte{46 << 2}},
		{Type: flowerIPTOSMask, Data: []byte{0xfc}},
		{Type: flowerFlags, Data: u32ne(1)},
		{Type: flowerAct | netlink.Nested, Data: mustAttrs(t, []netlink.Attribute{
			{Type: 1 | netlink.Nested, Data: mustAttrs(t, []netlink.Attribute{
				{Type: actKind, Data: []byte("gact\x00")},
				{Type: actOptions | netlink.Nested, Data: mustAttrs(t, []netlink.Attribute{
					{Type: gactParms, Data: gactParmsBytes(0, ActShot)},
				})},
				{Type: actCookie, Data: cookie},
			})},
		})},
	}
	want := []netlink.Attribute{
		{Type: tcaKind, Data: []byte("flower\x00")},
		{Type: tcaChain, Data: u32ne(3)},
		{Type: tcaOptions | netlink.Nested, Data: mustAttrs(t, wantOpts)},
	}
	if diff := cmp.Diff(want, top, ignoreLen); diff != "" {
		gotOpts, _ := netlink.UnmarshalAttributes(top[2].Data)
		t.Fatalf("attributes differ (-want +got):\n%s\noptions got: %+v", diff, gotOpts)
	}
}

func TestMarshalIPv6ICMPv6VLANAndUDP(t *testing.T) {
	cases := []struct {
		name string
		f    Filter
		want []netlink.Attribute // options only
	}{
		{
			name: "icmpv6 type/code",
			f: Filter{Ifindex: 1, Prio: 2, Protocol: ProtoIPv6, Flags: SkipSW, Key: Key{
				EthType: ProtoIPv6, IPProto: IPProtoICMPv6,
				Dst:      Prefix(netip.MustParsePrefix("2001:db8::/32")),
				ICMPType: 128, ICMPTypeMask: 0xff, ICMPCode: 0, ICMPCodeMask: 0xff,
			}, Actions: []Action{Drop(nil)}},
			want: []netlink.Attribute{
				{Type: flowerEthType, Data: []byte{0x86, 0xdd}},
				{Type: flowerIPProto, Data: []byte{58}},
				{Type: flowerIPv6Dst, Data: netip.MustParseAddr("2001:db8::").AsSlice()},
				{Type: flowerIPv6DstMask, Data: netip.MustParseAddr("ffff:ffff::").AsSlice()},
				{Type: flowerICMPv6Type, Data: []byte{128}},
				{Type: flowerICMPv6TypeMsk, Data: []byte{0xff}},
				{Type: flowerICMPv6Code, Data: []byte{0}},
				{Type: flowerICMPv6CodeMsk, Data: []byte{0xff}},
				{Type: flowerFlags, Data: u32ne(2)},
			},
		},
		{
			name: "vlan udp",
			f: Filter{Ifindex: 1, Prio: 3, Protocol: Proto8021Q, Key: Key{
				EthType: Proto8021Q, VLAN: VLANKey{ID: 100, HasID: true, Prio: 5, HasPrio: true, EthType: ProtoIPv4},
				IPProto: IPProtoUDP, DstPort: PortMask{Port: 53, Mask: 0xffff},
			}, Actions: []Action{Drop(nil)}},
			want: []netlink.Attribute{
				{Type: flowerEthType, Data: []byte{0x81, 0x00}},
				{Type: flowerVLANID, Data: u16ne(100)},
				{Type: flowerVLANPrio, Data: []byte{5}},
				{Type: flowerVLANEthType, Data: []byte{0x08, 0x00}},
				{Type: flowerIPProto, Data: []byte{17}},
				{Type: flowerUDPDst, Data: []byte{0, 53}},
				{Type: flowerUDPDstMask, Data: []byte{0xff, 0xff}},
				{Type: flowerFlags, Data: u32ne(0)},
			},
		},
		{
			name: "icmpv4 type only",
			f: Filter{Ifindex: 1, Prio: 3, Protocol: ProtoIPv4, Key: Key{
				EthType: ProtoIPv4, IPProto: IPProtoICMP, ICMPType: 8, ICMPTypeMask: 0xff,
			}, Actions: []Action{Drop(nil)}},
			want: []netlink.Attribute{
				{Type: flowerEthType, Data: []byte{0x08, 0x00}},
				{Type: flowerIPProto, Data: []byte{1}},
				{Type: flowerICMPv4Type, Data: []byte{8}},
				{Type: flowerICMPv4TypeMsk, Data: []byte{0xff}},
				{Type: flowerFlags, Data: u32ne(0)},
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.f.Validate(); err != nil {
				t.Fatal(err)
			}
			b, err := tc.f.marshalOptions()
			if err != nil {
				t.Fatal(err)
			}
			got, err := netlink.UnmarshalAttributes(b)
			if err != nil {
				t.Fatal(err)
			}
			// Drop the action attribute (checked in TestMarshalExactAttributes).
			if n := len(got); n > 0 && got[n-1].Type&^netlink.Nested == flowerAct {
				got = got[:n-1]
			}
			if diff := cmp.Diff(tc.want, got, ignoreLen); diff != "" {
				t.Fatalf("(-want +got):\n%s", diff)
			}
		})
	}
}

func roundTripCases() []Filter {
	v6 := Filter{Ifindex: 3, Prio: 20, Protocol: ProtoIPv6, Handle: 9, Chain: 0, Flags: SkipHW, Key: Key{
		EthType: ProtoIPv6, IPProto: IPProtoUDP,
		Src:     Prefix(netip.MustParsePrefix("2001:db8:1::/48")),
		Dst:     Prefix(netip.MustParsePrefix("2001:db8:ffff::1/128")),
		SrcPort: PortMask{Port: 0, Mask: 0xffff}, DstPort: PortMask{Port: 0x1000, Mask: 0xf000},
		TOS: 0x20, TOSMask: 0xe0,
	}, Actions: []Action{Drop(MakeCookie(1))}}
	icmp := Filter{Ifindex: 3, Prio: 21, Protocol: ProtoIPv4, Handle: 10, Parent: ParentEgress, Key: Key{
		EthType: ProtoIPv4, IPProto: IPProtoICMP, ICMPType: 3, ICMPTypeMask: 0xff, ICMPCode: 0, ICMPCodeMask: 0xf0,
	}, Actions: []Action{Drop(MakeCookie(2)), {Kind: "gact", Verdict: ActOK}}}
	vlan := Filter{Ifindex: 3, Prio: 22, Protocol: Proto8021Q, Handle: 11, Key: Key{
		EthType: Proto8021Q, VLAN: VLANKey{ID: 0, HasID: true, EthType: ProtoIPv6},
		Dst: Prefix(netip.MustParsePrefix("::/1")),
	}, Actions: []Action{Drop(nil)}}
	frag := Filter{Ifindex: 3, Prio: 23, Protocol: ProtoIPv4, Handle: 12, Key: Key{
		EthType: ProtoIPv4, IPFlags: 0, IPFlagsMask: IPFlagFrag | IPFlagFirstFrag,
	}, Actions: []Action{Drop(MakeCookie(3))}}
	return []Filter{v4filter(), v6, icmp, vlan, frag}
}

func TestRoundTrip(t *testing.T) {
	for _, f := range roundTripCases() {
		t.Run(f.ID(), func(t *testing.T) {
			if err := f.Validate(); err != nil {
				t.Fatal(err)
			}
			b, err := f.MarshalBinary()
			if err != nil {
				t.Fatal(err)
			}
			var g Filter
			if err := g.UnmarshalBinary(b); err != nil {
				t.Fatal(err)
			}
			// Parent 0 means "ingress"; the kernel reports it explicitly.
			f.Parent = f.parent()
			if diff := cmp.Diff(f, g, cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); diff != "" {
				t.Fatalf("round trip (-sent +decoded):\n%s", diff)
			}
		})
	}
}

func TestValidateRefusesWideningFilters(t *testing.T) {
	base := func() Filter {
		return Filter{Ifindex: 1, Prio: 1, Protocol: ProtoIPv4, Key: Key{EthType: ProtoIPv4}, Actions: []Action{Drop(nil)}}
	}
	cases := []struct {
		name  string
		mod   func(f *Filter)
		field string
	}{
		{"ports without proto", func(f *Filter) { f.Key.DstPort = PortMask{80, 0xffff} }, "dst_port"},
		{"ports with icmp", func(f *Filter) { f.Key.IPProto = IPProtoICMP; f.Key.SrcPort = PortMask{1, 0xffff} }, "src_port"},
		{"port outside mask", func(f *Filter) { f.Key.IPProto = IPProtoTCP; f.Key.DstPort = PortMask{0x1234, 0xff00} }, "dst_port"},
		{"port without mask", func(f *Filter) { f.Key.IPProto = IPProtoTCP; f.Key.DstPort = PortMask{80, 0} }, "dst_port"},
		{"tcp flags on udp", func(f *Filter) { f.Key.IPProto = IPProtoUDP; f.Key.TCPFlags, f.Key.TCPFlagsMask = 2, 2 }, "tcp_flags"},
		{"icmp without proto", func(f *Filter) { f.Key.ICMPType, f.Key.ICMPTypeMask = 8, 0xff }, "icmp"},
		{"icmpv4 proto on v6", func(f *Filter) {
			f.Protocol, f.Key.EthType, f.Key.IPProto = ProtoIPv6, ProtoIPv6, IPProtoICMP
			f.Key.ICMPType, f.Key.ICMPTypeMask = 128, 0xff
		}, "icmp"},
		{"ip key without eth_type", func(f *Filter) { f.Key.EthType = 0; f.Key.IPProto = IPProtoTCP }, "eth_type"},
		{"v6 address on v4", func(f *Filter) { f.Key.Dst = Prefix(netip.MustParsePrefix("2001:db8::/32")) }, "dst_ip"},
		{"unmasked address", func(f *Filter) {
			f.Key.Src = AddrMask{netip.MustParseAddr("10.1.2.3"), netip.MustParseAddr("255.255.0.0")}
		}, "src_ip"},
		{"eth_type vs protocol", func(f *Filter) { f.Key.EthType = ProtoIPv6 }, "eth_type"},
		{"vlan without 8021q", func(f *Filter) { f.Key.VLAN.HasID = true }, "vlan"},
		{"vlan id too big", func(f *Filter) {
			f.Protocol, f.Key.EthType = Proto8021Q, Proto8021Q
			f.Key.VLAN = VLANKey{ID: 4096, HasID: true}
		}, "vlan_id"},
		{"both skip flags", func(f *Filter) { f.Flags = SkipHW | SkipSW }, "flags"},
		{"read-only flag", func(f *Filter) { f.Flags = InHW }, "flags"},
		{"no action", func(f *Filter) { f.Actions = nil }, "actions"},
		{"long cookie", func(f *Filter) { f.Actions[0].Cookie = make([]byte, 17) }, "actions[0].cookie"},
		{"other action", func(f *Filter) { f.Actions[0].Kind = "mirred" }, "actions[0].kind"},
		{"no ifindex", func(f *Filter) { f.Ifindex = 0 }, "ifindex"},
		{"frag bits", func(f *Filter) { f.Key.IPFlagsMask = 4 }, "ip_flags"},
		{"tos outside mask", func(f *Filter) { f.Key.TOS, f.Key.TOSMask = 3, 0xfc }, "ip_tos"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := base()
			if err := f.Validate(); err != nil {
				t.Fatalf("base invalid: %v", err)
			}
			tc.mod(&f)
			err := f.Validate()
			var ve *ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("Validate() = %v, want *ValidationError", err)
			}
			if ve.Field != tc.field {
				t.Fatalf("field %q, want %q (%v)", ve.Field, tc.field, err)
			}
		})
	}
}

func TestCookie(t *testing.T) {
	c := MakeCookie(0x0102030405060708)
	if len(c) > CookieMaxLen {
		t.Fatalf("cookie %d bytes", len(c))
	}
	if string(c[:6]) != "scrubd" {
		t.Fatalf("magic %q", c[:6])
	}
	id, ok := ParseCookie(c)
	if !ok || id != 0x0102030405060708 {
		t.Fatalf("ParseCookie = %#x, %v", id, ok)
	}
	for _, other := range [][]byte{nil, []byte("ovs-cookie-12345"), append([]byte("scrubX"), c[6:]...), c[:14]} {
		if _, ok := ParseCookie(other); ok {
			t.Fatalf("ParseCookie(%q) accepted a foreign cookie", other)
		}
	}
	f := Filter{Actions: []Action{Drop(c)}}
	if id, ok := f.OwnedID(); !ok || id != 0x0102030405060708 {
		t.Fatal("OwnedID")
	}
}

func TestFlagsString(t *testing.T) {
	if s := (SkipHW | NotInHW).String(); s != "skip_hw,not_in_hw" {
		t.Fatal(s)
	}
	if s := (InHW | 0x100).String(); s != "in_hw,0x100" {
		t.Fatal(s)
	}
}

func TestUnmarshalErrors(t *testing.T) {
	if err := new(Filter).UnmarshalBinary([]byte{1, 2, 3}); err == nil {
		t.Fatal("short tcmsg accepted")
	}
	ae := netlink.NewAttributeEncoder()
	ae.String(tcaKind, "matchall")
	attrs, _ := ae.Encode()
	b := append(tcmsg{Ifindex: 1}.append(nil), attrs...)
	if err := new(Filter).UnmarshalBinary(b); !errors.Is(err, ErrNotFlower) {
		t.Fatalf("matchall: %v", err)
	}
	// IPv4 source with a 16-byte mask.
	oe := netlink.NewAttributeEncoder()
	oe.Bytes(flowerIPv4Src, []byte{1, 2, 3, 4})
	oe.Bytes(flowerIPv6SrcMask, make([]byte, 16))
	opts, _ := oe.Encode()
	ae = netlink.NewAttributeEncoder()
	ae.String(tcaKind, "flower")
	ae.Bytes(tcaOptions, opts)
	attrs, _ = ae.Encode()
	b = append(tcmsg{Ifindex: 1}.append(nil), attrs...)
	if err := new(Filter).UnmarshalBinary(b); err == nil {
		t.Fatal("mixed-family address accepted")
	}
}
