package placement

import (
	"context"
	"time"

	"github.com/scrubd/scrubd/agent/store"
)

// Run is the placer's owner goroutine: it applies store changes as they come
// and runs a Tick (and the store's expiry sweep) on every tick. It returns
// when ctx ends. ticks is injected so tests drive time. The view reads
// Ready once the first reconcile and placement round are done; resync
// requests (RequestResync) are served between rounds.
func (p *Placer) Run(ctx context.Context, st *store.Store, ticks <-chan time.Time) error {
	if err := p.Reconcile(ctx); err != nil {
		p.log.Error("reconcile failed; continuing with software enforcement", "err", err)
	}
	p.Apply(ctx, st.Effective())
	if ctx.Err() != nil {
		return nil // stopped mid-placement
	}
	p.ready = true
	p.publish()
	for {
		select {
		case <-ctx.Done():
			return nil
		case why := <-p.resyncReq:
			p.Resync(ctx, why)
		case <-st.Changed():
			if !coalesce(ctx, st.Changed()) {
				return nil
			}
			// The signal of a change the last Apply already saw (the
			// rule files load before Run starts) costs nothing.
			if st.Version() != p.version {
				p.ApplyStore(ctx, st)
			}
		case <-ticks:
			if len(st.Sweep()) > 0 {
				p.ApplyStore(ctx, st)
			}
			p.Tick(ctx)
		}
	}
}

// Batching of store changes: after a change, placement waits until the
// store has been quiet for BatchQuiet (at most BatchMax after the first
// change) and then applies one snapshot, so a burst of FlowSpec updates,
// rules put one by one through the API, or a rule file and a route
// arriving together are one placement pass over one snapshot, not one
// pass per change.
const (
	BatchQuiet = 20 * time.Millisecond
	BatchMax   = 250 * time.Millisecond
)

// coalesce waits for changed to stay quiet for BatchQuiet, at most
// BatchMax; false if ctx ended meanwhile.
func coalesce(ctx context.Context, changed <-chan struct{}) bool {
	limit := time.NewTimer(BatchMax)
	defer limit.Stop()
	quiet := time.NewTimer(BatchQuiet)
	defer quiet.Stop()
	for {
		select {
		case <-ctx.Done():
			return false
		case <-changed:
			quiet.Reset(BatchQuiet)
		case <-quiet.C:
			return true
		case <-limit.C:
			return true
		}
	}
}
