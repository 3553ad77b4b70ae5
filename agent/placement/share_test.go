package placement

import (
	"context"
	"fmt"
	"net/netip"
	"reflect"
	"runtime"
	"testing"
	"time"

	"github.com/scrubd/scrubd/agent/store"
	"github.com/scrubd/scrubd/swpath/rule"
)

// shareRule is drop rule i, a /32 of its own.
func shareRule(i int) rule.Rule {
	return rule.Rule{ID: fmt.Sprintf("s%d", i), Priority: 1000, Action: rule.Drop,
		Match: rule.Match{Dst: netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}), 32)}}
}

// With the backstop every rule goes to software, and the set the engine
// is handed is the placer's own array, not a copy made each round: a
// round that adds one rule to n allocates less than one copy of the set's
// rules (n x the size of rule.Rule, 304 bytes on 64-bit). With the copy
// (the software set built rule by rule every round) a round allocates
// that copy plus the published view's n rule views, more than the bound.
func TestSoftwareSetNotCopiedEachRound(t *testing.T) {
	const n = 4000
	w := newWorld(t, 100) // the hardware takes 100; the rest software
	st := store.New(nil, w.now)
	rules := make([]rule.Rule, n)
	for i := range rules {
		rules[i] = shareRule(i)
	}
	if _, err := st.Replace("file:a", rules); err != nil {
		t.Fatal(err)
	}
	c := cfg()
	c.NoBackstop = false
	p := New(c, w.hw, w.sw, quiet(), w.now)
	ctx := context.Background()
	p.ApplyStore(ctx, st) // a snapshot: Apply
	next := n
	add := func() {
		if _, err := st.Put("api", shareRule(next)); err != nil {
			t.Fatal(err)
		}
		next++
		p.ApplyStore(ctx, st)
	}
	add() // the first append outgrows the snapshot's array
	const rounds = 10
	deltas := p.deltas
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for range rounds {
		add()
	}
	runtime.ReadMemStats(&after)
	if p.deltas-deltas != rounds {
		t.Fatalf("%d of %d rounds applied from the store's delta", p.deltas-deltas, rounds)
	}
	if got := len(w.sw.set.Rules); got != n+1+rounds {
		t.Fatalf("software holds %d rules, want %d (backstop: all)", got, n+1+rounds)
	}
	perRound := (after.TotalAlloc - before.TotalAlloc) / rounds
	oneCopy := uint64(n) * uint64(reflect.TypeFor[rule.Rule]().Size())
	t.Logf("%d rules: %d bytes allocated per round; one copy of the rules is %d bytes", n, perRound, oneCopy)
	if perRound >= oneCopy {
		t.Fatalf("a round adding one rule allocated %d bytes, at least one copy of the %d rules (%d bytes)", perRound, n, oneCopy)
	}
}

// The set handed to the engine never changes under it: a rule changed in
// its place (same id, same place in the store's order) goes into a new
// array of the placer's, and the set the engine held before reads as it
// was. The engine's new set holds the change.
func TestSoftwareSetHeldByEngineNeverChanges(t *testing.T) {
	w := newWorld(t, 0) // software only
	st := store.New(nil, w.now)
	rules := make([]rule.Rule, 50)
	for i := range rules {
		rules[i] = shareRule(i)
	}
	if _, err := st.Replace("file:a", rules); err != nil {
		t.Fatal(err)
	}
	p := New(cfg(), w.hw, w.sw, quiet(), w.now)
	ctx := context.Background()
	p.ApplyStore(ctx, st)
	// An add at the end (a delta round), so the engine holds an array of
	// the placer's, not the store snapshot's.
	if _, err := st.Put("file:b", shareRule(50)); err != nil {
		t.Fatal(err)
	}
	p.ApplyStore(ctx, st)
	held := w.sw.set
	if &held.Rules[0] != &p.set.Rules[0] {
		t.Fatal("the engine's set is a copy of the placer's rules, not the placer's array")
	}
	want := make([]rule.Rule, len(held.Rules))
	copy(want, held.Rules)
	for round, id := range []int{10, 20, 10} {
		w.clock = w.clock.Add(time.Second)
		r := shareRule(id)
		r.Match.Dst = netip.MustParsePrefix(fmt.Sprintf("192.0.2.%d/32", round))
		if _, err := st.Put("file:a", r); err != nil {
			t.Fatal(err)
		}
		deltas := p.deltas
		p.ApplyStore(ctx, st)
		if p.deltas != deltas+1 {
			t.Fatalf("round %d not applied from the delta", round)
		}
		if !sameRules(held.Rules, want) {
			t.Fatalf("round %d: the set the engine held changed under it", round)
		}
		got := w.sw.set.Rules[w.sw.set.Index(r.ID)]
		if got.Match.Dst != r.Match.Dst {
			t.Fatalf("round %d: software holds %s as %s, want %s", round, r.ID, got.Match.Dst, r.Match.Dst)
		}
		held = w.sw.set
		want = append(want[:0], held.Rules...)
	}
}
