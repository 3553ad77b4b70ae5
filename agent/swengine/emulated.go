package swengine

import (
	"math"
	"sync"
	"time"

	"github.com/scrubd/scrubd/agent/dataplane"
	"github.com/scrubd/scrubd/swpath/barrier"
	"github.com/scrubd/scrubd/swpath/classifier"
	"github.com/scrubd/scrubd/swpath/dv"
	"github.com/scrubd/scrubd/swpath/dv/dvsim"
	"github.com/scrubd/scrubd/swpath/rule"
)

// Emulated is the simulated NIC's software path (agent/sim builds it): the
// Direct Verbs engine (swpath/dv) over the NIC emulator, one worker per
// receive queue, all sharing one classifier whose set SetRules swaps
// atomically. It implements dataplane.SW. Its packet and byte counters are
// the engine's times the simulation's Scale; its cycle counter too, so
// cycles per packet stay what the engine measured. Capacity reports the
// modelled workers and clock, not this machine's.
type Emulated struct {
	dv      *dvsim.Sim
	scale   float64
	workers int
	hz      float64
	// modelLost returns, per queue, the packets the capacity model lost
	// before they reached the ring (out-of-buffer on the modelled NIC).
	modelLost func(q int) uint64
	lost      func() map[string]uint64

	mu     sync.Mutex
	frozen *dataplane.SWStats // after Freeze
	// read's buffers (under mu): the counts returned, two buffers the
	// classifier writes in turn and read scales in place
	// (countBufs.fill): an idle engine's reads allocate nothing per rule.
	counts countBufs
}

// EmulatedConfig is what the simulated NIC gives its software path.
type EmulatedConfig struct {
	DV *dvsim.Sim
	// Scale is the sampling factor: one packet in Scale is sent.
	Scale float64
	// Workers and Hz are the modelled workers and their clock.
	Workers int
	Hz      float64
	// ModelLost returns the packets the capacity model lost before queue
	// q's ring.
	ModelLost func(q int) uint64
	// ProtectedLost returns the protected packets lost, by cause
	// (dataplane.ProtectedLoss).
	ProtectedLost func() map[string]uint64
}

// NewEmulated returns the software path over the emulator c.DV.
func NewEmulated(c EmulatedConfig) *Emulated {
	return &Emulated{dv: c.DV, scale: c.Scale, workers: c.Workers, hz: c.Hz, modelLost: c.ModelLost, lost: c.ProtectedLost}
}

// Name implements dataplane.SW.
func (s *Emulated) Name() string { return "dv (emulated NIC)" }

// EmulatedCycles converts engine counter ticks to cycles at the modelled
// clock hz: the time this machine's engine spent, counted at hz (counter
// ticks are not core cycles on arm64).
func EmulatedCycles(ticks uint64, hz float64) uint64 {
	if tick := float64(barrier.CycleHz()); tick > 0 {
		return uint64(float64(ticks) * hz / tick)
	}
	return ticks
}

func (s *Emulated) up(v uint64) uint64 { return uint64(math.Round(float64(v) * s.scale)) }

// SetRules implements dataplane.SW: an atomic swap of the classifier's set.
func (s *Emulated) SetRules(set *rule.Set) error { return s.dv.Class.Swap(set) }

// PatchRules implements dataplane.SWPatcher: the classifier's Patch.
func (s *Emulated) PatchRules(from, to *rule.Set, removed, added []int) error {
	return s.dv.Class.Patch(from, to, removed, added)
}

// Capacity implements dataplane.SW: the modelled workers and clock.
func (s *Emulated) Capacity() (int, float64) { return s.workers, s.hz }

// Engine returns the engine's raw (unscaled) counters per worker.
func (s *Emulated) Engine() []dv.Counters {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.frozen != nil {
		return nil
	}
	return s.dv.Engine.Snapshot()
}

// MeasuredCyclesPerPacket is the engine's time per packet received on
// this machine, in cycles at the modelled clock; 0 before any traffic.
func (s *Emulated) MeasuredCyclesPerPacket() float64 {
	t := dv.Total(s.Engine())
	if t.Rx == 0 {
		return 0
	}
	return float64(EmulatedCycles(t.Cycles, s.hz)) / float64(t.Rx)
}

// ProtectedLost implements dataplane.ProtectedLoss (the simulated NIC's
// count).
func (s *Emulated) ProtectedLost() map[string]uint64 { return s.lost() }

// Stats implements dataplane.SW.
func (s *Emulated) Stats() dataplane.SWStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.frozen != nil {
		return *s.frozen
	}
	return s.read()
}

func (s *Emulated) read() dataplane.SWStats {
	var set *rule.Set
	cs := s.counts.fill(func(dst []classifier.Count) []classifier.Count {
		var raw []classifier.Count
		set, raw = s.dv.Class.CountsInto(dst)
		return raw
	})
	for i, c := range cs {
		cs[i] = dataplane.Counter{Packets: s.up(c.Packets), Bytes: s.up(c.Bytes)}
	}
	out := dataplane.SWStats{At: time.Now(), Set: set, Counts: cs}
	lookupStats(&out, s.dv.Class)
	ps := s.dv.Pool.Snapshot()
	var size, outstanding int
	node := 0
	for _, nd := range ps.Nodes {
		size += nd.Buffers
		outstanding += int(nd.Allocs) - int(nd.Frees)
		node = nd.Node
	}
	ws := s.dv.Engine.Snapshot()
	for i, c := range ws {
		w := dataplane.WorkerStats{Worker: i, RxPackets: s.up(c.Rx), RxBytes: s.up(c.RxBytes),
			Dropped: s.up(c.Dropped), Passed: s.up(c.Passed), OutOfBuffer: s.up(c.OutOfBuffer + s.modelLost(i)),
			Unforwarded: s.up(c.TxFull), CacheHits: s.up(c.CacheHits), Cycles: s.up(EmulatedCycles(c.Cycles, s.hz)), PoolNode: node, PoolAllocFail: c.NoBuf}
		// One pool node shared by every queue: its size and free buffers
		// are split evenly, so the sums over workers are the pool's.
		w.PoolSize = size / len(ws)
		w.PoolFree = (size - outstanding) / len(ws)
		if i == 0 {
			w.PoolSize += size % len(ws)
			w.PoolFree += (size - outstanding) % len(ws)
		}
		out.Workers = append(out.Workers, w)
	}
	return out
}

// Freeze keeps the last counters for readers once the engine is closed.
func (s *Emulated) Freeze() {
	s.dv.Class.Settle() // a fold of the classifier's set in flight ends first
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.frozen == nil {
		st := s.read()
		s.frozen = &st
	}
}
