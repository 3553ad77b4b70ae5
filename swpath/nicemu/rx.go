package nicemu

import (
	"fmt"
	"math/bits"
	"math/rand/v2"
	"runtime"
	"sync/atomic"

	"github.com/scrubd/scrubd/swpath/dv/prm"
)

// RxCounters are a receive queue's device-side counters. They are read
// with atomic loads while the device runs.
type RxCounters struct {
	Delivered   atomic.Uint64 // packets placed with a good CQE (regular or mini)
	OutOfBuffer atomic.Uint64 // no posted WQE (mlx5 rx_out_of_buffer)
	CQOverrun   atomic.Uint64 // CQ full: packet dropped, protocol error
	Errors      atomic.Uint64 // packets completed with an error CQE
	Sessions    atomic.Uint64 // compressed sessions emitted
	Compressed  atomic.Uint64 // packets delivered as mini-CQEs
	BadCI       atomic.Uint64 // CQ doorbell record ahead of the producer
	BadRQDBR    atomic.Uint64 // RQ doorbell record beyond the ring
}

// ProtocolError describes the first protocol violation a queue saw.
type ProtocolError struct {
	Queue string
	What  string
	Value uint32
	Limit uint32
}

func (e *ProtocolError) Error() string {
	return fmt.Sprintf("nicemu: %s: %s (value 0x%x, limit 0x%x)", e.Queue, e.What, e.Value, e.Limit)
}

// RxQueue is the device side of one receive queue (a CQ and a cyclic RQ).
// Its delivering methods are called from one goroutine at a time (the
// Emulator's, or a benchmark's while the engine is stopped); counters and
// Err may be read from any goroutine.
type RxQueue struct {
	name    string
	r       *prm.RxRings
	mem     *Memory
	cqMask  uint32
	rqMask  uint32
	pi      uint32 // CQ producer counter
	wqeCons uint32 // WQEs consumed
	// FlowTag is written into every CQE (bits 23:0 of sop_drop_qpn), as a
	// steering rule with an ibv_flow_spec_action_tag would.
	FlowTag uint32
	// Poison makes compressed sessions write a CQE that looks valid for the
	// slot's pass into each hole, so a driver that does not invalidate
	// holes reads garbage on a later pass.
	Poison bool

	jitter *rand.Rand // set by an Emulator with Pace: random yields

	C   RxCounters
	err atomic.Pointer[ProtocolError]
}

// NewRxQueue attaches the device side to r. start sets both the CQ
// producer and the WQE consumer counters, so tests can begin near the
// 24-bit CQ-index and 16-bit WQE-counter wraps; the driver must be started
// with the same value.
func NewRxQueue(name string, r *prm.RxRings, mem *Memory, start uint32) (*RxQueue, error) {
	if err := r.Validate(); err != nil {
		return nil, err
	}
	return &RxQueue{
		name: name, r: r, mem: mem,
		cqMask: 1<<r.CQLog2 - 1, rqMask: 1<<r.RQLog2 - 1,
		pi: start, wqeCons: start,
	}, nil
}

// Err returns the first protocol error seen, or nil.
func (q *RxQueue) Err() error {
	if e := q.err.Load(); e != nil {
		return e
	}
	return nil
}

func (q *RxQueue) flag(c *atomic.Uint64, what string, v, limit uint32) {
	c.Add(1)
	q.err.CompareAndSwap(nil, &ProtocolError{Queue: q.name, What: what, Value: v, Limit: limit})
}

// cqSpace returns how many CQEs may be written now, after checking the CQ
// doorbell record (the consumer index rdma-core cq.c update_cons_index
// stores, big-endian, 24 bits).
func (q *RxQueue) cqSpace() uint32 {
	v := prm.LoadDBR(q.r.CQDBR, prm.CQDBRSetCI)
	if v>>24 != 0 {
		// rdma-core stores htobe32(ci & 0xffffff): the top byte is always
		// zero. A set top byte is a host-order store (VPP before
		// 3214ba59e30).
		q.flag(&q.C.BadCI, "CQ doorbell record has bits 31:24 set (host byte order?)", v, prm.CQCIMask)
		return 0
	}
	ci := v & prm.CQCIMask
	used := (q.pi - ci) & prm.CQCIMask
	n := q.cqMask + 1
	if used > n {
		q.flag(&q.C.BadCI, "CQ consumer index runs ahead of the producer (byte order?)", ci, q.pi&prm.CQCIMask)
		return 0
	}
	return n - used
}

