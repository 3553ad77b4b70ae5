package dv_test

import (
	"testing"

	"github.com/scrubd/scrubd/swpath/dv/dvsim"
	"github.com/scrubd/scrubd/swpath/traffic"
)

// TestStepNoAllocs proves the worker's burst (reap, poll, parse,
// classify, drop, forward, ring, refill) allocates nothing, with regular
// CQEs and compressed sessions, in forward and host mode.
func TestStepNoAllocs(t *testing.T) {
	for _, host := range []bool{false, true} {
		sim, err := dvsim.New(dvsim.Config{Rules: traffic.SourceWorkload(), Host: host, RQLog2: 9, CQLog2: 10, SQLog2: 9})
		if err != nil {
			t.Fatal(err)
		}
		gen := traffic.NewGenerator(traffic.Config{Seed: 3, Rules: traffic.SourceWorkload(), RuleFraction: 0.5, Sizes: traffic.Fixed(64)})
		frames := gen.Frames(64)
		w, q := sim.Workers[0], sim.RX[0]
		w.Step() // first refill
		var compress bool
		allocs := testing.AllocsPerRun(200, func() {
			compress = !compress
			q.DeliverBurst(frames, compress, 64)
			if n := w.Step(); n != len(frames) {
				t.Fatalf("step received %d of %d", n, len(frames))
			}
			for _, tx := range sim.TX {
				tx.Service()
			}
		})
		if allocs != 0 {
			t.Errorf("host=%v: %.1f allocations per burst, want 0", host, allocs)
		}
		c := w.Snapshot()
		if c.Rx == 0 || c.Dropped == 0 || c.Passed == 0 || c.Sessions == 0 {
			t.Errorf("host=%v: the loop did not exercise drops, passes and sessions: %+v", host, c)
		}
		if !host && (c.Tx == 0 || c.TxDone == 0) {
			t.Errorf("forward mode sent nothing: %+v", c)
		}
		if err := sim.Close(); err != nil {
			t.Fatal(err)
		}
		if sim.Leaked != 0 {
			t.Errorf("leaked %d buffers", sim.Leaked)
		}
	}
}
