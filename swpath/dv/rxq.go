package dv

import (
	"fmt"

	"github.com/scrubd/scrubd/swpath/barrier"
	"github.com/scrubd/scrubd/swpath/dv/prm"
	"github.com/scrubd/scrubd/swpath/pool"
)

// MaxBurst is the most completions one poll takes (VPP's VLIB_FRAME_SIZE).
const MaxBurst = 256

// Refill batching, as VPP's rdma_device_input_refill: refill only with at
// least 2*refillMultiple free slots, in multiples of refillMultiple, at most
// MaxBurst at once.
const (
	refillMultiple = 8
	refillMin      = 2 * refillMultiple
)

// Burst holds what one poll received, by position. Len, Hash and Flags are
// what the CQE (or mini-CQE) said; Buf is the buffer index the WQE held.
// Free lists buffers of completions that carried no packet (error CQEs),
// for the caller to return to its pool.
type Burst struct {
	Buf   [MaxBurst]uint32
	Len   [MaxBurst]uint32
	Hash  [MaxBurst]uint32
	Flags [MaxBurst]uint16 // hds_ip_ext<<8 | l4_l3_hdr_type (CQE 0x1c)
	Tag   [MaxBurst]uint32 // flow tag
	Free  [MaxBurst]uint32
	NFree int
}

// RxStats are the receive queue's own protocol counters.
type RxStats struct {
	ErrCQEs   uint64 // error or unexpected CQEs (their buffers are freed)
	Unposted  uint64 // completions for WQEs never posted (device bug or corruption): skipped
	NoBuf     uint64 // refills cut short because the pool node was exhausted
	SeqErrors uint64 // wqe_counter did not name the expected WQE
	Sessions  uint64 // compressed sessions expanded
	// Corrupt counts compressed-session titles whose count this driver
	// cannot walk (fewer than 2, more than the CQ, or more than the WQEs
	// outstanding); their claimed slots that passed the owner test were
	// invalidated and skipped.
	Corrupt uint64
}

// RxQueue is the driver side of one receive queue: a CQ and a cyclic RQ
// with one data segment per WQE. One goroutine per queue; not safe for
// concurrent use.
type RxQueue struct {
	cq      []byte
	cqLog2  uint
	cqMask  uint32
	cqDBR   []byte
	rq      []byte
	rqMask  uint32
	stride  int
	rqDBR   []byte
	arena   Arena
	arenaVA uint64
	lkey    uint32
	bufSize uint32 // a CQE's byte count is clamped to this

	ci     uint32 // CQ consumer index (24 bits go to the doorbell record)
	pubCI  uint32 // last ci written to the CQ doorbell record
	head   uint32 // WQEs completed
	tail   uint32 // WQEs posted
	shadow []uint32
	get    [MaxBurst]uint32
	words  [MaxBurst]uint32 // owner words of the current run, as scanned

	// An open compressed session (title at sessCI, sessN packets, sessDone
	// of them handed out). The CQ index stays at the title until all are.
	sessCI, sessN, sessDone uint32
	sessFlags               uint16
	sessTag                 uint32

	Stats RxStats
}

