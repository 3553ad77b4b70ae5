package dv_test

import (
	"testing"

	"github.com/scrubd/scrubd/swpath/dv/dvsim"
	"github.com/scrubd/scrubd/swpath/dv/prm"
	"github.com/scrubd/scrubd/swpath/pool"
)

// FuzzPoll writes arbitrary bytes into the CQ, as a broken device or a
// corrupted ring would, marks the slots owned by software, and runs the
// worker: it must not panic, must never hand out a buffer it does not
// own, and every buffer must be back in the pool after shutdown.
func FuzzPoll(f *testing.F) {
	title := make([]byte, 64)
	prm.PutBE32(title, prm.CQEOffByteCnt, 5)
	title[prm.CQEOffOpOwn] = prm.OpOwnTitle
	f.Add(title)
	regular := make([]byte, 128)
	prm.PutBE32(regular, prm.CQEOffByteCnt, 60)
	regular[prm.CQEOffOpOwn] = prm.OpOwnRespSend
	prm.PutBE32(regular, 64+prm.CQEOffByteCnt, 1<<20)
	regular[64+prm.CQEOffOpOwn] = prm.CQERespErr << 4
	f.Add(regular)
	huge := make([]byte, 64)
	prm.PutBE32(huge, prm.CQEOffByteCnt, 0xffffffff)
	huge[prm.CQEOffOpOwn] = prm.OpOwnTitle
	f.Add(huge)
	// Empty session titles in every slot: more completions than WQEs.
	empty := make([]byte, 64*64)
	for i := 0; i < 64; i++ {
		empty[i*64+prm.CQEOffOpOwn] = prm.OpOwnTitle
	}
	f.Add(empty)
	f.Fuzz(func(t *testing.T, data []byte) {
		sim, err := dvsim.New(dvsim.Config{RQLog2: 5, CQLog2: 6, SQLog2: 5, Host: true,
			Pool: &pool.Config{HugePages: pool.HugeOff, Bind: pool.BindOff, BuffersPerNode: 256, CacheSize: 64, Batch: 16, Debug: true}})
		if err != nil {
			t.Fatal(err)
		}
		w, rr := sim.Workers[0], sim.RxRings[0]
		w.Step() // post buffers
		n := min(len(data), len(rr.CQ))
		copy(rr.CQ[:n], data[:n])
		for off := 0; off < n; off += prm.CQESize {
			// Owner bit of the first pass (counters start at 0).
			w := prm.LoadWord(rr.CQ, off+prm.CQEOffWQECnt)
			prm.StoreWord(rr.CQ, off+prm.CQEOffWQECnt, w&^(1<<24))
		}
		for i := 0; i < 4; i++ {
			w.Step()
		}
		if err := sim.Close(); err != nil {
			t.Fatal(err)
		}
		if sim.Leaked != 0 || sim.BadFrees != 0 {
			t.Fatalf("%d buffers leaked, %d freed twice", sim.Leaked, sim.BadFrees)
		}
	})
}
