package sim

import (
	"sync/atomic"
	"time"

	"github.com/scrubd/scrubd/agent/dataplane"
	"github.com/scrubd/scrubd/swpath/classifier"
	"github.com/scrubd/scrubd/swpath/rule"
)

// workerCounters are one simulated worker's counters, in sample units.
type workerCounters struct {
	rx, rxBytes, dropped, passed, oob atomic.Uint64
}

// SW is the simulated software path: the real classifier (swpath/classifier)
// with one classifier.Worker per simulated worker, fed with sampled packets.
// Its counters are scaled by the sampling factor, and its cycle count is the
// model's cycles per packet times the packets received. It implements
// dataplane.SW.
type SW struct {
	scale   float64
	hz      float64
	cpp     float64
	c       *classifier.Classifier
	workers []*classifier.Worker
	ctr     []workerCounters
}

func newSW(workers int, hz, cpp, scale float64) (*SW, error) {
	c, err := classifier.New(&rule.Set{})
	if err != nil {
		return nil, err
	}
	s := &SW{scale: scale, hz: hz, cpp: cpp, c: c, ctr: make([]workerCounters, workers)}
	for i := 0; i < workers; i++ {
		s.workers = append(s.workers, c.NewWorker())
	}
	return s, nil
}

// Name implements dataplane.SW.
func (s *SW) Name() string { return "sim-go-classifier" }

// SetRules implements dataplane.SW: an atomic swap of the classifier's set.
func (s *SW) SetRules(set *rule.Set) error { return s.c.Swap(set) }

// Capacity implements dataplane.SW.
func (s *SW) Capacity() (int, float64) { return len(s.workers), s.hz }

func (s *SW) up(v uint64) uint64 { return uint64(float64(v) * s.scale) }

// Stats implements dataplane.SW.
func (s *SW) Stats() dataplane.SWStats {
	snap := s.c.Snapshot()
	out := dataplane.SWStats{At: time.Now(), Rules: make(map[string]dataplane.Counter, len(snap.Rules))}
	for _, rc := range snap.Rules {
		out.Rules[rc.ID] = dataplane.Counter{Packets: s.up(rc.Packets), Bytes: s.up(rc.Bytes)}
	}
	for i := range s.ctr {
		c := &s.ctr[i]
		rx := s.up(c.rx.Load())
		out.Workers = append(out.Workers, dataplane.WorkerStats{Worker: i, RxPackets: rx, RxBytes: s.up(c.rxBytes.Load()),
			Dropped: s.up(c.dropped.Load()), Passed: s.up(c.passed.Load()), OutOfBuffer: s.up(c.oob.Load()),
			Cycles: uint64(float64(rx) * s.cpp), PoolSize: 4096, PoolFree: 4096, PoolNode: 0})
	}
	return out
}

// classify runs one sampled packet on worker w and reports the verdict.
func (s *SW) classify(w int, f *rule.Fields, length uint32) classifier.Verdict {
	c := &s.ctr[w]
	c.rx.Add(1)
	c.rxBytes.Add(uint64(length))
	r := s.workers[w].Classify(f, length)
	if r.Verdict == classifier.Drop {
		c.dropped.Add(1)
	} else {
		c.passed.Add(1)
	}
	return r.Verdict
}

func (s *SW) close() {
	for _, w := range s.workers {
		w.Close()
	}
}
