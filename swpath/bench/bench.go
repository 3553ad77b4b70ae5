// Package bench measures the software packet path (swpath/dv) on the NIC
// emulator (swpath/nicemu): receive + refill, parse + classify, drop or
// forward, per frame size and per worker. It is the library behind
// `scrubd bench`, and its Report (JSON) is what the placement model reads
// as this machine's software capacity.
//
// Method: the receive rings are pre-filled by the emulator with the timer
// stopped (the emulator's cost is not the engine's), then the worker runs
// bursts until it has received everything that was placed; time and
// counter ticks are taken around those bursts only. The split comes from
// the worker's own per-burst counters. No NIC is involved: DMA, PCIe and
// cache misses on device-written lines are not modelled, so these figures
// are an upper bound for the software's own cost on real hardware.
package bench

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/scrubd/scrubd/swpath/barrier"
	"github.com/scrubd/scrubd/swpath/classifier"
	"github.com/scrubd/scrubd/swpath/dv"
	"github.com/scrubd/scrubd/swpath/dv/dvsim"
	"github.com/scrubd/scrubd/swpath/internal/sys"
	"github.com/scrubd/scrubd/swpath/nicemu"
	"github.com/scrubd/scrubd/swpath/numa"
	"github.com/scrubd/scrubd/swpath/packet"
	"github.com/scrubd/scrubd/swpath/pool"
	"github.com/scrubd/scrubd/swpath/rule"
	"github.com/scrubd/scrubd/swpath/traffic"
)

// DefaultFrameSizes are the sizes `scrubd bench` measures (bytes on the
// wire including FCS, as link rates are quoted).
var DefaultFrameSizes = []int{64, 128, 256, 512, 1024, 1500}

// Config sets up a run. Zero fields take the defaults.
type Config struct {
	// Workers run concurrently, one receive queue each (default 1).
	Workers int
	// CPUs pins worker i to CPUs[i]; nil pins worker i to CPU i when
	// there is more than one worker, and leaves a single worker unpinned.
	CPUs []int
	// FrameSizes to measure (default DefaultFrameSizes).
	FrameSizes []int
	// Rules to classify against (default traffic.SourceWorkload(): the
	// source material's five UDP drop rules).
	Rules *rule.Set
	// Packets per worker per frame size (default 1<<20).
	Packets int
	// Mix is the share of frames (0..1) that no rule drops; they are
	// forwarded to the peer port (or counted, in Host mode). Default 0:
	// the pure drop path (receive + classify + drop + recycle).
	Mix float64
	// Host counts passed frames instead of forwarding them.
	Host bool
	// Compress delivers completions as compressed sessions.
	Compress bool
	// RQLog2 sizes the receive ring (default 10: 1024 WQEs).
	RQLog2 uint
	// Flows is the number of distinct frames cycled (default 4096).
	Flows int
	// Seed for the traffic (default 1).
	Seed uint64
	// IPv6 is the share of IPv6 frames (default: a negligible 0.0001,
	// i.e. an IPv4 flood as in the source material's measurements).
	IPv6 float64
}

// Split is a per-packet cost, in nanoseconds, by stage.
type Split struct {
	RxRefill float64 `json:"rx_refill"` // poll CQEs, reap send CQEs, refill the RQ
	Classify float64 `json:"classify"`  // parse + classify
	Out      float64 `json:"out"`       // drop (recycle to the cache) or forward (send WQEs + doorbell)
}

