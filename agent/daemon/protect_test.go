package daemon

import (
	"errors"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/scrubd/scrubd/agent/config"
	"github.com/scrubd/scrubd/agent/protect"
	"github.com/scrubd/scrubd/swpath/rule"
)

func bgpCfg(listen int32, ns ...config.Neighbor) *config.Config {
	cfg := config.Defaults()
	cfg.FlowSpec.Enabled = true
	cfg.FlowSpec.ListenPort = listen
	cfg.FlowSpec.Neighbors = ns
	return &cfg
}

func fixedLocal(a string) func(*config.FlowSpec, netip.Addr) (netip.Addr, error) {
	return func(*config.FlowSpec, netip.Addr) (netip.Addr, error) { return netip.MustParseAddr(a), nil }
}

// tcpPkt is a TCP segment as the parser reports it.
func tcpPkt(src, dst string, sport, dport uint16) rule.Fields {
	return rule.Fields{Family: rule.IPv4, Proto: rule.ProtoTCP, L4: true, SrcPort: sport, DstPort: dport,
		Src: rule.AddrFrom(netip.MustParseAddr(src)), Dst: rule.AddrFrom(netip.MustParseAddr(dst))}
}

func protected(l *protect.List, f *rule.Fields) bool {
	for _, e := range l.Entries {
		if e.Rule.Match.Matches(f) {
			return true
		}
	}
	return false
}

// The automatic protect rules hold exactly the BGP session's packets as
// they reach this host: from the peer to the local address, to the
// configured listen port (the peer connected) or from the neighbour's port
// (we connected). The peer's other traffic, and traffic to other local
// addresses, is not protected.
func TestBGPProtectIsTheSession(t *testing.T) {
	cfg := bgpCfg(10179, config.Neighbor{Address: "192.0.2.1", Port: 1790})
	l, err := protectList(cfg, fixedLocal("192.0.2.10"))
	if err != nil {
		t.Fatal(err)
	}
	peer, local, other := "192.0.2.1", "192.0.2.10", "198.51.100.7"
	for _, tc := range []struct {
		f    rule.Fields
		want bool
	}{
		{tcpPkt(peer, local, 40000, 10179), true},  // peer connected to our listen port
		{tcpPkt(peer, local, 1790, 40000), true},   // our connection to the peer's port
		{tcpPkt(peer, local, 40000, 179), false},   // 179 is not where we listen
		{tcpPkt(peer, local, 179, 40000), false},   // the peer listens on 1790
		{tcpPkt(peer, other, 40000, 10179), false}, // not this host
		{tcpPkt(peer, other, 1790, 40000), false},
		{tcpPkt(other, local, 40000, 10179), false}, // not the peer
		{rule.Fields{Family: rule.IPv4, Proto: rule.ProtoUDP, L4: true, SrcPort: 1790, DstPort: 10179,
			Src: rule.AddrFrom(netip.MustParseAddr(peer)), Dst: rule.AddrFrom(netip.MustParseAddr(local))}, false},
	} {
		if got := protected(l, &tc.f); got != tc.want {
			t.Errorf("%+v protected = %v, want %v", tc.f, got, tc.want)
		}
	}
	// A route dropping the session's own packets (the peer's source, the
	// listen port) is never clear: it is narrowed, and the session's
	// packets are excepted from it.
	r := rule.Rule{ID: "fs", Action: rule.Drop, Match: rule.Match{Src: netip.MustParsePrefix("192.0.2.1/32"),
		Proto: []uint8{rule.ProtoTCP}, DstPort: rule.Ranges{{Lo: 10179, Hi: 10179}}}}
	if v, why := l.Check(&r); v != protect.Narrowed {
		t.Errorf("drop src 192.0.2.1/32 tcp dport 10179: %v (%s), want narrowed", v, why)
	}
	// A SYN flood against a victim prefix next to this host does not touch
	// the session.
	syn := rule.Rule{ID: "syn", Action: rule.Drop, Match: rule.Match{Dst: netip.MustParsePrefix("198.51.100.0/24"),
		Proto: []uint8{rule.ProtoTCP}, HasTCPFlags: true, TCPFlags: rule.TCPFlags{Value: 0x02, Mask: 0x12}}}
	if v, why := l.Check(&syn); v != protect.Clear {
		t.Errorf("SYN flood drop: %v (%s), want clear", v, why)
	}
}

// listen_port -1 (active only) leaves only the source-port rule; a passive
// neighbour only the listen-port rule; neither port defaults to anything
// but 179.
func TestBGPProtectDirections(t *testing.T) {
	for _, tc := range []struct {
		listen  int32
		n       config.Neighbor
		dst     []uint32 // expected destination-port rules
		src     []uint32 // expected source-port rules
		comment string
	}{
		{179, config.Neighbor{Address: "192.0.2.1"}, []uint32{179}, []uint32{179}, "defaults"},
		{-1, config.Neighbor{Address: "192.0.2.1", Port: 1179}, nil, []uint32{1179}, "active only"},
		{10179, config.Neighbor{Address: "192.0.2.1", Passive: true}, []uint32{10179}, nil, "passive"},
	} {
		l, err := protectList(bgpCfg(tc.listen, tc.n), fixedLocal("192.0.2.10"))
		if err != nil {
			t.Fatal(err)
		}
		var dst, src []uint32
		for _, e := range l.Entries {
			m := e.Rule.Match
			if m.Dst != netip.MustParsePrefix("192.0.2.10/32") || m.Src != netip.MustParsePrefix("192.0.2.1/32") || m.Port != nil {
				t.Errorf("%s: %s: not between the peer and the local address", tc.comment, m.String())
			}
			for _, r := range m.DstPort {
				dst = append(dst, r.Lo)
			}
			for _, r := range m.SrcPort {
				src = append(src, r.Lo)
			}
		}
		if !slices.Equal(dst, tc.dst) || !slices.Equal(src, tc.src) {
			t.Errorf("%s: dst ports %v src ports %v, want %v %v", tc.comment, dst, src, tc.dst, tc.src)
		}
	}
}

// The local address comes from flowspec.listen_address when it is of the
// peer's family, else from the routing table (127.0.0.2 is reached from
// 127.0.0.1 on lo); without a route the rules protect the session toward
// any local address, and say so.
func TestBGPProtectLocalAddress(t *testing.T) {
	fs := &config.FlowSpec{ListenAddress: "192.0.2.10"}
	if a, err := LocalAddrToward(fs, netip.MustParseAddr("192.0.2.1")); err != nil || a != netip.MustParseAddr("192.0.2.10") {
		t.Errorf("listen_address: %v %v", a, err)
	}
	if a, err := LocalAddrToward(&config.FlowSpec{}, netip.MustParseAddr("127.0.0.2")); err != nil || !a.IsLoopback() || !a.Is4() {
		t.Errorf("toward 127.0.0.2: %v %v, want a loopback IPv4 address", a, err)
	}
	l, err := protectList(bgpCfg(179, config.Neighbor{Address: "192.0.2.1"}), func(*config.FlowSpec, netip.Addr) (netip.Addr, error) {
		return netip.Addr{}, errors.New("network unreachable")
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range l.Entries {
		if e.Rule.Match.Dst.IsValid() || !strings.Contains(e.Note, "local address unknown") {
			t.Errorf("no route: %s (%s)", e.Rule.Match.String(), e.Note)
		}
	}
	if len(l.Entries) != 2 {
		t.Errorf("no route: %d entries, want 2", len(l.Entries))
	}
}
