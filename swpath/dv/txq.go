package dv

import (
	"encoding/binary"
	"fmt"

	"github.com/scrubd/scrubd/swpath/barrier"
	"github.com/scrubd/scrubd/swpath/dv/prm"
	"github.com/scrubd/scrubd/swpath/pool"
)

// TxStats are the send queue's own counters.
type TxStats struct {
	ErrCQEs   uint64 // send completions with an error opcode
	Doorbells uint64
}

// TxQueue is the driver side of one raw-packet send queue and its CQ. A
// send WQE is one 64-byte basic block: a control segment, an Ethernet
// segment with the first 18 bytes of the frame inlined, and one data
// segment for the rest of the buffer. Only the last WQE of each doorbell
// asks for a completion; its CQE returns every buffer up to it. One
// goroutine per queue; not safe for concurrent use.
type TxQueue struct {
	sq      []byte
	sqMask  uint32
	qpDBR   []byte
	uar     []byte
	bfOff   int
	bfSize  int
	qpn     uint32
	cq      []byte
	cqLog2  uint
	cqMask  uint32
	cqDBR   []byte
	arena   Arena
	arenaVA uint64
	lkey    uint32

	pi      uint32 // WQEs posted
	rung    uint32 // pi at the last doorbell
	cons    uint32 // WQEs completed
	ci      uint32 // send CQ consumer index
	shadow  []uint32
	lastWQE int // byte offset of the last posted WQE

	Stats TxStats
}

// NewTxQueue binds the driver side to send rings r; buffers are in arena
// under lkey. start is the initial WQE and CQ counter.
func NewTxQueue(r *prm.TxRings, arena Arena, lkey uint32, start uint32) (*TxQueue, error) {
	if err := r.Validate(); err != nil {
		return nil, err
	}
	if r.CQLog2 < r.SQLog2 {
		return nil, fmt.Errorf("dv: send CQ of 2^%d entries for an SQ of 2^%d: want at least as many", r.CQLog2, r.SQLog2)
	}
	prm.StoreDBR(r.CQDBR, prm.CQDBRSetCI, start&prm.CQCIMask)
	prm.StoreDBR(r.QPDBR, prm.SQDBROff, start&0xffff)
	t := &TxQueue{
		sq: r.SQ, sqMask: 1<<r.SQLog2 - 1, qpDBR: r.QPDBR, uar: r.UAR, bfSize: r.BFSize, qpn: r.QPN,
		cq: r.CQ, cqLog2: r.CQLog2, cqMask: 1<<r.CQLog2 - 1, cqDBR: r.CQDBR,
		arena: arena, arenaVA: prm.Addr(arena.Mem), lkey: lkey,
		pi: start, rung: start, cons: start, ci: start,
		shadow: make([]uint32, 1<<r.SQLog2),
	}
	t.initWQEs()
	return t, nil
}

// initWQEs writes the fields of every send WQE that never change (the
// signature, stream, immediate, the Ethernet segment's offload words and
// the data segment's lkey) once, so that Post writes only what differs
// from packet to packet, as the RQ's byte count and lkey are set once.
// Only this queue writes the SQ; the device only reads it.
func (t *TxQueue) initWQEs() {
	for slot := 0; slot <= int(t.sqMask); slot++ {
		off := slot << prm.SendWQEShift
		w := t.sq[off : off+prm.SendWQEBB : off+prm.SendWQEBB]
		w[prm.CtrlOffSig] = 0
		w[prm.CtrlOffStream] = 0
		w[prm.CtrlOffStream+1] = 0
		prm.PutBE32(w, prm.CtrlOffImm, 0)
		// Ethernet segment: no offloads.
		e := w[prm.CtrlSegSize : prm.CtrlSegSize+prm.EthSegSize]
		prm.PutBE32(e, 0, 0)
		prm.PutBE32(e, prm.EthOffCsFlags, 0) // cs_flags, rsvd1, mss
		prm.PutBE32(e, 8, 0)
		d := w[prm.CtrlSegSize+prm.EthSegSize:]
		prm.PutBE32(d, prm.DataSegOffLKey, t.lkey)
	}
}

// Space returns how many WQEs can be posted now.
func (t *TxQueue) Space() int { return int(t.sqMask + 1 - (t.pi - t.cons)) }

// Outstanding returns how many posted WQEs still hold buffers.
func (t *TxQueue) Outstanding() int { return int(t.pi - t.cons) }

