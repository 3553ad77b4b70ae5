package placement_test

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/scrubd/scrubd/agent/placement"
	"github.com/scrubd/scrubd/internal/cputime"
	"github.com/scrubd/scrubd/swpath/classifier"
	"github.com/scrubd/scrubd/swpath/rule"
)

// BenchmarkPlacementChangeSW: BenchmarkPlacementChange's round (one drop
// rule added to n ClassBench-style placed rules, or one removed: the last
// one added, or one from the middle; read from the store's delta) with the Go classifier as the software path,
// given the whole set (sw=swap) or the change (sw=patch). Per change:
// wall ns/op, the process's CPU (cpu-ns/change, a fold's goroutine
// included) and bytes allocated (B/change, the classifier's included).
//
//	go test -run '^$' -bench PlacementChangeSW -benchtime 20x ./agent/placement/
func BenchmarkPlacementChangeSW(b *testing.B) {
	for _, n := range []int{10000, 100000} {
		for _, op := range []string{"add", "remove", "removemid", "changemid"} {
			for _, sw := range []string{"swap", "patch"} {
				b.Run(fmt.Sprintf("rules=%d/op=%s/sw=%s", n, op, sw), func(b *testing.B) {
					st := classBenchStore(b, n)
					c, err := classifier.New(&rule.Set{})
					if err != nil {
						b.Fatal(err)
					}
					s := placement.ClassifierSW(c, sw == "patch")
					p := placement.New(placement.Config{MinDwell: time.Second}, simPath(4096), s, quiet(), time.Now)
					ctx := context.Background()
					p.ApplyStore(ctx, st)
					var ch change
					var cpu time.Duration
					var ms runtime.MemStats
					var alloc uint64
					for b.Loop() {
						b.StopTimer()
						ch.make(ctx, b, op, st, p)
						runtime.ReadMemStats(&ms)
						a0 := ms.TotalAlloc
						b.StartTimer()
						c0 := cputime.Process()
						p.ApplyStore(ctx, st)
						cpu += cputime.Process() - c0
						b.StopTimer()
						runtime.ReadMemStats(&ms)
						alloc += ms.TotalAlloc - a0
						b.StartTimer()
					}
					c.Settle()
					b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/change")
					b.ReportMetric(float64(alloc)/float64(b.N), "B/change")
					if got := c.Table().Set(); got.Len() != len(st.Effective().Set.Rules) {
						b.Fatalf("the classifier holds %d rules (%d holes aside), the store %d", got.Len(), got.Holes.Count(), len(st.Effective().Set.Rules))
					}
				})
			}
		}
	}
}
