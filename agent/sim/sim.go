// Package sim is `scrubd run --sim`: the whole agent on a simulated NIC with
// no hardware and no configuration. A built-in traffic mix (small-frame
// floods, large-frame amplification, traffic no NIC key can match,
// legitimate and management traffic) is sent, as real Ethernet frames, into
//
//   - the simulated NIC flow table (offload/sim, mlx5's keys, flow groups
//     and limits) behind agent/hwpath: a frame an entry matches is dropped
//     there and counted on that entry, as the eswitch would;
//   - for every frame the table passes, the receive ring of the NIC
//     emulator (swpath/nicemu), where the Direct Verbs engine (swpath/dv:
//     one worker per receive queue, each with its own pool cache, the
//     classifier's burst API) polls it, drops it or forwards it to the
//     peer port's send queue.
//
// Counters are read back from those two places only: per rule from the
// table's entries and the engine's classifier, per worker and
// out-of-buffer from the engine and the emulator, cycles per packet as the
// engine measured them.
//
// What is modelled rather than run: a 100G link carries tens of Mpps, which
// a laptop cannot push through Go code, so one packet in Scale is sent
// through the real path and every counter the agent reads is multiplied by
// Scale. The software path modelled is a BlueField-3's: Workers cores at Hz
// running CPP cycles per packet (the Direct Verbs figures by default);
// when the packets reaching software exceed that capacity the excess is
// lost before the receive rings, counted as out-of-buffer, as on a NIC
// whose rings run dry. With QueueDrainPPS each receive queue also carries
// at most that many packets per second (its ring's drain rate, agent/plan's
// queue model): what a queue is offered beyond it is lost as out-of-buffer
// too, however much CPU the model has left. RSS is mlx5's: a Toeplitz hash
// of the addresses with the key scrubd's engine gives the NIC, through a
// uniform indirection table. The engine's own cycles per packet, measured
// on this machine, are reported beside the model. Every frame carries its
// flow and the reference decision ((*rule.Set).Decide on the rule set in
// force when it was sent), so the simulator counts any packet a path
// dropped that the rules pass (over-drop), and every packet of a protected
// flow lost, whatever lost it: a rule on either path, a missing receive
// buffer, a full send queue (ProtectedLost). The packets the capacity
// model loses are drawn at random among the round's, the flows interleaved
// by arrival, so each flow loses in proportion to its rate.
//
// Two ways to drive it: Step runs a slice of traffic synchronously (the
// workers are stepped on the caller's goroutine until the rings are empty:
// deterministic, for tests), Run sends traffic in real time while the
// workers poll on their own locked OS threads.
package sim

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"math/bits"
	"math/rand/v2"
	"net/netip"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/scrubd/scrubd/agent/dataplane"
	"github.com/scrubd/scrubd/agent/hwpath"
	"github.com/scrubd/scrubd/agent/plan"
	"github.com/scrubd/scrubd/agent/swengine"
	"github.com/scrubd/scrubd/offload"
	"github.com/scrubd/scrubd/offload/compile"
	osim "github.com/scrubd/scrubd/offload/sim"
	"github.com/scrubd/scrubd/swpath/classifier"
	"github.com/scrubd/scrubd/swpath/dv"
	"github.com/scrubd/scrubd/swpath/dv/dvsim"
	"github.com/scrubd/scrubd/swpath/nicemu"
	"github.com/scrubd/scrubd/swpath/numa"
	"github.com/scrubd/scrubd/swpath/pool"
	"github.com/scrubd/scrubd/swpath/rule"
)

// Flow is one stream of the traffic mix.
type Flow struct {
	Name      string
	Fields    rule.Fields
	Frame     int     // frame size on the wire in bytes (with FCS)
	PPS       float64 // full-rate (modelled) packets per second
	Protected bool    // traffic the protect list covers
	// Vary spreads source addresses over this many values.
	Vary int
}

// FlowStats are one flow's counters, in modelled packets (real packets
// times Scale).
type FlowStats struct {
	Name      string
	Protected bool // the flow is traffic the protect list covers
	Sent      uint64
	HWDropped uint64
	SWDropped uint64
	Passed    uint64
	// OOB is what was lost for want of receive buffers: the modelled
	// capacity's loss (ModelOOB) plus what found a real ring empty.
	OOB      uint64
	ModelOOB uint64
	// OverDrop counts packets a path dropped that the rules pass.
	OverDrop uint64
	// UnderPass counts packets the rules drop that passed (a rule not yet
	// in force on a path).
	UnderPass uint64
	// Unforwarded counts passed packets the engine could not send on (the
	// peer port's send queue was full): lost, though no rule dropped them.
	Unforwarded uint64
	// Forwarded counts packets the peer port transmitted (forward mode).
	Forwarded uint64
}

