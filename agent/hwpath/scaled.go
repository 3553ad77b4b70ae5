package hwpath

import (
	"context"
	"reflect"
	"sync"

	"github.com/scrubd/scrubd/agent/dataplane"
	"github.com/scrubd/scrubd/swpath/rule"
)

// Scaled is the simulated NIC's hardware path (agent/sim): it multiplies a
// hardware path's counters by the simulation's sampling factor, so both
// paths report full-rate figures, and reports the simulated NIC's own
// counters.
type Scaled struct {
	dataplane.HW
	// Scale is the sampling factor (one packet in Scale is sent).
	Scale float64
	// NIC returns the simulated NIC's drop counters (mlx5's names).
	NIC func() map[string]uint64

	// in is the path's last map (held, so that its address is not reused)
	// and out the scaled copy Stats made of it, returned again while the
	// path returns the same map. Neither is written (the path's may be its
	// cached map).
	mu      sync.Mutex
	in, out map[string]dataplane.Counter
}

// Stats implements dataplane.HW: the path's counters times Scale, in a map
// of its own.
func (h *Scaled) Stats(ctx context.Context) (map[string]dataplane.Counter, error) {
	st, err := h.HW.Stats(ctx)
	if err != nil {
		return nil, err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.out != nil && reflect.ValueOf(st).Pointer() == reflect.ValueOf(h.in).Pointer() {
		return h.out, nil
	}
	out := make(map[string]dataplane.Counter, len(st))
	for k, c := range st {
		out[k] = dataplane.Counter{Packets: uint64(float64(c.Packets) * h.Scale), Bytes: uint64(float64(c.Bytes) * h.Scale)}
	}
	h.in, h.out = st, out
	return out, nil
}

// NICCounters reports the simulated NIC's counters.
func (h *Scaled) NICCounters(ctx context.Context) (map[string]uint64, error) { return h.NIC(), nil }

// Compile implements dataplane.HW.
func (h *Scaled) Compile(r *rule.Rule, set *rule.Set) (dataplane.Cost, error) {
	return h.HW.Compile(r, set)
}

// SyncAccepts and PruneAccepts pass the hardware path's pass-entry upkeep
// through (placement looks for them on the path it is given).
func (h *Scaled) SyncAccepts(ctx context.Context, set *rule.Set) {
	if s, ok := h.HW.(interface {
		SyncAccepts(context.Context, *rule.Set)
	}); ok {
		s.SyncAccepts(ctx, set)
	}
}

func (h *Scaled) PruneAccepts(ctx context.Context, set *rule.Set) error {
	if s, ok := h.HW.(interface {
		PruneAccepts(context.Context, *rule.Set) error
	}); ok {
		return s.PruneAccepts(ctx, set)
	}
	return nil
}