// SizeResult is one frame size's measurement.
type SizeResult struct {
	FrameSize int     `json:"frame_size"`
	Workers   int     `json:"workers"`
	Packets   uint64  `json:"packets"` // received, all workers
	Dropped   uint64  `json:"dropped"`
	Passed    uint64  `json:"passed"`
	NsPerPkt  float64 `json:"ns_per_pkt"` // wall time per packet, per worker
	// CPUNsPerPkt is the worker thread's CPU time per packet
	// (CLOCK_THREAD_CPUTIME_ID): what the software costs when other
	// processes share the core, as on a busy test machine.
	CPUNsPerPkt float64 `json:"cpu_ns_per_pkt"`
	// CyclesPerPkt is core cycles per packet: CPUNsPerPkt times CoreMHz
	// (thread CPU time, so other processes on the core do not count), or
	// counter ticks when the core clock is unknown.
	CyclesPerPkt float64 `json:"cycles_per_pkt"`
	// CapacityMpps is what one dedicated core would sustain: 1000 /
	// CPUNsPerPkt. This is the figure for the placement model.
	CapacityMpps  float64 `json:"capacity_mpps_per_core"`
	TicksPerPkt   float64 `json:"ticks_per_pkt"` // swpath/barrier.Cycles ticks
	MppsPerWorker float64 `json:"mpps_per_worker"`
	// QueueDrainMpps is how fast one worker empties its own receive
	// queue: packets received from a pre-filled ring (receive, classify,
	// drop or forward, recycle) over the wall time of those bursts, per
	// queue. It is the per-queue drain rate of the capacity model
	// (`scrubd plan --bench`, software.queue_drain_mpps): a queue offered
	// more than this overflows its ring whatever the CPU count.
	QueueDrainMpps float64 `json:"queue_drain_mpps"`
	Mpps           float64 `json:"mpps"` // all workers
	// LineRateMpps is 100GbE line rate at this size (pps = bps/((size+20)*8)).
	LineRateMpps float64 `json:"line_rate_100g_mpps"`
	Split        Split   `json:"split_ns"`
	// CacheHitPct is the share of the packets received that the
	// classifier's flow cache decided, in percent: what --flows gives
	// (high below the cache's 8192 decisions, about 0 on a flood).
	CacheHitPct float64 `json:"cache_hit_pct"`
}

// Report is the result of Run.
type Report struct {
	GOARCH   string `json:"goarch"`
	CPUModel string `json:"cpu_model,omitempty"`
	// CoreMHz is /proc/cpuinfo's "cpu MHz" (x86); 0 where the kernel does
	// not report it (arm64): cycles are then counter ticks.
	NumCPU    int          `json:"num_cpu"`
	CoreMHz   float64      `json:"core_mhz,omitempty"`
	CounterHz uint64       `json:"counter_hz"`
	Rules     int          `json:"rules"`
	Mix       float64      `json:"mix"`
	Host      bool         `json:"host"`
	Compress  bool         `json:"compress"`
	RingSize  int          `json:"ring_size"`
	Emulated  bool         `json:"emulated"` // always true: no NIC
	Sizes     []SizeResult `json:"sizes"`
}

func (c *Config) defaults() {
	if c.Workers <= 0 {
		c.Workers = 1
	}
	if len(c.FrameSizes) == 0 {
		c.FrameSizes = DefaultFrameSizes
	}
	if c.Rules == nil {
		c.Rules = traffic.SourceWorkload()
	}
	if c.Packets <= 0 {
		c.Packets = 1 << 20
	}
	if c.RQLog2 == 0 {
		c.RQLog2 = 10
	}
	if c.Flows <= 0 {
		c.Flows = 4096
	}
	if c.Seed == 0 {
		c.Seed = 1
	}
	if c.IPv6 == 0 {
		c.IPv6 = 0.0001
	}
	if c.CPUs == nil && c.Workers > 1 {
		for i := 0; i < c.Workers; i++ {
			c.CPUs = append(c.CPUs, i%runtime.NumCPU())
		}
	}
}

// Frames returns n distinct frames of size bytes (on the wire): a share
// mix that no rule in set drops, the rest dropped by some rule; a share v6
// of them IPv6.
func Frames(set *rule.Set, size, n int, mix, v6 float64, seed uint64) ([][]byte, error) {
	tab, err := classifier.Compile(set)
	if err != nil {
		return nil, err
	}
	drop := traffic.NewGenerator(traffic.Config{Seed: seed, Rules: set, RuleFraction: 1, IPv6Fraction: v6, Sizes: traffic.Fixed(size)})
	pass := traffic.NewGenerator(traffic.Config{Seed: seed + 1, IPv6Fraction: v6, Sizes: traffic.Fixed(size)})
	wantPass := int(float64(n)*mix + 0.5)
	var out [][]byte
	var f rule.Fields
	np, nd := 0, 0
	for tries := 0; len(out) < n; tries++ {
		if tries > 1000*n {
			return nil, fmt.Errorf("bench: could not make %d frames (%d passing) of %d bytes for this rule set", n, wantPass, size)
		}
		var b []byte
		if np < wantPass {
			b = pass.Next(nil)
		} else {
			b = drop.Next(nil)
		}
		packet.Parse(b, &f)
		d := tab.Decide(&f)
		dropped := d >= 0 && set.Rules[d].Action == rule.Drop
		switch {
		case np < wantPass && !dropped:
			np++
		case np >= wantPass && dropped && nd < n-wantPass:
			nd++
		default:
			continue
		}
		out = append(out, b)
	}
	return out, nil
}