// Options size the simulated NIC.
type Options struct {
	// Scale: one packet in Scale runs through the real path (default 1000).
	Scale float64
	// Workers, Hz and CPP model the software path's capacity (default 12
	// workers, 2.13 GHz, 297 cycles per packet: BlueField-3 with Direct
	// Verbs).
	Workers int
	Hz      float64
	CPP     float64
	// Queues is the number of real receive queues and engine workers
	// (default Workers).
	Queues    int
	HWEntries int // hardware entry budget (default 10)
	HWMasks   int // mask shapes per table (0: device's 15)
	// HWEntriesPerRule bounds the entries one rule compiles to (0: none).
	HWEntriesPerRule int
	Flows            []Flow // default DefaultFlows()
	Start            time.Time
	InsertRate       float64 // default: mlx5 DMFS 5000/s
	// Host puts the engine in host mode: passed frames are counted, not
	// forwarded to the peer port.
	Host bool
	// RingEntries sizes each receive queue of the emulated NIC (default
	// 512; software.rx_ring_entries); its CQ gets twice as many.
	RingEntries int
	// QueueDrainPPS, when set, is each receive queue's modelled drain rate
	// (full-rate packets per second): the ring's limit.
	QueueDrainPPS float64
	// RETASize is the RSS indirection table's size (default
	// plan.DefaultRETASize).
	RETASize int
	// IdleSleep is how long a worker in Run sleeps after a poll that found
	// nothing (default 1 ms), so twelve simulated cores do not keep a
	// laptop's CPUs spinning.
	IdleSleep time.Duration
	// Sink, when set, sees every frame the peer port transmits, after the
	// simulator counted it (tests count what came out against what was
	// sent). It must not keep the slice.
	Sink func(frame []byte)
}

// NIC is the simulated box: hardware table, emulated NIC rings and the
// engine polling them, traffic.
type NIC struct {
	opt   Options
	clock *osim.FakeClock
	hwNIC *osim.NIC
	hw    dataplane.HW
	sw    *swengine.Emulated
	dv    *dvsim.Sim

	flows [][]variant
	stats []flowCounters
	// modelOOB counts, per queue, packets the capacity model lost before
	// they reached the ring; ringOOB the part of them the queue's drain
	// rate lost (the rest the CPU model did).
	modelOOB []atomic.Uint64
	ringOOB  []atomic.Uint64
	drainAcc []float64
	untagged atomic.Uint64
	unpinned atomic.Uint64 // workers Run could not pin

	mu      sync.Mutex // serialises traffic rounds
	ref     *rule.Set  // the effective set, for the reference decision
	refSeen *rule.Set
	refDrop [][]bool
	acc     []float64
	keepAcc float64    // the capacity model's fraction of a packet to keep, carried
	rng     *rand.Rand // picks the packets the capacity model loses
	steps   uint64
	pend    [][]pending
	running bool

	closeOnce sync.Once
	closeErr  error
	closed    atomic.Bool
}

type pending struct {
	flow  int
	frame []byte
	at    float64 // when in the round it arrives, as a fraction of the round
}

type flowCounters struct {
	sent, hw, sw, passed, oob, modelOOB, over, under, unfwd, fwd atomic.Uint64
	_                                                            [64]byte
}

// defaultModel fills the modelled software path's zero fields: scale
// 1000, 12 workers of a 2.13 GHz BlueField-3 at 297 cycles per packet.
func (opt *Options) defaultModel() {
	if opt.Scale <= 0 {
		opt.Scale = 1000
	}
	if opt.Workers <= 0 {
		opt.Workers = 12
	}
	if opt.Hz <= 0 {
		opt.Hz = 2.13e9
	}
	if opt.CPP <= 0 {
		opt.CPP = 297
	}
}

// EmulatedRing returns the entries of each emulated receive queue for a
// modelled NIC whose rings have modelled entries (software.rx_ring_entries
// or the capacity model's size) and whose software path opt describes
// (Scale, Workers, Hz, CPP; zero fields take New's defaults). The emulated
// rings carry real packets, one for every Scale modelled ones, so a
// modelled ring of N entries holds N/Scale of them. They must still take
// one round of Run's traffic at once, whatever queue it falls on: the
// whole modelled software capacity for maxRound, in real packets (the
// capacity model loses the rest before the rings). The result is that
// rounded up to a power of 2, at least 256 and at most modelled: at scale
// 1 the emulated rings are the modelled ones. Each ring entry holds a
// pool buffer of about 2 KiB: 2 queues of 32768 entries were 150 MB of
// buffers for a simulation whose rounds deliver a few hundred packets.
func EmulatedRing(modelled int, opt Options) int {
	opt.defaultModel()
	round := float64(opt.Workers) * opt.Hz / opt.CPP * maxRound.Seconds() / opt.Scale
	need := max(float64(modelled)/opt.Scale, round)
	n := 256
	for n < modelled && float64(n) < need {
		n *= 2
	}
	return n
}

