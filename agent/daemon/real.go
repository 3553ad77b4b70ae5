package daemon

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/scrubd/scrubd/agent/config"
	"github.com/scrubd/scrubd/agent/dataplane"
	"github.com/scrubd/scrubd/agent/hwpath"
	"github.com/scrubd/scrubd/offload"
	"github.com/scrubd/scrubd/offload/compile"
	"github.com/scrubd/scrubd/offload/flowerbackend"
	"github.com/scrubd/scrubd/offload/tcflower"
	"github.com/scrubd/scrubd/swpath/barrier"
	"github.com/scrubd/scrubd/swpath/rule"
	"github.com/scrubd/scrubd/swpath/xdp"
)

// Table placement of scrubd's hardware entries: chain 0, priorities 10
// (IPv4) and 11 (IPv6), after OVS's reserved 1-4 on a BlueField uplink;
// the pass entries that except accept rules (protect entries) from the
// drops at 8 and 9, before them.
const (
	hwChain        = 0
	hwPassPrioV4   = 8
	hwPassPrioV6   = 9
	hwPrioV4       = 10
	hwPrioV6       = 11
	defaultEntries = 0 // unknown: the device's ENOSPC decides
)

// RealPaths builds the dataplane from the config: tc flower (skip_sw) on
// every offload device, each rule in every device's table, and the Direct
// Verbs engine (mlx5 build) or the XDP engine on the software interfaces.
// The Direct Verbs engine is wired through --sim only in this build.
func RealPaths(ctx context.Context, cfg *config.Config) (Paths, error) {
	var p Paths
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
		cl, err := tcflower.Dial()
		if err != nil {
			return p, fmt.Errorf("offload: netlink: %w", err)
		}
		closers = append(closers, cl.Close)
		caps := offload.MLX5(defaultEntries)
		// One backend per device; with several (p0 and p1), every rule
		// goes into each table (hwpath.Multi).
		var bs []offload.Backend
		devs := map[int]string{}
		for i, dev := range cfg.Offload.Devices {
			ifi, err := net.InterfaceByName(dev)
			if err != nil {
				p.Close()
				return p, fmt.Errorf("offload.devices[%d] %q: %w", i, dev, err)
			}
			devs[ifi.Index] = dev
			bs = append(bs, flowerbackend.New(flowerbackend.Config{Client: cl, Ifindex: ifi.Index, Dev: dev, Caps: caps, Flags: tcflower.SkipSW}))
		}
		var b offload.Backend = bs[0]
		if len(bs) > 1 {
			b = hwpath.NewMulti(cfg.Offload.Devices, bs)
		}
		dev := strings.Join(cfg.Offload.Devices, "+")
		p.Watch = func(ctx context.Context, lost func(string)) error { return watchQdisc(ctx, devs, lost) }
		p.HW = hwpath.New(hwpath.Config{Name: "tcflower:" + dev, Compile: compile.Config{Caps: caps, Chain: hwChain, PrioV4: hwPrioV4, PrioV6: hwPrioV6,
			PassPrioV4: hwPassPrioV4, PassPrioV6: hwPassPrioV6},
			Owner: offload.Owner{Chain: hwChain, PrioLo: hwPassPrioV4, PrioHi: hwPrioV6}, MaxEntries: cfg.Offload.MaxEntries, MaxMasks: cfg.Offload.MaxMasks,
			MaxEntriesPerRule: cfg.Offload.MaxEntriesPerRule}, b)
	case "none":
	default:
		return p, fmt.Errorf("offload.backend %q is not available outside --sim", cfg.Offload.Backend)
	}
	switch cfg.Software.Engine {
	case "xdp":
		opts := xdp.Options{Mode: xdp.Host, PinPath: cfg.Software.XDPPinPath}
		if to := cfg.Software.ForwardTo; to != "" {
			// Inline: what passes goes out of forward_to (XDP_REDIRECT
			// through a devmap).
			ifi, err := net.InterfaceByName(to)
			if err != nil {
				p.Close()
				return p, fmt.Errorf("software.forward_to %q: %w", to, err)
			}
			opts.Mode, opts.Peer = xdp.Inline, ifi.Index
		}
		e, err := xdp.New(opts)
		if err != nil {
			p.Close()
			return p, fmt.Errorf("software.engine xdp: %w", err)
		}
		closers = append(closers, e.Close)
		for _, name := range cfg.Software.Interfaces {
			ifi, err := net.InterfaceByName(name)
			if err != nil {
				p.Close()
				return p, fmt.Errorf("software.interfaces %q: %w", name, err)
			}
			if _, err := e.Attach(ifi.Index, true); err != nil {
				p.Close()
				return p, fmt.Errorf("software.interfaces %q: %w", name, err)
			}
		}
		x := &xdpSW{e: e, workers: cfg.Software.Workers, hz: cfg.Software.GHz * 1e9}
		hz := x.hz
		if hz <= 0 {
			hz = float64(barrier.CycleHz()) // published, though capacity needs software.ghz
		}
		x.cost = &xdpCost{e: e, hz: hz}
		p.SW, p.Run = x, x.cost.run
	case "dv":
		sw, closeSW, err := dvEngine(ctx, cfg)
		if err != nil {
			p.Close()
			return p, err
		}
		closers = append(closers, closeSW)
		p.SW = sw
	case "none":
		p.SW = &noSW{}
	default:
		p.Close()
		return p, fmt.Errorf("software.engine %q has no packet input in scrubd run (use dv, xdp or none)", cfg.Software.Engine)
	}
	return p, nil
}

// watchQdisc follows the rtnetlink TC group: when the clsact (or ingress)
// qdisc of an offload device (devs: by ifindex) is deleted (OVS deletes it when it
// restarts, and every filter goes with it) it calls lost at once. Lost
// notifications (ENOBUFS) count as a possible deletion too. A monitor that
// cannot be opened is logged by the caller's lack of resyncs only: the
// agent runs on without it.
func watchQdisc(ctx context.Context, devs map[int]string, lost func(string)) error {
	m, err := tcflower.NewMonitor()
	if err != nil {
		lost("qdisc monitor unavailable (" + err.Error() + "): checking once")
		return nil
	}
	defer m.Close()
	return followQdisc(ctx, m, devs, lost)
}

// followQdisc is watchQdisc's loop over an open monitor.
func followQdisc(ctx context.Context, m *tcflower.Monitor, devs map[int]string, lost func(string)) error {
	for {
		ev, err := m.Next(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			lost("qdisc monitor lost events (" + err.Error() + ")")
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(time.Second):
			}
			continue
		}
		if dev, ok := devs[ev.Ifindex]; ok && ev.Deleted {
			lost(ev.Kind + " qdisc on " + dev + " deleted")
		}
	}
}

// xdpSW is the XDP engine as a dataplane.SW.
type xdpSW struct {
	e       *xdp.Engine
	workers int
	hz      float64
	cost    *xdpCost // nil: no sampling
}

func (x *xdpSW) Name() string                 { return "xdp" }
func (x *xdpSW) SetRules(set *rule.Set) error { return x.e.Replace(set) }
func (x *xdpSW) Capacity() (int, float64)     { return x.workers, x.hz }
func (x *xdpSW) Stats() dataplane.SWStats {
	out := dataplane.SWStats{At: time.Now(), Rules: map[string]dataplane.Counter{}}
	set := x.e.Set()
	cs, err := x.e.Counters()
	if err == nil && set != nil {
		for i, c := range cs {
			if i < len(set.Rules) {
				out.Rules[set.Rules[i].ID] = dataplane.Counter{Packets: c.Packets, Bytes: c.Bytes}
			}
		}
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
