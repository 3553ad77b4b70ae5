package placement

import (
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/scrubd/scrubd/agent/dataplane"
	"github.com/scrubd/scrubd/agent/store"
	"github.com/scrubd/scrubd/swpath/rule"
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
	steps, big := 20000, 3000
	if testing.Short() {
		steps, big = 4000, 1200 // -race -short in CI
	}
	for step := range steps {
		switch k := rng.IntN(10); {
		case step == steps/4:
			rvs := make([]RuleView, big)
			for i := range rvs {
				rvs[i] = rv(i)
			}
			es := make([]ruleEntry, len(rvs))
			for i, r := range rvs {
				es[i] = entryOf(r, time.Time{})
			}
			e.reset(es)
			ref = rvs
		case k < 4 || len(ref) == 0:
			i := rng.IntN(len(ref) + 1)
			if rng.IntN(2) == 0 {
				i = len(ref) // appends, as the store's new rules
			}
			r := rv(step)
			e.insert(i, entryOf(r, time.Time{}))
			ref = slices.Insert(ref, i, r)
		case k < 7:
			i := rng.IntN(len(ref))
			e.remove(i)
			ref = slices.Delete(ref, i, i+1)
		default:
			i := rng.IntN(len(ref))
			r := rv(step)
			e.set(i, entryOf(r, time.Time{}))
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
	want := make([]RuleView, 0, len(p.states))
	p.set.Ordered(func(i int) { // in order: a rule changed in place at its key
		if rs := p.states[i]; rs != nil { // not a hole
			want = append(want, p.viewOf(rs))
		}
	})
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

// checkFind checks RuleList.Find on p's published list against a walk of
// the list by id, for every rule of the store (placed at the store's
// version): a rule in force is found, as the walk finds it, and a refused
// one (not in the set) and an id the store does not hold are not.
func checkFind(t *testing.T, p *Placer, st *store.Store, what string) {
	t.Helper()
	l := p.View().Rules
	byID := map[string]RuleView{}
	for _, rv := range l.All() {
		byID[rv.ID] = rv
	}
	for _, e := range st.List() {
		got, ok := l.Find(e.Rule.ID, e.Seq())
		want, in := byID[e.Rule.ID]
		switch {
		case e.InForce() && !ok:
			t.Fatalf("%s: Find(%q, %d) found nothing; the list holds %+v", what, e.Rule.ID, e.Seq(), want)
		case !e.InForce() && ok:
			t.Fatalf("%s: Find(%q, %d) found %+v for a rule not in force", what, e.Rule.ID, e.Seq(), *got)
		case ok && (!in || *got != want):
			t.Fatalf("%s: Find(%q, %d) = %+v, the list holds %+v", what, e.Rule.ID, e.Seq(), *got, want)
		}
	}
	if rv, ok := l.Find("no-such-rule", 1); ok {
		t.Fatalf("%s: Find of an id not held found %+v", what, *rv)
	}
}

// Readers of the published View walk its list while the placer edits the
// next one: run with -race, a write to anything a View holds is reported.
// The readers also check that a View's list does not change under them.
func TestRuleListReadersRaceFree(t *testing.T) {
	w := newWorld(t, 8)
	p := New(cfg(), w.hw, w.sw, quiet(), w.now)
	ctx := context.Background()
	var rs []rule.Rule
	for i := range 600 {
		rs = append(rs, drop(fmt.Sprintf("r%d", i), fmt.Sprintf("10.%d.%d.0/24", i/256, i%256)))
	}
	st := store.New(nil, w.now)
	if _, err := st.Replace("api", rs); err != nil {
		t.Fatal(err)
	}
	w.want(st.Effective().Set.Rules...)
	p.ApplyStore(ctx, st)
	done := make(chan struct{})
	var readers sync.WaitGroup
	for range 2 {
		readers.Add(1)
		go func() {
			defer readers.Done()
			for {
				select {
				case <-done:
					return
				default:
				}
				v := p.View()
				first := v.Rules.Slice()
				for i, r := range v.Rules.All() {
					if r != first[i] || *v.Rules.At(i) != r {
						t.Errorf("a published list changed under its reader at %d", i)
						return
					}
				}
			}
		}()
	}
	rng := rand.New(rand.NewPCG(3, 4))
	rounds := 300
	if testing.Short() {
		rounds = 60
	}
	for i := range rounds {
		w.clock = w.clock.Add(time.Second)
		id := fmt.Sprintf("r%d", rng.IntN(700))
		if rng.IntN(2) == 0 {
			_ = st.Delete("api", id)
		} else {
			_, _ = st.Put("api", drop(id, fmt.Sprintf("10.9.%d.0/24", i%256)))
		}
		w.want(st.Effective().Set.Rules...)
		p.ApplyStore(ctx, st)
		c := w.sw.rules[id]
		c.Packets += 10
		w.sw.rules[id] = c
		p.Tick(ctx)
	}
	close(done)
	readers.Wait()
	checkList(t, p, "end")
}

// A list made of RuleViews reads them back as they were, whatever their
// texts: the list holds each compactly and builds the RuleView on read.
func TestRuleListOfReadsBack(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	rvs := []RuleView{
		{ID: "blank"},
		{ID: "sw", Action: "drop", Path: SW, Reason: "software: why", Since: t0.Add(time.Second)},
		{ID: "hw", Action: "drop", Path: HW, Since: t0, Moves: 3, HW: dataplane.Counter{Packets: 5, Bytes: 320},
			PPS: 7.5, HWPPS: 2.5, SWPPS: 1, AvgFrame: 64},
		{ID: "acc", Action: "accept", Path: None, Reason: "accept rule"},
		{ID: "odd", Action: "action(7)", Path: "elsewhere", Since: t0.Add(-time.Hour)},
	}
	l := RuleListOf(rvs...)
	if got := l.Slice(); !reflect.DeepEqual(got, rvs) {
		t.Fatalf("read back\n%+v\nwant\n%+v", got, rvs)
	}
	for i := range rvs {
		if *l.At(i) != rvs[i] || l.ID(i) != rvs[i].ID {
			t.Fatalf("At(%d) = %+v, want %+v", i, *l.At(i), rvs[i])
		}
	}
	if h, s, _, _ := l.totals(); h != 2.5 || s != 1 {
		t.Fatalf("totals %v %v, want 2.5 1", h, s)
	}
	if hw, sw := l.paths(); hw != 1 || sw != 1 {
		t.Fatalf("paths %d %d, want 1 1", hw, sw)
	}
	// A list without places: Find walks it, whatever place it is given.
	for i, rv := range rvs {
		if got, ok := l.Find(rv.ID, uint64(i)*7); !ok || *got != rv {
			t.Fatalf("Find(%q) in a list without places = %v, %v; want %+v", rv.ID, got, ok, rv)
		}
	}
	if _, ok := l.Find("missing", 0); ok {
		t.Fatal("Find of an id not held found it")
	}
}