// New builds the simulated NIC: the flow table, the engine's pool, rings
// and workers over the emulator, and the traffic's frames.
func New(opt Options) (*NIC, error) {
	opt.defaultModel()
	if opt.Queues <= 0 {
		opt.Queues = opt.Workers
	}
	if opt.HWEntries <= 0 {
		opt.HWEntries = 10
	}
	if opt.Flows == nil {
		opt.Flows = DefaultFlows()
	}
	if len(opt.Flows) > maxFlows {
		return nil, fmt.Errorf("sim: %d flows: at most %d", len(opt.Flows), maxFlows)
	}
	if opt.Start.IsZero() {
		opt.Start = time.Now()
	}
	if opt.IdleSleep <= 0 {
		opt.IdleSleep = time.Millisecond
	}
	if opt.RingEntries == 0 {
		opt.RingEntries = 512
	}
	if err := plan.ValidRing(opt.RingEntries); err != nil {
		return nil, fmt.Errorf("sim: %w", err)
	}
	if opt.RETASize == 0 {
		opt.RETASize = plan.DefaultRETASize
	}
	reta, err := plan.UniformRETA(opt.RETASize, opt.Queues)
	if err != nil {
		return nil, fmt.Errorf("sim: %w", err)
	}
	caps := offload.MLX5(osim.DefaultEntries)
	if opt.InsertRate > 0 {
		caps.InsertRate = opt.InsertRate
	}
	clk := osim.NewFakeClock(opt.Start)
	hwNIC := osim.New(osim.Config{Caps: caps, Clock: clk, Dev: "sim0"})
	// The agent's table layout (agent/hwpath/flower.go): drops at 10 and 11, the
	// accept rules' pass entries before them at 8 and 9.
	path := hwpath.New(hwpath.Config{Name: "sim-mlx5", Compile: compile.Config{Caps: caps, Chain: 0, PrioV4: 10, PrioV6: 11, PassPrioV4: 8, PassPrioV6: 9},
		Owner: offload.Owner{Chain: 0, PrioLo: 8, PrioHi: 11}, MaxEntries: opt.HWEntries, MaxMasks: opt.HWMasks,
		MaxEntriesPerRule: opt.HWEntriesPerRule}, hwNIC)
	n := &NIC{opt: opt, clock: clk, hwNIC: hwNIC, ref: &rule.Set{},
		stats: make([]flowCounters, len(opt.Flows)), modelOOB: make([]atomic.Uint64, opt.Queues),
		ringOOB: make([]atomic.Uint64, opt.Queues), drainAcc: make([]float64, opt.Queues),
		acc: make([]float64, len(opt.Flows)), pend: make([][]pending, opt.Queues), rng: rand.New(rand.NewPCG(1, 2))}
	for i := range opt.Flows {
		vs, err := buildVariants(i, &opt.Flows[i], reta)
		if err != nil {
			return nil, err
		}
		n.flows = append(n.flows, vs)
	}
	// The engine: rings of RingEntries receive WQEs (a CQ of twice that)
	// and 512 send WQEs per queue, small pool caches: twelve queues of 512
	// fit in ~50 MB.
	rq := uint(bits.TrailingZeros(uint(opt.RingEntries)))
	d, err := dvsim.New(dvsim.Config{Workers: opt.Queues, Host: opt.Host, CQLog2: rq + 1, RQLog2: rq, SQLog2: 9, Tap: n.tap,
		Sink: n.sink, Unforwarded: n.unforwarded,
		Pool: &pool.Config{HugePages: pool.HugeOff, Bind: pool.BindOff, CacheSize: 128}})
	if err != nil {
		return nil, fmt.Errorf("sim: software path: %w", err)
	}
	n.dv = d
	for _, w := range d.Workers {
		w.Step() // post the first receive buffers
	}
	n.sw = swengine.NewEmulated(swengine.EmulatedConfig{DV: d, Scale: opt.Scale, Workers: opt.Workers, Hz: opt.Hz,
		ModelLost: func(q int) uint64 { return n.modelOOB[q].Load() }, ProtectedLost: n.ProtectedLost})
	n.hw = &hwpath.Scaled{HW: path, Scale: opt.Scale, NIC: n.nicCounters}
	return n, nil
}