// NewRxQueue binds the driver side to rings r whose buffers live in arena,
// registered under lkey. start is the initial value of
// the CQ and WQE counters: 0 on a real device (ibv_modify_wq to RDY zeroes
// them); tests start near the wraps. Every WQE's byte_count and lkey are
// written once here, as VPP does, so refills write only addresses.
func NewRxQueue(r *prm.RxRings, arena Arena, lkey uint32, start uint32) (*RxQueue, error) {
	if err := r.Validate(); err != nil {
		return nil, err
	}
	if arena.BufSize <= 0 || len(arena.Mem) < arena.Headroom+arena.BufSize {
		return nil, fmt.Errorf("dv: buffer size %d with arena of %d bytes", arena.BufSize, len(arena.Mem))
	}
	if r.RQStride != prm.DataSegSize {
		return nil, fmt.Errorf("dv: RQ stride %d: this driver posts one data segment per WQE (stride 16)", r.RQStride)
	}
	q := &RxQueue{
		cq: r.CQ, cqLog2: r.CQLog2, cqMask: 1<<r.CQLog2 - 1, cqDBR: r.CQDBR,
		rq: r.RQ, rqMask: 1<<r.RQLog2 - 1, stride: r.RQStride, rqDBR: r.RQDBR,
		arena: arena, arenaVA: prm.Addr(arena.Mem), lkey: lkey, bufSize: uint32(arena.BufSize),
		ci: start, pubCI: start, head: start, tail: start,
		shadow: make([]uint32, 1<<r.RQLog2),
	}
	for i := 0; i <= int(q.rqMask); i++ {
		w := q.rq[i*q.stride:]
		prm.PutBE32(w, prm.DataSegOffCount, uint32(arena.BufSize))
		prm.PutBE32(w, prm.DataSegOffLKey, lkey)
		prm.PutBE64(w, prm.DataSegOffAddr, 0)
	}
	// Publish the starting indices (0 on a real device, where RESET->RDY
	// zeroed the records already).
	prm.StoreDBR(q.cqDBR, prm.CQDBRSetCI, start&prm.CQCIMask)
	prm.StoreDBR(q.rqDBR, prm.RQDBROff, start&prm.WQCounterMsk)
	return q, nil
}

// Posted returns how many WQEs hold a buffer the device may fill.
func (q *RxQueue) Posted() int { return int(q.tail - q.head) }

func (q *RxQueue) slot(i uint32) []byte {
	off := int(i&q.cqMask) << prm.CQELog2Size
	return q.cq[off : off+prm.CQESize : off+prm.CQESize]
}

// Poll receives up to budget (<= MaxBurst) packets into b and returns how
// many. Buffers of error completions are appended to b.Free.
func (q *RxQueue) Poll(b *Burst, budget int) int {
	budget = min(budget, MaxBurst)
	b.NFree = 0
	n := 0
	if q.sessN != 0 {
		n = q.drainSession(b, 0, budget)
	}
	for q.sessN == 0 && n < budget {
		// A. Find a run of ready CQEs by their owner words alone (rdma-core
		// cq.c get_sw_cqe: opcode != INVALID and owner == pass parity).
		// A compressed title ends the run: its mini-CQE arrays follow it.
		run := uint32(0)
		title := false
		for n+int(run) < budget {
			i := q.ci + run
			w := prm.LoadWord(q.cq, int(i&q.cqMask)<<prm.CQELog2Size+prm.CQEOffWQECnt)
			op := uint8(w >> 24)
			if !prm.SWOwned(op, i, q.cqLog2) {
				break
			}
			q.words[run] = w
			run++
			if op&prm.FormatMask != 0 {
				title = true
				break
			}
		}
		if run == 0 {
			break
		}
		// B. One from-device barrier for the whole run, before any other
		// CQE byte, mini-CQE or packet byte is read (rdma-core cq.c
		// mlx5_get_next_cqe: "read CQ entry contents after we've checked
		// the ownership bit"; batched as DPDK's vector paths do).
		barrier.FromDevice()
		regular := run
		if title {
			regular--
		}
		for k := uint32(0); k < regular; k++ {
			c := q.slot(q.ci)
			if q.head == q.tail {
				// A completion with no WQE outstanding: never hand out a
				// buffer we do not own. Skip it.
				q.Stats.Unposted++
				q.ci++
				continue
			}
			// The owner word as the scan read it: the device does not
			// write a slot again before the consumer index passes it.
			counter, op := prm.OwnerWord(q.words[k])
			if counter != uint16(q.head) {
				q.Stats.SeqErrors++
			}
			buf := q.shadow[q.head&q.rqMask]
			if op&0xfc != prm.OpOwnRespSend {
				// Error CQE (RESP_ERR, syndrome at 0x37) or anything VPP's
				// fast test would reject: the WQE is consumed, no packet.
				q.Stats.ErrCQEs++
				b.Free[b.NFree] = buf
				b.NFree++
			} else {
				b.Buf[n] = buf
				// The device writes at most the WQE's byte_count (the buffer
				// size); a larger count is corruption and is clamped, so
				// neither the frame nor RxBytes reaches past the buffer.
				b.Len[n] = min(prm.BE32(c, prm.CQEOffByteCnt), q.bufSize)
				b.Hash[n] = prm.BE32(c, prm.CQEOffRxHash)
				b.Flags[n] = prm.BE16(c, prm.CQEOffHdsIP)
				b.Tag[n] = prm.BE32(c, prm.CQEOffSopQPN) & prm.FlowTagMask
				n++
			}
			q.head++
			q.ci++
		}
		if title {
			c := q.slot(q.ci)
			counter, _ := prm.OwnerWord(q.words[run-1])
			if counter != uint16(q.head) {
				q.Stats.SeqErrors++
			}
			cnt := prm.BE32(c, prm.CQEOffByteCnt)
			if cnt > q.tail-q.head {
				// More packets than WQEs outstanding: corrupt. Skip the
				// title and invalidate the slots it claims: a mini-CQE
				// array's last byte-count byte sits where op_own is and
				// can pass the owner test as a regular CQE.
				q.Stats.Unposted++
				q.skipCorrupt(cnt)
				continue
			}
			if cnt < 2 || cnt > q.cqMask+1 {
				// Not a session this driver can walk: treat the title as an
				// error completion of one WQE, if one is outstanding, and
				// invalidate the slots it claims.
				if q.head == q.tail {
					q.Stats.Unposted++
				} else {
					q.Stats.ErrCQEs++
					b.Free[b.NFree] = q.shadow[q.head&q.rqMask]
					b.NFree++
					q.head++
				}
				q.skipCorrupt(cnt)
				continue
			}
			q.sessCI, q.sessN, q.sessDone = q.ci, cnt, 0
			q.sessFlags = prm.BE16(c, prm.CQEOffHdsIP)
			q.sessTag = prm.BE32(c, prm.CQEOffSopQPN) & prm.FlowTagMask
			q.Stats.Sessions++
			n = q.drainSession(b, n, budget)
		}
		if !title && n < budget {
			break // the run ended on a CQE the device still owns
		}
	}
	if q.ci != q.pubCI {
		// C. The invalidation stores (drainSession, skipCorrupt) before the
		// 24-bit consumer index, big-endian, that lets the device reuse
		// the slots. rdma-core cq.c update_cons_index is the store alone,
		// with no barrier; this to-device barrier is DPDK's
		// (drivers/net/mlx5/mlx5_rx.c mlx5_rx_burst: rte_io_wmb() before
		// the CQ doorbell record). Like theirs, it orders stores only: on
		// arm64 DMB OSHST does not order this pass's CQE loads before the
		// store.
		barrier.ToDevice()
		prm.StoreDBR(q.cqDBR, prm.CQDBRSetCI, q.ci&prm.CQCIMask)
		q.pubCI = q.ci
	}
	return n
}

