package nicemu

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/scrubd/scrubd/swpath/dv/prm"
)

// TestToeplitzVector checks the hash against the first IPv4-with-ports
// vector of Microsoft's "Verifying the RSS Hash Calculation".
func TestToeplitzVector(t *testing.T) {
	in := []byte{66, 9, 149, 187, 161, 142, 100, 80, 0x0a, 0xea, 0x06, 0xe6} // 2794 -> 1766
	if got := toeplitz(in); got != 0x51ccc178 {
		t.Fatalf("toeplitz = %#x, want 0x51ccc178", got)
	}
	if got := toeplitz(in[:8]); got != 0x323e8fc2 {
		t.Fatalf("toeplitz(addresses only) = %#x, want 0x323e8fc2", got)
	}
}

// miniDriver is the smallest correct driver: it posts n WQEs, each a
// 2048-byte buffer of arena, and reads regular CQEs.
type miniDriver struct {
	r     *prm.RxRings
	arena []byte
	tail  uint32
	ci    uint32
}

func newMini(t *testing.T, cqLog2, rqLog2 uint) (*miniDriver, *RxQueue) {
	r := prm.NewRxRings(cqLog2, rqLog2)
	d := &miniDriver{r: r, arena: prm.Alloc(2048 << rqLog2)}
	mem := &Memory{}
	mem.Register(7, d.arena)
	q, err := NewRxQueue("rx0", r, mem, 0)
	if err != nil {
		t.Fatal(err)
	}
	return d, q
}

func (d *miniDriver) post(n int) {
	mask := uint32(len(d.r.RQ)/16 - 1)
	for i := 0; i < n; i++ {
		s := d.tail & mask
		w := d.r.RQ[s*16:]
		prm.PutBE32(w, 0, 2048)
		prm.PutBE32(w, 4, 7)
		prm.PutBE64(w, 8, prm.Addr(d.arena)+uint64(s)*2048)
		d.tail++
	}
	prm.StoreDBR(d.r.RQDBR, 0, d.tail&0xffff)
}

// next returns the next regular CQE's frame, or nil.
func (d *miniDriver) next(t *testing.T) []byte {
	mask := uint32(1)<<d.r.CQLog2 - 1
	c := d.r.CQ[(d.ci&mask)*64:][:64]
	ctr, op := prm.OwnerWord(prm.LoadWord(c, 0x3c))
	if !prm.SWOwned(op, d.ci, d.r.CQLog2) {
		return nil
	}
	if op&0xfc != prm.OpOwnRespSend {
		t.Fatalf("CQE %d: op_own %#x", d.ci, op)
	}
	n := prm.BE32(c, prm.CQEOffByteCnt)
	s := uint32(ctr) & uint32(len(d.r.RQ)/16-1)
	d.ci++
	prm.StoreDBR(d.r.CQDBR, 0, d.ci&0xffffff)
	return d.arena[s*2048 : s*2048+n]
}

func frame(i int) []byte {
	f := make([]byte, 60+i%40)
	binary.BigEndian.PutUint16(f[12:], 0x0800)
	f[14] = 0x45
	binary.BigEndian.PutUint32(f[26:], uint32(i))
	return f
}

func TestOutOfBufferAndOrder(t *testing.T) {
	d, q := newMini(t, 7, 6)
	d.post(48)
	placed := 0
	for i := 0; i < 100; i++ {
		if q.Deliver(frame(i)) == Placed {
			placed++
		}
	}
	if placed != 48 || q.C.OutOfBuffer.Load() != 52 || q.C.Delivered.Load() != 48 {
		t.Fatalf("placed %d, out-of-buffer %d, delivered %d; want 48, 52, 48", placed, q.C.OutOfBuffer.Load(), q.C.Delivered.Load())
	}
	for i := 0; i < 48; i++ {
		got := d.next(t)
		if !bytes.Equal(got, frame(i)) {
			t.Fatalf("packet %d: got %x", i, got)
		}
	}
	if d.next(t) != nil {
		t.Fatal("a 49th CQE appeared")
	}
	if err := q.Err(); err != nil {
		t.Fatal(err)
	}
}

