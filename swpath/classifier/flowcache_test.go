package classifier

import (
	"testing"

	"github.com/scrubd/scrubd/swpath/packet"
	"github.com/scrubd/scrubd/swpath/rule"
	"github.com/scrubd/scrubd/swpath/traffic"
)

// TestCacheBackoff: on a flood of new 5-tuples the flow cache's bypass
// starts at cacheBypass packets and doubles after every window that misses
// again, up to cacheBypassMax, so only a few bursts go through it: the
// first two (the first finds it empty and does not count), then one after
// each bypass, at most 2 + log2(cacheBypassMax/cacheBypass) + 1 +
// packets/cacheBypassMax bursts (10 for 2^18 packets in bursts of 256; a
// fixed bypass of 8192 took one burst in 33, 32). When the traffic turns
// to 1000 flows the cache is back within two bypasses (the window after
// the first fills it) and then decides most packets; a flood after that
// starts over at cacheBypass.
func TestCacheBackoff(t *testing.T) {
	const burst = 256
	set := traffic.ClassBenchRules(3, 1000)
	c, err := New(set)
	if err != nil {
		t.Fatal(err)
	}
	if c.Table().ntables < minCacheTables {
		t.Fatalf("%d hash tables: the set does not use the cache", c.Table().ntables)
	}
	w := c.NewWorker()
	defer w.Close()
	// Every packet of the flood new (not a trace run again, whose
	// packets the cache would have seen).
	gen := traffic.NewGenerator(traffic.Config{Seed: 17, Rules: set, RuleFraction: 0.95})
	fs := make([]rule.Fields, burst)
	var buf []byte
	next := func() {
		for i := range fs {
			buf = gen.Next(buf[:0])
			packet.Parse(buf, &fs[i])
		}
	}
	flows := parseAll(traffic.NewGenerator(traffic.Config{Seed: 18, Rules: set, RuleFraction: 0.95, Flows: 1000}).Frames(16384))
	lens := make([]uint32, burst)
	out := make([]Result, burst)
	flood := func(packets int) {
		for range packets / burst {
			next()
			w.ClassifyBurst(fs, lens, out)
		}
	}
	run := func(fs []rule.Fields, packets int) {
		for p := 0; p < packets; p += burst {
			off := p % len(fs)
			w.ClassifyBurst(fs[off:off+burst], lens, out)
		}
	}
	const packets = 1 << 18
	flood(packets)
	steps := 0
	for b := cacheBypass; b < cacheBypassMax; b *= 2 {
		steps++
	}
	maxBursts := 2 + steps + 1 + packets/cacheBypassMax
	if got := w.cache.lookups; got > uint64(maxBursts*burst) {
		t.Errorf("flood: %d of %d packets went through the cache, want at most %d (%d bursts)", got, packets, maxBursts*burst, maxBursts)
	}
	if w.cache.lookups < 2*burst {
		t.Errorf("flood: %d packets went through the cache, want at least the first two bursts", w.cache.lookups)
	}
	// Few flows: back within two bypasses, then hits.
	run(flows, 2*cacheBypassMax+4*burst)
	l0, h0 := w.cache.lookups, w.cache.hits
	run(flows, 64*burst)
	if l, h := w.cache.lookups-l0, w.cache.hits-h0; l != 64*burst || h < l/2 {
		t.Errorf("1000 flows after the flood: %d of %d packets through the cache, %d hits", l, 64*burst, h)
	}
	// A new flood: the first bypass is cacheBypass again.
	flood(burst)
	if w.cache.bypass != cacheBypass {
		t.Errorf("a flood after flows: bypass %d, want %d", w.cache.bypass, cacheBypass)
	}
}
