package hwpath

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/scrubd/scrubd/agent/config"
	"github.com/scrubd/scrubd/agent/dataplane"
	"github.com/scrubd/scrubd/internal/netdev"
	"github.com/scrubd/scrubd/offload"
	"github.com/scrubd/scrubd/offload/compile"
	"github.com/scrubd/scrubd/offload/devcheck"
	"github.com/scrubd/scrubd/offload/tcflower"
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

// Flower is the tc flower hardware path on the devices of a config.
type Flower struct {
	HW dataplane.HW
	// Watch subscribes to the deletions of an offload device's clsact
	// qdisc (every filter goes with it) and returns the loop that calls
	// lost for each, run until ctx ends (daemon.Paths.Watch).
	Watch func(lost func(reason string)) (run func(ctx context.Context) error)
	// Close closes the netlink socket.
	Close func() error
}

// NewFlower opens tc flower (skip_sw) on every device of
// offload.devices: one backend per device, every rule in each device's
// table (Multi) when there are several (p0 and p1), scrubd's chain and
// priorities (the constants above), the config's entry and mask budget.
func NewFlower(cfg *config.Config) (Flower, error) {
	cl, err := tcflower.Dial()
	if err != nil {
		return Flower{}, fmt.Errorf("offload: netlink: %w", err)
	}
	caps := offload.MLX5(defaultEntries)
	// The devices' drop counters (ethtool -S) for scrubd_nic_dropped_packets_total;
	// the agent runs on without them when the ioctl socket cannot be opened.
	et, etErr := devcheck.OpenEthtool()
	closeAll := func() error {
		if et != nil {
			et.Close()
		}
		return cl.Close()
	}
	var bs []offload.Backend
	devs := map[int]string{}
	for i, dev := range cfg.Offload.Devices {
		ifi, err := netdev.ByName(dev)
		if err != nil {
			closeAll()
			return Flower{}, fmt.Errorf("offload.devices[%d] %q: %w", i, dev, err)
		}
		devs[ifi.Index] = dev
		fc := FlowerConfig{Client: cl, Ifindex: ifi.Index, Dev: dev, Caps: caps, Flags: tcflower.SkipSW}
		if etErr == nil {
			fc.Counters = dropCounters(et, dev)
		}
		bs = append(bs, NewFlowerBackend(fc))
	}
	var b offload.Backend = bs[0]
	if len(bs) > 1 {
		b = NewMulti(cfg.Offload.Devices, bs)
	}
	dev := strings.Join(cfg.Offload.Devices, "+")
	hw := New(Config{Name: "tcflower:" + dev, Compile: compile.Config{Caps: caps, Chain: hwChain, PrioV4: hwPrioV4, PrioV6: hwPrioV6,
		PassPrioV4: hwPassPrioV4, PassPrioV6: hwPassPrioV6},
		Owner: offload.Owner{Chain: hwChain, PrioLo: hwPassPrioV4, PrioHi: hwPrioV6}, MaxEntries: cfg.Offload.MaxEntries, MaxMasks: cfg.Offload.MaxMasks,
		MaxEntriesPerRule: cfg.Offload.MaxEntriesPerRule}, b)
	return Flower{HW: hw, Close: closeAll,
		Watch: func(lost func(string)) func(context.Context) error { return watchQdisc(devs, lost) }}, nil
}

// dropCounters reads dev's ethtool statistics and keeps the drop counters
// (devcheck.DropCounters: mlx5's rx_discards_phy, rx_out_of_buffer and the
// like, as the kernel's mlx5 counters.rst names them).
func dropCounters(et *devcheck.Ethtool, dev string) func(context.Context) (map[string]uint64, error) {
	return func(context.Context) (map[string]uint64, error) {
		st, err := et.Stats(dev)
		if err != nil {
			return nil, err
		}
		return devcheck.DropCounters(st), nil
	}
}

// watchQdisc joins the rtnetlink TC group now and returns the loop that
// follows it: when the clsact (or ingress) qdisc of an offload device
// (devs: by ifindex) is deleted (OVS deletes it when it restarts, and
// every filter goes with it) it calls lost at once. A deletion after
// watchQdisc returns is reported even if the loop starts later. Lost
// notifications (ENOBUFS) count as a possible deletion too. A monitor that
// cannot be opened is logged by the caller's lack of resyncs only: the
// agent runs on without it.
func watchQdisc(devs map[int]string, lost func(string)) (run func(context.Context) error) {
	m, err := tcflower.NewMonitor()
	if err != nil {
		lost("qdisc monitor unavailable (" + err.Error() + "): checking once")
		return func(context.Context) error { return nil }
	}
	return func(ctx context.Context) error {
		defer m.Close()
		return followQdisc(ctx, m, devs, lost)
	}
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
