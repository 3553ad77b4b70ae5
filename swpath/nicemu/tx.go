package nicemu

import (
	"sync/atomic"

	"github.com/scrubd/scrubd/swpath/dv/prm"
)

// TxCounters are a send queue's device-side counters.
type TxCounters struct {
	Frames   atomic.Uint64 // frames sent
	Bytes    atomic.Uint64
	CQEs     atomic.Uint64 // send CQEs written
	Doorbell atomic.Uint64 // doorbells seen (UAR writes that moved the queue)
	BadDB    atomic.Uint64 // UAR word or doorbell record inconsistent
	BadWQE   atomic.Uint64 // malformed send WQE
	BadCI    atomic.Uint64 // send CQ consumer index ahead of producer
}

// TxQueue is the device side of one raw-packet send queue and its CQ.
// Service is called from one goroutine at a time.
type TxQueue struct {
	name   string
	r      *prm.TxRings
	mem    *Memory
	sqMask uint32
	cqMask uint32
	cons   uint32 // send WQE basic blocks consumed
	pi     uint32 // send CQ producer
	sink   func([]byte)
	frame  []byte

	C   TxCounters
	err atomic.Pointer[ProtocolError]
}

// NewTxQueue attaches the device side to r. Every frame sent is passed to
// sink (which must not keep the slice), if sink is not nil. start sets the
// WQE and CQ counters, as for NewRxQueue.
func NewTxQueue(name string, r *prm.TxRings, mem *Memory, start uint32, sink func([]byte)) (*TxQueue, error) {
	if err := r.Validate(); err != nil {
		return nil, err
	}
	return &TxQueue{
		name: name, r: r, mem: mem, sink: sink,
		sqMask: 1<<r.SQLog2 - 1, cqMask: 1<<r.CQLog2 - 1,
		cons: start, pi: start, frame: make([]byte, 0, 16384),
	}, nil
}

// Err returns the first protocol error seen, or nil.
func (q *TxQueue) Err() error {
	if e := q.err.Load(); e != nil {
		return e
	}
	return nil
}

func (q *TxQueue) flag(c *atomic.Uint64, what string, v, limit uint32) {
	c.Add(1)
	q.err.CompareAndSwap(nil, &ProtocolError{Queue: q.name, What: what, Value: v, Limit: limit})
}

// rung returns how many basic blocks the newest UAR doorbell covers beyond
// those consumed. The doorbell is the first 8 bytes of the last WQE's
// control segment, written to one of two BlueFlame halves alternately
// (rdma-core post_send_db: bf->offset ^= bf->buf_size).
func (q *TxQueue) rung() uint32 {
	best := uint32(0)
	for half := 0; half < 2; half++ {
		w := prm.Load64(q.r.UAR, half*q.r.BFSize)
		if w == 0 {
			continue
		}
		opIdx, qpnDS := uint32(w>>32), uint32(w)
		if qpnDS>>8 != q.r.QPN {
			q.flag(&q.C.BadDB, "doorbell names another QP", qpnDS>>8, q.r.QPN)
			continue
		}
		idx := opIdx >> 8 & 0xffff
		// The doorbell names the WQE starting at idx; it ends one block
		// later for every WQE this driver posts (ds <= 4); a longer WQE is
		// measured when it is consumed.
		d := (idx + 1 - q.cons) & 0xffff
		if d >= 1 && d <= q.sqMask+1 && d > best {
			best = d
		}
	}
	return best
}

func (q *TxQueue) cqSpace() uint32 {
	ci := prm.LoadDBR(q.r.CQDBR, prm.CQDBRSetCI) & prm.CQCIMask
	used := (q.pi - ci) & prm.CQCIMask
	if used > q.cqMask+1 {
		q.flag(&q.C.BadCI, "send CQ consumer index runs ahead of the producer", ci, q.pi&prm.CQCIMask)
		return 0
	}
	return q.cqMask + 1 - used
}

