package sim

import (
	"sync"
	"time"

	"github.com/scrubd/scrubd/agent/dataplane"
	"github.com/scrubd/scrubd/swpath/barrier"
	"github.com/scrubd/scrubd/swpath/dv"
	"github.com/scrubd/scrubd/swpath/rule"
)

// SW is the simulated NIC's software path: the Direct Verbs engine
// (swpath/dv) over the NIC emulator, one worker per receive queue, all
// sharing one classifier whose set SetRules swaps atomically. It
// implements dataplane.SW. Its packet and byte counters are the engine's
// times the simulation's Scale; its cycle counter too, so cycles per
// packet stay what the engine measured. Capacity reports the modelled
// workers and clock, not this machine's.
type SW struct {
	n *NIC

	mu     sync.Mutex
	frozen *dataplane.SWStats // after Close
}

// Name implements dataplane.SW.
func (s *SW) Name() string { return "dv (emulated NIC)" }

// cycles converts engine counter ticks to cycles at the modelled clock: the
// time this machine's engine spent, counted at Hz (counter ticks are not
// core cycles on arm64).
func (n *NIC) cycles(ticks uint64) uint64 {
	if tick := float64(barrier.CycleHz()); tick > 0 {
		return uint64(float64(ticks) * n.opt.Hz / tick)
	}
	return ticks
}

// SetRules implements dataplane.SW: an atomic swap of the classifier's set.
func (s *SW) SetRules(set *rule.Set) error { return s.n.dv.Class.Swap(set) }

// Capacity implements dataplane.SW: the modelled workers and clock.
func (s *SW) Capacity() (int, float64) { return s.n.opt.Workers, s.n.opt.Hz }

// Engine returns the engine's raw (unscaled) counters per worker.
func (s *SW) Engine() []dv.Counters {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.frozen != nil {
		return nil
	}
	return s.n.dv.Engine.Snapshot()
}

// MeasuredCyclesPerPacket is the engine's time per packet received on
// this machine, in cycles at the modelled clock; 0 before any traffic.
func (s *SW) MeasuredCyclesPerPacket() float64 {
	t := dv.Total(s.Engine())
	if t.Rx == 0 {
		return 0
	}
	return float64(s.n.cycles(t.Cycles)) / float64(t.Rx)
}

// ProtectedLost implements dataplane.ProtectedLoss (see NIC.ProtectedLost).
func (s *SW) ProtectedLost() map[string]uint64 { return s.n.ProtectedLost() }

// Stats implements dataplane.SW.
func (s *SW) Stats() dataplane.SWStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.frozen != nil {
		return *s.frozen
	}
	return s.read()
}

func (s *SW) read() dataplane.SWStats {
	n := s.n
	snap := n.dv.Class.Snapshot()
	out := dataplane.SWStats{At: time.Now(), Rules: make(map[string]dataplane.Counter, len(snap.Rules))}
	for _, rc := range snap.Rules {
		out.Rules[rc.ID] = dataplane.Counter{Packets: n.up(rc.Packets), Bytes: n.up(rc.Bytes)}
	}
	ps := n.dv.Pool.Snapshot()
	var size, outstanding int
	node := 0
	for _, nd := range ps.Nodes {
		size += nd.Buffers
		outstanding += int(nd.Allocs) - int(nd.Frees)
		node = nd.Node
	}
	ws := n.dv.Engine.Snapshot()
	for i, c := range ws {
		w := dataplane.WorkerStats{Worker: i, RxPackets: n.up(c.Rx), RxBytes: n.up(c.RxBytes),
			Dropped: n.up(c.Dropped), Passed: n.up(c.Passed), OutOfBuffer: n.up(c.OutOfBuffer + n.modelOOB[i].Load()),
			Unforwarded: n.up(c.TxFull), Cycles: n.up(n.cycles(c.Cycles)), PoolNode: node, PoolAllocFail: c.NoBuf}
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

// freeze keeps the last counters for readers after the engine is closed.
func (s *SW) freeze() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.frozen == nil {
		st := s.read()
		s.frozen = &st
	}
}
