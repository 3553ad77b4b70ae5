package nicemu

import (
	"bytes"
	"testing"

	"github.com/scrubd/scrubd/swpath/dv/prm"
)

// postSend writes one send WQE at index idx for frame, which sits at the
// start of arena, and optionally rings the doorbell.
func postSend(r *prm.TxRings, arena []byte, idx uint32, frame []byte) {
	w := r.SQ[int(idx&(1<<r.SQLog2-1))*64:][:64]
	prm.PutBE32(w, prm.CtrlOffOpIdx, (idx&0xffff)<<8|prm.OpcodeSend)
	prm.PutBE32(w, prm.CtrlOffQPNDS, r.QPN<<8|prm.SendDS)
	w[prm.CtrlOffFmCeSe] = prm.CtrlCQUpdate
	e := w[16:48]
	prm.PutBE16(e, prm.EthOffInlSz, prm.EthInlineSize)
	copy(e[prm.EthOffInlStart:], frame[:prm.EthInlineSize])
	d := w[48:]
	prm.PutBE32(d, 0, uint32(len(frame)-prm.EthInlineSize))
	prm.PutBE32(d, 4, 9)
	prm.PutBE64(d, 8, prm.Addr(arena)+prm.EthInlineSize)
}

func newTx(t *testing.T) (*prm.TxRings, []byte, *TxQueue, *[][]byte) {
	r := prm.NewTxRings(4, 4, 0x77)
	arena := prm.Alloc(4096)
	mem := &Memory{}
	mem.Register(9, arena)
	var sent [][]byte
	q, err := NewTxQueue("tx", r, mem, 0, func(f []byte) { sent = append(sent, bytes.Clone(f)) })
	if err != nil {
		t.Fatal(err)
	}
	return r, arena, q, &sent
}

func TestSendAndComplete(t *testing.T) {
	r, arena, q, sent := newTx(t)
	frame := frame(5)
	copy(arena, frame)
	postSend(r, arena, 0, frame)
	postSend(r, arena, 1, frame)
	prm.StoreDBR(r.QPDBR, prm.SQDBROff, 2)
	prm.Copy64(r.UAR, 0, r.SQ, 64) // doorbell names WQE 1
	if n := q.Service(); n != 2 || len(*sent) != 2 || !bytes.Equal((*sent)[1], frame) {
		t.Fatalf("sent %d frames %x", n, *sent)
	}
	// Both WQEs asked for a completion: two send CQEs, opcode REQ.
	for i := 0; i < 2; i++ {
		ctr, op := prm.OwnerWord(prm.LoadWord(r.CQ[i*64:], 0x3c))
		if prm.Opcode(op) != prm.CQEReq || ctr != uint16(i) || op&1 != 0 {
			t.Fatalf("CQE %d: counter %d op_own %#x", i, ctr, op)
		}
	}
	if q.Service() != 0 {
		t.Fatal("the same doorbell sent twice")
	}
	if err := q.Err(); err != nil {
		t.Fatal(err)
	}
}

func TestSendDoorbellOrderFlagged(t *testing.T) {
	r, arena, q, sent := newTx(t)
	f := frame(1)
	copy(arena, f)
	postSend(r, arena, 0, f)
	// UAR rung, but the doorbell record written in host byte order.
	prm.StoreDBRHost(r.QPDBR, prm.SQDBROff, 1)
	prm.Copy64(r.UAR, 0, r.SQ, 0)
	if q.Service() != 0 || len(*sent) != 0 || q.C.BadDB.Load() == 0 || q.Err() == nil {
		t.Fatalf("host-order SQ doorbell record not flagged: sent %d, BadDB %d", len(*sent), q.C.BadDB.Load())
	}
}

func TestMalformedWQEFlagged(t *testing.T) {
	r, arena, q, _ := newTx(t)
	f := frame(1)
	postSend(r, arena, 0, f)
	prm.StoreDBR(r.QPDBR, prm.SQDBROff, 1)
	prm.Copy64(r.UAR, 0, r.SQ, 0)
	prm.PutBE32(r.SQ, prm.CtrlOffOpIdx, 7<<8|prm.OpcodeSend) // then corrupt its index
	if q.Service() != 0 || q.C.BadWQE.Load() != 1 || q.Err() == nil {
		t.Fatalf("malformed WQE not refused: BadWQE %d, err %v", q.C.BadWQE.Load(), q.Err())
	}
}
