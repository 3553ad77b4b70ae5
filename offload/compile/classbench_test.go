package compile

import (
	"slices"
	"testing"

	"github.com/scrubd/scrubd/offload"
	"github.com/scrubd/scrubd/swpath/rule"
	"github.com/scrubd/scrubd/swpath/traffic"
)

// TestTrafficRandomRulesExact cross-checks the compiler on the rule
// generator of the classifier tests (every kind of condition, accept rules,
// ties): every offloaded rule is exact, and the hardware part of every set
// never drops what the set passes.
func TestTrafficRandomRulesExact(t *testing.T) {
	for seed := range uint64(20) {
		s := traffic.RandomRules(seed, 40)
		for _, cfg := range []*Config{mlx5Cfg(), flowerCfg()} {
			res := Set(cfg, s)
			var hw []offload.Entry
			for i := range res {
				if !res[i].Offloadable {
					continue
				}
				hw = append(hw, res[i].Entries...)
				if len(res[i].SplitBy) == 0 {
					r := s.Rules[i]
					checkExact(t, &r, &res[i], 300)
				}
			}
			sp := newSpace(seed, s.Rules)
			for range 3000 {
				f := sp.packet()
				for i := range res {
					if res[i].Offloadable && entriesMatch(res[i].Entries, &f) != wantHW(s, &res[i], i, &f) {
						t.Fatalf("seed %d: rule %s (split by %v) inexact on %+v", seed, s.Rules[i].ID, res[i].SplitBy, f)
					}
				}
				if entriesMatch(hw, &f) {
					if d := s.Decide(&f); d < 0 || s.Rules[d].Action != rule.Drop {
						t.Fatalf("seed %d: hardware drops %+v, set decides %d", seed, f, d)
					}
				}
			}
		}
	}
}

func TestBudget(t *testing.T) {
	caps := offload.MLX5(10)
	caps.LargeGroups = 2
	cfg := &Config{Caps: caps, PrioV4: 1, PrioV6: 2}
	rs := []rule.Rule{
		parseOne(t, `{id: a, action: drop, match: {dst: 10.0.0.0/8, proto: udp, dst_port: "53"}}`),
		parseOne(t, `{id: b, action: drop, match: {dst: 11.0.0.0/8, proto: udp, dst_port: "123"}}`),       // same shape
		parseOne(t, `{id: c, action: drop, match: {dst: 12.0.0.0/16, proto: udp, dst_port: "19"}}`),       // 2nd shape
		parseOne(t, `{id: d, action: drop, match: {dst: 13.0.0.0/24, proto: udp, dst_port: "19"}}`),       // 3rd shape: no group
		parseOne(t, `{id: e, action: drop, match: {dst: 14.0.0.0/8, proto: udp, dst_port: "1000-2000"}}`), // 8 entries
	}
	b := NewBudget(caps, nil)
	var took []bool
	for i := range rs {
		res := Rule(cfg, &rs[i])
		took = append(took, b.Take(&res))
	}
	if want := []bool{true, true, true, false, false}; !slices.Equal(took, want) {
		t.Fatalf("took %v, want %v", took, want)
	}
	if b.Entries() != 3 || b.Masks(offload.Table{Prio: 1}) != 2 {
		t.Fatalf("entries %d masks %d", b.Entries(), b.Masks(offload.Table{Prio: 1}))
	}
}

// BenchmarkClassBench compiles ClassBench-style IPv4 ACL sets for mlx5 and
// reports the compiler's output size: entries per offloaded rule, the share
// of rules offloadable, distinct mask shapes (flow groups) in the IPv4
// table, and how many rules fit a 4k-entry, 15-group table.
func BenchmarkClassBench(b *testing.B) {
	ladder := mlx5Cfg()
	ladder.AddrLadder4 = []int{8, 16, 24, 32}
	for _, n := range []int{1000, 10000} {
		s := traffic.ClassBenchRules(1, n)
		for _, c := range []struct {
			name string
			cfg  *Config
		}{{"exact", mlx5Cfg()}, {"ladder8", ladder}} {
			b.Run(itoa(n)+"/"+c.name, func(b *testing.B) {
				var res []Result
				for b.Loop() {
					res = Set(c.cfg, s)
				}
				var entries, off int
				masks := map[TableMask]bool{}
				budget := NewBudget(offload.MLX5(4096), nil)
				fit := 0
				for i := range res {
					if !res[i].Offloadable {
						continue
					}
					off++
					entries += len(res[i].Entries)
					for _, m := range res[i].Masks {
						masks[m] = true
					}
					if budget.Take(&res[i]) {
						fit++
					}
				}
				b.ReportMetric(float64(entries)/float64(off), "entries/rule")
				b.ReportMetric(100*float64(off)/float64(n), "%offloadable")
				b.ReportMetric(float64(len(masks)), "masks")
				b.ReportMetric(float64(fit), "rules-in-4k/15g")
				b.ReportMetric(float64(budget.Entries()), "entries-in-4k/15g")
			})
		}
	}
}

func itoa(n int) string {
	if n%1000 == 0 {
		return string(rune('0'+n/10000%10)) + string(rune('0'+n/1000%10)) + "k"
	}
	return "n"
}
