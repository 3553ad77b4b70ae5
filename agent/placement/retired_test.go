package placement

import (
	"context"
	"testing"
	"time"

	"github.com/scrubd/scrubd/agent/dataplane"
)

// A rule removed and added again under the same id within CounterMemory
// continues its counters (a FlowSpec route withdrawn and announced again:
// its rule id is the route's); after CounterMemory it starts from zero. The
// device's own counter starts from zero for the new entry each time.
func TestCountersSurviveReAdd(t *testing.T) {
	w := newWorld(t, 4)
	c := cfg()
	c.CounterMemory = 5 * time.Minute
	p := New(c, w.hw, w.sw, quiet(), w.now)
	ctx := context.Background()
	a, b := drop("a", "203.0.113.1/32"), drop("b", "203.0.113.2/32")
	hw := func(id string) uint64 {
		for _, r := range p.View().Rules.All() {
			if r.ID == id {
				return r.HW.Packets
			}
		}
		return 0
	}
	w.want(a, b)
	p.Apply(ctx, snap(1, a, b))
	w.hw.stats["a"] = dataplane.Counter{Packets: 100, Bytes: 6400}
	p.Tick(ctx)
	if got := hw("a"); got != 100 {
		t.Fatalf("a: %d packets, want 100", got)
	}
	// Withdrawn, announced again a minute later: the new entry counts 20.
	w.want(b)
	p.Apply(ctx, snap(2, b))
	w.clock = w.clock.Add(time.Minute)
	w.want(a, b)
	p.Apply(ctx, snap(3, a, b))
	w.hw.stats["a"] = dataplane.Counter{Packets: 20, Bytes: 1280}
	w.clock = w.clock.Add(time.Second)
	p.Tick(ctx)
	if got := hw("a"); got != 120 {
		t.Fatalf("a after a re-add within the memory: %d packets, want 100+20", got)
	}
	// Gone for longer than the memory: from zero.
	w.want(b)
	p.Apply(ctx, snap(4, b))
	w.clock = w.clock.Add(5*time.Minute + time.Second)
	p.Apply(ctx, snap(5, b)) // any apply forgets what is older
	w.want(a, b)
	p.Apply(ctx, snap(6, a, b))
	w.hw.stats["a"] = dataplane.Counter{Packets: 7, Bytes: 448}
	w.clock = w.clock.Add(time.Second)
	p.Tick(ctx)
	if got := hw("a"); got != 7 {
		t.Fatalf("a after a re-add past the memory: %d packets, want 7", got)
	}
	// Without a memory, a re-add starts from zero.
	w2 := newWorld(t, 4)
	p2 := New(cfg(), w2.hw, w2.sw, quiet(), w2.now)
	w2.want(a)
	p2.Apply(ctx, snap(1, a))
	w2.hw.stats["a"] = dataplane.Counter{Packets: 50}
	p2.Tick(ctx)
	w2.want()
	p2.Apply(ctx, snap(2))
	w2.want(a)
	p2.Apply(ctx, snap(3, a))
	w2.hw.stats["a"] = dataplane.Counter{Packets: 3}
	w2.clock = w2.clock.Add(time.Second)
	p2.Tick(ctx)
	for _, r := range p2.View().Rules.All() {
		if r.ID == "a" && r.HW.Packets != 3 {
			t.Fatalf("no memory: %d packets, want 3", r.HW.Packets)
		}
	}
}
