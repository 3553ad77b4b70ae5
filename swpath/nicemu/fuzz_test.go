package nicemu

import (
	"testing"

	"github.com/scrubd/scrubd/swpath/dv/prm"
)

// FuzzService feeds arbitrary send-queue contents, doorbell record and
// BlueFlame word to the emulator's send side, and arbitrary receive WQEs
// to its receive side: nothing may panic, and whatever is refused must be
// flagged as a protocol error rather than sent.
func FuzzService(f *testing.F) {
	good := make([]byte, 64)
	prm.PutBE32(good, prm.CtrlOffOpIdx, prm.OpcodeSend)
	prm.PutBE32(good, prm.CtrlOffQPNDS, 0x77<<8|prm.SendDS)
	prm.PutBE16(good, 16+prm.EthOffInlSz, 18)
	prm.PutBE32(good, 48, 100)
	prm.PutBE32(good, 52, 9)
	f.Add(good, uint32(1), uint64(0x00000a0000007704))
	f.Add(make([]byte, 64*16), uint32(0xffff), uint64(0xffffffffffffffff))
	f.Fuzz(func(t *testing.T, sq []byte, dbr uint32, uar uint64) {
		r := prm.NewTxRings(4, 4, 0x77)
		copy(r.SQ, sq)
		arena := prm.Alloc(4096)
		mem := &Memory{}
		mem.Register(9, arena)
		q, err := NewTxQueue("tx", r, mem, 0, nil)
		if err != nil {
			t.Fatal(err)
		}
		prm.StoreDBR(r.QPDBR, prm.SQDBROff, dbr)
		var w [8]byte
		for i := range w {
			w[i] = byte(uar >> (56 - 8*i))
		}
		copy(r.UAR, w[:])
		sent := q.Service()
		if sent > 16 {
			t.Fatalf("sent %d from a ring of 16", sent)
		}

		rr := prm.NewRxRings(5, 4)
		copy(rr.RQ, sq)
		rq, err := NewRxQueue("rx", rr, mem, 0)
		if err != nil {
			t.Fatal(err)
		}
		prm.StoreDBR(rr.RQDBR, prm.RQDBROff, dbr)
		for i := 0; i < 4; i++ {
			rq.Deliver(sq)
		}
	})
}