// Run measures every frame size and returns the report.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	cfg.defaults()
	rep := &Report{
		GOARCH: runtime.GOARCH, NumCPU: runtime.NumCPU(), CounterHz: barrier.CycleHz(),
		Rules: len(cfg.Rules.Rules), Mix: cfg.Mix, Host: cfg.Host, Compress: cfg.Compress,
		RingSize: 1 << cfg.RQLog2, Emulated: true,
	}
	rep.CPUModel, rep.CoreMHz = cpuInfo()
	for _, size := range cfg.FrameSizes {
		if err := ctx.Err(); err != nil {
			return rep, err
		}
		r, err := measure(ctx, cfg, size, rep.CoreMHz)
		if err != nil {
			return rep, err
		}
		rep.Sizes = append(rep.Sizes, r)
	}
	return rep, nil
}

func measure(ctx context.Context, cfg Config, size int, coreMHz float64) (SizeResult, error) {
	frames, err := Frames(cfg.Rules, size, cfg.Flows, cfg.Mix, cfg.IPv6, cfg.Seed)
	if err != nil {
		return SizeResult{}, err
	}
	sim, err := newSim(cfg, cfg.Rules)
	if err != nil {
		return SizeResult{}, err
	}
	defer sim.Close()
	res := make([]workerResult, cfg.Workers)
	var wg sync.WaitGroup
	for i := range sim.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res[i] = runWorker(ctx, sim, i, frames, cfg)
		}()
	}
	wg.Wait()
	out := SizeResult{FrameSize: size, Workers: cfg.Workers, LineRateMpps: 100e9 / (float64(size+20) * 8) / 1e6}
	var ns, cpuNs, ticks float64
	var c dv.Counters
	for _, r := range res {
		if r.err != nil {
			return out, r.err
		}
		ns += float64(r.elapsed.Nanoseconds())
		cpuNs += float64(r.cpu.Nanoseconds())
		ticks += float64(r.ticks)
		c = dv.Total([]dv.Counters{c, r.c})
		out.Mpps += float64(r.c.Rx) / float64(r.elapsed.Nanoseconds()) * 1e3
	}
	if c.Rx == 0 {
		return out, fmt.Errorf("bench: %d-byte frames: nothing received", size)
	}
	pk := float64(c.Rx)
	out.Packets, out.Dropped, out.Passed = c.Rx, c.Dropped, c.Passed
	out.NsPerPkt = ns / pk
	out.CPUNsPerPkt = cpuNs / pk
	out.TicksPerPkt = ticks / pk
	out.CyclesPerPkt = out.TicksPerPkt
	if coreMHz > 0 {
		ns := out.CPUNsPerPkt
		if ns <= 0 {
			ns = out.NsPerPkt
		}
		out.CyclesPerPkt = ns * coreMHz / 1e3
	}
	if out.CPUNsPerPkt > 0 {
		out.CapacityMpps = 1e3 / out.CPUNsPerPkt
	}
	out.CacheHitPct = 100 * float64(c.CacheHits) / pk
	out.MppsPerWorker = out.Mpps / float64(cfg.Workers)
	out.QueueDrainMpps = out.MppsPerWorker
	tot := float64(c.CyclesRx + c.CyclesClassify + c.CyclesOut)
	if tot > 0 {
		// Apportion wall time by the stages' counter ticks.
		out.Split = Split{
			RxRefill: out.NsPerPkt * float64(c.CyclesRx) / tot,
			Classify: out.NsPerPkt * float64(c.CyclesClassify) / tot,
			Out:      out.NsPerPkt * float64(c.CyclesOut) / tot,
		}
	}
	return out, nil
}

type workerResult struct {
	c       dv.Counters
	elapsed time.Duration
	cpu     time.Duration
	ticks   uint64
	err     error
}

