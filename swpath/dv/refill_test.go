package dv_test

import (
	"testing"

	"github.com/scrubd/scrubd/swpath/dv/dvsim"
	"github.com/scrubd/scrubd/swpath/dv/prm"
	"github.com/scrubd/scrubd/swpath/traffic"
)

// TestRefillBatches checks VPP's refill pattern through the RQ doorbell
// record the device reads: nothing below 16 free slots, then multiples of
// 8, at most 256 per batch, never wrapping inside a batch.
func TestRefillBatches(t *testing.T) {
	sim, err := dvsim.New(dvsim.Config{Host: true, RQLog2: 9, CQLog2: 10})
	if err != nil {
		t.Fatal(err)
	}
	defer sim.Close()
	w, q, rr := sim.Workers[0], sim.RX[0], sim.RxRings[0]
	dbr := func() uint32 { return prm.LoadDBR(rr.RQDBR, prm.RQDBROff) }
	w.Step()
	if got := dbr(); got != 256 {
		t.Fatalf("first refill posted %d, want 256 (one batch of at most 256)", got)
	}
	w.Step()
	if got := dbr(); got != 512 {
		t.Fatalf("second refill: record %d, want 512", got)
	}
	frames := traffic.NewGenerator(traffic.Config{Seed: 1, Sizes: traffic.Fixed(64)}).Frames(512)
	deliver := func(n int) {
		if got := q.DeliverBurst(frames[:n], false, 0); got != n {
			t.Fatalf("placed %d of %d", got, n)
		}
		if got := w.Step(); got != n {
			t.Fatalf("received %d of %d", got, n)
		}
	}
	deliver(9) // 9 free: below 16, no refill
	if got := dbr(); got != 512 {
		t.Fatalf("refilled with 9 free: record %d", got)
	}
	deliver(12) // 21 free: refill 16 (a multiple of 8), 5 stay free
	if got := dbr(); got != 528 {
		t.Fatalf("record %d, want 528", got)
	}
	deliver(11) // 16 free again: refill 16
	if got := dbr(); got != 544 {
		t.Fatalf("record %d, want 544", got)
	}
	if c := w.Snapshot(); c.Rx != 32 || c.Passed != 32 {
		t.Fatalf("%+v", c)
	}
}
