package placement_test

import (
	"context"
	"fmt"
	"net/netip"
	"reflect"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/scrubd/scrubd/agent/placement"
	"github.com/scrubd/scrubd/swpath/rule"
)

// bytesPer returns the bytes allocated per call of f, over runs calls,
// with prep run before each outside the count.
func bytesPer(runs int, prep, f func(i int)) float64 {
	var total uint64
	var m0, m1 runtime.MemStats
	for i := range runs {
		prep(i)
		runtime.ReadMemStats(&m0)
		f(i)
		runtime.ReadMemStats(&m1)
		total += m1.TotalAlloc - m0.TotalAlloc
	}
	return float64(total) / float64(runs)
}

// changeCost places n ClassBench-style rules (a table of 512 entries: it
// is full at both sizes, so hardware holds as many rules at 1k as at 10k)
// and returns the bytes allocated by one placement round of one rule added
// through the store (ApplyStore: the delta round and the View it
// publishes), by one idle Tick (no counter moved), and by one round of
// one rule removed from the middle of the set (which leaves a hole: no
// copy of the set's rules, see compact), and by one round of one rule
// changed in place (its priority: the same id keeps its place; the copy
// is appended, see moveInPlace).
func changeCost(t *testing.T, n int) (add, tick, rm, ch float64) {
	st := classBenchStore(t, n)
	clk := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	// MinDwell is longer than the ticks below: a rule hardware refused is
	// not tried again in them (each try allocates what the compile does).
	p := placement.New(placement.Config{MinDwell: time.Hour}, simPath(512), &countSW{}, quiet(), func() time.Time { return clk })
	ctx := context.Background()
	p.ApplyStore(ctx, st)
	put := func(i int) {
		r := rule.Rule{ID: fmt.Sprintf("one%d", i), Priority: 100, Action: rule.Drop,
			Match: rule.Match{Dst: netip.PrefixFrom(netip.AddrFrom4([4]byte{198, 18, byte(i >> 8), byte(i)}), 32), Proto: []uint8{rule.ProtoUDP}}}
		if _, err := st.Put("api", r); err != nil {
			t.Fatal(err)
		}
	}
	// A first add grows the placer's arrays (their capacity ends at the
	// snapshot's length); the next n adds append in place.
	put(-1)
	p.ApplyStore(ctx, st)
	add = bytesPer(40, put, func(int) { p.ApplyStore(ctx, st) })
	if v := p.View(); v.StoreVersion != st.Version() || v.Rules.Len() != n+2+41 {
		t.Fatalf("placement at version %d with %d rules, store at %d with %d", v.StoreVersion, v.Rules.Len(), st.Version(), n+2+41)
	}
	for range 3 {
		clk = clk.Add(time.Second)
		p.Tick(ctx)
	}
	d := len(p.View().Decisions)
	tick = bytesPer(20, func(int) { clk = clk.Add(time.Second) }, func(int) { p.Tick(ctx) })
	if len(p.View().Decisions) != d {
		t.Fatalf("the idle ticks moved rules (%d decisions, was %d)", len(p.View().Decisions), d)
	}
	before := p.View().Rules.Len()
	const rms = 20
	rm = bytesPer(rms, func(i int) {
		if err := st.Delete("file:bench", "cb"+strconv.Itoa(n/2+3*i)); err != nil {
			t.Fatal(err)
		}
	}, func(int) { p.ApplyStore(ctx, st) })
	if v := p.View(); v.StoreVersion != st.Version() || v.Rules.Len() != before-rms {
		t.Fatalf("placement at version %d with %d rules, store at %d with %d", v.StoreVersion, v.Rules.Len(), st.Version(), before-rms)
	}
	change := func(i int) {
		r := st.Effective().Set.Rules[n/3+5*i]
		r.Priority++
		if _, err := st.Put("file:bench", r); err != nil {
			t.Fatal(err)
		}
	}
	// A first change may grow the array the engine holds (its capacity
	// ends where the adds above left it); the next ones append in place.
	change(-1)
	p.ApplyStore(ctx, st)
	ch = bytesPer(20, change, func(int) { p.ApplyStore(ctx, st) })
	if v := p.View(); v.StoreVersion != st.Version() || v.Rules.Len() != before-rms {
		t.Fatalf("placement at version %d with %d rules, store at %d with %d", v.StoreVersion, v.Rules.Len(), st.Version(), before-rms)
	}
	return add, tick, rm, ch
}

