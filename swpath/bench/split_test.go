package bench

import (
	"runtime"
	"testing"

	"github.com/scrubd/scrubd/swpath/classifier"
	"github.com/scrubd/scrubd/swpath/internal/sys"
	"github.com/scrubd/scrubd/swpath/packet"
	"github.com/scrubd/scrubd/swpath/rule"
	"github.com/scrubd/scrubd/swpath/traffic"
)

// BenchmarkFloodSplit is BenchmarkFloodRules' 10k-rule flood three ways on
// the same frames, one after another in one process: the dv engine end to
// end (engine: receive, parse, classify, drop, refill), the classifier
// worker alone on the frames' parsed fields in bursts of 256 (worker: the
// lookup, the flow cache and the per-rule counters), and the table's burst
// lookup alone (table). engine minus worker is what the engine adds around
// the classifier, worker minus table what the worker adds to the lookup.
// Repeat the command (not -count, which repeats each part in a row) to
// interleave them.
func BenchmarkFloodSplit(b *testing.B) {
	set := traffic.ClassBenchRules(10000, 10000)
	b.Run("engine", func(b *testing.B) {
		benchSize(b, Config{FrameSizes: []int{64}, Rules: set, Flows: floodFlows})
	})
	frames, err := Frames(set, 64, floodFlows, 0, 0.0001, 1)
	if err != nil {
		b.Fatal(err)
	}
	fs := make([]rule.Fields, len(frames))
	lens := make([]uint32, len(frames))
	for i, f := range frames {
		packet.Parse(f, &fs[i])
		lens[i] = uint32(len(f))
	}
	c, err := classifier.New(set)
	if err != nil {
		b.Fatal(err)
	}
	const burst = 256
	loop := func(b *testing.B, do func(fs []rule.Fields, lens []uint32)) {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		do(fs[:burst], lens[:burst])
		b.ResetTimer()
		u0 := sys.ThreadCPUTime()
		pkts, off := 0, 0
		for pkts < max(b.N, 1<<16) {
			if off+burst > len(fs) {
				off = 0
			}
			do(fs[off:off+burst], lens[off:off+burst])
			off += burst
			pkts += burst
		}
		u1 := sys.ThreadCPUTime()
		b.ReportMetric(float64(u1-u0)/float64(pkts), "cpu-ns/pkt")
		b.ReportMetric(0, "ns/op")
	}
	b.Run("worker", func(b *testing.B) {
		w := c.NewWorker()
		defer w.Close()
		out := make([]classifier.Result, burst)
		loop(b, func(fs []rule.Fields, lens []uint32) { w.ClassifyBurst(fs, lens, out) })
	})
	b.Run("table", func(b *testing.B) {
		t := c.Table()
		out := make([]int32, burst)
		loop(b, func(fs []rule.Fields, _ []uint32) { t.DecideBurst(fs, out) })
	})
}