// Service consumes the send WQEs the doorbell announced, sends their
// frames and writes the requested send CQEs. It returns the frames sent.
func (q *TxQueue) Service() int {
	d := q.rung()
	if d == 0 {
		return 0
	}
	// The driver writes the doorbell record before the UAR (rdma-core
	// post_send_db); a UAR naming WQEs the record does not cover is a
	// driver bug.
	posted := prm.LoadDBR(q.r.QPDBR, prm.SQDBROff)
	if (posted-q.cons)&0xffff < d || (posted-q.cons)&0xffff > q.sqMask+1 {
		q.flag(&q.C.BadDB, "UAR doorbell ahead of the SQ doorbell record (order or byte order)", posted, q.cons+d)
		return 0
	}
	q.C.Doorbell.Add(1)
	end := q.cons + d
	sent := 0
	for int32(end-q.cons) > 0 {
		bbs, ok := q.consume()
		if !ok {
			return sent
		}
		q.cons += bbs
		sent++
	}
	return sent
}

// consume handles the WQE at q.cons and returns its size in basic blocks.
func (q *TxQueue) consume() (uint32, bool) {
	w := q.r.SQ[int(q.cons&q.sqMask)*prm.SendWQEBB:][:prm.SendWQEBB]
	opIdx := prm.BE32(w, prm.CtrlOffOpIdx)
	qpnDS := prm.BE32(w, prm.CtrlOffQPNDS)
	ds := qpnDS & 0x3f
	if opIdx&0xff != prm.OpcodeSend || opIdx>>8&0xffff != q.cons&0xffff || qpnDS>>8 != q.r.QPN || ds < 2 || ds > 4 {
		q.flag(&q.C.BadWQE, "malformed send WQE (opcode, index, qpn or ds)", opIdx, q.cons&0xffff)
		return 0, false
	}
	signaled := w[prm.CtrlOffFmCeSe]&prm.CtrlCQUpdate != 0
	if signaled && q.cqSpace() == 0 {
		// Real hardware would overrun the send CQ. The driver sizes it to
		// the SQ and polls it every burst, so wait for room instead.
		return 0, false
	}
	eth := w[prm.CtrlSegSize:]
	inl := uint32(prm.BE16(eth, prm.EthOffInlSz))
	if inl > prm.EthInlineSize {
		q.flag(&q.C.BadWQE, "inline header longer than the eth segment holds", inl, prm.EthInlineSize)
		return 0, false
	}
	f := append(q.frame[:0], eth[prm.EthOffInlStart:prm.EthOffInlStart+inl]...)
	if ds == 4 {
		seg := w[prm.CtrlSegSize+prm.EthSegSize:]
		n := prm.BE32(seg, prm.DataSegOffCount)
		buf := q.mem.translate(prm.BE32(seg, prm.DataSegOffLKey), prm.BE64(seg, prm.DataSegOffAddr), n)
		if buf == nil {
			q.flag(&q.C.BadWQE, "send data segment outside every registered region", n, 0)
			return 0, false
		}
		f = append(f, buf...)
	}
	q.frame = f
	q.C.Frames.Add(1)
	q.C.Bytes.Add(uint64(len(f)))
	if q.sink != nil {
		q.sink(f)
	}
	if signaled {
		c := q.r.CQ[int(q.pi&q.cqMask)*prm.CQESize:][:prm.CQESize]
		prm.PutBE32(c, prm.CQEOffByteCnt, 0)
		prm.PutBE32(c, prm.CQEOffSopQPN, q.r.QPN)
		prm.StoreWord(c, prm.CQEOffWQECnt, prm.MakeOwnerWord(uint16(q.cons), prm.CQEReq<<prm.OpcodeShift|uint8(q.pi>>q.r.CQLog2)&1))
		q.pi++
		q.C.CQEs.Add(1)
	}
	return 1, true
}
