package dv_test

import (
	"testing"

	"github.com/scrubd/scrubd/swpath/dv/dvsim"
	"github.com/scrubd/scrubd/swpath/dv/prm"
	"github.com/scrubd/scrubd/swpath/pool"
)

// TestCorruptTitleInvalidatesItsSlots writes compressed-session titles
// whose count the driver cannot walk, followed by mini-CQE arrays whose
// last byte-count byte (CQE byte 0x3f, op_own) reads as a RESP_SEND CQE of
// the current pass. The driver must skip the title, mark the claimed slots
// that pass the owner test INVALID, hand out no buffer for them, and go on
// with the next real completion, whose byte count is clamped to the
// buffer size.
func TestCorruptTitleInvalidatesItsSlots(t *testing.T) {
	for _, c := range []struct {
		name      string
		cnt       uint32
		errCQEs   uint64 // the title taken as an error completion of one WQE
		unposted  uint64
		nextWQE   uint16 // wqe_counter of the real completion after it
		garbage   int    // slots after the title that pass the owner test
		wantSkips uint32 // slots ci moves past: the title and the garbage
	}{
		{name: "more-than-posted", cnt: 40, unposted: 1, nextWQE: 0, garbage: 9, wantSkips: 10},
		// A count of 1 claims no slot after the title: it is one error
		// completion and the next slot is read as what it is.
		{name: "one", cnt: 1, errCQEs: 1, nextWQE: 1, garbage: 0, wantSkips: 1},
		{name: "more-than-the-CQ", cnt: 0xffffffff, unposted: 1, nextWQE: 0, garbage: 9, wantSkips: 10},
	} {
		t.Run(c.name, func(t *testing.T) {
			sim, err := dvsim.New(dvsim.Config{RQLog2: 5, CQLog2: 6, SQLog2: 5, Host: true,
				Pool: &pool.Config{HugePages: pool.HugeOff, Bind: pool.BindOff, BuffersPerNode: 256, CacheSize: 64, Batch: 16, Debug: true}})
			if err != nil {
				t.Fatal(err)
			}
			w, rr := sim.Workers[0], sim.RxRings[0]
			w.Step() // posts 32 WQEs
			if got := prm.LoadDBR(rr.RQDBR, prm.RQDBROff); got != 32 {
				t.Fatalf("posted %d WQEs, want 32", got)
			}
			slot := func(i int) []byte { return rr.CQ[i*prm.CQESize : (i+1)*prm.CQESize] }
			// The title (mlx5_cqe64: byte_cnt at 0x2c holds the mini-CQE
			// count, op_own 0x2c = RESP_SEND, format 3, owner 0).
			title := slot(0)
			prm.PutBE32(title, 0x2c, c.cnt)
			prm.StoreWord(rr.CQ, 0x3c, prm.MakeOwnerWord(0, 0x2c))
			// Mini-CQE arrays (8 bytes each: rx_hash_result, byte_cnt) with
			// byte_cnt 0x120: the last one's low byte 0x20 sits at 0x3f.
			for s := 1; s <= c.garbage; s++ {
				b := slot(s)
				for m := 0; m < 7; m++ {
					prm.PutBE32(b, m*8, 0x1234)
					prm.PutBE32(b, m*8+4, 0x120)
				}
				prm.PutBE32(b, 0x38, 0x1234)
				prm.StoreWord(rr.CQ, s*prm.CQESize+0x3c, 0x20000100) // bytes 00 00 01 20
			}
			if got := w.Step(); got != 0 {
				t.Fatalf("a corrupt title's slots gave %d packets", got)
			}
			s := w.Snapshot()
			if s.RxErrors != c.errCQEs || s.Unposted != c.unposted || s.Sessions != 0 {
				t.Fatalf("error CQEs %d unposted %d sessions %d, want %d %d 0", s.RxErrors, s.Unposted, s.Sessions, c.errCQEs, c.unposted)
			}
			if got := prm.LoadDBR(rr.CQDBR, prm.CQDBRSetCI); got != c.wantSkips {
				t.Fatalf("consumer index %d after the corrupt title, want %d", got, c.wantSkips)
			}
			for i := 1; i < int(c.wantSkips); i++ {
				if op := uint8(prm.LoadWord(rr.CQ, i*prm.CQESize+0x3c) >> 24); op != 0xf0 {
					t.Errorf("slot %d op_own %#x after the skip, want 0xf0 (INVALID, owner 0)", i, op)
				}
			}
			// The next real completion: RESP_SEND, owner 0, a byte count
			// beyond the buffer (clamped to it).
			next := slot(int(c.wantSkips))
			prm.PutBE32(next, 0x2c, 1<<20)
			prm.StoreWord(rr.CQ, int(c.wantSkips)*prm.CQESize+0x3c, prm.MakeOwnerWord(c.nextWQE, 0x20))
			if got := w.Step(); got != 1 {
				t.Fatalf("received %d after the skip, want 1", got)
			}
			s = w.Snapshot()
			if want := uint64(sim.Pool.BufSize()); s.RxBytes != want {
				t.Errorf("RxBytes %d for a byte count of 1 MiB, want the buffer size %d", s.RxBytes, want)
			}
			if s.SeqErrors != 0 {
				t.Errorf("%d sequence errors", s.SeqErrors)
			}
			if err := sim.Close(); err != nil {
				t.Fatal(err)
			}
			if sim.Leaked != 0 || sim.BadFrees != 0 {
				t.Fatalf("%d buffers leaked, %d freed twice", sim.Leaked, sim.BadFrees)
			}
		})
	}
}