// skipCorrupt moves ci past a corrupt title at ci that claims cnt
// completions, and past the slots after it that it claims (title+1 ..
// title+cnt-1, at most the CQ) as long as they pass the owner test:
// those hold its mini-CQE arrays or holes, not completions. Each is marked
// INVALID with its pass's parity first, as a completed session's slots
// are. A slot the device still owns ends the skip; the device writes it
// later and the owner test sees it then.
func (q *RxQueue) skipCorrupt(cnt uint32) {
	q.Stats.Corrupt++
	title := q.ci
	q.ci++
	claim := min(cnt, q.cqMask+1)
	for j := uint32(1); j < claim; j++ {
		i := title + j
		off := int(i&q.cqMask)<<prm.CQELog2Size + prm.CQEOffWQECnt
		if !prm.SWOwned(uint8(prm.LoadWord(q.cq, off)>>24), i, q.cqLog2) {
			break
		}
		prm.StoreWord(q.cq, off, prm.MakeOwnerWord(0, prm.OpOwnInvalid|uint8(i>>q.cqLog2)&1))
		q.ci++
	}
}

// drainSession hands out the open session's packets from position n of b
// until budget, and closes the session when all are out: its slots after
// the title are invalidated and ci moves past it.
func (q *RxQueue) drainSession(b *Burst, n, budget int) int {
	for q.sessDone < q.sessN && n < budget {
		k := q.sessDone
		s := q.slot(q.sessCI + prm.MiniArraySlot(k/prm.MiniPerSlot))
		e := int(k%prm.MiniPerSlot) * prm.MiniCQESize
		b.Buf[n] = q.shadow[q.head&q.rqMask]
		b.Len[n] = min(prm.BE32(s, e+prm.MiniOffByteCnt), q.bufSize)
		b.Hash[n] = prm.BE32(s, e+prm.MiniOffRxHash)
		b.Flags[n] = q.sessFlags
		b.Tag[n] = q.sessTag
		q.head++
		q.sessDone++
		n++
	}
	if q.sessDone == q.sessN {
		// The device leaves holes and mini-CQE arrays in slots title+1 ..
		// title+n-1; stale contents there would pass the owner test on a
		// later pass. Mark them INVALID with this pass's parity, as VPP's
		// compressed_cqe_reset_owner does (DPDK writes 0xF0 likewise). The
		// title slot is overwritten by the device.
		for i := q.sessCI + 1; i != q.sessCI+q.sessN; i++ {
			prm.StoreWord(q.slot(i), prm.CQEOffWQECnt,
				prm.MakeOwnerWord(0, prm.OpOwnInvalid|uint8(i>>q.cqLog2)&1))
		}
		q.ci = q.sessCI + q.sessN
		q.sessN, q.sessDone = 0, 0
	}
	return n
}

