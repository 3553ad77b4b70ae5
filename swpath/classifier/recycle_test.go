package classifier

import (
	"fmt"
	"net/netip"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/scrubd/scrubd/swpath/rule"
)

// dstRule is a drop rule on UDP to one IPv4 address 10.x.y.z with index i.
func dstRule(id string, i int) rule.Rule {
	a := netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)})
	return rule.Rule{ID: id, Priority: rule.DefaultPriority, Action: rule.Drop,
		Match: rule.Match{Dst: netip.PrefixFrom(a, 32), Proto: []uint8{rule.ProtoUDP}}}
}

// dstPacket is a UDP packet to 10.x.y.z (see dstRule).
func dstPacket(i int) rule.Fields {
	a := netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)})
	return rule.Fields{Family: rule.IPv4, Proto: rule.ProtoUDP, L4: true, SrcPort: 1000, DstPort: 53, Length: 100,
		Src: rule.AddrFrom(netip.MustParseAddr("192.0.2.1")), Dst: rule.AddrFrom(a)}
}

func counts(c *Classifier) map[string]uint64 {
	m := map[string]uint64{}
	for _, rc := range c.Snapshot().Rules {
		m[rc.ID] = rc.Packets
	}
	return m
}

// TestSlotChurnBounded pushes 100k distinct rule IDs through 1000 swaps of
// 100 fresh rules each (plus one rule kept throughout), with a worker
// classifying between swaps: counter memory stays bounded by two sets, the
// kept rule's counts are exact, and every fresh rule counts only its own
// packets.
func TestSlotChurnBounded(t *testing.T) {
	const perSet, swaps = 100, 1000
	keep := dstRule("keep", 0xffffff)
	mk := func(g int) *rule.Set {
		s := &rule.Set{Rules: []rule.Rule{keep}}
		for i := range perSet {
			s.Rules = append(s.Rules, dstRule(fmt.Sprintf("g%d-r%d", g, i), i))
		}
		return s
	}
	c, err := New(mk(0))
	if err != nil {
		t.Fatal(err)
	}
	w := c.NewWorker()
	defer w.Close()
	closed := c.NewWorker() // a closed worker's counts are recycled too
	fs := make([]rule.Fields, perSet+1)
	lens := make([]uint32, len(fs))
	for i := range perSet {
		fs[i] = dstPacket(i)
		lens[i] = 100
	}
	fs[perSet], lens[perSet] = dstPacket(0xffffff), 100
	out := make([]Result, len(fs))
	closed.ClassifyBurst(fs, lens, out)
	closed.Close()
	keptWant := uint64(1)
	for g := 1; g <= swaps; g++ {
		if err := c.Swap(mk(g)); err != nil {
			t.Fatal(err)
		}
		got := counts(c)
		for i := range perSet {
			if n := got[fmt.Sprintf("g%d-r%d", g, i)]; n != 0 {
				t.Fatalf("swap %d: new rule r%d starts at %d packets", g, i, n)
			}
		}
		// Rule r_i is hit g%3+1 times.
		for range g%3 + 1 {
			w.ClassifyBurst(fs, lens, out)
			keptWant++
		}
		got = counts(c)
		for i := range perSet {
			if n := got[fmt.Sprintf("g%d-r%d", g, i)]; n != uint64(g%3+1) {
				t.Fatalf("swap %d: rule r%d has %d packets, want %d", g, i, n, g%3+1)
			}
		}
		if got["keep"] != keptWant {
			t.Fatalf("swap %d: kept rule has %d packets, want %d", g, got["keep"], keptWant)
		}
	}
	c.mu.Lock()
	nslots, ids, ctr := c.nslots, len(c.slots), len(*w.ctr.Load())
	c.mu.Unlock()
	if nslots > 2*(perSet+1) || ctr > nslots || len(c.retired) > nslots {
		t.Fatalf("after %d distinct ids: %d slots, worker counters %d, retired %d; want <= %d",
			swaps*perSet, nslots, ctr, len(c.retired), 2*(perSet+1))
	}
	if ids != perSet+1 {
		t.Fatalf("%d ids remembered, want %d", ids, perSet+1)
	}
}

