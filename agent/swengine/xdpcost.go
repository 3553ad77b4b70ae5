package swengine

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"sync/atomic"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/scrubd/scrubd/swpath/xdp"
)

// The XDP engine counts no cycles, so its cost per packet is sampled from
// the kernel's BPF run-time statistics on the traffic it really gets: every
// costEvery (the first costFirst after start) statistics are turned on for
// costWindow, and the program's run time over that window is divided by its
// runs. Statistics cost every BPF program on the host a clock read or two
// per run while they are on, hence the short window. Turning them on needs
// CAP_SYS_ADMIN; without it the figure comes only if the operator has set
// the sysctl kernel.bpf_stats_enabled.
const (
	costFirst   = time.Second
	costWindow  = time.Second
	costEvery   = 30 * time.Second
	costMinRuns = 1000 // fewer runs in a window: too little traffic to tell
)

// xdpCost holds the latest sampled cost, in cycles of hz per packet.
type xdpCost struct {
	e   *xdp.Engine
	hz  float64
	cpp atomic.Uint64 // float64 bits; 0: no figure yet
}

func (c *xdpCost) cyclesPerPacket() float64 { return math.Float64frombits(c.cpp.Load()) }

// run samples until ctx ends.
func (c *xdpCost) run(ctx context.Context, log *slog.Logger) error {
	wait, warned := costFirst, false
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
		wait = costEvery
		ns, runs, err := c.sample(ctx)
		switch {
		case ctx.Err() != nil:
			return nil
		case err != nil:
			if !warned {
				log.Warn("XDP cost per packet unknown: the capacity model keeps its configured figure", "err", err)
				warned = true
			}
		case runs >= costMinRuns:
			cpp := ns * c.hz / 1e9
			c.cpp.Store(math.Float64bits(cpp))
			log.Debug("XDP cost sampled", "ns_per_packet", ns, "cycles_per_packet", cpp, "runs", runs)
		}
	}
}

// sample measures one window: ns per run and the number of runs.
func (c *xdpCost) sample(ctx context.Context) (float64, uint64, error) {
	on, onErr := ebpf.EnableStats(unix.BPF_STATS_RUN_TIME)
	if onErr == nil {
		defer on.Close()
	}
	t0, n0, err := c.e.RunStats()
	if err != nil {
		return 0, 0, err
	}
	select {
	case <-ctx.Done():
		return 0, 0, ctx.Err()
	case <-time.After(costWindow):
	}
	t1, n1, err := c.e.RunStats()
	if err != nil {
		return 0, 0, err
	}
	if n1 == n0 || t1 <= t0 {
		if onErr != nil {
			// Either no traffic, or statistics are off: say why they
			// could not be turned on.
			return 0, 0, fmt.Errorf("no runs counted, and BPF statistics could not be turned on (set the sysctl kernel.bpf_stats_enabled=1, or grant CAP_SYS_ADMIN): %w", onErr)
		}
		return 0, n1 - n0, nil
	}
	return float64(t1-t0) / float64(n1-n0), n1 - n0, nil
}