// posted returns how many WQEs the RQ doorbell record announces beyond
// those consumed (the counter rdma-core qp.c mlx5_post_wq_recv stores).
// Only bits 15:0 count.
func (q *RxQueue) posted() uint32 {
	raw := prm.LoadDBR(q.r.RQDBR, prm.RQDBROff)
	avail := (raw - q.wqeCons) & prm.WQCounterMsk
	if avail > q.rqMask+1 {
		q.flag(&q.C.BadRQDBR, "RQ doorbell record beyond the ring (wrong byte order?)", raw, q.wqeCons&prm.WQCounterMsk)
		return 0
	}
	if avail == 0 && raw>>16 != 0 {
		// Nothing new in bits 15:0, but high bits set: if the byte-swapped
		// value would announce WQEs, the driver stored its counter in host
		// order. (rdma-core masks the counter to 16 bits; VPP stores it
		// unmasked, so high bits alone prove nothing.)
		if alt := (bits.ReverseBytes32(raw) - q.wqeCons) & prm.WQCounterMsk; alt != 0 && alt <= q.rqMask+1 {
			q.flag(&q.C.BadRQDBR, "RQ doorbell record in host byte order", raw, q.wqeCons&prm.WQCounterMsk)
		}
	}
	return avail
}

// Ready reports whether one packet would be placed now (a WQE posted and a
// CQE free). Backpressured senders wait on it instead of dropping.
func (q *RxQueue) Ready() bool { return q.posted() > 0 && q.cqSpace() > 0 }

// Outcome is what happened to one delivered packet.
type Outcome uint8

const (
	Placed      Outcome = iota // good CQE
	OutOfBuffer                // no WQE: dropped
	Overrun                    // no CQE space: dropped, protocol error
	ErrorCQE                   // completed with an error CQE
)

// scatter copies frame into the WQE at index w and returns the error
// syndrome, or 0 (§6 step 3).
func (q *RxQueue) scatter(w uint32, frame []byte) uint8 {
	wqe := q.r.RQ[int(w&q.rqMask)*q.r.RQStride:][:q.r.RQStride]
	rest := frame
	for off := 0; off+prm.DataSegSize <= len(wqe); off += prm.DataSegSize {
		cnt := prm.BE32(wqe, off+prm.DataSegOffCount)
		if cnt == 0 {
			break
		}
		if len(rest) == 0 {
			return 0
		}
		lkey := prm.BE32(wqe, off+prm.DataSegOffLKey)
		addr := prm.BE64(wqe, off+prm.DataSegOffAddr)
		buf := q.mem.translate(lkey, addr, cnt)
		if buf == nil {
			return prm.SyndLocalProt
		}
		rest = rest[copy(buf, rest):]
	}
	if len(rest) != 0 {
		return prm.SyndLocalLength
	}
	return 0
}

func (q *RxQueue) slot(i uint32) []byte {
	return q.r.CQ[int(i&q.cqMask)*prm.CQESize:][:prm.CQESize]
}

func (q *RxQueue) owner(i uint32) uint8 { return uint8(i>>q.r.CQLog2) & 1 }

// writeBody fills the body of a receive CQE with plain stores (§6 step 4).
func (q *RxQueue) writeBody(c []byte, m meta, byteCnt uint32) {
	prm.PutBE32(c, prm.CQEOffRxHash, m.hash)
	c[prm.CQEOffHashTyp] = 0
	c[prm.CQEOffHdsIP] = m.hdsIP
	c[prm.CQEOffL4L3] = m.l4l3
	prm.PutBE16(c, prm.CQEOffVLAN, 0)
	prm.PutBE32(c, prm.CQEOffByteCnt, byteCnt)
	prm.PutBE32(c, prm.CQEOffSopQPN, q.FlowTag&prm.FlowTagMask)
}

