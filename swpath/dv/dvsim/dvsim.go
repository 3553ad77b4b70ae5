// Package dvsim wires the Direct Verbs engine (swpath/dv) to the NIC
// emulator (swpath/nicemu): a buffer pool, one receive queue and worker per
// RSS queue on port 0, one send queue per worker on port 1 (the peer port
// passed frames are forwarded to), and an emulator goroutine feeding the
// receive queues from a traffic Source. It is what tests, `scrubd bench`,
// `scrubd dryrun --engine dv` and `scrubd run --sim` start and stop.
//
// Everything is emulated: no NIC is touched.
package dvsim

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/scrubd/scrubd/swpath/classifier"
	"github.com/scrubd/scrubd/swpath/dv"
	"github.com/scrubd/scrubd/swpath/dv/prm"
	"github.com/scrubd/scrubd/swpath/nicemu"
	"github.com/scrubd/scrubd/swpath/numa"
	"github.com/scrubd/scrubd/swpath/pool"
	"github.com/scrubd/scrubd/swpath/rule"
	"github.com/scrubd/scrubd/swpath/traffic"
)

// Config describes a simulated port pair.
type Config struct {
	// Classifier is shared by the workers (per-rule counters are summed in
	// it); if nil, one is compiled from Rules.
	Classifier *classifier.Classifier
	Rules      *rule.Set
	// Workers is the number of receive queues and workers (default 1).
	Workers int
	// Host selects host mode: passed frames are counted, not forwarded.
	Host bool
	// CQLog2, RQLog2, SQLog2 size the rings (defaults 11, 10, 10: a CQ of
	// twice the RQ, as rdma-core's rounding of cqe+1 gives VPP).
	CQLog2, RQLog2, SQLog2 uint
	// Start is the initial value of every ring counter (tests start near
	// the 16- and 24-bit wraps); a real device starts at 0.
	Start uint32
	// CPUs pins worker i to CPUs[i]; nil or short leaves workers unpinned.
	CPUs []int
	// Spin keeps idle workers polling instead of yielding.
	Spin bool
	// Burst is the worker poll budget (default dv.MaxBurst).
	Burst int
	// Source feeds the emulator; nil leaves the receive side idle (for
	// benchmarks that drive the queues with Deliver).
	Source nicemu.Source
	// Emu configures the emulator's pacing, compression and backpressure.
	Emu nicemu.Config
	// Poison fills compressed-session holes with CQEs that look valid.
	Poison bool
	// FlowTag is put into every receive CQE.
	FlowTag uint32
	// Sink sees every frame the peer port transmits (it must not keep it).
	Sink func(frame []byte)
	// Tap sees every received frame and its result (see dv.WorkerConfig).
	Tap func(frame []byte, r classifier.Result)
	// Unforwarded sees every passed frame a worker could not send on (see
	// dv.WorkerConfig).
	Unforwarded func(frame []byte)
	// Pool overrides the pool configuration; BuffersPerNode defaults to
	// what the rings need, hugepages and binding default to off.
	Pool *pool.Config
	// CachePolicy is every worker's flow cache policy (default
	// classifier.CacheAdaptive).
	CachePolicy classifier.CachePolicy
}

// LKey is the memory key the simulated NIC registers the arena under.
const LKey = 0x5c2b

// Sim is a running (or ready) engine over an emulated NIC.
type Sim struct {
	cfg       Config
	Pool      *pool.Pool
	Class     *classifier.Classifier
	Engine    *dv.Engine
	Emulator  *nicemu.Emulator
	RX        []*nicemu.RxQueue
	TX        []*nicemu.TxQueue
	RxRings   []*prm.RxRings
	TxRings   []*prm.TxRings
	Workers   []*dv.Worker
	caches    []*pool.Cache
	clsW      []*classifier.Worker
	ownsPool  bool
	startOnce sync.Once
	closeOnce sync.Once
	closeErr  error
	cancel    context.CancelFunc
	// Leaked is set by Close: buffers allocated from the pool and never
	// returned, after every ring was released and every cache closed.
	Leaked int64
	// BadFrees is set by Close: frees the pool refused (with Pool.Debug,
	// a buffer freed twice).
	BadFrees uint64
}