// Post writes a send WQE for buffer buf holding frame (a prefix of the
// buffer). The caller checks Space first. The device sees nothing until
// Ring.
func (t *TxQueue) Post(buf uint32, frame []byte) {
	slot := t.pi & t.sqMask
	off := int(slot) << prm.SendWQEShift
	w := t.sq[off : off+prm.SendWQEBB : off+prm.SendWQEBB]
	inl := min(len(frame), prm.EthInlineSize)
	ds := uint32(prm.SendDS)
	if len(frame) <= prm.EthInlineSize {
		ds-- // everything inlined: no data segment
	}
	// Control segment (mlx5dv_set_ctrl_seg): index, opcode, qpn, size;
	// signature, stream and immediate were set by initWQEs.
	prm.PutBE32(w, prm.CtrlOffOpIdx, (t.pi&0xffff)<<8|prm.OpcodeSend)
	prm.PutBE32(w, prm.CtrlOffQPNDS, t.qpn<<8|ds)
	w[prm.CtrlOffFmCeSe] = 0 // Ring sets CQ_UPDATE on the last WQE
	// Ethernet segment (offload words zero since initWQEs): the L2 header
	// inlined.
	e := w[prm.CtrlSegSize : prm.CtrlSegSize+prm.EthSegSize]
	prm.PutBE16(e, prm.EthOffInlSz, uint16(inl))
	inline := e[prm.EthOffInlStart : prm.EthOffInlStart+prm.EthInlineSize]
	if len(frame) >= prm.EthInlineSize {
		// 18 bytes as three fixed-size moves, not a memmove call.
		binary.LittleEndian.PutUint64(inline[0:8], binary.LittleEndian.Uint64(frame[0:8]))
		binary.LittleEndian.PutUint64(inline[8:16], binary.LittleEndian.Uint64(frame[8:16]))
		binary.LittleEndian.PutUint16(inline[16:18], binary.LittleEndian.Uint16(frame[16:18]))
	} else {
		copy(inline, frame[:inl])
	}
	if ds == prm.SendDS {
		// Data segment (lkey set by initWQEs): the rest of the frame.
		d := w[prm.CtrlSegSize+prm.EthSegSize:]
		prm.PutBE32(d, prm.DataSegOffCount, uint32(len(frame)-inl))
		prm.PutBE64(d, prm.DataSegOffAddr, t.arenaVA+uint64(t.arena.Offset(buf)+inl))
	}
	t.shadow[slot] = buf
	t.lastWQE = off
	t.pi++
}

// Ring publishes the WQEs posted since the last Ring: the last one asks
// for a completion, then the doorbell record and the BlueFlame doorbell,
// in rdma-core's order (qp.c post_send_db).
func (t *TxQueue) Ring() {
	if t.pi == t.rung {
		return
	}
	t.sq[t.lastWQE+prm.CtrlOffFmCeSe] = prm.CtrlCQUpdate
	// WQEs before the doorbell record (post_send_db:
	// udma_to_device_barrier, "descriptors are written before updating
	// doorbell record and ringing the doorbell").
	barrier.ToDevice()
	prm.StoreDBR(t.qpDBR, prm.SQDBROff, t.pi&0xffff)
	// The record before the write-combining doorbell (mmio_wc_start).
	barrier.WCStart()
	// The first 8 bytes of the last WQE's control segment to the
	// BlueFlame register (mmio_write64_be(bf->reg + bf->offset, ctrl)).
	prm.Copy64(t.uar, t.bfOff, t.sq, t.lastWQE)
	// Flush the write-combining buffer so the doorbell leaves the CPU now
	// (mmio_flush_writes), then switch BlueFlame halves
	// (bf->offset ^= bf->buf_size).
	barrier.FlushWC()
	t.bfOff ^= t.bfSize
	t.rung = t.pi
	t.Stats.Doorbells++
}

// Reap polls the send CQ and returns the buffers of completed WQEs to
// bufs. It returns how many WQEs completed.
func (t *TxQueue) Reap(bufs *pool.Cache) int {
	done := 0
	for {
		// Owner words first, one from-device barrier per run (as receive).
		run := uint32(0)
		for ; run <= t.cqMask; run++ {
			i := t.ci + run
			w := prm.LoadWord(t.cq, int(i&t.cqMask)<<prm.CQELog2Size+prm.CQEOffWQECnt)
			if !prm.SWOwned(uint8(w>>24), i, t.cqLog2) {
				break
			}
		}
		if run == 0 {
			break
		}
		barrier.FromDevice()
		for k := uint32(0); k < run; k++ {
			off := int(t.ci&t.cqMask) << prm.CQELog2Size
			counter, op := prm.OwnerWord(prm.LoadWord(t.cq, off+prm.CQEOffWQECnt))
			if prm.Opcode(op) != prm.CQEReq {
				t.Stats.ErrCQEs++
			}
			// The CQE names the last WQE it completes; every WQE up to it
			// is done (signalled only at the end of each doorbell batch).
			upto := uint32(counter-uint16(t.cons)) + 1
			if upto > t.pi-t.cons {
				upto = t.pi - t.cons // a counter we never posted: free what is out
				t.Stats.ErrCQEs++
			}
			done += int(upto)
			for upto > 0 {
				s := t.cons & t.sqMask
				chunk := min(upto, t.sqMask+1-s)
				_ = bufs.FreeBatch(t.shadow[s : s+chunk])
				t.cons += chunk
				upto -= chunk
			}
			t.ci++
		}
		// The consumer index (rdma-core cq.c update_cons_index, a plain
		// store with no barrier of its own); the to-device barrier before
		// it is DPDK's, as on the receive side.
		barrier.ToDevice()
		prm.StoreDBR(t.cqDBR, prm.CQDBRSetCI, t.ci&prm.CQCIMask)
	}
	return done
}

// Release returns the buffers of WQEs still outstanding, for shutdown
// after the device stopped.
func (t *TxQueue) Release(bufs *pool.Cache) int {
	n := 0
	for t.cons != t.pi {
		_ = bufs.Free(t.shadow[t.cons&t.sqMask])
		t.cons++
		n++
	}
	return n
}
