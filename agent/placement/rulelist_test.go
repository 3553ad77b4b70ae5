package placement

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
)

// The list editor against a plain slice doing the same edits: random
// inserts, removals and writes, published now and then. Every list
// published must still read what it read when published (no later edit
// writes what a View holds), its chunks must add up (ends), and its totals
// must be the sums over its rules.
func TestRuleListEditsEqualSlice(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var e listEditor
	var ref []RuleView
	type pub struct {
		l    RuleList
		want []RuleView
	}
	var pubs []pub
	rv := func(k int) RuleView {
		return RuleView{ID: fmt.Sprintf("r%d", k), HWPPS: float64(rng.IntN(4)), SWPPS: float64(rng.IntN(4)), AvgFrame: float64(64 * rng.IntN(4))}
	}
	check := func(step int, l RuleList, want []RuleView) {
		t.Helper()
		if l.Len() != len(want) || !slices.Equal(l.Slice(), want) {
			t.Fatalf("step %d: list of %d differs from the slice of %d", step, l.Len(), len(want))
		}
		n := 0
		for k, c := range l.chunks {
			if len(c.rv) == 0 || len(c.rv) >= 2*chunkLen {
				t.Fatalf("step %d: chunk %d holds %d rules", step, k, len(c.rv))
			}
			n += len(c.rv)
			if l.ends[k] != n {
				t.Fatalf("step %d: ends[%d] = %d, want %d", step, k, l.ends[k], n)
			}
		}
		for i, r := range l.All() {
			if *l.At(i) != r || r != want[i] {
				t.Fatalf("step %d: At(%d) and All differ", step, i)
			}
		}
		var hw, sw, hwB, swB float64
		for _, r := range want {
			hw += r.HWPPS
			sw += r.SWPPS
			hwB += r.HWPPS * r.AvgFrame
			swB += r.SWPPS * r.AvgFrame
		}
		if h, s, hb, sb := l.totals(); h != hw || s != sw || hb != hwB || sb != swB {
			t.Fatalf("step %d: totals %v %v %v %v, want %v %v %v %v", step, h, s, hb, sb, hw, sw, hwB, swB)
		}
	}
	for step := range 20000 {
		switch k := rng.IntN(10); {
		case step == 5000:
			rvs := make([]RuleView, 3000)
			for i := range rvs {
				rvs[i] = rv(i)
			}
			e.reset(slices.Clone(rvs))
			ref = rvs
		case k < 4 || len(ref) == 0:
			i := rng.IntN(len(ref) + 1)
			if rng.IntN(2) == 0 {
				i = len(ref) // appends, as the store's new rules
			}
			r := rv(step)
			e.insert(i, r)
			ref = slices.Insert(ref, i, r)
		case k < 7:
			i := rng.IntN(len(ref))
			e.remove(i)
			ref = slices.Delete(ref, i, i+1)
		default:
			i := rng.IntN(len(ref))
			r := rv(step)
			e.set(i, r)
			ref[i] = r
		}
		if rng.IntN(8) == 0 {
			l := e.published()
			check(step, l, ref)
			pubs = append(pubs, pub{l, slices.Clone(ref)})
		}
	}
	for i, p := range pubs {
		if !reflect.DeepEqual(p.l.Slice(), p.want) {
			t.Fatalf("published list %d of %d changed after it was published", i, len(pubs))
		}
	}
	if len(pubs) < 100 {
		t.Fatalf("only %d lists published", len(pubs))
	}
}

// checkList fails unless p's published list is what a list built from
// scratch of its rule states reads: every change a round made reached it.
func checkList(t *testing.T, p *Placer, what string) {
	t.Helper()
	want := make([]RuleView, len(p.order))
	for i, id := range p.order {
		want[i] = viewOf(id, p.states[i])
	}
	if got := p.View().Rules.Slice(); !reflect.DeepEqual(got, want) {
		for i := range min(len(got), len(want)) {
			if got[i] != want[i] {
				t.Fatalf("%s: published rule %d is %+v, its state says %+v", what, i, got[i], want[i])
			}
		}
		t.Fatalf("%s: %d rules published, %d placed", what, len(got), len(want))
	}
	var hw, sw int
	for _, r := range want {
		switch r.Path {
		case HW:
			hw++
		case SW:
			sw++
		}
	}
	if h, s := p.View().Rules.paths(); h != hw || s != sw {
		t.Fatalf("%s: the list counts %d in hardware and %d in software, the rules %d and %d", what, h, s, hw, sw)
	}
}