// HW is the hardware path (for placement).
func (n *NIC) HW() dataplane.HW { return n.hw }

// SW is the software path (for placement).
func (n *NIC) SW() dataplane.SW { return n.sw }

// Device is the simulated flow table (tests use SetGone and Flush).
func (n *NIC) Device() *osim.NIC { return n.hwNIC }

// Now is the simulation's clock.
func (n *NIC) Now() time.Time { return n.clock.Now() }

// Scale is how many modelled packets each real packet stands for.
func (n *NIC) Scale() float64 { return n.opt.Scale }

// Model describes the modelled software path.
func (n *NIC) Model() (workers int, hz, cpp float64) { return n.opt.Workers, n.opt.Hz, n.opt.CPP }

// SetReference gives the rule set in force, for the reference decision.
func (n *NIC) SetReference(s *rule.Set) {
	n.mu.Lock()
	n.ref = s
	n.mu.Unlock()
}

// Close stops the emulated device and the engine and releases the pool. It
// returns the emulator's first protocol error, or an error if buffers
// leaked. Stats stay readable (frozen) afterwards.
func (n *NIC) Close() error {
	n.closeOnce.Do(func() {
		n.mu.Lock()
		defer n.mu.Unlock()
		n.sw.Freeze()
		n.closed.Store(true)
		n.closeErr = n.dv.Close()
		if n.closeErr == nil && n.dv.Leaked != 0 {
			n.closeErr = fmt.Errorf("sim: %d buffers leaked", n.dv.Leaked)
		}
	})
	return n.closeErr
}

func (n *NIC) up(v uint64) uint64 { return uint64(math.Round(float64(v) * n.opt.Scale)) }

func (n *NIC) nicCounters() map[string]uint64 {
	var model, ring uint64
	for i := range n.modelOOB {
		model += n.modelOOB[i].Load()
	}
	for _, q := range n.dv.RX {
		ring += q.C.OutOfBuffer.Load()
	}
	// Drop counters only, as mlx5 names them (the kernel's
	// Documentation/networking/device_drivers/ethernet/mellanox/mlx5/counters.rst):
	// rx_out_of_buffer, packets lost for want of a posted receive buffer;
	// rx_discards_phy, packets the port discarded (none here: the
	// simulated port never runs out of its own buffer). rx_packets_phy
	// counts every packet received, not a drop, and is not reported.
	return map[string]uint64{
		"rx_out_of_buffer": n.up(model + ring),
		"rx_discards_phy":  0,
	}
}

// flowOf returns the counters of the flow a frame's tag names (nil for a
// frame the simulator did not send).
func (n *NIC) flowOf(frame []byte) *flowCounters {
	t := tagOf(frame)
	if t < 0 || t>>tagFlowBits >= len(n.stats) {
		n.untagged.Add(1)
		return nil
	}
	return &n.stats[t>>tagFlowBits]
}

// sink sees every frame the peer port transmits (forward mode).
func (n *NIC) sink(frame []byte) {
	if fc := n.flowOf(frame); fc != nil {
		fc.fwd.Add(1)
	}
	if n.opt.Sink != nil {
		n.opt.Sink(frame)
	}
}

// unforwarded sees every passed frame the engine could not send on.
func (n *NIC) unforwarded(frame []byte) {
	if fc := n.flowOf(frame); fc != nil {
		fc.unfwd.Add(1)
	}
}

// tap sees every frame the engine classified (on the worker's goroutine):
// it attributes the verdict to the frame's flow and checks it against the
// reference decision the frame carries.
func (n *NIC) tap(frame []byte, r classifier.Result) {
	fc := n.flowOf(frame)
	if fc == nil {
		return
	}
	refDrop := tagOf(frame)&tagDrop != 0
	if r.Verdict == classifier.Drop {
		fc.sw.Add(1)
		if !refDrop {
			fc.over.Add(1)
		}
		return
	}
	fc.passed.Add(1)
	if refDrop {
		fc.under.Add(1)
	}
}

// refresh recomputes the reference decision of every variant when the rule
// set changed. Caller holds mu.
func (n *NIC) refresh() {
	if n.ref == n.refSeen && n.refDrop != nil {
		return
	}
	n.refSeen = n.ref
	n.refDrop = referenceDrops(n.ref, n.flows)
}