// New builds the pool, rings, emulator queues and workers. Nothing runs
// until Start.
func New(cfg Config) (s *Sim, err error) {
	if cfg.Workers <= 0 {
		cfg.Workers = 1
	}
	if cfg.CQLog2 == 0 {
		cfg.CQLog2 = 11
	}
	if cfg.RQLog2 == 0 {
		cfg.RQLog2 = 10
	}
	if cfg.SQLog2 == 0 {
		cfg.SQLog2 = 10
	}
	if cfg.CQLog2 < cfg.RQLog2 {
		return nil, fmt.Errorf("dvsim: CQLog2 %d < RQLog2 %d: the CQ could overrun", cfg.CQLog2, cfg.RQLog2)
	}
	s = &Sim{cfg: cfg, Class: cfg.Classifier}
	defer func() {
		if err != nil {
			s.release()
		}
	}()
	if s.Class == nil {
		set := cfg.Rules
		if set == nil {
			set = &rule.Set{}
		}
		if s.Class, err = classifier.New(set); err != nil {
			return nil, err
		}
	}
	pc := pool.Config{HugePages: pool.HugeOff, Bind: pool.BindOff}
	if cfg.Pool != nil {
		pc = *cfg.Pool
	}
	if pc.Topology == nil {
		if pc.Topology, err = numa.ReadLive(); err != nil {
			return nil, err
		}
	}
	if pc.BuffersPerNode == 0 {
		cache := pc.CacheSize
		if cache == 0 {
			cache = 512
		}
		need := cfg.Workers * (1<<cfg.RQLog2 + 1<<cfg.SQLog2 + 2*cache + 2*dv.MaxBurst)
		pc.BuffersPerNode = max(4096, need)
	}
	if s.Pool, err = pool.New(pc); err != nil {
		return nil, err
	}
	s.ownsPool = true
	mem := &nicemu.Memory{}
	for _, n := range s.Pool.Nodes() {
		mem.Register(LKey, s.Pool.Region(n))
	}
	for i := 0; i < cfg.Workers; i++ {
		cpu := -1
		if i < len(cfg.CPUs) {
			cpu = cfg.CPUs[i]
		}
		name := fmt.Sprintf("p0/rx%d", i)
		node := s.Pool.NodeFor(pool.Queue{Name: name, CPU: cpu, DeviceNode: numa.Unknown})
		arena, err := dv.ArenaOf(s.Pool, node)
		if err != nil {
			return nil, err
		}
		cache, err := s.Pool.NewCacheOnNode(name, node)
		if err != nil {
			return nil, err
		}
		s.caches = append(s.caches, cache)
		rr := prm.NewRxRings(cfg.CQLog2, cfg.RQLog2)
		s.RxRings = append(s.RxRings, rr)
		erx, err := nicemu.NewRxQueue(name, rr, mem, cfg.Start)
		if err != nil {
			return nil, err
		}
		erx.Poison, erx.FlowTag = cfg.Poison, cfg.FlowTag
		s.RX = append(s.RX, erx)
		rx, err := dv.NewRxQueue(rr, arena, LKey, cfg.Start)
		if err != nil {
			return nil, err
		}
		var tx *dv.TxQueue
		if !cfg.Host {
			tr := prm.NewTxRings(cfg.SQLog2, cfg.SQLog2, uint32(0x100+i))
			s.TxRings = append(s.TxRings, tr)
			etx, err := nicemu.NewTxQueue(fmt.Sprintf("p1/tx%d", i), tr, mem, cfg.Start, cfg.Sink)
			if err != nil {
				return nil, err
			}
			s.TX = append(s.TX, etx)
			if tx, err = dv.NewTxQueue(tr, arena, LKey, cfg.Start); err != nil {
				return nil, err
			}
		}
		cw := s.Class.NewWorker()
		cw.SetCachePolicy(cfg.CachePolicy)
		s.clsW = append(s.clsW, cw)
		w, err := dv.NewWorker(dv.WorkerConfig{
			Name: name, CPU: cpu, RX: rx, TX: tx, Arena: arena, Cache: cache,
			Classifier: cw, Burst: cfg.Burst, Spin: cfg.Spin, Tap: cfg.Tap, Unforwarded: cfg.Unforwarded,
			OutOfBuffer: erx.C.OutOfBuffer.Load,
		})
		if err != nil {
			return nil, err
		}
		s.Workers = append(s.Workers, w)
	}
	s.Engine = dv.NewEngine(s.Workers...)
	s.Emulator = nicemu.New(cfg.Emu, cfg.Source, s.RX, s.TX)
	return s, nil
}