// Refill posts free buffers from bufs into the RQ, VPP style (input.c
// rdma_device_input_refill), and returns how many it posted.
func (q *RxQueue) Refill(bufs *pool.Cache) int {
	size := q.rqMask + 1
	free := size - (q.tail - q.head)
	if free < refillMin {
		return 0
	}
	n := min(free, MaxBurst)
	slot := q.tail & q.rqMask
	n = min(n, size-slot) // never wrap inside a batch
	n &^= refillMultiple - 1
	realign := n == 0
	if realign {
		// Fewer than 8 slots before the ring's end: only when the counters
		// started unaligned (tests start near the 16-bit wrap). Fill them
		// to realign; VPP's counters start at 0 and never get here.
		n = size - slot
	}
	k, err := bufs.AllocBatch(q.get[:n])
	got := uint32(k)
	if err != nil {
		q.Stats.NoBuf++ // the node is exhausted: post what we got
	}
	if keep := got &^ (refillMultiple - 1); !realign && keep != got {
		// A short allocation is rounded down to the multiple and the rest
		// goes back (VPP: round down, free the excess).
		_ = bufs.FreeBatch(q.get[keep:got])
		got = keep
	}
	if got == 0 {
		return 0
	}
	for i := uint32(0); i < got; i++ {
		idx := q.get[i]
		s := slot + i
		q.shadow[s] = idx
		// D. Only the address changes; byte_count and lkey were set once.
		prm.PutBE64(q.rq, int(s)*q.stride+prm.DataSegOffAddr, q.arenaVA+uint64(q.arena.Offset(idx)))
	}
	q.tail += got
	// E. The WQE addresses must be visible before the doorbell record
	// that lets the device use them (rdma-core qp.c mlx5_post_wq_recv:
	// udma_to_device_barrier, "descriptors are written before doorbell
	// record"). Full rather than ToDevice: buffers read in this poll pass
	// are reposted here, and on arm64 DMB OSHST does not order those
	// earlier loads before the doorbell store (Arm ARM DDI 0487 C6.2
	// DMB: the ST options order stores against stores only). One barrier
	// per batch of up to 256.
	barrier.Full()
	prm.StoreDBR(q.rqDBR, prm.RQDBROff, q.tail&prm.WQCounterMsk)
	return int(got)
}

// Release returns every posted buffer to bufs, for shutdown after the
// device has stopped (the WQ destroyed, or the emulator closed).
func (q *RxQueue) Release(bufs *pool.Cache) int {
	n := 0
	for q.head != q.tail {
		_ = bufs.Free(q.shadow[q.head&q.rqMask])
		q.head++
		n++
	}
	return n
}

// String reports the queue's counters, for debugging. Call it only from
// the queue's goroutine, or after it stopped.
func (q *RxQueue) String() string {
	return fmt.Sprintf("ci %#x head %#x tail %#x session %d/%d at %#x", q.ci, q.head, q.tail, q.sessDone, q.sessN, q.sessCI)
}
