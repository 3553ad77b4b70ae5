package placement

import (
	"context"
	"testing"
	"time"

	"github.com/scrubd/scrubd/agent/dataplane"
)

// TestCountersAddUpAcrossMatchChange: a software engine that keeps a
// rule's counter slot by id (the XDP engine does) goes on counting when
// the rule keeps its id and only its match changes. The per-rule total
// must equal what the engine counted, not the running total plus the
// engine's whole count again. The engine counts below are written by hand
// as the engine would report them (cumulative per id), and the expected
// totals are their sums.
func TestCountersAddUpAcrossMatchChange(t *testing.T) {
	w := newWorld(t, 0)
	p := New(cfg(), nil, w.sw, quiet(), w.now)
	ctx := context.Background()
	sw := func(id string) uint64 {
		for _, r := range p.View().Rules.All() {
			if r.ID == id {
				return r.SW.Packets
			}
		}
		t.Fatalf("rule %s not in the view", id)
		return 0
	}
	tick := func(counts map[string]uint64) {
		for id, n := range counts {
			w.sw.rules[id] = dataplane.Counter{Packets: n, Bytes: 64 * n}
		}
		w.clock = w.clock.Add(time.Second)
		p.Tick(ctx)
	}
	a := drop("drop-flood", "203.0.113.1/32")
	w.want(a)
	p.Apply(ctx, snap(1, a))
	tick(map[string]uint64{"drop-flood": 100})
	if got := sw("drop-flood"); got != 100 {
		t.Fatalf("after the first round: %d, want 100", got)
	}
	// Same id, new match; the engine keeps the slot and counts on to 150.
	a2 := drop("drop-flood", "203.0.113.0/24")
	b := drop("b", "198.51.100.7/32")
	w.want(a2, b)
	p.Apply(ctx, snap(2, a2, b))
	tick(map[string]uint64{"drop-flood": 150, "b": 9})
	if got := sw("drop-flood"); got != 150 {
		t.Fatalf("after a match change under the same id: %d, want the engine's 150 (a double count gives 250)", got)
	}
	// Changed again, this time by an engine that starts the slot afresh
	// (counts 20 from zero): 150 + 20.
	a3 := drop("drop-flood", "203.0.113.0/25")
	w.want(a3, b)
	p.Apply(ctx, snap(3, a3, b))
	tick(map[string]uint64{"drop-flood": 20, "b": 10})
	if got := sw("drop-flood"); got != 170 {
		t.Fatalf("after a change with a fresh slot: %d, want 150+20", got)
	}
	// The engine restarts: every slot from zero.
	tick(map[string]uint64{"drop-flood": 5, "b": 1})
	if got, gb := sw("drop-flood"), sw("b"); got != 175 || gb != 11 {
		t.Fatalf("after a restart: drop-flood %d b %d, want 175 and 11", got, gb)
	}
	// The per-rule totals add up to what the engine dropped in all.
	var sum uint64
	for _, r := range p.View().Rules.All() {
		sum += r.SW.Packets + r.HW.Packets
	}
	if want := uint64(150 + 20 + 5 + 10 + 1); sum != want {
		t.Fatalf("per-rule counters sum to %d, the engine dropped %d", sum, want)
	}
}