// Start runs the workers and the emulator until ctx is done or Close.
func (s *Sim) Start(ctx context.Context) error {
	err := errors.New("dvsim: started twice")
	s.startOnce.Do(func() {
		ctx, s.cancel = context.WithCancel(ctx)
		if err = s.Engine.Start(ctx); err != nil {
			return
		}
		s.Emulator.Start(ctx)
	})
	return err
}

// Close stops the emulator (the device) first, then the workers, returns
// every buffer still on a ring to its cache, closes the caches and the
// classifier workers (their counts stay in the classifier) and the pool.
// It returns the first protocol error the emulator saw, or a worker's
// start-up error. It is idempotent.
func (s *Sim) Close() error {
	s.closeOnce.Do(func() {
		if s.cancel != nil {
			s.cancel()
		}
		s.Emulator.Close()
		errs := []error{s.Engine.Stop()}
		for _, w := range s.Workers {
			w.Release()
		}
		errs = append(errs, s.ProtocolErr())
		s.closeErr = errors.Join(errs...)
		s.release()
	})
	return s.closeErr
}

func (s *Sim) release() {
	for _, c := range s.caches {
		_ = c.Close()
	}
	s.caches = nil
	if s.Pool != nil {
		nodes := s.Pool.Snapshot().Nodes
		if out, err := s.Pool.Outstanding(); err == nil {
			s.Leaked = int64(len(out))
		} else {
			for _, n := range nodes {
				s.Leaked += int64(n.Allocs) - int64(n.Frees)
			}
		}
		for _, n := range nodes {
			s.BadFrees += n.BadFrees
		}
	}
	for _, w := range s.clsW {
		w.Close()
	}
	s.clsW = nil
	if s.ownsPool && s.Pool != nil {
		_ = s.Pool.Close()
	}
}

// ProtocolErr returns the first protocol error any emulated queue saw.
func (s *Sim) ProtocolErr() error {
	var errs []error
	for _, q := range s.RX {
		errs = append(errs, q.Err())
	}
	for _, q := range s.TX {
		errs = append(errs, q.Err())
	}
	return errors.Join(errs...)
}

// Snapshot is the sim's live counters.
type Snapshot struct {
	Workers []dv.Counters
	Total   dv.Counters
	// Offered is the frames the emulator took from the source;
	// Delivered, OutOfBuffer and RxErrors its receive-side outcome.
	Offered, Delivered, OutOfBuffer, RxErrors uint64
	// TxFrames is what the peer port transmitted.
	TxFrames, TxBytes uint64
}