// A rule added (or removed) costs what it touches, not what the set holds: the bytes a
// delta round allocates (placement, the hardware path's compile and the
// View published) and those of an idle Tick do not grow with the number
// of rules. With the View rebuilt as one RuleView per rule per round (160
// bytes a rule: 1.6 MB a round at 10k), or the hardware path's index of
// the set built again for every new set, the 10k figure is many times the
// 1k one.
func TestChangeCostDoesNotGrowWithRules(t *testing.T) {
	add1, tick1, rm1, ch1 := changeCost(t, 1000)
	add10, tick10, rm10, ch10 := changeCost(t, 10000)
	t.Logf("bytes per add: %.0f at 1k rules, %.0f at 10k; per idle tick: %.0f, %.0f; per remove: %.0f, %.0f; per change in place: %.0f, %.0f",
		add1, add10, tick1, tick10, rm1, rm10, ch1, ch10)
	// Margins: a chunk of the View (256 entries, 12 KB, with figures for
	// the rules that have any) and the chunk index may be copied once
	// more at 10k; map growth in the store.
	const margin = 64 << 10
	if add10 > 1.5*add1+margin {
		t.Errorf("one rule added allocates %.0f bytes at 10k rules, %.0f at 1k: it grows with the set", add10, add1)
	}
	// An idle tick's bytes are the View and the counters of the few rules
	// in hardware at most (the table holds 512 entries at both sizes).
	if tick10 > 1.5*tick1+margin/2 {
		t.Errorf("an idle tick allocates %.0f bytes at 10k rules, %.0f at 1k: it grows with the set", tick10, tick1)
	}
	// A removal leaves a hole: it copies the holes' bitmap (a bit a rule,
	// 1.25 KB at 10k), not the rules (3.2 MB at 10k), which the 20
	// removals here are too few to compact.
	if rm10 > 1.5*rm1+margin {
		t.Errorf("one rule removed allocates %.0f bytes at 10k rules, %.0f at 1k: it grows with the set", rm10, rm1)
	}
	// A change in place appends the new copy and holes the old: no copy
	// of the rules (3.2 MB at 10k) while an engine holds the array.
	if ch10 > 1.5*ch1+margin {
		t.Errorf("one rule changed in place allocates %.0f bytes at 10k rules, %.0f at 1k: it grows with the set", ch10, ch1)
	}
}

// The first rule added after a full round (Apply took the store's array,
// capped at its length) costs no copy of the set either: the store writes
// the rule after the end of that array (it keeps room) and the placer
// takes the store's array, longer, instead of growing a copy of its own
// (at 100k rules 29 MB, and a second copy of every rule held from then
// on). At 10k rules the round allocates well under a copy of the rules.
func TestFirstAddCopiesNoRules(t *testing.T) {
	const n = 10000
	st := classBenchStore(t, n)
	clk := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	p := placement.New(placement.Config{MinDwell: time.Hour}, simPath(512), &countSW{}, quiet(), func() time.Time { return clk })
	ctx := context.Background()
	p.ApplyStore(ctx, st)
	copyBytes := float64(n) * float64(reflect.TypeFor[rule.Rule]().Size())
	for i := range 3 {
		r := rule.Rule{ID: fmt.Sprintf("first%d", i), Priority: 100, Action: rule.Drop,
			Match: rule.Match{Dst: netip.PrefixFrom(netip.AddrFrom4([4]byte{198, 18, 7, byte(i)}), 32), Proto: []uint8{rule.ProtoUDP}}}
		if _, err := st.Put("api", r); err != nil {
			t.Fatal(err)
		}
		b := bytesPer(1, func(int) {}, func(int) { p.ApplyStore(ctx, st) })
		if b > copyBytes/2 {
			t.Errorf("add %d after a full round allocates %.0f bytes at %d rules: a copy of the rules is %.0f", i, b, n, copyBytes)
		}
		v := p.View()
		if v.StoreVersion != st.Version() || v.Rules.Len() != n+2+i+1 {
			t.Fatalf("placement at version %d with %d rules, store at %d with %d", v.StoreVersion, v.Rules.Len(), st.Version(), n+2+i+1)
		}
		if last := v.Rules.At(v.Rules.Len() - 1); last.ID != r.ID || last.Path == placement.None {
			t.Fatalf("the last rule placed is %s on %v, want %s placed", last.ID, last.Path, r.ID)
		}
	}
}

// The array the placer takes from the store stays the store's and the
// engines': a rule changed in place afterwards (the same id at the same
// place in the order) is appended (moveInPlace: past the length of every
// set handed out, or into a new array), so a set handed out before (here
// the store's, read back) still holds the old rule. Written in place, the old set would show the new match. (Without
// the backstop: with it, the software set shares the array too and guards
// it the same way.)
func TestAdoptedArrayIsNotWritten(t *testing.T) {
	const n = 2000
	st := classBenchStore(t, n)
	clk := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	p := placement.New(placement.Config{MinDwell: time.Hour, NoBackstop: true}, simPath(512), &countSW{}, quiet(), func() time.Time { return clk })
	ctx := context.Background()
	p.ApplyStore(ctx, st)
	one := func(b byte) rule.Rule {
		return rule.Rule{ID: "adopted", Priority: 100, Action: rule.Drop,
			Match: rule.Match{Dst: netip.PrefixFrom(netip.AddrFrom4([4]byte{198, 18, 9, b}), 32), Proto: []uint8{rule.ProtoUDP}}}
	}
	if _, err := st.Put("api", one(1)); err != nil {
		t.Fatal(err)
	}
	p.ApplyStore(ctx, st)
	held := st.Effective().Set.Rules
	want := make([]string, len(held))
	for i := range held {
		want[i] = held[i].ID + " " + held[i].Match.String()
	}
	for _, b := range []byte{2, 3} {
		if _, err := st.Put("api", one(b)); err != nil {
			t.Fatal(err)
		}
		p.ApplyStore(ctx, st)
		if v := p.View(); v.StoreVersion != st.Version() {
			t.Fatalf("placement at version %d, store at %d", v.StoreVersion, st.Version())
		}
	}
	for i := range held {
		if got := held[i].ID + " " + held[i].Match.String(); got != want[i] {
			t.Fatalf("rule %d of a set handed out before is now %q, was %q", i, got, want[i])
		}
	}
}
