package rule

import (
	"net/netip"
	"testing"
)

func v4(s string) Addr { return AddrFrom(netip.MustParseAddr(s)) }

func mustRule(t *testing.T, y string) Rule {
	t.Helper()
	r, err := ParseRule("t", []byte(y), t0)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestMatches(t *testing.T) {
	udp := Fields{Family: IPv4, Proto: ProtoUDP, L4: true, Frag: NotFragment, SrcPort: 53, DstPort: 1500,
		Src: v4("198.51.100.9"), Dst: v4("203.0.113.7"), Length: 80, DSCP: 46}
	frag := udp
	frag.L4, frag.Frag = false, IsFragment|LastFragment
	first := udp
	first.Frag = FirstFragment | DontFragment
	syn := Fields{Family: IPv6, Proto: ProtoTCP, L4: true, Frag: NotFragment, TCPFlags: SYN, SrcPort: 4000, DstPort: 80,
		Dst: AddrFrom(netip.MustParseAddr("2001:db8::1"))}
	synack := syn
	synack.TCPFlags = SYN | ACK
	ack := syn
	ack.TCPFlags = ACK
	pshFin := syn
	pshFin.TCPFlags = PSH | FIN
	icmp := Fields{Family: IPv4, Proto: ProtoICMP, L4: true, Frag: NotFragment, ICMPType: 8}
	icmp6 := Fields{Family: IPv6, Proto: ProtoICMPv6, L4: true, Frag: NotFragment, ICMPType: 8}
	icmpAs6 := Fields{Family: IPv6, Proto: ProtoICMP, L4: true, Frag: NotFragment, ICMPType: 8}
	sctp := Fields{Family: IPv4, Proto: ProtoSCTP, L4: true, Frag: NotFragment, SrcPort: 1, DstPort: 2}
	nonIP := Fields{}

	tests := []struct {
		rule string
		f    Fields
		want bool
	}{
		{`{id: a, action: drop, match: all}`, udp, true},
		{`{id: a, action: drop, match: all}`, nonIP, false},
		{`{id: a, action: drop, match: {src: 198.51.100.0/24}}`, udp, true},
		{`{id: a, action: drop, match: {src: 198.51.101.0/24}}`, udp, false},
		{`{id: a, action: drop, match: {src: 2001:db8::/32}}`, udp, false},
		{`{id: a, action: drop, match: {dst: 2001:db8::/32}}`, syn, true},
		{`{id: a, action: drop, match: {dst_port: 1000-2000}}`, udp, true},
		{`{id: a, action: drop, match: {dst_port: 1000-1499}}`, udp, false},
		{`{id: a, action: drop, match: {dst_port: [1, 1500]}}`, udp, true},
		{`{id: a, action: drop, match: {port: 53}}`, udp, true},
		{`{id: a, action: drop, match: {port: 1500}}`, udp, true},
		{`{id: a, action: drop, match: {port: 54}}`, udp, false},
		{`{id: a, action: drop, match: {port: 53}}`, frag, false},
		{`{id: a, action: drop, match: {src: 198.51.100.0/24}}`, frag, true},
		{`{id: a, action: drop, match: {port: 53}}`, first, true},
		{`{id: a, action: drop, match: {fragment: is-fragment}}`, frag, true},
		{`{id: a, action: drop, match: {fragment: last-fragment}}`, frag, true},
		{`{id: a, action: drop, match: {fragment: first-fragment}}`, frag, false},
		{`{id: a, action: drop, match: {fragment: [first-fragment]}}`, first, true},
		{`{id: a, action: drop, match: {fragment: [dont-fragment]}}`, first, true},
		{`{id: a, action: drop, match: {fragment: [not-fragment]}}`, udp, true},
		{`{id: a, action: drop, match: {fragment: [not-fragment]}}`, first, false},
		{`{id: a, action: drop, match: {tcp_flags: {value: [syn], mask: [syn, ack]}}}`, syn, true},
		{`{id: a, action: drop, match: {tcp_flags: {value: [syn], mask: [syn, ack]}}}`, synack, false},
		{`{id: a, action: drop, match: {tcp_flags: {value: [syn]}}}`, synack, true},
		{`{id: a, action: drop, match: {tcp_flags: {value: [syn]}}}`, udp, false},
		// value [] with a mask: none of the masked flags set.
		{`{id: a, action: drop, match: {tcp_flags: {value: [], mask: [syn, ack]}}}`, syn, false},
		{`{id: a, action: drop, match: {tcp_flags: {value: [], mask: [syn, ack]}}}`, synack, false},
		{`{id: a, action: drop, match: {tcp_flags: {value: [], mask: [syn, ack]}}}`, ack, false},
		{`{id: a, action: drop, match: {tcp_flags: {value: [], mask: [syn, ack]}}}`, pshFin, true},
		{`{id: a, action: drop, match: {tcp_flags: {value: [], mask: [syn, ack]}}}`, udp, false},
		{`{id: a, action: drop, match: {icmp_type: 8}}`, icmp, true},
		{`{id: a, action: drop, match: {icmp_type: 8}}`, icmp6, true},
		{`{id: a, action: drop, match: {icmp_type: 8}}`, icmpAs6, false},
		{`{id: a, action: drop, match: {icmp_type: 0}}`, icmp, false},
		{`{id: a, action: drop, match: {icmp_type: 8}}`, udp, false},
		{`{id: a, action: drop, match: {dst_port: 2}}`, sctp, true},
		{`{id: a, action: drop, match: {proto: [udp, tcp]}}`, syn, true},
		{`{id: a, action: drop, match: {proto: 47}}`, syn, false},
		{`{id: a, action: drop, match: {length: 0-80}}`, udp, true},
		{`{id: a, action: drop, match: {length: 81-100}}`, udp, false},
		{`{id: a, action: drop, match: {dscp: [0, 46]}}`, udp, true},
		{`{id: a, action: drop, match: {dscp: 10}}`, udp, false},
	}
	for _, tt := range tests {
		r := mustRule(t, tt.rule)
		if got := r.Match.Matches(&tt.f); got != tt.want {
			t.Errorf("%s on %+v = %v, want %v", tt.rule, tt.f, got, tt.want)
		}
	}
}

func TestDecidePriority(t *testing.T) {
	s := &Set{Rules: []Rule{
		mustRule(t, `{id: wide, priority: 10, action: drop, match: {proto: udp}}`),
		mustRule(t, `{id: allow, priority: 5, action: accept, match: {src: 198.51.100.0/24}}`),
		mustRule(t, `{id: tie, priority: 10, action: accept, match: {dst_port: 1500}}`),
	}}
	f := Fields{Family: IPv4, Proto: ProtoUDP, L4: true, Frag: NotFragment, DstPort: 1500, Src: v4("198.51.100.1")}
	if got := s.Decide(&f); got != 1 {
		t.Fatalf("decided by %d, want 1 (lowest priority number)", got)
	}
	f.Src = v4("10.0.0.1")
	if got := s.Decide(&f); got != 0 {
		t.Fatalf("decided by %d, want 0 (tie goes to the first listed)", got)
	}
	f.Proto = ProtoTCP
	if got := s.Decide(&f); got != 2 {
		t.Fatalf("decided by %d, want 2", got)
	}
	f.DstPort = 1
	if got := s.Decide(&f); got != -1 {
		t.Fatalf("decided by %d, want -1 (pass)", got)
	}
}

func TestFragState(t *testing.T) {
	for _, tt := range []struct {
		df, mf bool
		off    uint16
		want   Frag
	}{
		{false, false, 0, NotFragment},
		{true, false, 0, NotFragment | DontFragment},
		{false, true, 0, FirstFragment},
		{false, true, 100, IsFragment},
		{false, false, 100, IsFragment | LastFragment},
	} {
		if got := FragState(tt.df, tt.mf, tt.off); got != tt.want {
			t.Errorf("FragState(%v,%v,%d) = %v, want %v", tt.df, tt.mf, tt.off, got, tt.want)
		}
	}
}

func TestPrefixMask(t *testing.T) {
	for _, n := range []int{0, 1, 31, 32, 63, 64, 65, 127, 128} {
		if got := PrefixMask(n).PrefixLen(); got != n {
			t.Errorf("PrefixMask(%d).PrefixLen() = %d", n, got)
		}
	}
	a := netip.MustParseAddr("2001:db8::42")
	if AddrFrom(a).Netip(IPv6) != a {
		t.Error("v6 round trip")
	}
	b := netip.MustParseAddr("192.0.2.7")
	if AddrFrom(b).Netip(IPv4) != b {
		t.Error("v4 round trip")
	}
}