// referenceDrops returns, for every variant of every flow, whether set
// drops it: the decision of set.Decide (the first matching rule in
// priority then file order), computed a flow at a time. A flow's variants
// differ in their source address only, so a rule whose match, without its
// source prefix, fails the flow's first variant fails them all; only the
// rules left are tried on each variant. At 100k rules and the default
// traffic mix (627 variants of 12 flows) that is one pass over the rules per flow
// instead of one per variant: the simulator's traffic stood still for
// seconds after every change of the rule set. A variant that differs in
// anything else falls back to set.Decide. The set's holes (rule.Holes)
// decide nothing.
func referenceDrops(set *rule.Set, flows [][]variant) [][]bool {
	out := make([][]bool, len(flows))
	var cand []int
	for i, vs := range flows {
		out[i] = make([]bool, len(vs))
		if len(vs) == 0 {
			continue
		}
		base := vs[0].fields
		cand = cand[:0]
		for k := range set.Rules {
			m := set.Rules[k].Match
			m.Src = netip.Prefix{}
			if m.Matches(&base) && set.Live(k) { // a hole (rule.Holes) is no rule
				cand = append(cand, k)
			}
		}
		for v := range vs {
			f := &vs[v].fields
			same := *f
			same.Src = base.Src
			best := -1
			if same != base {
				best = set.Decide(f)
			} else {
				for _, k := range cand {
					r := &set.Rules[k]
					if best >= 0 && !rule.Before(r, set.Key(k), &set.Rules[best], set.Key(best)) {
						continue
					}
					if r.Match.Matches(f) {
						best = k
					}
				}
			}
			out[i][v] = best >= 0 && set.Rules[best].Action == rule.Drop
		}
	}
	return out
}

// round sends secs of traffic. sync steps the workers on this goroutine;
// otherwise they poll on their own. Caller holds mu.
func (n *NIC) round(secs float64, sync bool) {
	n.steps++
	if secs <= 0 || n.closed.Load() {
		return
	}
	n.refresh()
	for q := range n.pend {
		n.pend[q] = n.pend[q][:0]
	}
	toSW := 0
	for i := range n.opt.Flows {
		fl := &n.opt.Flows[i]
		n.acc[i] += fl.PPS * secs / n.opt.Scale
		cnt := int(n.acc[i])
		n.acc[i] -= float64(cnt)
		fc := &n.stats[i]
		vs := n.flows[i]
		for k := 0; k < cnt; k++ {
			v := int((n.steps*7919 + uint64(k)) % uint64(len(vs)))
			drop := n.refDrop[i][v]
			fr := vs[v].frames[0]
			if drop {
				fr = vs[v].frames[1]
			}
			fc.sent.Add(1)
			if _, hit := n.hwNIC.ProcessFrame(fr); hit {
				fc.hw.Add(1)
				if !drop {
					fc.over.Add(1)
				}
				continue
			}
			// The flow's packets are spread evenly over the round.
			at := (float64(k) + 0.5) / float64(cnt)
			n.pend[vs[v].queue] = append(n.pend[vs[v].queue], pending{flow: i, frame: fr, at: at})
			toSW++
		}
	}
	// The modelled software capacity: what exceeds it is lost before the
	// rings, for want of posted buffers.
	capPPS := float64(n.opt.Workers) * n.opt.Hz / n.opt.CPP
	offered := float64(toSW) * n.opt.Scale / secs
	keep := 1.0
	if offered > capPPS {
		keep = capPPS / offered
	}
	// Which packets: toKeep of the toSW, drawn at random (selection
	// sampling, Knuth's Algorithm S), so each is as likely as any other to
	// be lost, whatever its flow or its place in the round.
	n.keepAcc += keep * float64(toSW)
	toKeep := int(n.keepAcc)
	n.keepAcc -= float64(toKeep)
	seen := 0
	for q, list := range n.pend {
		// The flows interleaved on the wire, in arrival order: what the
		// capacity or a ring's drain rate loses falls on every flow in
		// proportion to its rate, not on the flows listed last.
		slices.SortStableFunc(list, func(a, b pending) int { return cmp.Compare(a.at, b.at) })
		rq := n.dv.RX[q]
		// The queue's ring drains at most QueueDrainPPS: this round's
		// allowance in real packets.
		allowed := len(list)
		if n.opt.QueueDrainPPS > 0 {
			n.drainAcc[q] += n.opt.QueueDrainPPS * secs / n.opt.Scale
			allowed = int(n.drainAcc[q])
			n.drainAcc[q] -= float64(allowed)
		}
		for _, p := range list {
			fc := &n.stats[p.flow]
			left := toSW - seen
			seen++
			if toKeep < left && n.rng.IntN(left) >= toKeep {
				fc.oob.Add(1)
				fc.modelOOB.Add(1)
				n.modelOOB[q].Add(1)
				continue
			}
			toKeep--
			if allowed == 0 {
				fc.oob.Add(1)
				fc.modelOOB.Add(1)
				n.modelOOB[q].Add(1)
				n.ringOOB[q].Add(1)
				continue
			}
			allowed--
			if sync {
				for rq.Room() == 0 && n.stepQueue(q) > 0 {
				}
			}
			if rq.Deliver(p.frame) != nicemu.Placed {
				fc.oob.Add(1) // the real ring was empty (or the completion failed)
			}
		}
	}
	if sync {
		n.drain()
		return
	}
	n.serviceTX()
}

