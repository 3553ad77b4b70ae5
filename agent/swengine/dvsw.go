package swengine

import (
	"sync"
	"time"

	"github.com/scrubd/scrubd/agent/dataplane"
	"github.com/scrubd/scrubd/swpath/barrier"
	"github.com/scrubd/scrubd/swpath/classifier"
	"github.com/scrubd/scrubd/swpath/dv"
	"github.com/scrubd/scrubd/swpath/pool"
	"github.com/scrubd/scrubd/swpath/rule"
)

// dvSW is the Direct Verbs engine as a dataplane.SW: one classifier shared
// by every worker of every port (SetRules swaps its set atomically), the
// workers' own counters, and the pool's. Cycles are the engine's counter
// ticks converted to cycles at the configured worker clock, so the
// capacity model (workers x clock / cycles) holds whatever the counter's
// frequency (the arm64 virtual counter is not the core clock).
type dvSW struct {
	cls     *classifier.Classifier
	engines []*dv.Engine
	pool    *pool.Pool
	workers int
	hz      float64
	tickHz  float64

	mu     sync.Mutex
	closed bool
	last   dataplane.SWStats
	// Stats' buffers (under mu): the counts returned, two written in
	// turn by the classifier (countBufs.fill).
	counts countBufs
}

func newDVSW(cls *classifier.Classifier, p *pool.Pool, workers int, hz float64, engines ...*dv.Engine) *dvSW {
	return &dvSW{cls: cls, engines: engines, pool: p, workers: workers, hz: hz, tickHz: float64(barrier.CycleHz())}
}

func (d *dvSW) Name() string                 { return "dv" }
func (d *dvSW) SetRules(set *rule.Set) error { return d.cls.Swap(set) }
func (d *dvSW) Capacity() (int, float64)     { return d.workers, d.hz }

// PatchRules implements dataplane.SWPatcher: the classifier's Patch.
func (d *dvSW) PatchRules(from, to *rule.Set, removed, added []int) error {
	return d.cls.Patch(from, to, removed, added)
}

// cycles converts counter ticks to cycles at the worker clock (ticks when
// either frequency is unknown).
func (d *dvSW) cycles(ticks uint64) uint64 {
	if d.hz <= 0 || d.tickHz <= 0 {
		return ticks
	}
	return uint64(float64(ticks) * d.hz / d.tickHz)
}

// Stats implements dataplane.SW; after close it returns the last counters.
func (d *dvSW) Stats() dataplane.SWStats {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return d.last
	}
	var set *rule.Set
	cs := d.counts.fill(func(dst []classifier.Count) []classifier.Count {
		var raw []classifier.Count
		set, raw = d.cls.CountsInto(dst)
		return raw
	})
	out := dataplane.SWStats{At: time.Now(), Set: set, Counts: cs}
	lookupStats(&out, d.cls)
	ps := d.pool.Snapshot()
	free := map[int][2]int{} // node: size, free
	for _, n := range ps.Nodes {
		free[n.Node] = [2]int{n.Buffers, n.Buffers - int(n.Allocs-n.Frees)}
	}
	var all []dv.Counters
	for _, e := range d.engines {
		all = append(all, e.Snapshot()...)
	}
	for i, c := range all {
		w := dataplane.WorkerStats{Worker: i, RxPackets: c.Rx, RxBytes: c.RxBytes, Dropped: c.Dropped, Passed: c.Passed,
			OutOfBuffer: c.OutOfBuffer, Unforwarded: c.TxFull, CacheHits: c.CacheHits, Cycles: d.cycles(c.Cycles), PoolAllocFail: c.NoBuf, PoolNode: -1}
		out.Workers = append(out.Workers, w)
	}
	// The pool's nodes, reported on the first worker of the list (the sums
	// over workers are the pool's).
	if len(out.Workers) > 0 {
		for node, sf := range free {
			out.Workers[0].PoolSize += sf[0]
			out.Workers[0].PoolFree += sf[1]
			out.Workers[0].PoolNode = node
		}
	}
	d.last = out
	return out
}

// freeze keeps the last counters once the engines are gone, after any
// fold of the classifier's set in flight (see classifier.Patch) has ended.
func (d *dvSW) freeze() {
	d.cls.Settle()
	d.Stats()
	d.mu.Lock()
	d.closed = true
	d.mu.Unlock()
}

// lookupStats sets out's lookup figures from the classifier's table in
// force.
func lookupStats(out *dataplane.SWStats, cls *classifier.Classifier) {
	st := cls.Table().Stats()
	out.LookupBytes, out.LookupBuild = int64(st.Bytes), st.Build
}
