package dv_test

import (
	"net/netip"
	"testing"

	"github.com/scrubd/scrubd/swpath/dv/dvsim"
	"github.com/scrubd/scrubd/swpath/dv/prm"
	"github.com/scrubd/scrubd/swpath/pool"
	"github.com/scrubd/scrubd/swpath/rule"
	"github.com/scrubd/scrubd/swpath/traffic"
)

// TestSessionSlotsInvalidated: after a compressed session of 13 packets
// is handed out, every slot after its title (mini-CQE arrays and holes,
// which the emulator poisons to look like good CQEs of this pass) holds
// op_own 0xf0 (INVALID, owner 0), as VPP's compressed_cqe_reset_owner
// leaves them; the title's slot is the device's to overwrite. Written out
// as bytes, independent of the timing the accounting runs depend on.
func TestSessionSlotsInvalidated(t *testing.T) {
	sim, err := dvsim.New(dvsim.Config{RQLog2: 5, CQLog2: 6, SQLog2: 5, Host: true, Poison: true,
		Pool: &pool.Config{HugePages: pool.HugeOff, Bind: pool.BindOff, BuffersPerNode: 256, CacheSize: 64, Batch: 16, Debug: true}})
	if err != nil {
		t.Fatal(err)
	}
	defer sim.Close()
	w, q, rr := sim.Workers[0], sim.RX[0], sim.RxRings[0]
	w.Step()
	frames := make([][]byte, 13)
	for i := range frames {
		// One kind of packet (UDP over IPv4): one session title fits all.
		frames[i] = traffic.AppendFrame(nil, &traffic.Frame{Family: rule.IPv4, Proto: rule.ProtoUDP,
			Src: netip.MustParseAddr("192.0.2.1"), Dst: netip.MustParseAddr("198.51.100.1"), SrcPort: uint16(1000 + i), DstPort: 53, Size: 64})
	}
	if got := q.DeliverBurst(frames, true, 40); got != 13 {
		t.Fatalf("placed %d of 13", got)
	}
	if q.C.Sessions.Load() != 1 {
		t.Fatalf("%d sessions, want one of 13", q.C.Sessions.Load())
	}
	if op := rr.CQ[2*64+0x3f]; op == 0xf0 {
		t.Fatal("the emulator did not poison hole slot 2: the test would prove nothing")
	}
	if got := w.Step(); got != 13 {
		t.Fatalf("received %d of 13", got)
	}
	for s := 1; s < 13; s++ {
		if op := prm.LoadWord(rr.CQ, s*64+0x3c) >> 24; op != 0xf0 {
			t.Errorf("slot %d op_own %#x after the session, want 0xf0", s, op)
		}
	}
	if ci := prm.LoadDBR(rr.CQDBR, prm.CQDBRSetCI); ci != 13 {
		t.Errorf("consumer index %d, want 13 (past the session)", ci)
	}
}
