package sim

import (
	"fmt"
	"math/rand/v2"
	"net/netip"

	"github.com/scrubd/scrubd/swpath/rule"
)

var (
	pfx4  = []string{"10.0.0.0/8", "10.1.0.0/16", "10.1.2.0/24", "10.1.2.3/32"}
	pfx6  = []string{"2001:db8::/32", "2001:db8:1::/48", "2001:db8:1::1/128"}
	addr4 = []string{"10.1.2.3", "10.1.2.4", "10.1.3.1", "10.2.0.1", "11.0.0.1"}
	addr6 = []string{"2001:db8:1::1", "2001:db8:1::2", "2001:db8:2::1", "2001:db9::1"}
	ports = []rule.Ranges{{{Lo: 53, Hi: 53}}, {{Lo: 80, Hi: 80}, {Lo: 443, Hi: 443}}, {{Lo: 1000, Hi: 2000}}, {{Lo: 1024, Hi: 65535}}}
	pvals = []uint16{0, 53, 54, 80, 443, 999, 1000, 1500, 2000, 2001, 1023, 1024, 65535}
)

func pick[T any](r *rand.Rand, s []T) T { return s[r.IntN(len(s))] }

// randRule draws a rule from small pools so that rules overlap.
func randRule(r *rand.Rand, id int) rule.Rule {
	ru := rule.Rule{ID: fmt.Sprintf("r%d", id), Priority: []uint32{10, 100, 1000}[r.IntN(3)]}
	if r.IntN(4) == 0 {
		ru.Action = rule.Accept
	}
	m := &ru.Match
	switch r.IntN(3) {
	case 1:
		m.Dst = netip.MustParsePrefix(pick(r, pfx4))
	case 2:
		m.Dst = netip.MustParsePrefix(pick(r, pfx6))
	}
	if r.IntN(3) != 0 {
		m.Proto = []uint8{pick(r, []uint8{rule.ProtoTCP, rule.ProtoUDP, rule.ProtoICMP})}
	}
	switch r.IntN(4) {
	case 0:
		m.DstPort = pick(r, ports)
	case 1:
		m.Port = pick(r, ports)
	}
	if r.IntN(5) == 0 {
		m.HasTCPFlags, m.TCPFlags = true, rule.TCPFlags{Value: rule.SYN, Mask: rule.SYN | rule.ACK}
	}
	if r.IntN(5) == 0 {
		m.Fragment = pick(r, []rule.Frag{rule.NotFragment, rule.IsFragment | rule.FirstFragment, rule.IsFragment})
	}
	if r.IntN(5) == 0 {
		m.DSCP = 1<<46 | 1<<0
	}
	return ru
}

// randFields draws a consistent packet from values near the pools.
func randFields(r *rand.Rand) rule.Fields {
	var f rule.Fields
	if r.IntN(2) == 0 {
		f.Family = rule.IPv4
		f.Src, f.Dst = rule.AddrFrom(netip.MustParseAddr(pick(r, addr4))), rule.AddrFrom(netip.MustParseAddr(pick(r, addr4)))
	} else {
		f.Family = rule.IPv6
		f.Src, f.Dst = rule.AddrFrom(netip.MustParseAddr(pick(r, addr6))), rule.AddrFrom(netip.MustParseAddr(pick(r, addr6)))
	}
	f.Proto = pick(r, []uint8{rule.ProtoTCP, rule.ProtoUDP, rule.ProtoICMP, rule.ProtoICMPv6, rule.ProtoSCTP})
	mf, off := r.IntN(3) == 0, uint16(0)
	if r.IntN(3) == 0 {
		off = 8
	}
	f.Frag = rule.FragState(f.Family == rule.IPv4 && r.IntN(2) == 0, mf, off)
	f.L4 = off == 0 && r.IntN(10) != 0
	if f.HasPorts() {
		f.SrcPort, f.DstPort = pick(r, pvals), pick(r, pvals)
	}
	if f.L4 && f.Proto == rule.ProtoTCP {
		f.TCPFlags = uint8(r.IntN(256))
	}
	if f.HasICMP() {
		f.ICMPType, f.ICMPCode = uint8(r.IntN(12)), uint8(r.IntN(3))
	}
	f.DSCP = pick(r, []uint8{0, 1, 46, 47})
	f.Length = 64
	return f
}
