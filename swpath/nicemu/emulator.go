package nicemu

import (
	"context"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/scrubd/scrubd/swpath/dv/prm"
)

// Config sets how an Emulator feeds its queues.
type Config struct {
	// Seed makes pacing and compression choices reproducible.
	Seed uint64
	// Burst is the most frames taken from the source per round (default 32).
	Burst int
	// Pace randomises the burst size and yields the goroutine at random
	// points, including between a CQE's body and its owner word, to shake
	// out ordering bugs in the driver.
	Pace bool
	// Compress is the fraction of bursts (0..1) delivered as compressed
	// sessions where packets share their title fields.
	Compress float64
	// MaxSession caps a compressed session (default 64).
	MaxSession int
	// Backpressure makes the emulator wait for posted WQEs instead of
	// dropping (out-of-buffer): every frame is then received, which is what
	// a differential test needs.
	Backpressure bool
	// ErrorRate is the chance (0..1), per delivery round and queue, of an
	// error completion (local length error) consuming a posted WQE with no
	// packet, as a device does for a bad WQE.
	ErrorRate float64
	// Rate, when > 0, caps the offered load in packets per second (the
	// emulator sleeps when it is ahead); 0 offers as fast as it can.
	Rate float64
}

// Emulator is one NIC port pair's device side, run on its own goroutine:
// it receives the Source's traffic into RX (spread by the Toeplitz hash
// over a 128-entry indirection table, as RSS does) and transmits what the
// driver posts on TX.
type Emulator struct {
	cfg  Config
	src  Source
	rx   []*RxQueue
	tx   []*TxQueue
	rng  *rand.Rand
	reta [128]uint8

	offered   atomic.Uint64
	exhausted chan struct{}
	cancel    context.CancelFunc
	wg        sync.WaitGroup
	startOnce sync.Once
	closeOnce sync.Once

	frames [][]byte
	lists  [][][]byte
}

// New returns an emulator over the given queues; Start runs it.
func New(cfg Config, src Source, rx []*RxQueue, tx []*TxQueue) *Emulator {
	if cfg.Burst <= 0 {
		cfg.Burst = 32
	}
	if cfg.MaxSession < 2 {
		cfg.MaxSession = 64
	}
	e := &Emulator{
		cfg: cfg, src: src, rx: rx, tx: tx,
		rng:       rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15)),
		exhausted: make(chan struct{}),
		frames:    make([][]byte, cfg.Burst),
		lists:     make([][][]byte, len(rx)),
	}
	for i := range e.reta {
		if len(rx) > 0 {
			e.reta[i] = uint8(i % len(rx))
		}
	}
	for i := range e.frames {
		e.frames[i] = make([]byte, 0, 2048)
	}
	if cfg.Pace {
		for _, q := range rx {
			q.jitter = rand.New(rand.NewPCG(cfg.Seed+uint64(len(q.name)), 7))
		}
	}
	return e
}

// Start runs the device goroutine until ctx is done or Close is called.
// The caller that starts it stops it.
func (e *Emulator) Start(ctx context.Context) {
	e.startOnce.Do(func() {
		ctx, e.cancel = context.WithCancel(ctx)
		e.wg.Add(1)
		go func() {
			defer e.wg.Done()
			e.run(ctx)
		}()
	})
}

// Close stops the device goroutine and waits for it. It is idempotent.
func (e *Emulator) Close() {
	e.closeOnce.Do(func() {
		if e.cancel != nil {
			e.cancel()
		}
	})
	e.wg.Wait()
}

// Exhausted is closed once every frame of the source has been offered to
// a queue (received, or dropped as out-of-buffer). The goroutine keeps
// servicing send queues until Close.
func (e *Emulator) Exhausted() <-chan struct{} { return e.exhausted }

// Offered returns the number of frames taken from the source so far.
func (e *Emulator) Offered() uint64 { return e.offered.Load() }

// ServiceTX runs every send queue once and returns the frames sent.
func (e *Emulator) ServiceTX() int {
	n := 0
	for _, t := range e.tx {
		n += t.Service()
	}
	return n
}

func (e *Emulator) run(ctx context.Context) {
	srcDone := e.src == nil
	if srcDone {
		close(e.exhausted)
	}
	start := time.Now()
	for ctx.Err() == nil {
		sent := e.ServiceTX()
		if srcDone {
			if sent == 0 {
				runtime.Gosched()
			}
			continue
		}
		if e.cfg.Rate > 0 && float64(e.offered.Load()) >= e.cfg.Rate*time.Since(start).Seconds() {
			if sent == 0 {
				time.Sleep(50 * time.Microsecond)
			}
			continue
		}
		if !e.round(ctx) {
			srcDone = true
			close(e.exhausted)
		}
		if e.cfg.Pace && e.rng.IntN(4) == 0 {
			runtime.Gosched()
		}
	}
}

// round takes one burst from the source and delivers it; false at the end
// of the source.
func (e *Emulator) round(ctx context.Context) bool {
	n := e.cfg.Burst
	if e.cfg.Pace {
		n = 1 + e.rng.IntN(n)
	}
	got := 0
	for got < n {
		f, ok := e.src.Next(e.frames[got])
		if !ok {
			break
		}
		e.frames[got] = f
		got++
	}
	if len(e.rx) == 0 {
		return got == n
	}
	for i := range e.lists {
		e.lists[i] = e.lists[i][:0]
	}
	for _, f := range e.frames[:got] {
		q := 0
		if len(e.rx) > 1 {
			q = int(e.reta[parseMeta(f).hash&127])
		}
		e.lists[q] = append(e.lists[q], f)
	}
	for qi, list := range e.lists {
		q := e.rx[qi]
		compress := e.cfg.Compress > 0 && e.rng.Float64() < e.cfg.Compress
		if e.cfg.ErrorRate > 0 && e.rng.Float64() < e.cfg.ErrorRate {
			q.InjectError(prm.SyndLocalLength)
		}
		for len(list) > 0 {
			k := len(list)
			if e.cfg.Backpressure {
				k = min(k, int(q.posted()), int(q.cqSpace()))
				if k == 0 {
					if ctx.Err() != nil {
						return false
					}
					e.ServiceTX()
					runtime.Gosched()
					continue
				}
			}
			q.DeliverBurst(list[:k], compress, e.cfg.MaxSession)
			e.offered.Add(uint64(k))
			list = list[k:]
		}
	}
	return got == n
}
