package dv

import (
	"fmt"
	"runtime"
	"sync/atomic"

	"github.com/scrubd/scrubd/swpath/barrier"
	"github.com/scrubd/scrubd/swpath/classifier"
	"github.com/scrubd/scrubd/swpath/numa"
	"github.com/scrubd/scrubd/swpath/packet"
	"github.com/scrubd/scrubd/swpath/pool"
	"github.com/scrubd/scrubd/swpath/rule"
)

// WorkerConfig is what one worker owns.
type WorkerConfig struct {
	Name string
	// CPU is the CPU the worker's thread is pinned to; -1 leaves it
	// unpinned (tests, the simulator).
	CPU int
	RX  *RxQueue
	// TX is the peer port's send queue passed frames are forwarded on; nil
	// selects host mode: passed frames are counted and their buffers
	// recycled.
	TX    *TxQueue
	Arena Arena
	// Cache is the worker's cache of its node's pool; buffers for RX come
	// from it and every dropped, sent or failed buffer goes back to it.
	Cache *pool.Cache
	// Classifier is this worker's classifier handle (per-rule counters).
	Classifier *classifier.Worker
	// Burst is the most packets per poll (default and maximum MaxBurst).
	Burst int
	// Spin keeps polling when a poll found nothing; otherwise the worker
	// yields its thread (for shared machines and the simulator).
	Spin bool
	// Tap, if set, sees every received frame and its result before the
	// buffer is dropped or forwarded (differential tests, dryrun). It must
	// not keep the slice.
	Tap func(frame []byte, r classifier.Result)
	// Unforwarded, if set, sees every passed frame the worker could not
	// send on because the peer's send queue was full (counted as TxFull),
	// before its buffer is recycled. It must not keep the slice.
	Unforwarded func(frame []byte)
	// OutOfBuffer, if set, reads the device's out-of-buffer drop counter
	// for this queue (mlx5 rx_out_of_buffer, or the emulator's).
	OutOfBuffer func() uint64
}

// Counters is a snapshot of one worker's counters. Every received packet
// is either Dropped or Passed; Passed = Tx + TxFull in forward mode.
type Counters struct {
	Name      string
	Rx        uint64 // packets received with a good completion
	RxBytes   uint64
	Dropped   uint64 // dropped by a rule
	Passed    uint64 // no rule dropped it
	Tx        uint64 // passed and posted to the peer's send queue
	TxFull    uint64 // passed but the send queue was full: buffer recycled
	TxDone    uint64 // send WQEs completed by the device
	RxErrors  uint64 // error completions (no packet)
	SeqErrors uint64 // completions naming an unexpected WQE
	Unposted  uint64 // completions for WQEs never posted, skipped
	Sessions  uint64 // compressed sessions expanded
	NoBuf     uint64 // refills cut short: the pool node was exhausted
	// OutOfBuffer is the device's count of packets dropped for want of a
	// posted WQE (read from WorkerConfig.OutOfBuffer at snapshot time).
	OutOfBuffer uint64
	// CacheHits are the received packets the classifier worker's flow
	// cache decided (read from it at snapshot time): near Rx on traffic of
	// few flows, near 0 on a flood, where the cache turns itself off.
	CacheHits uint64
	Bursts    uint64 // polls that received at least one packet
	Idle      uint64 // polls that received nothing
	// Cycles spent in non-empty bursts (swpath/barrier.Cycles units), and
	// their split: receive + refill, parse + classify, drop + forward.
	Cycles, CyclesRx, CyclesClassify, CyclesOut uint64
}

type liveCounters struct {
	// seq is odd while publish writes (a sequence lock: Snapshot reads
	// all counters of one burst or retries).
	seq atomic.Uint64
	// hold counts the readers inside Snapshot; while it is non-zero the
	// worker skips publishing (up to maxHeld bursts in a row), so that a
	// reader's retries end even when bursts come faster than it reads.
	hold                                                                                       atomic.Int32
	rx, rxBytes, dropped, passed, tx, txFull, txDone, rxErr, seqErr, unposted, sessions, noBuf atomic.Uint64
	bursts, idle, cycles, cycRx, cycCls, cycOut                                                atomic.Uint64
	_                                                                                          [64]byte
}

// Worker polls one receive queue. Run it with Engine, or call Step from
// one goroutine.
type Worker struct {
	cfg      WorkerConfig
	rx       *RxQueue
	pubStats RxStats // rx.Stats as last published
	held     int     // publishes skipped in a row while readers held the counters
	tx       *TxQueue
	cache    *pool.Cache
	cls      *classifier.Worker
	arena    Arena
	burst    int
	b        Burst
	fields   [MaxBurst]rule.Fields
	res      [MaxBurst]classifier.Result
	recycle  [MaxBurst]uint32

	c    Counters // owned by the worker goroutine
	live liveCounters
}