// runWorker pre-fills worker i's ring and times its bursts, on a locked
// thread (pinned when the config names a CPU).
func runWorker(ctx context.Context, sim *dvsim.Sim, i int, frames [][]byte, cfg Config) workerResult {
	unlock, err := lockThread(cfg.CPUs, i)
	defer unlock()
	if err != nil {
		return workerResult{err: err}
	}
	g := newRing(sim, i, frames, cfg)
	// The first ring-full warms caches and the pool; not counted.
	g.fill()
	g.drain(nil)
	before := g.w.Snapshot()
	var r workerResult
	for received := 0; received < cfg.Packets; {
		if ctx.Err() != nil {
			r.err = ctx.Err()
			return r
		}
		g.fill()
		received += g.drain(&r)
	}
	r.c = diff(g.w.Snapshot(), before)
	return r
}

// newSim returns the emulated NIC and engine of cfg's workers, their
// rules set.
func newSim(cfg Config, set *rule.Set) (*dvsim.Sim, error) {
	return dvsim.New(dvsim.Config{
		Rules: set, Workers: cfg.Workers, Host: cfg.Host, CPUs: cfg.CPUs,
		RQLog2: cfg.RQLog2, CQLog2: cfg.RQLog2 + 1, SQLog2: cfg.RQLog2,
		Pool: &pool.Config{HugePages: pool.HugeAuto, Bind: pool.BindAuto},
	})
}

// lockThread locks the calling goroutine to its thread, pinned to
// cpus[i] where cpus names one for worker i, until unlock is called
// (also after an error).
func lockThread(cpus []int, i int) (unlock func(), err error) {
	runtime.LockOSThread()
	if i < len(cpus) && cpus[i] >= 0 {
		err = numa.PinThread(cpus[i])
	}
	return runtime.UnlockOSThread, err
}

// ring is one worker's receive queue on the emulator, cycling frames.
type ring struct {
	w        *dv.Worker
	q        *nicemu.RxQueue
	tx       interface{ Service() int }
	frames   [][]byte
	next     int
	compress bool
}

// newRing returns worker i's ring, its first refill done.
func newRing(sim *dvsim.Sim, i int, frames [][]byte, cfg Config) *ring {
	g := &ring{w: sim.Workers[i], q: sim.RX[i], frames: frames, compress: cfg.Compress}
	if !cfg.Host && i < len(sim.TX) {
		g.tx = sim.TX[i]
	}
	g.w.Step() // first refill
	return g
}

// fill gives every posted receive WQE a packet (not timed), and services
// the send queue.
func (g *ring) fill() {
	for room := g.q.Room(); room > 0; {
		k := min(room, len(g.frames)-g.next)
		g.q.DeliverBurst(g.frames[g.next:g.next+k], g.compress, 64)
		g.next = (g.next + k) % len(g.frames)
		room -= k
	}
	if g.tx != nil {
		g.tx.Service()
	}
}

// drain runs the worker's bursts until its ring is empty, adds their
// wall, thread CPU and counter time to r (nil: not timed), and returns
// the packets received.
func (g *ring) drain(r *workerResult) int {
	t0 := time.Now()
	u0 := sys.ThreadCPUTime()
	c0 := barrier.Cycles()
	got := 0
	for {
		n := g.w.Step()
		if n == 0 {
			break
		}
		got += n
	}
	c1 := barrier.Cycles()
	u1 := sys.ThreadCPUTime()
	el := time.Since(t0)
	if r != nil {
		r.elapsed += el
		r.cpu += u1 - u0
		r.ticks += c1 - c0
	}
	return got
}

func diff(a, b dv.Counters) dv.Counters {
	return dv.Counters{
		Name: a.Name, Rx: a.Rx - b.Rx, RxBytes: a.RxBytes - b.RxBytes, Dropped: a.Dropped - b.Dropped,
		Passed: a.Passed - b.Passed, Tx: a.Tx - b.Tx, TxFull: a.TxFull - b.TxFull,
		Bursts: a.Bursts - b.Bursts, Cycles: a.Cycles - b.Cycles, CyclesRx: a.CyclesRx - b.CyclesRx,
		CyclesClassify: a.CyclesClassify - b.CyclesClassify, CyclesOut: a.CyclesOut - b.CyclesOut,
		CacheHits: a.CacheHits - b.CacheHits,
	}
}

