package placement_test

import (
	"context"
	"testing"
	"time"

	"github.com/scrubd/scrubd/agent/placement"
)

// TestIdleTickSortsNothing: an idle agent (no traffic, software load 0)
// whose hardware table is full has no rule that can move, so a Tick's
// regime pass gathers and sorts no candidate; the old pass gathered and
// sorted every software rule each round (n minus the table's size here).
// Once a removal frees entries, the next Tick gathers the rules that fit
// and tries them (offload first), MaxMoves moves at most.
func TestIdleTickSortsNothing(t *testing.T) {
	const n, entries = 3000, 64
	st := classBenchStore(t, n)
	clk := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	now := func() time.Time { return clk }
	p := placement.New(placement.Config{MinDwell: time.Second, MaxMoves: 4}, simPath(entries), &countSW{}, quiet(), now)
	ctx := context.Background()
	p.ApplyStore(ctx, st)
	onHW := func() (hw []string, sw int) {
		for _, r := range p.View().Rules.All() {
			switch r.Path {
			case placement.HW:
				hw = append(hw, r.ID)
			case placement.SW:
				sw++
			}
		}
		return hw, sw
	}
	hw, sw := onHW()
	if b := p.View().HWBudget; b.MaxEntries == 0 || b.MaxEntries-b.UsedEntries > 4 || sw < n-entries {
		t.Fatalf("setup: want a full table and most rules in software, got budget %+v, %d in hardware, %d in software", b, len(hw), sw)
	}
	for range 3 {
		clk = clk.Add(2 * time.Second) // past MinDwell: every rule may move
		p.Tick(ctx)
		if got := p.RegimeSorted(); got != 0 {
			t.Fatalf("idle tick with a full table sorted %d candidates (of %d software rules), want 0", got, sw)
		}
	}
	if hw2, _ := onHW(); len(hw2) != len(hw) {
		t.Fatalf("idle ticks moved rules: %d in hardware, was %d", len(hw2), len(hw))
	}
	// Free entries: remove ten hardware rules from the store.
	for _, id := range hw[:10] {
		if err := st.Delete("file:bench", id); err != nil {
			t.Fatal(err)
		}
	}
	p.ApplyStore(ctx, st)
	before, _ := onHW()
	refused := func() (n uint64) {
		for _, c := range p.View().HWFailures {
			n += c
		}
		return n
	}
	r0 := refused()
	clk = clk.Add(2 * time.Second)
	p.Tick(ctx)
	if got := p.RegimeSorted(); got == 0 || got > sw {
		t.Fatalf("tick after freeing entries sorted %d candidates, want between 1 and %d", got, sw)
	}
	// The rules gathered are tried: they move, or the table refuses them
	// (ClassBench rules need mask shapes the table may not have left).
	after, _ := onHW()
	if len(after) > len(before)+4 || (len(after) == len(before) && refused() == r0) {
		t.Fatalf("tick after freeing entries: %d rules in hardware, was %d, refusals %d -> %d; want a move (at most MaxMoves, 4) or a refusal",
			len(after), len(before), r0, refused())
	}
}
