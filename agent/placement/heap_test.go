package placement_test

import (
	"context"
	"net/netip"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/scrubd/scrubd/agent/placement"
	"github.com/scrubd/scrubd/swpath/rule"
)

// BenchmarkPlacedHeap: what the store, the placer and the software set it
// hands out retain once n ClassBench-style rules are placed: the live heap
// after a collection, after one Apply on the simulated 4096-entry table
// (applied-live-MB) and after one rule more added through the store's
// delta (in bytes per rule, live-B/rule, and in all, live-MB), the rules'
// own data (prefixes, port lists) and the hardware path's compile results
// included. The software path records the
// set it is given (no classifier).
func BenchmarkPlacedHeap(b *testing.B) {
	for _, n := range []int{100000} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			var live, applied uint64
			for b.Loop() {
				var m0, m1 runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&m0)
				st := classBenchStore(b, n)
				sw := &countSW{}
				p := placement.New(placement.Config{MinDwell: time.Second}, simPath(4096), sw, quiet(), time.Now)
				ctx := context.Background()
				p.Apply(ctx, st.Effective())
				runtime.GC()
				runtime.ReadMemStats(&m1)
				applied = m1.HeapAlloc - m0.HeapAlloc
				r := rule.Rule{ID: "one", Priority: 100, Action: rule.Drop,
					Match: rule.Match{Dst: netip.MustParsePrefix("198.18.0.1/32"), Proto: []uint8{rule.ProtoUDP}}}
				if _, err := st.Put("api", r); err != nil {
					b.Fatal(err)
				}
				p.ApplyStore(ctx, st)
				runtime.GC()
				runtime.ReadMemStats(&m1)
				if len(sw.set.Rules) != n+3 {
					b.Fatalf("software holds %d rules, want %d", len(sw.set.Rules), n+3)
				}
				live = m1.HeapAlloc - m0.HeapAlloc
				runtime.KeepAlive(st)
				runtime.KeepAlive(p)
			}
			b.ReportMetric(float64(applied)/1e6, "applied-live-MB")
			b.ReportMetric(float64(live)/float64(n), "live-B/rule")
			b.ReportMetric(float64(live)/1e6, "live-MB")
		})
	}
}
