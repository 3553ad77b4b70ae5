package placement

import (
	"context"
	"fmt"
	"net/netip"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/scrubd/scrubd/agent/dataplane"
	"github.com/scrubd/scrubd/swpath/rule"
)

// swCounted returns the software totals of the View's rules by id.
func swCounted(p *Placer) map[string]uint64 {
	out := map[string]uint64{}
	for _, r := range p.View().Rules.All() {
		out[r.ID] = r.SW.Packets
	}
	return out
}

// Tick pairs the software path's counts (by position in the engine's set)
// with the rules they are for: in one walk when the engine holds the set
// the placer pushed, and by id when it holds another (a set of another
// order, with a rule the placer no longer has). Totals are hand-computed
// from the counts the fake engine reports.
func TestTickSoftwareCountsByPosition(t *testing.T) {
	w := newWorld(t, 0) // no hardware room: every rule in software
	p := New(cfg(), w.hw, w.sw, quiet(), w.now)
	ctx := context.Background()
	rs := []rule.Rule{drop("a", "203.0.113.1/32"), drop("b", "203.0.113.2/32"), drop("c", "203.0.113.3/32"), drop("d", "203.0.113.4/32")}
	w.want(rs...)
	p.Apply(ctx, snap(1, rs...))
	if w.sw.set == nil || len(w.sw.set.Rules) != 4 {
		t.Fatalf("software set %v", w.sw.set)
	}
	w.sw.rules["a"], w.sw.rules["b"], w.sw.rules["c"], w.sw.rules["d"] = dataplane.Counter{Packets: 10}, dataplane.Counter{Packets: 20}, dataplane.Counter{Packets: 30}, dataplane.Counter{Packets: 40}
	p.Tick(ctx)
	if got, want := swCounted(p), map[string]uint64{"a": 10, "b": 20, "c": 30, "d": 40}; !mapsEqual(got, want) {
		t.Fatalf("pushed set: software totals %v, want %v", got, want)
	}
	// The engine holds a set of another order with a rule the placer does
	// not have (as after a push it refused): paired by id.
	other := &rule.Set{Rules: slices.Clone(w.sw.set.Rules)}
	slices.Reverse(other.Rules)
	other.Rules = slices.Insert(other.Rules, 1, drop("gone", "198.51.100.1/32"))
	w.sw.set = other
	w.sw.rules["a"], w.sw.rules["c"], w.sw.rules["gone"] = dataplane.Counter{Packets: 15}, dataplane.Counter{Packets: 37}, dataplane.Counter{Packets: 99}
	w.clock = w.clock.Add(time.Second)
	p.Tick(ctx)
	if got, want := swCounted(p), map[string]uint64{"a": 15, "b": 20, "c": 37, "d": 40}; !mapsEqual(got, want) {
		t.Fatalf("a set of another order: software totals %v, want %v", got, want)
	}
	// The engine holds a subset in order (b left it): b's total stays.
	w.sw.set = &rule.Set{Rules: []rule.Rule{rs[0], rs[2], rs[3]}}
	w.sw.rules["b"], w.sw.rules["d"] = dataplane.Counter{Packets: 1000}, dataplane.Counter{Packets: 41}
	w.clock = w.clock.Add(time.Second)
	p.Tick(ctx)
	if got, want := swCounted(p), map[string]uint64{"a": 15, "b": 20, "c": 37, "d": 41}; !mapsEqual(got, want) {
		t.Fatalf("a subset: software totals %v, want %v", got, want)
	}
}

func mapsEqual(a, b map[string]uint64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// An idle Tick over n rules in software, and one with a few software
// counters moving, allocate nothing per rule for the software counts: the
// bytes at 10k rules are those at 1k within a margin (the View's chunk
// index and a chunk or two copied for the rules that moved). With the
// counts paired through a map of the engine's set built every tick (at
// least 40 bytes a rule: 360 KB more at 10k) it fails.
func TestTickSoftwareCountsAllocateNothingPerRule(t *testing.T) {
	idle1, busy1 := swTickBytes(t, 1000)
	idle10, busy10 := swTickBytes(t, 10000)
	t.Logf("bytes per tick: idle %.0f at 1k rules, %.0f at 10k; with 3 rules counting %.0f, %.0f", idle1, idle10, busy1, busy10)
	const margin = 48 << 10
	if idle10 > idle1+margin {
		t.Errorf("an idle tick allocates %.0f bytes at 10k rules in software, %.0f at 1k", idle10, idle1)
	}
	if busy10 > busy1+margin {
		t.Errorf("a tick with 3 rules counting allocates %.0f bytes at 10k rules in software, %.0f at 1k", busy10, busy1)
	}
}

// swTickBytes places n drop rules, all in software (no hardware path), and returns the bytes
// one Tick allocates on average over 10, idle and with three rules'
// software counts moving, after two ticks that size the buffers.
func swTickBytes(t *testing.T, n int) (idle, busy float64) {
	w := newWorld(t, 0)
	// No hardware path: nothing but the software counts moves in a tick
	// (with a full hardware table the regime would try a move every tick).
	w.hw = nil
	p := New(cfg(), nil, w.sw, quiet(), w.now)
	ctx := context.Background()
	rs := make([]rule.Rule, n)
	for i := range rs {
		rs[i] = rule.Rule{ID: fmt.Sprintf("r%d", i), Priority: 1000, Action: rule.Drop,
			Match: rule.Match{Dst: netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}), 32)}}
	}
	// With the store's places (Seqs), a tick publishes the rules that
	// moved in place rather than building the View's list again.
	sn := snap(1, rs...)
	sn.Seqs = make([]uint64, n)
	for i := range sn.Seqs {
		sn.Seqs[i] = uint64(i + 1)
	}
	p.Apply(ctx, sn)
	if w.sw.set == nil || len(w.sw.set.Rules) != n {
		t.Fatalf("%d rules: the software path holds %v", n, w.sw.set)
	}
	tick := func() float64 {
		w.clock = w.clock.Add(time.Second)
		var m0, m1 runtime.MemStats
		runtime.ReadMemStats(&m0)
		p.Tick(ctx)
		runtime.ReadMemStats(&m1)
		return float64(m1.TotalAlloc - m0.TotalAlloc)
	}
	tick()
	tick()
	const rounds = 10
	for range rounds {
		idle += tick() / rounds
	}
	ids := []string{"r7", fmt.Sprintf("r%d", n/2), fmt.Sprintf("r%d", n-1)}
	for k := range rounds {
		for _, id := range ids {
			w.sw.rules[id] = dataplane.Counter{Packets: uint64(k+1) * 100, Bytes: uint64(k+1) * 6400}
		}
		busy += tick() / rounds
	}
	got := swCounted(p)
	for _, id := range ids {
		if got[id] != rounds*100 {
			t.Fatalf("%d rules: %s software total %d, want %d", n, id, got[id], rounds*100)
		}
	}
	return idle, busy
}