// stepQueue runs one burst of worker q and lets the peer port send what it
// forwarded.
func (n *NIC) stepQueue(q int) int {
	got := n.dv.Workers[q].Step()
	if q < len(n.dv.TX) {
		n.dv.TX[q].Service()
	}
	return got
}

// drain steps every worker until its ring is empty.
func (n *NIC) drain() {
	for q := range n.dv.Workers {
		for n.stepQueue(q) > 0 {
		}
	}
}

func (n *NIC) serviceTX() {
	for _, t := range n.dv.TX {
		t.Service()
	}
}

// Step runs dt of traffic synchronously: it advances the simulation clock,
// sends each flow's packets through the hardware table and what it passes
// through the engine, stepping the workers until the rings are empty. It
// must not be called while Run runs.
func (n *NIC) Step(dt time.Duration) {
	n.clock.Advance(dt)
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.running {
		panic("sim: Step called while Run is running")
	}
	n.round(dt.Seconds(), true)
}

// Idle advances the simulation clock without traffic.
func (n *NIC) Idle(dt time.Duration) { n.clock.Advance(dt) }

// Stats returns every flow's counters, in modelled packets.
func (n *NIC) Stats() []FlowStats {
	out := make([]FlowStats, len(n.stats))
	for i := range n.stats {
		c := &n.stats[i]
		out[i] = FlowStats{Name: n.opt.Flows[i].Name, Protected: n.opt.Flows[i].Protected, Sent: n.up(c.sent.Load()), HWDropped: n.up(c.hw.Load()),
			SWDropped: n.up(c.sw.Load()), Passed: n.up(c.passed.Load()), OOB: n.up(c.oob.Load()), ModelOOB: n.up(c.modelOOB.Load()),
			OverDrop: n.up(c.over.Load()), UnderPass: n.up(c.under.Load()), Unforwarded: n.up(c.unfwd.Load()),
			Forwarded: n.up(c.fwd.Load())}
	}
	return out
}

// EngineStats are the software path's own counters, in real packets (not
// scaled): what the engine received, dropped and forwarded, what the peer
// port sent, what found a ring empty, and the engine's cycle split.
type EngineStats struct {
	Workers                    int
	Total                      dv.Counters
	PeerSent                   uint64 // frames the emulated peer port transmitted
	RingOutOfBuffer, ModelLost uint64
	Forward                    bool
	// CyclesPerTick converts Total's cycle counts (counter ticks) to
	// cycles at the modelled clock.
	CyclesPerTick float64
	// Unpinned counts workers Run could not pin to a CPU.
	Unpinned uint64
}

// Engine returns the engine's counters (zero after Close).
func (n *NIC) Engine() EngineStats {
	es := EngineStats{Workers: len(n.dv.Workers), Forward: !n.opt.Host, CyclesPerTick: float64(swengine.EmulatedCycles(1<<20, n.opt.Hz)) / (1 << 20)}
	if n.closed.Load() {
		return es
	}
	sn := n.dv.Snapshot()
	es.Total, es.PeerSent, es.RingOutOfBuffer = sn.Total, sn.TxFrames, sn.OutOfBuffer
	for i := range n.modelOOB {
		es.ModelLost += n.modelOOB[i].Load()
	}
	return es
}

// Rings returns the entries of each emulated receive queue and of its CQ.
func (n *NIC) Rings() (rq, cq int) {
	r := n.dv.RxRings[0]
	return 1 << r.RQLog2, 1 << r.CQLog2
}

// RingLost returns the packets each queue's drain rate lost (modelled
// packets, per queue): the rings' overflow, apart from the CPU model's.
func (n *NIC) RingLost() []uint64 {
	out := make([]uint64, len(n.ringOOB))
	for i := range n.ringOOB {
		out[i] = n.up(n.ringOOB[i].Load())
	}
	return out
}

// Untagged counts frames the engine saw that the simulator did not send
// (always 0 unless something is wrong).
func (n *NIC) Untagged() uint64 { return n.untagged.Load() }

