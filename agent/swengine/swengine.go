// Package swengine holds the software path's adapters: each software
// engine a device runs, as the agent's dataplane.SW.
//
//   - dv: the Direct Verbs engine (swpath/dv) on mlx5 receive queues
//     (dvSW; the mlx5 build sets it up on the devices, dvEngine), its
//     receive-ring size (RxRing), its workers' split over the interfaces
//     and where its buffers live;
//   - xdp: the XDP program (swpath/xdp) on the software interfaces
//     (xdpSW), with its cost per packet sampled from the kernel's BPF
//     run-time statistics (xdpCost);
//   - none: nothing enforces what hardware cannot hold (noSW);
//   - dv over the NIC emulator: the simulated NIC's software path
//     (Emulated, which agent/sim builds for offload.backend sim), its
//     counters scaled with the simulation's traffic;
//   - the start-up calibration of software.cycles_per_packet auto
//     (Calibrate: a short swpath/bench run).
//
// agent/backend chooses among them from the config.
package swengine

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/scrubd/scrubd/agent/config"
	"github.com/scrubd/scrubd/agent/dataplane"
	"github.com/scrubd/scrubd/internal/netdev"
	"github.com/scrubd/scrubd/swpath/barrier"
	"github.com/scrubd/scrubd/swpath/rule"
	"github.com/scrubd/scrubd/swpath/xdp"
)

// Engine is a started software engine.
type Engine struct {
	SW dataplane.SW
	// Run, if set, runs until ctx ends: the engine's own background work
	// (the XDP engine's cost sampling).
	Run func(ctx context.Context, log *slog.Logger) error
	// Close stops the engine (nil: nothing to stop).
	Close func() error
}

// New starts the engine software.engine names on the devices the config
// lists (software.interfaces, software.forward_to).
func New(ctx context.Context, cfg *config.Config) (Engine, error) {
	switch cfg.Software.Engine {
	case "xdp":
		return newXDP(cfg)
	case "dv":
		sw, closeSW, err := dvEngine(ctx, cfg)
		if err != nil {
			return Engine{}, err
		}
		return Engine{SW: sw, Close: closeSW}, nil
	case "none":
		return Engine{SW: &noSW{}}, nil
	}
	return Engine{}, fmt.Errorf("software.engine %q has no packet input in scrubd run (use dv, xdp or none)", cfg.Software.Engine)
}

// newXDP loads the XDP program and attaches it to every software
// interface: host mode, or inline (what passes goes out of forward_to by
// XDP_REDIRECT through a devmap).
func newXDP(cfg *config.Config) (Engine, error) {
	opts := xdp.Options{Mode: xdp.Host, PinPath: cfg.Software.XDPPinPath}
	if to := cfg.Software.ForwardTo; to != "" {
		ifi, err := netdev.ByName(to)
		if err != nil {
			return Engine{}, fmt.Errorf("software.forward_to %q: %w", to, err)
		}
		opts.Mode, opts.Peer = xdp.Inline, ifi.Index
	}
	e, err := xdp.New(opts)
	if err != nil {
		return Engine{}, fmt.Errorf("software.engine xdp: %w", err)
	}
	for _, name := range cfg.Software.Interfaces {
		ifi, err := netdev.ByName(name)
		if err != nil {
			e.Close()
			return Engine{}, fmt.Errorf("software.interfaces %q: %w", name, err)
		}
		if _, err := e.Attach(ifi.Index, true); err != nil {
			e.Close()
			return Engine{}, fmt.Errorf("software.interfaces %q: %w", name, err)
		}
	}
	x := &xdpSW{e: e, workers: cfg.Software.Workers, hz: cfg.Software.GHz * 1e9}
	hz := x.hz
	if hz <= 0 {
		hz = float64(barrier.CycleHz()) // published, though capacity needs software.ghz
	}
	x.cost = &xdpCost{e: e, hz: hz}
	return Engine{SW: x, Run: x.cost.run, Close: e.Close}, nil
}

// xdpSW is the XDP engine as a dataplane.SW.
type xdpSW struct {
	e       *xdp.Engine
	workers int
	hz      float64
	cost    *xdpCost // nil: no sampling
	mu      sync.Mutex
	counts  countBufs // Stats' counts, two written in turn (under mu)
}

func (x *xdpSW) Name() string                 { return "xdp" }
func (x *xdpSW) SetRules(set *rule.Set) error { return x.e.Replace(set) }
func (x *xdpSW) Capacity() (int, float64)     { return x.workers, x.hz }
func (x *xdpSW) Stats() dataplane.SWStats {
	out := dataplane.SWStats{At: time.Now()}
	// The set and its counters are read apart: a SetRules between the two
	// reads gives counters of another length, and the read has none.
	set := x.e.Set()
	cs, err := x.e.Counters()
	if err == nil && set != nil && len(cs) == len(set.Rules) {
		x.mu.Lock()
		out.Set, out.Counts = set, x.counts.next(len(cs))
		for i, c := range cs {
			out.Counts[i] = dataplane.Counter{Packets: c.Packets, Bytes: c.Bytes}
		}
		x.mu.Unlock()
	}
	if v, err := x.e.Verdicts(); err == nil {
		w := xdpWorkerStats(v[:])
		if rf, err := x.e.RedirectFailures(); err == nil {
			w.Unforwarded = rf.Packets
		}
		out.Workers = []dataplane.WorkerStats{w}
	}
	if x.cost != nil {
		out.EstCyclesPerPacket = x.cost.cyclesPerPacket()
	}
	return out
}

// xdpWorkerStats folds the XDP program's per-verdict counters into one
// worker's figures: every verdict was received; Dropped dropped, the rest
// passed.
func xdpWorkerStats(v []xdp.Counter) dataplane.WorkerStats {
	var w dataplane.WorkerStats
	for i, c := range v {
		w.RxPackets += c.Packets
		w.RxBytes += c.Bytes
		if xdp.Verdict(i) == xdp.Dropped {
			w.Dropped += c.Packets
		} else {
			w.Passed += c.Packets
		}
	}
	return w
}

// noSW is "software.engine: none": nothing enforces rules hardware cannot
// hold. Placement still reports them as on the software path, and the
// agent warns at start.
type noSW struct {
	mu  sync.Mutex
	set *rule.Set
}

func (n *noSW) Name() string { return "none" }
func (n *noSW) SetRules(set *rule.Set) error {
	n.mu.Lock()
	n.set = set
	n.mu.Unlock()
	return nil
}
func (n *noSW) Capacity() (int, float64) { return 0, 0 }
func (n *noSW) Stats() dataplane.SWStats { return dataplane.SWStats{At: time.Now()} }
