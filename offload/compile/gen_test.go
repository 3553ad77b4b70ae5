package compile

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"

	"github.com/scrubd/scrubd/swpath/rule"
)

var (
	pfx4     = []string{"10.0.0.0/8", "10.1.0.0/16", "10.1.2.0/24", "10.1.2.3/32", "192.0.2.0/25", "0.0.0.0/0"}
	pfx6     = []string{"2001:db8::/32", "2001:db8:1::/48", "2001:db8:1::1/128", "2001:db8:1:0:8000::/65"}
	portPool = []rule.Ranges{{rg(53, 53)}, {rg(80, 80), rg(443, 443)}, {rg(1000, 2000)}, {rg(0, 1023)}, {rg(1024, 65535)},
		{rg(1, 65535)}, {rg(6000, 6003), rg(6100, 6200)}, {rg(0, 0)}, {rg(22, 23)}}
	icmpPool  = []rule.Ranges{{rg(0, 0)}, {rg(8, 8)}, {rg(3, 5)}, {rg(0, 255)}, {rg(1, 254)}, {rg(11, 12)}}
	protoPool = []uint8{rule.ProtoICMP, rule.ProtoTCP, rule.ProtoUDP, rule.ProtoICMPv6, rule.ProtoSCTP, rule.ProtoGRE}
)

func rg(lo, hi uint32) rule.Range { return rule.Range{Lo: lo, Hi: hi} }

// randRule draws a rule from small pools so that rules of one set overlap.
func randRule(r *rand.Rand, id int) rule.Rule {
	ru := rule.Rule{ID: fmt.Sprintf("r%d", id), Priority: []uint32{10, 100, 1000}[r.IntN(3)]}
	if r.IntN(4) == 0 {
		ru.Action = rule.Accept
	}
	m := &ru.Match
	switch r.IntN(3) {
	case 1:
		if r.IntN(2) == 0 {
			m.Src = netip.MustParsePrefix(pick(r, pfx4))
		}
		if r.IntN(2) == 0 || !m.Src.IsValid() {
			m.Dst = netip.MustParsePrefix(pick(r, pfx4))
		}
	case 2:
		if r.IntN(2) == 0 {
			m.Src = netip.MustParsePrefix(pick(r, pfx6))
		}
		if r.IntN(2) == 0 || !m.Src.IsValid() {
			m.Dst = netip.MustParsePrefix(pick(r, pfx6))
		}
	}
	if r.IntN(3) != 0 {
		n := 1 + r.IntN(2)
		for range n {
			p := pick(r, protoPool)
			if !slices.Contains(m.Proto, p) {
				m.Proto = append(m.Proto, p)
			}
		}
		slices.Sort(m.Proto)
	}
	switch r.IntN(5) {
	case 0:
		m.DstPort = pick(r, portPool)
	case 1:
		m.SrcPort = pick(r, portPool)
		if r.IntN(2) == 0 {
			m.DstPort = pick(r, portPool)
		}
	case 2:
		m.Port = pick(r, portPool)
		if r.IntN(3) == 0 {
			m.DstPort = pick(r, portPool)
		}
	}
	if r.IntN(6) == 0 {
		m.HasTCPFlags = true
		m.TCPFlags.Mask = uint8(r.IntN(256))
		m.TCPFlags.Value = uint8(r.IntN(256)) & m.TCPFlags.Mask
	}
	if r.IntN(6) == 0 {
		m.ICMPType = pick(r, icmpPool)
		if r.IntN(2) == 0 {
			m.ICMPCode = pick(r, icmpPool)
		}
	}
	if r.IntN(4) == 0 {
		m.Fragment = rule.Frag(1 + r.IntN(31))
	}
	if r.IntN(8) == 0 {
		m.Length = rule.Ranges{{Lo: 0, Hi: uint32(r.IntN(1500))}}
	}
	if r.IntN(5) == 0 {
		m.DSCP = r.Uint64() & r.Uint64() & r.Uint64()
		if r.IntN(2) == 0 {
			m.DSCP = 1 << r.IntN(64)
		}
	}
	return ru
}
