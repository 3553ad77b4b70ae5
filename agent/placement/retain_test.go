package placement_test

import (
	"context"
	"net/netip"
	"runtime"
	"testing"
	"time"

	"github.com/scrubd/scrubd/agent/dataplane"
	"github.com/scrubd/scrubd/agent/placement"
	"github.com/scrubd/scrubd/swpath/rule"
)

// retainedPerRule places n ClassBench-style rules from a store on the
// simulated 4096-entry table, ticks twice, adds one rule through the
// store's delta, and returns what the placer (its rule states, the
// published list, the hardware path's compile results for every rule)
// retains per rule after a collection: the store and the software set's
// array are the store's and are not counted.
func retainedPerRule(t *testing.T, n int) float64 {
	t.Helper()
	st := classBenchStore(t, n)
	hw := simPath(4096)
	sw := &idleSW{}
	clk := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	now := func() time.Time { return clk }
	ctx := context.Background()
	var m0, m1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m0)
	p := placement.New(placement.Config{MinDwell: time.Second}, hw, sw, quiet(), now)
	p.ApplyStore(ctx, st)
	for range 2 {
		clk = clk.Add(time.Second)
		p.Tick(ctx)
	}
	r := rule.Rule{ID: "one", Priority: 100, Action: rule.Drop,
		Match: rule.Match{Dst: netip.MustParsePrefix("198.18.0.1/32"), Proto: []uint8{rule.ProtoUDP}}}
	if _, err := st.Put("api", r); err != nil {
		t.Fatal(err)
	}
	p.ApplyStore(ctx, st)
	clk = clk.Add(time.Second)
	p.Tick(ctx)
	runtime.GC()
	runtime.ReadMemStats(&m1)
	v := p.View()
	if v.Rules.Len() != n+3 || len(sw.set.Rules) != n+3 {
		t.Fatalf("%d rules published, %d in software; want %d", v.Rules.Len(), len(sw.set.Rules), n+3)
	}
	if last := v.Rules.At(n + 2); last.ID != "one" || last.Path != placement.HW {
		t.Fatalf("the rule added is %s on %v, want one in hardware", last.ID, last.Path)
	}
	runtime.KeepAlive(st)
	runtime.KeepAlive(p)
	return float64(int64(m1.HeapAlloc)-int64(m0.HeapAlloc)) / float64(n)
}

// idleSW is a software path whose rules see no traffic: it reports a
// zero count for every rule of its set, as an idle engine does.
type idleSW struct{ countSW }

func (s *idleSW) Stats() dataplane.SWStats {
	if s.set == nil {
		return dataplane.SWStats{}
	}
	return dataplane.SWStats{Set: s.set, Counts: make([]dataplane.Counter, len(s.set.Rules))}
}

// TestRetainedPerRule bounds what the placer keeps per rule at 10k rules
// once they are placed, ticked and one more added. Each rule's state is
// 80 bytes, with an extra part only for the rules that need one (in
// hardware, moved, with traffic), and its entry in the published list 56
// (figures apart for the rules that have any): 837 bytes per rule when
// every state had every field and a printed match key and the list held
// RuleViews; 691 with an extra part given to every rule the software
// engine counts (at zero); 564 with figures allocated for every entry;
// 451 with the hardware path's mask-shape keys as strings; 369 with the
// rules' ids in an array of the placer's besides the set's, and the list
// of rules touched kept at the size of the last full round's; 342 with
// the places in the store's order copied on the first add; 331 with the
// state at 96 bytes (its mask shapes as a slice); 316 (most 325) before
// each list entry held its place in the store's order, 8 bytes that make
// RuleList.Find (an API read of one rule) a binary search, not a walk.
func TestRetainedPerRule(t *testing.T) {
	const most = 333
	b := retainedPerRule(t, 10000)
	t.Logf("%.0f bytes retained per rule", b)
	if b > most {
		t.Fatalf("%.0f bytes retained per rule at 10k rules; want at most %d", b, most)
	}
}