// Deliver places one packet as a regular CQE, or drops it.
func (q *RxQueue) Deliver(frame []byte) Outcome {
	if q.cqSpace() == 0 {
		q.flag(&q.C.CQOverrun, "CQ overrun: no free CQE", q.pi, q.cqMask+1)
		return Overrun
	}
	if q.posted() == 0 {
		q.C.OutOfBuffer.Add(1)
		return OutOfBuffer
	}
	return q.placeOne(frame, parseMeta(frame))
}

func (q *RxQueue) placeOne(frame []byte, m meta) Outcome {
	c := q.slot(q.pi)
	out := Placed
	if synd := q.scatter(q.wqeCons, frame); synd != 0 {
		// Error CQE (struct mlx5_err_cqe): syndrome at 0x37.
		c[prm.CQEOffVendorSynd] = 0
		c[prm.CQEOffSyndrome] = synd
		prm.PutBE32(c, prm.CQEOffByteCnt, 0)
		prm.StoreWord(c, prm.CQEOffWQECnt, prm.MakeOwnerWord(uint16(q.wqeCons), prm.CQERespErr<<prm.OpcodeShift|q.owner(q.pi)))
		q.C.Errors.Add(1)
		out = ErrorCQE
	} else {
		q.writeBody(c, m, uint32(len(frame)))
		if q.jitter != nil && q.jitter.IntN(8) == 0 {
			runtime.Gosched() // let the driver poll between body and owner
		}
		// Publish last (§6 step 5): one release store of the owner word.
		prm.StoreWord(c, prm.CQEOffWQECnt, prm.MakeOwnerWord(uint16(q.wqeCons), prm.OpOwnRespSend|q.owner(q.pi)))
		q.C.Delivered.Add(1)
	}
	q.pi++
	q.wqeCons++
	return out
}

// DeliverBurst places frames in order, as regular CQEs or, when compress
// is set, as compressed sessions of up to maxSession packets that share
// their title fields (runs of one stay regular). It returns how many were
// placed with a good CQE; the rest are counted as out-of-buffer, overrun
// or error.
func (q *RxQueue) DeliverBurst(frames [][]byte, compress bool, maxSession int) int {
	placed := 0
	for i := 0; i < len(frames); {
		m := parseMeta(frames[i])
		n := 1
		if compress {
			for i+n < len(frames) && n < maxSession && parseMeta(frames[i+n]).title() == m.title() {
				n++
			}
		}
		if n >= 2 {
			k := q.deliverSession(frames[i:i+n], m)
			placed += k
			if k >= 2 {
				i += k
				continue
			}
			// Not enough room for a session: fall through to one regular
			// CQE for frames[i] (k == 0 here).
		}
		if q.Deliver(frames[i]) == Placed {
			placed++
		}
		i++
	}
	return placed
}

