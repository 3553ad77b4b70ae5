package dv_test

import (
	"testing"

	"github.com/scrubd/scrubd/swpath/classifier"
	"github.com/scrubd/scrubd/swpath/dv/dvsim"
	"github.com/scrubd/scrubd/swpath/traffic"
)

// TestCacheHitsCounted: a worker's counters carry its classifier worker's
// flow cache hits. 40 flows, 64 frames a burst, 32 bursts, against a set
// whose tables turn the cache on, the same 64 frames each burst: with the
// cache pinned on, every packet after the first burst hits (a burst's
// misses go into the cache after its lookup, so the first burst misses
// whole, and 40 flows fit the 8192 decisions), so hits are the received
// less 64; with it pinned off, none.
func TestCacheHitsCounted(t *testing.T) {
	set := traffic.RandomRules(111, 300)
	gen := traffic.NewGenerator(traffic.Config{Seed: 112, Rules: set, RuleFraction: 0.9, Flows: 40, Sizes: traffic.Fixed(64)})
	frames := gen.Frames(64)
	for _, p := range []classifier.CachePolicy{classifier.CacheAlways, classifier.CacheNever} {
		sim, err := dvsim.New(dvsim.Config{Rules: set, Host: true, RQLog2: 9, CQLog2: 10, SQLog2: 9, CachePolicy: p})
		if err != nil {
			t.Fatal(err)
		}
		w, q := sim.Workers[0], sim.RX[0]
		w.Step() // first refill
		const bursts = 32
		for range bursts {
			q.DeliverBurst(frames, false, 0)
			if n := w.Step(); n != len(frames) {
				t.Fatalf("step received %d of %d", n, len(frames))
			}
		}
		c := w.Snapshot()
		if c.Rx != bursts*uint64(len(frames)) {
			t.Fatalf("policy %d: received %d, want %d", p, c.Rx, bursts*len(frames))
		}
		switch p {
		case classifier.CacheAlways:
			if want := c.Rx - uint64(len(frames)); c.CacheHits != want {
				t.Errorf("cache on: %d hits of %d received, want %d", c.CacheHits, c.Rx, want)
			}
		case classifier.CacheNever:
			if c.CacheHits != 0 {
				t.Errorf("cache off: %d hits", c.CacheHits)
			}
		}
		if err := sim.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
