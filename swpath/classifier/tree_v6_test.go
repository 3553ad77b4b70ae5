package classifier

import (
	"fmt"
	"net/netip"
	"testing"

	"github.com/scrubd/scrubd/swpath/packet"
	"github.com/scrubd/scrubd/swpath/rule"
	"github.com/scrubd/scrubd/swpath/traffic"
)

// classBenchV6 returns set with each IPv4 prefix a.b.c.d/n written as
// 2001:db8:aabb:ccdd::/(32+n), as aclbench -ipv6 does.
func classBenchV6(set *rule.Set) *rule.Set {
	out := &rule.Set{Rules: append([]rule.Rule(nil), set.Rules...)}
	conv := func(p netip.Prefix) netip.Prefix {
		if !p.IsValid() {
			return p
		}
		a := p.Addr().As4()
		return netip.PrefixFrom(netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, a[0], a[1], a[2], a[3]}), 32+p.Bits()).Masked()
	}
	for i := range out.Rules {
		m := &out.Rules[i].Match
		m.Src, m.Dst = conv(m.Src), conv(m.Dst)
	}
	return out
}

// withoutTop6 turns tab's trees back into what they were before the top
// bits (tree_v6.go): every IPv6 record with an address prefix needs holds.
func withoutTop6(tab *Table) {
	tr := tab.tr
	const top = v6SrcTop | v6DstTop
	for i := range tr.ents {
		if e := &tr.ents[i]; e.miscMask&top != 0 {
			e.misc, e.miscMask = e.misc&^top, e.miscMask&^top
			e.flags |= chkKeyAddr
		}
	}
	for ti := range tr.t {
		d := &tr.t[ti]
		for j := range d.rec {
			if r := &d.rec[j]; r.miscMask&top != 0 {
				r.misc &^= top
				r.miscMask = r.miscMask&^(top|chkPortsBit) | chkFullBit
			}
			if d.blk != nil {
				d.blk[j/vecBlock].setLane(j%vecBlock, &d.rec[j])
			}
		}
	}
}

// BenchmarkTreesIPv6 floods fresh 5-tuples through DecideBurst on a
// ClassBench-style set as IPv4, the same set as IPv6 (classBenchV6), and
// the IPv6 set without the top bits (withoutTop6: every IPv6 record that
// passes its check needs holds), alternated burst group by burst group in
// one process (thread CPU time).
func BenchmarkTreesIPv6(b *testing.B) {
	for _, n := range []int{1000, 10000, 100000} {
		b.Run(fmt.Sprintf("rules=%dk", n/1000), func(b *testing.B) {
			set4 := traffic.ClassBenchRules(uint64(n), n)
			set6 := classBenchV6(set4)
			var tabs [3]*Table
			var fss [3][]rule.Fields
			for v, set := range []*rule.Set{set4, set6, set6} {
				tab, err := Compile(set)
				if err != nil {
					b.Fatal(err)
				}
				if tab.tr == nil {
					b.Fatalf("set %d: no trees", v)
				}
				tabs[v] = tab
				frac := 1e-12
				if v > 0 {
					frac = 1
				}
				g := traffic.NewGenerator(traffic.Config{Seed: 99, Rules: set, RuleFraction: 0.95, IPv6Fraction: frac})
				fs := make([]rule.Fields, 1<<18)
				var buf []byte
				for i := range fs {
					buf = g.Next(buf[:0])
					packet.Parse(buf, &fs[i])
				}
				fss[v] = fs
			}
			withoutTop6(tabs[2])
			ids := make([]int32, burstSize)
			cpu, pkts := interleave3(b, len(fss[0]), func(v, o int) {
				tabs[v].DecideBurst(fss[v][o:o+burstSize], ids)
			})
			b.ReportMetric(float64(cpu[0])/float64(pkts), "v4-cpu-ns/pkt")
			b.ReportMetric(float64(cpu[1])/float64(pkts), "v6-cpu-ns/pkt")
			b.ReportMetric(float64(cpu[2])/float64(pkts), "v6-holds-cpu-ns/pkt")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// TestWithoutTop6 keeps BenchmarkTreesIPv6's old form honest: it decides
// as the reference does, and its records need holds as often as before.
func TestWithoutTop6(t *testing.T) {
	keepBlocks(t)
	set := classBenchV6(traffic.ClassBenchRules(1000, 1000))
	tab, err := Compile(set)
	if err != nil {
		t.Fatal(err)
	}
	withoutTop6(tab)
	g := traffic.NewGenerator(traffic.Config{Seed: 5, Rules: set, RuleFraction: 0.95, IPv6Fraction: 1, Odd: true})
	fs := parseAll(g.Frames(2000))
	out := make([]int32, len(fs))
	tab.DecideBurst(fs, out)
	for i := range fs {
		if want := set.Decide(&fs[i]); int(out[i]) != want || tab.Decide(&fs[i]) != want {
			t.Fatalf("packet %d: burst %d, Decide %d, reference %d", i, out[i], tab.Decide(&fs[i]), want)
		}
	}
	full := 0
	for _, d := range tab.tr.t {
		for _, r := range d.records() {
			if r.miscMask&chkFullBit != 0 && r.ent != treeNoRank {
				full++
			}
		}
	}
	if full < len(tab.tr.ents) {
		t.Fatalf("%d records need holds, fewer than the %d entries", full, len(tab.tr.ents))
	}
}