// ProtectedDrops returns how many packets of protected flows a rule
// dropped on either path (modelled packets); ProtectedLost adds the loss
// no rule decided.
func (n *NIC) ProtectedDrops() uint64 {
	var d uint64
	for i, s := range n.Stats() {
		if n.opt.Flows[i].Protected {
			d += s.HWDropped + s.SWDropped
		}
	}
	return d
}

// ProtectedLost returns the packets of protected flows lost so far, by
// cause (dataplane.LostCauses; modelled packets): dropped by a hardware
// entry or by the engine's rules, lost for want of a receive buffer (the
// capacity model's and the real rings' out-of-buffer), passed but not sent
// on because the peer's send queue was full. Each frame's flow is read from
// its tag wherever it is lost. It implements dataplane.ProtectedLoss.
func (n *NIC) ProtectedLost() map[string]uint64 {
	out := make(map[string]uint64, len(dataplane.LostCauses))
	for _, c := range dataplane.LostCauses {
		out[c] = 0
	}
	for _, s := range n.Stats() {
		if !s.Protected {
			continue
		}
		out[dataplane.LostHWRule] += s.HWDropped
		out[dataplane.LostSWRule] += s.SWDropped
		out[dataplane.LostOutOfBuffer] += s.OOB
		out[dataplane.LostUnforwarded] += s.Unforwarded
	}
	return out
}

// maxRound is the most traffic time Run sends in one round.
const maxRound = 50 * time.Millisecond

// Run sends traffic in real time until ctx ends (the --sim mode): every
// tick it sends the traffic of the time elapsed into the table and the
// rings, and lets the peer port send; the workers poll their rings
// meanwhile, each on its own OS thread pinned to a CPU, sleeping IdleSleep
// after a poll that found nothing (dv.Engine's workers spin or yield
// instead, which would keep every CPU of a laptop busy).
func (n *NIC) Run(ctx context.Context, every time.Duration) error {
	n.mu.Lock()
	if n.running || n.closed.Load() {
		n.mu.Unlock()
		return fmt.Errorf("sim: Run called twice or after Close")
	}
	n.running = true
	n.mu.Unlock()
	var stop atomic.Bool
	var wg sync.WaitGroup
	cpus := runtime.NumCPU()
	for i, w := range n.dv.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Each worker on its own OS thread, pinned to a CPU (round
			// robin: twelve simulated cores share this machine's). The
			// thread is never unlocked: Go retires it when the goroutine
			// ends. Where pinning is refused the worker runs unpinned.
			runtime.LockOSThread()
			if numa.PinThread(i%cpus) != nil {
				n.unpinned.Add(1)
			}
			for !stop.Load() {
				if w.Step() == 0 {
					time.Sleep(n.opt.IdleSleep)
				}
			}
		}()
	}
	defer func() {
		stop.Store(true)
		wg.Wait()
		// The workers are stopped: decide what is still on the rings here,
		// so every packet sent is accounted for.
		n.mu.Lock()
		n.drain()
		n.running = false
		n.mu.Unlock()
	}()
	t := time.NewTicker(every)
	defer t.Stop()
	last := time.Now()
	for {
		select {
		case <-ctx.Done():
			return nil
		case now := <-t.C:
			dt := now.Sub(last)
			last = now
			n.clock.Advance(dt)
			n.mu.Lock()
			// A tick that came late (the machine was busy) sends the time
			// it missed in rounds of at most maxRound: the same packets,
			// without a pending list sized for the whole gap.
			for ; dt > maxRound; dt -= maxRound {
				n.round(maxRound.Seconds(), false)
			}
			n.round(dt.Seconds(), false)
			n.mu.Unlock()
		}
	}
}

func v4(s string) rule.Addr { return rule.AddrFrom(netip.MustParseAddr(s)) }

func udp(src, dst string, sp, dp uint16, length uint32) rule.Fields {
	return rule.Fields{Family: rule.IPv4, Proto: rule.ProtoUDP, L4: true, Frag: rule.NotFragment, Src: v4(src), Dst: v4(dst), SrcPort: sp, DstPort: dp, Length: length}
}

func tcp(src, dst string, sp, dp uint16, flags uint8, length uint32) rule.Fields {
	f := udp(src, dst, sp, dp, length)
	f.Proto, f.TCPFlags = rule.ProtoTCP, flags
	return f
}

