package sim

import (
	"context"

	"github.com/scrubd/scrubd/agent/dataplane"
	"github.com/scrubd/scrubd/swpath/rule"
)

// scaledHW multiplies a hardware path's counters by the sampling factor, so
// both paths report full-rate figures, and reports the simulated NIC's own
// counters.
type scaledHW struct {
	dataplane.HW
	scale float64
	nic   func() map[string]uint64
}

func (h *scaledHW) Stats(ctx context.Context) (map[string]dataplane.Counter, error) {
	st, err := h.HW.Stats(ctx)
	if err != nil {
		return nil, err
	}
	for k, c := range st {
		st[k] = dataplane.Counter{Packets: uint64(float64(c.Packets) * h.scale), Bytes: uint64(float64(c.Bytes) * h.scale)}
	}
	return st, nil
}

func (h *scaledHW) NICCounters(ctx context.Context) (map[string]uint64, error) { return h.nic(), nil }

func (h *scaledHW) Compile(r *rule.Rule, set *rule.Set) (dataplane.Cost, error) {
	return h.HW.Compile(r, set)
}

// SyncAccepts and PruneAccepts pass the hardware path's pass-entry upkeep
// through (placement looks for them on the path it is given).
func (h *scaledHW) SyncAccepts(ctx context.Context, set *rule.Set) {
	if s, ok := h.HW.(interface {
		SyncAccepts(context.Context, *rule.Set)
	}); ok {
		s.SyncAccepts(ctx, set)
	}
}

func (h *scaledHW) PruneAccepts(ctx context.Context, set *rule.Set) error {
	if s, ok := h.HW.(interface {
		PruneAccepts(context.Context, *rule.Set) error
	}); ok {
		return s.PruneAccepts(ctx, set)
	}
	return nil
}