// NewWorker checks cfg and returns a worker. The first Step fills the RQ.
func NewWorker(cfg WorkerConfig) (*Worker, error) {
	if cfg.RX == nil || cfg.Cache == nil || cfg.Classifier == nil {
		return nil, fmt.Errorf("dv: worker %q: RX, Cache and Classifier are required", cfg.Name)
	}
	if cfg.Burst <= 0 || cfg.Burst > MaxBurst {
		cfg.Burst = MaxBurst
	}
	return &Worker{
		cfg: cfg, rx: cfg.RX, tx: cfg.TX, cache: cfg.Cache, cls: cfg.Classifier,
		arena: cfg.Arena, burst: cfg.Burst, c: Counters{Name: cfg.Name},
	}, nil
}

// Step runs one burst: reap send completions, poll, classify, drop or
// forward, refill. It returns the packets received. It never allocates.
func (w *Worker) Step() int {
	t0 := barrier.Cycles()
	if w.tx != nil && w.tx.Outstanding() > 0 {
		w.c.TxDone += uint64(w.tx.Reap(w.cache))
	}
	n := w.rx.Poll(&w.b, w.burst)
	if w.b.NFree > 0 {
		_ = w.cache.FreeBatch(w.b.Free[:w.b.NFree])
		w.c.RxErrors += uint64(w.b.NFree)
	}
	if n == 0 {
		w.rx.Refill(w.cache)
		w.c.Idle++
		if w.c.Idle&1023 == 0 || w.b.NFree > 0 || w.rx.Stats != w.pubStats {
			w.publish()
		}
		return 0
	}
	t1 := barrier.Cycles()
	b := &w.b
	var bytes uint64
	for i := 0; i < n; i++ {
		packet.Parse(w.arena.Frame(b.Buf[i], b.Len[i]), &w.fields[i])
		bytes += uint64(b.Len[i])
	}
	w.cls.ClassifyBurst(w.fields[:n], b.Len[:n], w.res[:n])
	t2 := barrier.Cycles()
	if w.cfg.Tap != nil {
		for i := 0; i < n; i++ {
			w.cfg.Tap(w.arena.Frame(b.Buf[i], b.Len[i]), w.res[i])
		}
	}
	nr, posted, dropped := 0, 0, 0
	for i := 0; i < n; i++ {
		if w.res[i].Verdict == classifier.Drop {
			w.recycle[nr] = b.Buf[i]
			nr++
			dropped++
			continue
		}
		if w.tx == nil {
			w.recycle[nr] = b.Buf[i]
			nr++
			continue
		}
		if w.tx.Space() == 0 {
			w.c.TxFull++
			if w.cfg.Unforwarded != nil {
				w.cfg.Unforwarded(w.arena.Frame(b.Buf[i], b.Len[i]))
			}
			w.recycle[nr] = b.Buf[i]
			nr++
			continue
		}
		w.tx.Post(b.Buf[i], w.arena.Frame(b.Buf[i], b.Len[i]))
		posted++
	}
	if nr > 0 {
		// Dropped buffers go straight back to this worker's cache.
		_ = w.cache.FreeBatch(w.recycle[:nr])
	}
	if posted > 0 {
		w.tx.Ring()
	}
	t3 := barrier.Cycles()
	w.rx.Refill(w.cache)
	t4 := barrier.Cycles()

	w.c.Rx += uint64(n)
	w.c.RxBytes += bytes
	w.c.Dropped += uint64(dropped)
	w.c.Passed += uint64(n - dropped)
	w.c.Tx += uint64(posted)
	w.c.Bursts++
	w.c.Cycles += t4 - t0
	w.c.CyclesRx += (t1 - t0) + (t4 - t3)
	w.c.CyclesClassify += t2 - t1
	w.c.CyclesOut += t3 - t2
	w.publish()
	return n
}

// maxHeld bounds how many bursts in a row a worker skips publishing while
// readers hold its counters: readers that snapshot back to back never stop
// the counters from moving.
const maxHeld = 64

// publish makes the worker's counters readable by Snapshot, unless a reader
// holds them (see liveCounters.hold).
func (w *Worker) publish() {
	if w.live.hold.Load() != 0 && w.held < maxHeld {
		w.held++
	} else {
		w.store()
	}
	w.cache.Publish()
}