// cpuInfo reads the CPU model and current clock from /proc/cpuinfo (x86;
// arm64 kernels do not report a clock there).
func cpuInfo() (model string, mhz float64) {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return "", 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		switch k {
		case "model name":
			if model == "" {
				model = v
			}
		case "cpu MHz":
			if mhz == 0 {
				mhz, _ = strconv.ParseFloat(v, 64)
			}
		}
	}
	return model, mhz
}

// WriteText prints the report as a table.
func (r *Report) WriteText(w io.Writer) error {
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "software path (dv engine on the NIC emulator; no NIC): %s, %d CPUs", r.GOARCH, r.NumCPU)
	if r.CPUModel != "" {
		fmt.Fprintf(bw, ", %s", r.CPUModel)
	}
	if r.CoreMHz > 0 {
		fmt.Fprintf(bw, " @ %.0f MHz", r.CoreMHz)
	}
	fmt.Fprintf(bw, "\n%d rules, pass share %.2f, host %v, compressed %v, ring %d\n", r.Rules, r.Mix, r.Host, r.Compress, r.RingSize)
	fmt.Fprintf(bw, "%6s %7s %8s %8s %8s %9s %8s %8s %9s %10s %9s %9s %7s\n", "size", "workers", "ns/pkt", "cpu-ns", "cyc/pkt", "drain/q", "Mpps", "cap/core", "100G Mpps", "rx+refill", "classify", "drop/fwd", "cache%")
	for _, s := range r.Sizes {
		fmt.Fprintf(bw, "%6d %7d %8.1f %8.1f %8.1f %9.2f %8.2f %8.2f %9.2f %10.1f %9.1f %9.1f %7.1f\n", s.FrameSize, s.Workers, s.NsPerPkt, s.CPUNsPerPkt, s.CyclesPerPkt,
			s.QueueDrainMpps, s.Mpps, s.CapacityMpps, s.LineRateMpps, s.Split.RxRefill, s.Split.Classify, s.Split.Out, s.CacheHitPct)
	}
	return bw.Flush()
}

// ParseFrameSizes parses a comma-separated list such as
// "64,128,256,512,1024,1500" (the --frame-sizes flag).
func ParseFrameSizes(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		n, err := strconv.Atoi(f)
		if err != nil || n < 60 || n > 9216 {
			return nil, fmt.Errorf("bench: frame size %q: want an integer 60..9216", f)
		}
		out = append(out, n)
	}
	return out, nil
}

// Pair is one frame size's cost of a rule set against a baseline set,
// the two timed side by side on one worker thread (RunPaired).
type Pair struct {
	FrameSize int `json:"frame_size"`
	Rounds    int `json:"rounds"`
	BaseRules int `json:"base_rules"`
	Rules     int `json:"rules"`
	// BaseCPUNsPerPkt and CPUNsPerPkt are the thread CPU ns a packet of
	// the baseline and of the set, over every round's timed packets.
	BaseCPUNsPerPkt float64 `json:"base_cpu_ns_per_pkt"`
	CPUNsPerPkt     float64 `json:"cpu_ns_per_pkt"`
	// Ratio is the median over the rounds of the set's CPU ns a packet
	// over the baseline's in the same round; RatioMin and RatioMax the
	// least and the most.
	Ratio    float64 `json:"ratio"`
	RatioMin float64 `json:"ratio_min"`
	RatioMax float64 `json:"ratio_max"`
}

// side is one rule set's worker in a paired run: warm runs a ring-full
// untimed, timed a ring-full whose time it adds to r, and returns the
// packets received.
type side interface {
	warm()
	timed(r *workerResult) int
}

func (g *ring) warm()                     { g.fill(); g.drain(nil) }
func (g *ring) timed(r *workerResult) int { g.fill(); return g.drain(r) }

