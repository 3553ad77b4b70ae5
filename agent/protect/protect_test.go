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
