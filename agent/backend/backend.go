// Package backend builds the agent's two enforcement paths from the config
// (daemon.Options.Paths): the same code for real devices and for the
// simulated NIC.
//
//	offload.backend  tcflower  tc flower on offload.devices (agent/hwpath)
//	                 sim       the simulated NIC's flow table (agent/sim)
//	                 none      no hardware path
//	software.engine  dv        the Direct Verbs engine: on the devices
//	                           (agent/swengine, mlx5 build), or over the
//	                           NIC emulator with offload.backend sim
//	                 xdp       the XDP program (agent/swengine)
//	                 none      nothing enforces what hardware cannot hold
//
// With offload.backend sim both paths are the simulated NIC's (agent/sim):
// its table behind agent/hwpath, and the dv engine polling the emulator's
// receive rings; its traffic runs as the dataplane's background work.
package backend

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/scrubd/scrubd/agent/config"
	"github.com/scrubd/scrubd/agent/daemon"
	"github.com/scrubd/scrubd/agent/hwpath"
	"github.com/scrubd/scrubd/agent/sim"
	"github.com/scrubd/scrubd/agent/swengine"
)

// Builder builds the paths; its zero value serves real devices, and a
// config with offload.backend sim gets a simulated NIC of SimScale.
type Builder struct {
	// SimScale is the simulated NIC's sampling factor: one packet in
	// SimScale of the modelled traffic runs through the real table and
	// engine (0: the simulator's default, 1000).
	SimScale float64
	// OnSim, if set, is given the simulated NIC once it is built (the
	// live view reads it).
	OnSim func(*sim.NIC)
}

// Paths builds both paths for cfg (a daemon.Options.Paths).
func (b Builder) Paths(ctx context.Context, cfg *config.Config) (daemon.Paths, error) {
	if cfg.Offload.Backend == "sim" {
		return b.simPaths(cfg)
	}
	var p daemon.Paths
	var closers []func() error
	p.Close = func() error {
		var errs []error
		for i := len(closers) - 1; i >= 0; i-- {
			errs = append(errs, closers[i]())
		}
		return errors.Join(errs...)
	}
	switch cfg.Offload.Backend {
	case "tcflower":
		f, err := hwpath.NewFlower(cfg)
		if err != nil {
			return daemon.Paths{}, err
		}
		closers = append(closers, f.Close)
		p.HW, p.Watch = f.HW, f.Watch
	case "none":
	default:
		return daemon.Paths{}, fmt.Errorf("offload.backend %q: unknown (tcflower, sim or none)", cfg.Offload.Backend)
	}
	e, err := swengine.New(ctx, cfg)
	if err != nil {
		p.Close()
		return daemon.Paths{}, err
	}
	if e.Close != nil {
		closers = append(closers, e.Close)
	}
	p.SW, p.Run = e.SW, e.Run
	if cfg.Software.Engine == "dv" {
		p.Log = logRing(cfg)
		p.Calibrate = func(ctx context.Context) (float64, error) { return swengine.Calibrate(ctx, cfg.Software.GHz) }
	}
	return p, nil
}

// Paths builds both paths for cfg with the zero Builder: real devices, or
// a simulated NIC of the default scale.
func Paths(ctx context.Context, cfg *config.Config) (daemon.Paths, error) {
	return Builder{}.Paths(ctx, cfg)
}

// logRing logs the receive ring size the dv engine uses and why.
func logRing(cfg *config.Config) func(*slog.Logger) {
	return func(log *slog.Logger) {
		n, why := swengine.RxRing(cfg, "/")
		log.Info("software receive rings", "entries", n, "cq_entries", 2*n, "why", why)
	}
}

// simPaths builds the simulated NIC the config describes and returns its
// paths, with its traffic as the dataplane's background work.
func (b Builder) simPaths(cfg *config.Config) (daemon.Paths, error) {
	if cfg.Software.Engine != "dv" {
		return daemon.Paths{}, fmt.Errorf("software.engine %q: offload.backend sim runs the dv engine over the NIC emulator only", cfg.Software.Engine)
	}
	if cfg.Software.CyclesPerPacket.Auto() {
		cfg.Software.CyclesPerPacket = 297 // the model is a BlueField-3 with Direct Verbs
	}
	n, err := NewSim(cfg, b.SimScale)
	if err != nil {
		return daemon.Paths{}, err
	}
	p := SimPaths(n)
	p.Close = n.Close
	p.Run = func(ctx context.Context, _ *slog.Logger) error { return n.Run(ctx, 10*time.Millisecond) }
	logModel := logRing(cfg)
	p.Log = func(log *slog.Logger) {
		logModel(log)
		rq, cq := n.Rings()
		log.Info("simulated NIC: emulated receive rings (one packet in the simulation's scale)", "entries", rq, "cq_entries", cq, "scale", n.Scale())
	}
	if b.OnSim != nil {
		b.OnSim(n)
	}
	return p, nil
}

// NewSim builds the simulated NIC a config describes: the modelled software
// path (workers, clock, cycles per packet, the queues' drain rate), the
// emulated receive rings (sim.EmulatedRing of software.rx_ring_entries or
// the capacity model's size), the table budget, host or forward mode.
func NewSim(cfg *config.Config, scale float64) (*sim.NIC, error) {
	ring, _ := swengine.RxRing(cfg, "/")
	opt := sim.Options{Scale: scale, Workers: cfg.Software.Workers, Hz: cfg.Software.GHz * 1e9,
		CPP: float64(cfg.Software.CyclesPerPacket), HWEntries: cfg.Offload.MaxEntries, HWMasks: cfg.Offload.MaxMasks,
		HWEntriesPerRule: cfg.Offload.MaxEntriesPerRule,
		Host:             cfg.Software.ForwardTo == "", QueueDrainPPS: cfg.Software.QueueDrainMpps * 1e6}
	// The emulated rings carry one packet in scale: the modelled ring's
	// share of them, and at least a round of the modelled capacity.
	opt.RingEntries = sim.EmulatedRing(ring, opt)
	return sim.New(opt)
}

// SimPaths returns the paths of a simulated NIC the caller drives (Step or
// Run) and closes. A flush of its table (the model of OVS deleting the
// qdisc) is reported to Watch as the qdisc monitor reports a deleted
// qdisc.
func SimPaths(n *sim.NIC) daemon.Paths {
	return daemon.Paths{HW: n.HW(), SW: n.SW(), Watch: func(lost func(string)) func(context.Context) error {
		flushed := make(chan struct{}, 1)
		n.Device().OnFlush(func() {
			select {
			case flushed <- struct{}{}:
			default:
			}
		})
		return func(ctx context.Context) error {
			for {
				select {
				case <-ctx.Done():
					return nil
				case <-flushed:
					lost("simulated flow table flushed (qdisc deleted)")
				}
			}
		}
	}}
}

// Sim returns a daemon.Options.Paths that gives the agent the paths of n
// (SimPaths), whatever the config says.
func Sim(n *sim.NIC) func(context.Context, *config.Config) (daemon.Paths, error) {
	return func(context.Context, *config.Config) (daemon.Paths, error) { return SimPaths(n), nil }
}
