package sim

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"testing"

	"github.com/scrubd/scrubd/agent/plan"
	"github.com/scrubd/scrubd/swpath/rule"
	"github.com/scrubd/scrubd/swpath/traffic"
)

// The reference decision computed a flow at a time is set.Decide's (the
// linear first match) for every variant of the default traffic mix, on
// sets built to split each flow's variants: rules on the flow's
// destination with source prefixes covering parts of its source range, of
// mixed priorities and actions, among ClassBench-style rules. A flow with
// a variant that differs in more than its source (a destination moved
// here) takes the fallback and must agree too. Every other set has holes
// (rule.Holes), which decide nothing, and every third rules changed in
// place (rule.Order), which decide at their keys.
func TestReferenceDropsAgreeWithDecide(t *testing.T) {
	flowsIn := DefaultFlows()
	reta, err := plan.UniformRETA(plan.DefaultRETASize, 4)
	if err != nil {
		t.Fatal(err)
	}
	var flows [][]variant
	for i := range flowsIn {
		vs, err := buildVariants(i, &flowsIn[i], reta)
		if err != nil {
			t.Fatal(err)
		}
		flows = append(flows, vs)
	}
	// A variant that differs in its destination port too.
	odd := flows[1][3]
	odd.fields.DstPort++
	flows[1] = append(flows[1], odd)

	var drops, passes int
	for seed := uint64(1); seed <= 6; seed++ {
		r := rand.New(rand.NewPCG(seed, 7))
		set := traffic.ClassBenchRules(seed, 3000)
		for k := 0; k < 400; k++ {
			fi := r.IntN(len(flows))
			vs := flows[fi]
			base := vs[r.IntN(len(vs))].fields
			fam := base.Family
			bits := 32
			if fam == rule.IPv6 {
				bits = 128
			}
			plen := bits - r.IntN(7) // up to 64 sources
			src := netip.PrefixFrom(base.Src.Netip(fam), plen).Masked()
			m := rule.Match{Src: src, Dst: netip.PrefixFrom(base.Dst.Netip(fam), bits-r.IntN(9)).Masked()}
			switch r.IntN(4) {
			case 0:
				m.Proto = []uint8{base.Proto}
			case 1:
				m.Src = netip.Prefix{} // destination only: every variant
			case 2:
				m.Proto = []uint8{base.Proto ^ 1} // never this flow
			}
			act := rule.Drop
			if r.IntN(3) == 0 {
				act = rule.Accept
			}
			set.Rules = append(set.Rules, rule.Rule{ID: fmt.Sprintf("s%d-%d", seed, k), Priority: uint32(10 * (1 + r.IntN(3))), Action: act, Match: m})
		}
		r.Shuffle(len(set.Rules), func(i, j int) { set.Rules[i], set.Rules[j] = set.Rules[j], set.Rules[i] })
		if seed%2 == 0 {
			// Holes (rule.Holes: removals in place) decide nothing.
			var dead []int
			for i := 0; i < len(set.Rules); i += 3 {
				dead = append(dead, i)
			}
			set.Holes = set.Holes.With(dead...)
		}
		if seed%3 == 0 {
			// Rules changed in place (rule.Order): a copy with the other
			// action appended, deciding at the old copy's key.
			n := len(set.Rules)
			for i := 1; i < n; i += 4 {
				if !set.Live(i) {
					continue
				}
				c := set.Rules[i]
				c.Action = rule.Accept + rule.Drop - c.Action
				set.Rules = append(set.Rules, c)
				set.Holes = set.Holes.With(i)
				set.Order = set.Order.With(len(set.Rules)-1, set.Key(i))
			}
		}
		got := referenceDrops(set, flows)
		for i, vs := range flows {
			for v := range vs {
				idx := set.Decide(&vs[v].fields)
				want := idx >= 0 && set.Rules[idx].Action == rule.Drop
				if got[i][v] != want {
					t.Fatalf("seed %d: flow %s variant %d: drop %v, set.Decide says %v (rule %d)", seed, flowsIn[min(i, len(flowsIn)-1)].Name, v, got[i][v], want, idx)
				}
				if want {
					drops++
				} else {
					passes++
				}
			}
		}
	}
	// The sets split the flows: both outcomes are common.
	if drops < 300 || passes < 300 {
		t.Fatalf("%d variants dropped, %d passed over the seeds: the sets do not split the flows", drops, passes)
	}
}

// The reference decision of the default traffic mix against 100k
// ClassBench-style rules: a flow at a time (referenceDrops) and
// set.Decide for every variant, as the simulator did before.
//
//	go test -run XXX -bench ReferenceDrops -benchtime 3x ./agent/sim/
func BenchmarkReferenceDrops(b *testing.B) {
	flowsIn := DefaultFlows()
	reta, err := plan.UniformRETA(plan.DefaultRETASize, 2)
	if err != nil {
		b.Fatal(err)
	}
	var flows [][]variant
	for i := range flowsIn {
		vs, err := buildVariants(i, &flowsIn[i], reta)
		if err != nil {
			b.Fatal(err)
		}
		flows = append(flows, vs)
	}
	set := traffic.ClassBenchRules(1, 100000)
	b.Run("per-flow", func(b *testing.B) {
		for b.Loop() {
			referenceDrops(set, flows)
		}
	})
	b.Run("decide-every-variant", func(b *testing.B) {
		for b.Loop() {
			for _, vs := range flows {
				for v := range vs {
					set.Decide(&vs[v].fields)
				}
			}
		}
	})
}