func TestHostOrderRQDoorbellFlagged(t *testing.T) {
	d, q := newMini(t, 7, 6)
	d.post(8)
	prm.StoreDBRHost(d.r.RQDBR, 0, 8) // VPP's old bug, on the RQ side
	if q.Deliver(frame(1)) != OutOfBuffer {
		t.Fatal("a packet was placed through a byte-swapped doorbell record")
	}
	var pe *ProtocolError
	if !errors.As(q.Err(), &pe) || q.C.BadRQDBR.Load() != 1 {
		t.Fatalf("err %v, BadRQDBR %d: want a ProtocolError", q.Err(), q.C.BadRQDBR.Load())
	}
}

func TestHostOrderCQDoorbellFlagged(t *testing.T) {
	d, q := newMini(t, 7, 6)
	d.post(64)
	for i := 0; i < 3; i++ {
		q.Deliver(frame(i))
	}
	for d.next(t) != nil {
	}
	prm.StoreDBRHost(d.r.CQDBR, 0, d.ci) // 3 in host order reads as 0x03000000
	if q.Deliver(frame(9)) != Overrun || q.C.BadCI.Load() == 0 {
		t.Fatalf("bad CI not flagged: BadCI %d, err %v", q.C.BadCI.Load(), q.Err())
	}
}

func TestScatterErrors(t *testing.T) {
	d, q := newMini(t, 7, 6)
	d.post(2)
	big := make([]byte, 3000)
	if q.Deliver(big) != ErrorCQE || q.C.Errors.Load() != 1 {
		t.Fatal("oversized frame did not complete with an error CQE")
	}
	c := d.r.CQ[:64]
	if _, op := prm.OwnerWord(prm.LoadWord(c, 0x3c)); prm.Opcode(op) != prm.CQERespErr || c[prm.CQEOffSyndrome] != prm.SyndLocalLength {
		t.Fatalf("op_own %#x syndrome %#x", op, c[prm.CQEOffSyndrome])
	}
	// A WQE pointing outside the MR: local protection error.
	prm.PutBE64(d.r.RQ[16:], 8, 1<<40)
	if q.Deliver(frame(0)) != ErrorCQE || d.r.CQ[64+prm.CQEOffSyndrome] != prm.SyndLocalProt {
		t.Fatal("unregistered address did not give a protection error")
	}
}

func TestSessionLayout(t *testing.T) {
	d, q := newMini(t, 7, 6)
	q.Poison = true
	d.post(64)
	fs := make([][]byte, 20)
	for i := range fs {
		fs[i] = frame(i)
	}
	if n := q.DeliverBurst(fs, true, 64); n != 20 {
		t.Fatalf("placed %d", n)
	}
	c := d.r.CQ
	_, op := prm.OwnerWord(prm.LoadWord(c, 0x3c))
	if op != prm.OpOwnTitle || prm.BE32(c, prm.CQEOffByteCnt) != 20 {
		t.Fatalf("title op_own %#x count %d", op, prm.BE32(c, prm.CQEOffByteCnt))
	}
	// mini-CQE k lives in slot MiniArraySlot(k/8), entry k%8.
	for k := uint32(0); k < 20; k++ {
		s := c[prm.MiniArraySlot(k/8)*64:]
		if got := prm.BE32(s, int(k%8)*8+prm.MiniOffByteCnt); got != uint32(len(fs[k])) {
			t.Fatalf("mini %d byte_cnt %d, want %d", k, got, len(fs[k]))
		}
	}
	// Slot 2 is a hole, poisoned to look like a good CQE of its pass.
	if _, op := prm.OwnerWord(prm.LoadWord(c[2*64:], 0x3c)); !prm.SWOwned(op, 2, 7) {
		t.Fatalf("hole not poisoned: %#x", op)
	}
	if q.C.Sessions.Load() != 1 || q.C.Compressed.Load() != 20 {
		t.Fatal("session counters")
	}
}