// deliverSession writes one compressed session (the layout DPDK
// drivers/net/mlx5/mlx5_rx.c mlx5_rx_poll_len and VPP
// src/plugins/rdma/input.c process_mini_cqes read) for as many of frames
// as fit, and returns that number (0 when fewer than 2 fit; nothing is
// written then).
func (q *RxQueue) deliverSession(frames [][]byte, title meta) int {
	n := uint32(len(frames))
	if sp := q.cqSpace(); n > sp {
		n = sp
	}
	if p := q.posted(); n > p {
		n = p
	}
	// A packet whose scatter would fail cannot be a mini-CQE; end before it.
	for i := uint32(0); i < n; i++ {
		if !q.fits(q.wqeCons+i, len(frames[i])) {
			n = i
			break
		}
	}
	if n < 2 {
		return 0
	}
	c0 := q.pi
	var arr [prm.CQESize]byte
	for i := uint32(0); i < n; i++ {
		q.scatter(q.wqeCons+i, frames[i])
		m := parseMeta(frames[i])
		e := arr[(i%prm.MiniPerSlot)*prm.MiniCQESize:]
		prm.PutBE32(e, prm.MiniOffRxHash, m.hash)
		prm.PutBE32(e, prm.MiniOffByteCnt, uint32(len(frames[i])))
		if i%prm.MiniPerSlot == prm.MiniPerSlot-1 || i == n-1 {
			j := i / prm.MiniPerSlot
			s := q.slot(c0 + prm.MiniArraySlot(j))
			used := int(i%prm.MiniPerSlot+1) * prm.MiniCQESize
			copy(s[:min(used, prm.CQEOffWQECnt)], arr[:])
			if used == prm.CQESize {
				// The last mini-CQE overlaps the owner word: store it
				// atomically like every access to that word.
				prm.StoreWord(s, prm.CQEOffWQECnt, uint32(arr[60])|uint32(arr[61])<<8|uint32(arr[62])<<16|uint32(arr[63])<<24)
			}
			arr = [prm.CQESize]byte{}
		}
	}
	if q.Poison {
		arrays := (n - 1) / prm.MiniPerSlot
		for k := uint32(1); k < n; k++ {
			if k == 1 || (k%8 == 0 && k/8 <= arrays) {
				continue
			}
			// A hole: make it look like a good CQE of its own pass.
			prm.StoreWord(q.slot(c0+k), prm.CQEOffWQECnt, prm.MakeOwnerWord(0xdead, prm.OpOwnRespSend|q.owner(c0+k)))
		}
	}
	t := q.slot(c0)
	q.writeBody(t, title, n) // byte_cnt of a title = number of mini-CQEs
	prm.StoreWord(t, prm.CQEOffWQECnt, prm.MakeOwnerWord(uint16(q.wqeCons), prm.OpOwnTitle|q.owner(c0)))
	q.pi += n
	q.wqeCons += n
	q.C.Delivered.Add(uint64(n))
	q.C.Compressed.Add(uint64(n))
	q.C.Sessions.Add(1)
	return int(n)
}

// fits reports whether a frame of n bytes scatters into WQE w.
func (q *RxQueue) fits(w uint32, n int) bool {
	wqe := q.r.RQ[int(w&q.rqMask)*q.r.RQStride:][:q.r.RQStride]
	for off := 0; off+prm.DataSegSize <= len(wqe) && n > 0; off += prm.DataSegSize {
		cnt := prm.BE32(wqe, off+prm.DataSegOffCount)
		if cnt == 0 {
			break
		}
		if q.mem.translate(prm.BE32(wqe, off+prm.DataSegOffLKey), prm.BE64(wqe, off+prm.DataSegOffAddr), cnt) == nil {
			return false
		}
		n -= int(cnt)
	}
	return n <= 0
}

// InjectError completes the next posted WQE with an error CQE of the given
// syndrome, as the device does for a bad WQE. It reports whether a WQE and
// a CQE were available.
func (q *RxQueue) InjectError(synd uint8) bool {
	if q.cqSpace() == 0 || q.posted() == 0 {
		return false
	}
	c := q.slot(q.pi)
	c[prm.CQEOffSyndrome] = synd
	prm.StoreWord(c, prm.CQEOffWQECnt, prm.MakeOwnerWord(uint16(q.wqeCons), prm.CQERespErr<<prm.OpcodeShift|q.owner(q.pi)))
	q.C.Errors.Add(1)
	q.pi++
	q.wqeCons++
	return true
}

// String reports the queue's counters, for debugging. Call it only from
// the goroutine that drives the queue, or after it stopped.
func (q *RxQueue) String() string {
	return fmt.Sprintf("%s: pi %#x wqe %#x rq-dbr %#x cq-dbr %#x", q.name, q.pi, q.wqeCons,
		prm.LoadDBR(q.r.RQDBR, prm.RQDBROff), prm.LoadDBR(q.r.CQDBR, prm.CQDBRSetCI))
}

// Room returns how many packets could be placed now: WQEs posted and CQEs
// free, whichever is fewer.
func (q *RxQueue) Room() int { return int(min(q.posted(), q.cqSpace())) }