// RunPaired measures the cost of cfg.Rules against that of base at each
// of cfg.FrameSizes, side by side on one worker thread (cfg.Workers must
// be 1; pinned where cfg.CPUs names a CPU): each of rounds rounds (at
// least 1) runs both sets in turn, the baseline first in even rounds and
// last in odd ones, each a ring-full untimed, so that the caches hold its
// own data rather than the other set's, then cfg.Packets/rounds packets
// timed. So a phase of the machine that slows it for seconds slows both
// sets of a round, where two runs one after the other would each see a
// phase of their own.
func RunPaired(ctx context.Context, cfg Config, base *rule.Set, rounds int) ([]Pair, error) {
	cfg.defaults()
	if cfg.Workers != 1 {
		return nil, fmt.Errorf("bench: a paired run takes one worker, not %d", cfg.Workers)
	}
	if base == nil {
		base = traffic.SourceWorkload()
	}
	rounds = max(rounds, 1)
	unlock, err := lockThread(cfg.CPUs, 0)
	defer unlock()
	if err != nil {
		return nil, err
	}
	var out []Pair
	for _, size := range cfg.FrameSizes {
		p, err := pairSize(ctx, cfg, base, size, rounds)
		if err != nil {
			return out, err
		}
		out = append(out, p)
	}
	return out, nil
}

// pairSize is RunPaired at one frame size.
func pairSize(ctx context.Context, cfg Config, base *rule.Set, size, rounds int) (Pair, error) {
	var sides [2]side
	for k, set := range [2]*rule.Set{base, cfg.Rules} {
		frames, err := Frames(set, size, cfg.Flows, cfg.Mix, cfg.IPv6, cfg.Seed)
		if err != nil {
			return Pair{}, err
		}
		sim, err := newSim(cfg, set)
		if err != nil {
			return Pair{}, err
		}
		defer sim.Close()
		sides[k] = newRing(sim, 0, frames, cfg)
	}
	p := Pair{FrameSize: size, Rounds: rounds, BaseRules: len(base.Rules), Rules: len(cfg.Rules.Rules)}
	cpu, pkts, ratios, err := alternate(ctx, sides, rounds, max(cfg.Packets/rounds, 1))
	if err != nil {
		return p, err
	}
	p.BaseCPUNsPerPkt = float64(cpu[0]) / float64(pkts[0])
	p.CPUNsPerPkt = float64(cpu[1]) / float64(pkts[1])
	slices.Sort(ratios)
	p.Ratio, p.RatioMin, p.RatioMax = ratios[len(ratios)/2], ratios[0], ratios[len(ratios)-1]
	return p, nil
}

// alternate runs rounds rounds over the two sides: in each, both in turn
// (side 0 first in even rounds, last in odd ones), each a ring-full
// untimed and then ring-fulls timed until it has received per packets
// (a ring-full that receives nothing is an error, not a wait). It returns each side's CPU time and packets over all rounds, and each
// round's CPU ns a packet of side 1 over side 0's.
func alternate(ctx context.Context, sides [2]side, rounds, per int) (cpu [2]time.Duration, pkts [2]int, ratios []float64, err error) {
	for round := range rounds {
		var rs [2]workerResult
		var got [2]int
		for i := range 2 {
			k := i
			if round%2 == 1 {
				k = 1 - i
			}
			sides[k].warm()
			for got[k] < per {
				if err := ctx.Err(); err != nil {
					return cpu, pkts, ratios, err
				}
				n := sides[k].timed(&rs[k])
				if n == 0 {
					return cpu, pkts, ratios, fmt.Errorf("bench: round %d: side %d received nothing from a full ring", round, k)
				}
				got[k] += n
			}
		}
		for k := range 2 {
			if got[k] == 0 || rs[k].cpu <= 0 {
				return cpu, pkts, ratios, fmt.Errorf("bench: round %d: side %d received %d packets in %v of CPU time", round, k, got[k], rs[k].cpu)
			}
			cpu[k] += rs[k].cpu
			pkts[k] += got[k]
		}
		ratios = append(ratios, float64(rs[1].cpu)/float64(got[1])/(float64(rs[0].cpu)/float64(got[0])))
	}
	return cpu, pkts, ratios, nil
}

// WritePairs prints RunPaired's result as a table.
func WritePairs(w io.Writer, ps []Pair) error {
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "%6s %7s %11s %7s %9s %9s %s\n", "size", "rounds", "base rules", "rules", "base cpu", "cpu-ns", "ratio, median (least-most)")
	for _, p := range ps {
		fmt.Fprintf(bw, "%6d %7d %11d %7d %9.1f %9.1f %.2fx (%.2f-%.2f)\n", p.FrameSize, p.Rounds, p.BaseRules, p.Rules, p.BaseCPUNsPerPkt, p.CPUNsPerPkt, p.Ratio, p.RatioMin, p.RatioMax)
	}
	return bw.Flush()
}