// DefaultFlows is the built-in traffic mix (full-rate figures for a 100G
// uplink).
func DefaultFlows() []Flow {
	ip := func(frame int) uint32 { return uint32(frame - 18) } // IP length of an untagged frame
	sctp := udp("198.18.7.1", "203.0.113.40", 5000, 9, ip(128))
	sctp.Proto = rule.ProtoSCTP
	gre := rule.Fields{Family: rule.IPv4, Proto: rule.ProtoGRE, L4: false, Frag: rule.NotFragment, Src: v4("198.18.9.1"), Dst: v4("203.0.113.60"), Length: ip(1400)}
	return []Flow{
		{Name: "syn-flood 64B", Fields: tcp("198.18.1.1", "203.0.113.20", 1024, 80, rule.SYN, ip(64)), Frame: 64, PPS: 60e6, Vary: 64},
		{Name: "udp-flood 64B", Fields: udp("198.18.2.1", "203.0.113.30", 40000, 1500, ip(64)), Frame: 64, PPS: 25e6, Vary: 64},
		{Name: "dns-amp 1500B", Fields: udp("198.18.3.1", "203.0.113.10", 53, 33000, ip(1500)), Frame: 1500, PPS: 5e6, Vary: 64},
		{Name: "ntp-amp 468B", Fields: udp("198.18.4.1", "203.0.113.11", 123, 33001, ip(468)), Frame: 468, PPS: 3e6, Vary: 64},
		{Name: "gre-bulk 1400B", Fields: gre, Frame: 1400, PPS: 2e6, Vary: 16},
		{Name: "tiny-udp 64B", Fields: udp("198.18.5.1", "198.51.100.9", 7000, 7001, ip(64)), Frame: 64, PPS: 6e6, Vary: 64},
		{Name: "sctp-flood 128B", Fields: sctp, Frame: 128, PPS: 2e6, Vary: 16},
		{Name: "udp-to-mgmt-net 64B", Fields: udp("198.18.6.1", "192.0.2.77", 9999, 161, ip(64)), Frame: 64, PPS: 1e6, Vary: 16},
		{Name: "legit https 594B", Fields: tcp("198.19.0.1", "203.0.113.80", 50000, 443, rule.ACK, ip(594)), Frame: 594, PPS: 4e6, Vary: 256},
		{Name: "resolver 512B (allowed)", Fields: udp("198.18.53.53", "203.0.113.10", 53, 40000, ip(512)), Frame: 512, PPS: 0.5e6},
		{Name: "mgmt ssh (protected)", Fields: tcp("198.19.1.1", "192.0.2.1", 40022, 22, rule.ACK, ip(128)), Frame: 128, PPS: 0.02e6, Protected: true},
		{Name: "mgmt snmp (protected)", Fields: udp("198.19.1.2", "192.0.2.1", 40161, 161, ip(128)), Frame: 128, PPS: 0.02e6, Protected: true},
	}
}

// DemoRule is a built-in rule and when it arrives.
type DemoRule struct {
	After time.Duration
	YAML  string
}

// DemoRules are the rules `scrubd run --sim` adds, one by one. Some cannot
// go to hardware (packet length, SCTP ports); two overlap accept rules (the
// resolver allow rule, the protected management address) and go to
// hardware behind those rules' pass entries.
func DemoRules() []DemoRule {
	return []DemoRule{
		{1 * time.Second, `{id: resolver-allow, priority: 10, action: accept, match: {src: 198.18.53.53/32, dst: 203.0.113.10/32, proto: udp, src_port: "53"}}`},
		{2 * time.Second, `{id: gre-bulk, action: drop, match: {dst: 203.0.113.60/32, proto: gre}}`},
		{3 * time.Second, `{id: ntp-amp, action: drop, match: {dst: 203.0.113.0/24, proto: udp, src_port: "123"}}`},
		{4 * time.Second, `{id: dns-amp, action: drop, match: {dst: 203.0.113.0/24, proto: udp, src_port: "53"}}`},
		{5 * time.Second, `{id: tiny-udp, action: drop, match: {dst: 198.51.100.0/24, proto: udp, length: "0-100"}}`},
		{6 * time.Second, `{id: sctp-flood, action: drop, match: {dst: 203.0.113.40/32, proto: sctp, dst_port: "9"}}`},
		{7 * time.Second, `{id: udp-mgmt-net, action: drop, match: {dst: 192.0.2.0/24, proto: udp}}`},
		{8 * time.Second, `{id: udp-flood, action: drop, match: {dst: 203.0.113.30/32, proto: udp, dst_port: "1000-2000"}}`},
		{10 * time.Second, `{id: syn-flood, action: drop, match: {dst: 203.0.113.20/32, proto: tcp, dst_port: "80", tcp_flags: {value: [syn], mask: [syn, ack]}}}`},
	}
}

// ParseDemo parses a demo rule.
func ParseDemo(d DemoRule, now time.Time) (rule.Rule, error) {
	r, err := rule.ParseRule("demo", []byte(d.YAML), now)
	if err != nil {
		return r, fmt.Errorf("demo rule: %w", err)
	}
	return r, nil
}