// publishFinal publishes whether or not a reader holds the counters: the
// last publish of a worker that stops.
func (w *Worker) publishFinal() {
	w.store()
	w.cache.Publish()
}

// store writes the counters with single-writer atomic stores between two
// increments of the sequence word, so that Snapshot sees one burst's
// counters together (received = dropped + passed), never the received
// count of one burst beside the verdict counts of the next.
func (w *Worker) store() {
	l, c := &w.live, &w.c
	w.held = 0
	l.seq.Add(1)
	l.rx.Store(c.Rx)
	l.rxBytes.Store(c.RxBytes)
	l.dropped.Store(c.Dropped)
	l.passed.Store(c.Passed)
	l.tx.Store(c.Tx)
	l.txFull.Store(c.TxFull)
	l.txDone.Store(c.TxDone)
	l.rxErr.Store(c.RxErrors)
	l.seqErr.Store(w.rx.Stats.SeqErrors)
	l.unposted.Store(w.rx.Stats.Unposted)
	l.sessions.Store(w.rx.Stats.Sessions)
	l.noBuf.Store(w.rx.Stats.NoBuf)
	w.pubStats = w.rx.Stats
	l.bursts.Store(c.Bursts)
	l.idle.Store(c.Idle)
	l.cycles.Store(c.Cycles)
	l.cycRx.Store(c.CyclesRx)
	l.cycCls.Store(c.CyclesClassify)
	l.cycOut.Store(c.CyclesOut)
	l.seq.Add(1)
}

// Snapshot returns the counters as of the last burst. Safe from any
// goroutine.
func (w *Worker) Snapshot() Counters {
	l := &w.live
	var c Counters
	// A sequence lock: retry while publish writes, or when it wrote
	// meanwhile. The hold makes the worker skip publishing while we read,
	// so the retries end: after the one publish that may be under way, the
	// next can come only maxHeld bursts later or from a worker that stops.
	l.hold.Add(1)
	defer l.hold.Add(-1)
	for {
		s := l.seq.Load()
		if s&1 != 0 {
			runtime.Gosched()
			continue
		}
		c = Counters{
			Name: w.cfg.Name, Rx: l.rx.Load(), RxBytes: l.rxBytes.Load(), Dropped: l.dropped.Load(),
			Passed: l.passed.Load(), Tx: l.tx.Load(), TxFull: l.txFull.Load(), TxDone: l.txDone.Load(),
			RxErrors: l.rxErr.Load(), SeqErrors: l.seqErr.Load(), Unposted: l.unposted.Load(), Sessions: l.sessions.Load(), NoBuf: l.noBuf.Load(),
			Bursts: l.bursts.Load(), Idle: l.idle.Load(), Cycles: l.cycles.Load(),
			CyclesRx: l.cycRx.Load(), CyclesClassify: l.cycCls.Load(), CyclesOut: l.cycOut.Load(),
		}
		if l.seq.Load() == s {
			break
		}
	}
	if w.cfg.OutOfBuffer != nil {
		c.OutOfBuffer = w.cfg.OutOfBuffer()
	}
	c.CacheHits = w.cls.CacheHits()
	return c
}

// Run polls until stop is set, checking it once per burst, on the calling
// goroutine locked to its OS thread and pinned to cfg.CPU. The thread is
// never unlocked: when Run returns the goroutine should exit, and Go then
// retires the pinned thread rather than reuse it.
func (w *Worker) Run(stop *atomic.Bool) error {
	runtime.LockOSThread()
	if w.cfg.CPU >= 0 {
		if err := numa.PinThread(w.cfg.CPU); err != nil {
			return fmt.Errorf("dv: worker %q: %w", w.cfg.Name, err)
		}
	}
	for !stop.Load() {
		if w.Step() == 0 && !w.cfg.Spin {
			runtime.Gosched()
		}
	}
	w.publishFinal()
	return nil
}

// Release returns every buffer still posted on the worker's queues to its
// cache. Call it only after the device has stopped writing (the emulator
// closed, or the WQ and QP destroyed) and the worker has stopped.
func (w *Worker) Release() int {
	n := w.rx.Release(w.cache)
	if w.tx != nil {
		w.c.TxDone += uint64(w.tx.Reap(w.cache))
		n += w.tx.Release(w.cache)
	}
	w.publishFinal()
	return n
}

// RxQueueState describes the receive queue's counters (debugging; call
// only when the worker is stopped).
func (w *Worker) RxQueueState() string { return w.rx.String() }
