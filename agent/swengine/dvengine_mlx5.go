//go:build mlx5 && cgo

package swengine

import (
	"context"
	"errors"
	"fmt"
	"math/bits"
	"runtime"

	"github.com/scrubd/scrubd/agent/config"
	"github.com/scrubd/scrubd/agent/dataplane"
	"github.com/scrubd/scrubd/swpath/classifier"
	"github.com/scrubd/scrubd/swpath/dv"
	"github.com/scrubd/scrubd/swpath/dv/verbs"
	"github.com/scrubd/scrubd/swpath/pool"
	"github.com/scrubd/scrubd/swpath/rule"
)

// dvEngine starts the Direct Verbs engine on the devices: one direction
// per software interface (received there, forwarded to
// software.forward_to, or counted in host mode), software.workers split
// over them in powers of 2 (splitWorkers), on the highest-numbered CPUs (the low ones stay for
// the kernel and the agent), one shared classifier and one pool.
func dvEngine(ctx context.Context, cfg *config.Config) (dataplane.SW, func() error, error) {
	sw := &cfg.Software
	ifaces := sw.Interfaces
	split := splitWorkers(sw.Workers, len(ifaces))
	if split == nil {
		return nil, nil, fmt.Errorf("software.workers %d: fewer than the %d interfaces", sw.Workers, len(ifaces))
	}
	used := 0
	for _, k := range split {
		used += k
	}
	n := runtime.NumCPU()
	if used > n {
		return nil, nil, fmt.Errorf("software.workers %d: only %d CPUs", sw.Workers, n)
	}
	cls, err := classifier.New(&rule.Set{})
	if err != nil {
		return nil, nil, err
	}
	// Every receive and send queue gets software.rx_ring_entries (or the
	// capacity model's size); each CQ twice that (verbs.CreateRx).
	entries, _ := RxRing(cfg, "/")
	p, err := pool.New(pool.Config{BuffersPerNode: max(pool.DefaultBuffersPerNode, used*(2*entries+2*pool.DefaultCacheSize+2*dv.MaxBurst)),
		HugePages: pool.HugeAuto, Bind: pool.BindAuto, Placement: bufferPlacement(sw.BufferNode)})
	if err != nil {
		return nil, nil, fmt.Errorf("software.engine dv: buffer pool: %w", err)
	}
	var ports []*verbs.Port
	var engines []*dv.Engine
	closeAll := func() error {
		var errs []error
		for _, pt := range ports {
			errs = append(errs, pt.Close())
		}
		errs = append(errs, p.Close())
		return errors.Join(errs...)
	}
	next := n - used
	for i, iface := range ifaces {
		var cpus []int
		for c := 0; c < split[i]; c++ {
			cpus = append(cpus, next)
			next++
		}
		pt, err := verbs.SetupPort(verbs.PortConfig{RxNetdev: iface, TxNetdev: sw.ForwardTo, Host: sw.ForwardTo == "",
			CPUs: cpus, Log2: uint(bits.TrailingZeros(uint(entries))), Pool: p, Classifier: cls})
		if err != nil {
			closeAll()
			return nil, nil, fmt.Errorf("software.interfaces %q: %w", iface, err)
		}
		ports = append(ports, pt)
		engines = append(engines, pt.Engine)
	}
	for _, e := range engines {
		if err := e.Start(ctx); err != nil {
			closeAll()
			return nil, nil, err
		}
	}
	s := newDVSW(cls, p, used, sw.GHz*1e9, engines...)
	return s, func() error { s.freeze(); return closeAll() }, nil
}
