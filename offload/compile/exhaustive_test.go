package compile

import (
	"net/netip"
	"testing"

	"github.com/scrubd/scrubd/offload"
	"github.com/scrubd/scrubd/swpath/rule"
)

// allPackets enumerates every consistent packet over a small domain: both
// families, a few addresses around the sets' prefixes, every fragment cell
// (DF x first/middle/last/none), L4 present or cut short, and for each
// protocol the port, TCP-flag and ICMP values around the sets' conditions.
func allPackets(yield func(*rule.Fields)) {
	addrs := map[rule.Family][]string{
		rule.IPv4: {"203.0.113.7", "203.0.113.8", "203.0.114.1", "10.0.0.1"},
		rule.IPv6: {"2001:db8::1", "2001:db8::2", "2001:db9::1"},
	}
	type cell struct {
		df, mf bool
		off    uint16
	}
	var cells []cell
	for _, df := range []bool{false, true} {
		for _, c := range []cell{{false, false, 0}, {false, true, 0}, {false, true, 8}, {false, false, 8}} {
			c.df = df
			cells = append(cells, c)
		}
	}
	var f rule.Fields
	for _, fam := range []rule.Family{rule.IPv4, rule.IPv6} {
		for _, src := range addrs[fam][:2] {
			for _, dst := range addrs[fam] {
				for _, proto := range []uint8{rule.ProtoICMP, rule.ProtoTCP, rule.ProtoUDP, rule.ProtoICMPv6, rule.ProtoSCTP} {
					for _, c := range cells {
						if c.df && fam == rule.IPv6 {
							continue
						}
						for _, l4 := range []bool{true, false} {
							if l4 && c.off != 0 {
								continue
							}
							for _, dscp := range []uint8{0, 46} {
								f = rule.Fields{Family: fam, Proto: proto, L4: l4, DSCP: dscp, Length: 60,
									Frag: rule.FragState(c.df, c.mf, c.off),
									Src:  rule.AddrFrom(netip.MustParseAddr(src)), Dst: rule.AddrFrom(netip.MustParseAddr(dst))}
								if !l4 {
									yield(&f)
									continue
								}
								switch {
								case f.HasPorts():
									for _, sp := range []uint16{0, 53, 1024} {
										for _, dp := range []uint16{0, 79, 80, 81, 999, 1000, 2000, 2001} {
											flags := []uint8{0}
											if proto == rule.ProtoTCP {
												flags = []uint8{0, rule.SYN, rule.SYN | rule.ACK, rule.ACK}
											}
											for _, fl := range flags {
												f.SrcPort, f.DstPort, f.TCPFlags = sp, dp, fl
												yield(&f)
											}
										}
									}
								case f.HasICMP():
									for _, ty := range []uint8{0, 8, 9} {
										for _, co := range []uint8{0, 1} {
											f.ICMPType, f.ICMPCode = ty, co
											yield(&f)
										}
									}
								default:
									yield(&f)
								}
							}
						}
					}
				}
			}
		}
	}
}

func parseSet(t *testing.T, ys ...string) *rule.Set {
	s := &rule.Set{}
	for _, y := range ys {
		s.Rules = append(s.Rules, parseOne(t, y))
	}
	return s
}

// TestExhaustiveSmallSets checks hand-made sets with overlapping accept and
// drop rules over every packet of allPackets: the hardware part never
// drops what the set passes, drops everything its offloaded rules decide,
// and every offloaded rule's entries match exactly the rule's packets.
func TestExhaustiveSmallSets(t *testing.T) {
	sets := []*rule.Set{
		parseSet(t,
			`{id: dns-ok, priority: 10, action: accept, match: {src: 203.0.113.7/32, proto: udp, src_port: "53"}}`,
			`{id: net, priority: 100, action: drop, match: {dst: 203.0.113.0/24, proto: udp}}`,
			`{id: syn80, priority: 100, action: drop, match: {proto: tcp, dst_port: "80", tcp_flags: {value: [syn], mask: [syn, ack]}}}`,
			`{id: frags, priority: 100, action: drop, match: {fragment: [is-fragment, first-fragment]}}`,
			`{id: web-ok, priority: 200, action: accept, match: {proto: tcp, dst_port: "80"}}`,
			`{id: first, priority: 300, action: drop, match: {proto: udp, dst_port: "1000-2000", fragment: [first-fragment]}}`),
		parseSet(t,
			`{id: p80, priority: 50, action: drop, match: {port: "80"}}`,
			`{id: host-ok, priority: 10, action: accept, match: {dst: "2001:db8::1/128", proto: icmpv6, icmp_type: "9"}}`,
			`{id: ping, priority: 100, action: drop, match: {dst: "2001:db8::/32", icmp_type: "8"}}`,
			`{id: ef, priority: 100, action: drop, match: {dscp: [46]}}`,
			`{id: df, priority: 100, action: drop, match: {dst: 10.0.0.0/8, fragment: [dont-fragment]}}`),
		parseSet(t,
			`{id: range, priority: 100, action: drop, match: {proto: udp, dst_port: "1000-2000"}}`,
			`{id: dns-resp, priority: 5, action: accept, match: {proto: udp, src_port: "53", dst_port: "1000-2000"}}`,
			`{id: syn, priority: 100, action: drop, match: {proto: tcp, fragment: [not-fragment], tcp_flags: {value: [syn], mask: [syn, ack]}}}`,
			`{id: ports, priority: 100, action: drop, match: {proto: [tcp, udp], src_port: "1024", port: "79-81"}}`),
		// value [] with a mask: none of the masked flags set.
		parseSet(t,
			`{id: no-syn-ack-443, priority: 100, action: drop, match: {proto: tcp, dst_port: "443", tcp_flags: {value: [], mask: [syn, ack]}}}`,
			`{id: no-rst, priority: 100, action: drop, match: {dst: 10.0.0.0/8, proto: tcp, src_port: "80", tcp_flags: {value: [], mask: [rst]}}}`),
	}
	total := 0
	for si, s := range sets {
		for ci, cfg := range []*Config{mlx5Cfg(), flowerCfg()} {
			res := Set(cfg, s)
			var hw []offload.Entry
			for i := range res {
				hw = append(hw, res[i].Entries...)
			}
			n := 0
			allPackets(func(f *rule.Fields) {
				n++
				d := s.Decide(f)
				if entriesMatch(hw, f) && (d < 0 || s.Rules[d].Action != rule.Drop) {
					t.Fatalf("set %d cfg %d: hardware drops %+v, set decides %d", si, ci, *f, d)
				}
				for i := range res {
					if res[i].Offloadable && entriesMatch(res[i].Entries, f) != wantHW(s, &res[i], i, f) {
						t.Fatalf("set %d cfg %d: rule %s inexact on %+v", si, ci, s.Rules[i].ID, *f)
					}
				}
			})
			total += n
			var placed []string
			for i := range res {
				if res[i].Offloadable {
					placed = append(placed, res[i].RuleID)
				}
			}
			t.Logf("set %d cfg %d: %d packets; in hardware: %v", si, ci, n, placed)
		}
	}
	if total < 80000 {
		t.Fatalf("only %d packets", total)
	}
}