// Snapshot reads every counter; safe while the sim runs.
func (s *Sim) Snapshot() Snapshot {
	sn := Snapshot{Workers: s.Engine.Snapshot(), Offered: s.Emulator.Offered()}
	sn.Total = dv.Total(sn.Workers)
	for _, q := range s.RX {
		sn.Delivered += q.C.Delivered.Load()
		sn.OutOfBuffer += q.C.OutOfBuffer.Load()
		sn.RxErrors += q.C.Errors.Load()
	}
	for _, q := range s.TX {
		sn.TxFrames += q.C.Frames.Load()
		sn.TxBytes += q.C.Bytes.Load()
	}
	return sn
}

// Generated is a Source of frames from a swpath/traffic generator: a
// frame-size mix, a flow count and rule-steered edges as cfg sets; limit
// > 0 ends it after that many frames (0: endless, for `scrubd run --sim`).
func Generated(cfg traffic.Config, limit uint64) nicemu.Source {
	g := traffic.NewGenerator(cfg)
	return &nicemu.FuncSource{Fn: func(dst []byte) ([]byte, bool) { return g.Next(dst[:0]), true }, Limit: limit}
}

// RingState describes every ring as the memory shared with the device
// shows it: the doorbell records (the driver's published consumer and
// producer indices), the emulator's counters, and the owner words of the
// CQEs around the published consumer index. Tests print it when a wait
// times out. It reads only words the device and driver access atomically,
// so it is safe while the sim runs.
func (s *Sim) RingState() string {
	var b strings.Builder
	for i, r := range s.RxRings {
		ci := prm.LoadDBR(r.CQDBR, prm.CQDBRSetCI)
		q := s.RX[i]
		fmt.Fprintf(&b, "rx%d: cq-dbr ci %#x rq-dbr %#x; device delivered %d oob %d errors %d sessions %d compressed %d bad-ci %d bad-rq-dbr %d; protocol error %v\n",
			i, ci, prm.LoadDBR(r.RQDBR, prm.RQDBROff), q.C.Delivered.Load(), q.C.OutOfBuffer.Load(),
			q.C.Errors.Load(), q.C.Sessions.Load(), q.C.Compressed.Load(), q.C.BadCI.Load(), q.C.BadRQDBR.Load(), q.Err())
		dumpCQ(&b, r.CQ, r.CQLog2, ci)
	}
	for i, r := range s.TxRings {
		ci := prm.LoadDBR(r.CQDBR, prm.CQDBRSetCI)
		q := s.TX[i]
		fmt.Fprintf(&b, "tx%d: qp-dbr sq %#x cq-dbr ci %#x; device frames %d cqes %d doorbells %d bad-db %d bad-wqe %d bad-ci %d; protocol error %v\n",
			i, prm.LoadDBR(r.QPDBR, prm.SQDBROff), ci, q.C.Frames.Load(), q.C.CQEs.Load(), q.C.Doorbell.Load(),
			q.C.BadDB.Load(), q.C.BadWQE.Load(), q.C.BadCI.Load(), q.Err())
		dumpCQ(&b, r.CQ, r.CQLog2, ci)
	}
	return b.String()
}

// dumpCQ writes the owner words of the 4 CQEs before ci and the 8 from ci
// on: index, wqe_counter, opcode, format, owner bit, and the owner parity
// software expects for that index.
func dumpCQ(b *strings.Builder, cq []byte, log2 uint, ci uint32) {
	mask := uint32(1)<<log2 - 1
	for k := uint32(0); k < 12; k++ {
		i := (ci - 4 + k) & prm.CQCIMask
		counter, op := prm.OwnerWord(prm.LoadWord(cq, int(i&mask)<<prm.CQELog2Size+prm.CQEOffWQECnt))
		mark := " "
		if k == 4 {
			mark = ">"
		}
		fmt.Fprintf(b, "  %s cqe %#06x slot %4d: wqe_counter %#06x opcode %2d format %d owner %d (sw parity %d) sw-owned %v\n",
			mark, i, i&mask, counter, prm.Opcode(op), op&prm.FormatMask>>prm.FormatShift, op&prm.OwnerMask,
			(i>>log2)&1, prm.SWOwned(op, i, log2))
	}
}
