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
	p.Apply(ctx, st.Snapshot())
	p.ready = true
	p.publish()
	for {
		select {
		case <-ctx.Done():
			return nil
		case why := <-p.resyncReq:
			p.Resync(ctx, why)
		case <-st.Changed():
			p.Apply(ctx, st.Snapshot())
		case <-ticks:
			if len(st.Sweep()) > 0 {
				p.Apply(ctx, st.Snapshot())
			}
			p.Tick(ctx)
		}
	}
}