// TestReAddedRuleStartsFromZero removes a counted rule and adds it back:
// it starts from zero (in open and closed workers' memory), and the rule
// kept throughout keeps its counts.
func TestReAddedRuleStartsFromZero(t *testing.T) {
	a, b := dstRule("a", 1), dstRule("b", 2)
	c, err := New(&rule.Set{Rules: []rule.Rule{a, b}})
	if err != nil {
		t.Fatal(err)
	}
	w1, w2 := c.NewWorker(), c.NewWorker()
	defer w1.Close()
	fa, fb := dstPacket(1), dstPacket(2)
	for range 5 {
		w1.Classify(&fa, 100)
		w2.Classify(&fa, 100)
		w1.Classify(&fb, 100)
	}
	w2.Close()
	if got := counts(c); got["a"] != 10 || got["b"] != 5 {
		t.Fatalf("before: %v", got)
	}
	if err := c.Swap(&rule.Set{Rules: []rule.Rule{b}}); err != nil {
		t.Fatal(err)
	}
	w1.Classify(&fa, 100) // passes now
	if err := c.Swap(&rule.Set{Rules: []rule.Rule{b, a}}); err != nil {
		t.Fatal(err)
	}
	if got := counts(c); got["a"] != 0 || got["b"] != 5 {
		t.Fatalf("after re-adding a: %v, want a 0, b 5", got)
	}
	r := w1.Classify(&fa, 100)
	if r.Rule != 1 || r.Verdict != Drop {
		t.Fatalf("a re-added: %+v", r)
	}
	if got := counts(c); got["a"] != 1 || got["b"] != 5 {
		t.Fatalf("after one more: %v, want a 1, b 5", got)
	}
	if c.nslots != 2 {
		t.Fatalf("%d counter slots for two ids: a's slot was not reused", c.nslots)
	}
}

// TestRecycleRace swaps, while workers run bursts, through sets of fresh
// IDs: one rule that every packet matches and rules no packet matches,
// which take the recycled slots of earlier matching rules. A burst still on
// an old table that added to a recycled slot would show up as a count on a
// rule that never matches. Kept rules' counts are checked exactly.
func TestRecycleRace(t *testing.T) {
	const dead = 8
	keep := dstRule("keep", 0xfffffe)
	mk := func(g int) *rule.Set {
		s := &rule.Set{}
		for i := range dead { // never matched: 10.200.x.x
			s.Rules = append(s.Rules, dstRule(fmt.Sprintf("g%d-dead%d", g, i), 200<<16|g<<4&0xfff0|i))
		}
		s.Rules = append(s.Rules, dstRule(fmt.Sprintf("g%d-live", g), 7), keep)
		return s
	}
	c, err := New(mk(0))
	if err != nil {
		t.Fatal(err)
	}
	fs := make([]rule.Fields, 256)
	lens := make([]uint32, len(fs))
	for i := range fs {
		if i%4 == 0 {
			fs[i] = dstPacket(0xfffffe)
		} else {
			fs[i] = dstPacket(7)
		}
		lens[i] = 100
	}
	var stop atomic.Bool
	var wg sync.WaitGroup
	var bursts atomic.Uint64
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w := c.NewWorker()
			defer w.Close()
			out := make([]Result, len(fs))
			for !stop.Load() {
				w.ClassifyBurst(fs, lens, out)
				bursts.Add(1)
			}
		}()
	}
	deferred := 0
	const swaps = 400
	for g := 1; g <= swaps && !t.Failed(); g++ {
		// Let the workers make progress: swaps alone would only pile up
		// slots behind a burst in flight.
		for b := bursts.Load(); bursts.Load() == b; {
			runtime.Gosched()
		}
		if err := c.Swap(mk(g)); err != nil {
			t.Fatal(err)
		}
		c.mu.Lock()
		if len(c.limbo) > 0 {
			deferred++
		}
		c.mu.Unlock()
		for _, rc := range c.Snapshot().Rules {
			if rc.ID != "keep" && rc.ID != fmt.Sprintf("g%d-live", g) && rc.Packets != 0 {
				t.Errorf("swap %d: rule %s, never matched, has %d packets", g, rc.ID, rc.Packets)
			}
		}
	}
	stop.Store(true)
	wg.Wait()
	if err := c.Swap(mk(swaps + 1)); err != nil { // no burst in flight now
		t.Fatal(err)
	}
	if len(c.limbo) != 0 {
		t.Fatalf("%d slots in limbo with no worker", len(c.limbo))
	}
	snap := c.Snapshot()
	total := bursts.Load() * uint64(len(fs))
	if snap.Packets != total || snap.Rules[dead+1].Packets != total/4 || snap.Rules[dead].Packets != 0 {
		t.Fatalf("classified %d, snapshot %d; kept rule %d, want %d", total, snap.Packets, snap.Rules[dead+1].Packets, total/4)
	}
	if c.nslots > swaps*(dead+1)/4 {
		t.Fatalf("slots were not recycled: %d slots for %d ids", c.nslots, swaps*(dead+1))
	}
	t.Logf("%d bursts, %d slots, %d swaps left slots in limbo for a burst in flight", bursts.Load(), c.nslots, deferred)
}
