package plan

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// The queue model. A flood reaches the software path through N receive
// queues, one worker each. The NIC spreads it by RSS (Toeplitz over the
// addresses, then the indirection table), so queue q is offered its share
// of the flood. Each queue carries at most the smaller of its drain rate
// (how fast its worker empties the ring: receive, classify, drop,
// recycle, as `scrubd bench` measures on one queue) and the worker's CPU
// ceiling (clock / cycles per packet); what exceeds that overflows the
// ring and is counted by the NIC as out-of-buffer. So
//
//	throughput = sum over queues of min(offered_q, drain, CPU ceiling)
//
// and the limit is the ring when the drain rate is the smaller bound, the
// CPU when the ceiling is, and the link when every offered packet is
// carried. Adding workers helps only by adding queues.

// Spread is how the flood's packets are spread over source addresses.
type Spread struct {
	// Random: every packet from a uniformly random IPv4 source (the
	// random-source floods of the VPP drop-path measurements).
	Random bool
	// Flows: that many sources of equal rate (when not Random).
	Flows int
}

// ParseSpread parses --flows: "random" or a count of flows.
func ParseSpread(s string) (Spread, error) {
	if strings.TrimSpace(s) == "random" {
		return Spread{Random: true}, nil
	}
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil || n < 1 {
		return Spread{}, fmt.Errorf("flows %q: want random or a number of flows of at least 1", s)
	}
	return Spread{Flows: n}, nil
}

func (s Spread) String() string {
	if s.Random {
		return "random"
	}
	return strconv.Itoa(s.Flows)
}

// MarshalText writes the spread as --flows takes it.
func (s Spread) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText reads it back.
func (s *Spread) UnmarshalText(b []byte) error {
	v, err := ParseSpread(string(b))
	if err != nil {
		return err
	}
	*s = v
	return nil
}

// FloodDst is the destination address of the modelled flood (a
// documentation address; the spread depends on it only through the hash's
// constant term).
var FloodDst = [4]byte{203, 0, 113, 1}

// Ring memory. Per receive-queue entry: its WQE (one 16-byte data
// segment) and the cache lines of the frame the NIC writes into the
// buffer and the worker reads; the CQ has twice the entries (rdma-core
// rounds cqe+1 up to a power of 2) of 64 bytes each.
const (
	WQEStride   = 16
	CQEBytes    = 64
	CacheLine   = 64
	MinRing     = 256
	MaxRing     = 1 << 15 // the RQ's 16-bit WQE counter (prm: RQLog2 <= 15)
	DefaultRing = 4096
	// DefaultAbsorbMicros is how long a ring must hold its queue's load
	// while the worker is away (a preemption, a rule-set swap) before it
	// overflows: a policy, not a measurement. At the 7.2 Mpps per queue of
	// a BlueField-3 worker (2.13 GHz / 297 cycles) it gives the 4096
	// entries the BlueField-3 measurements ran with.
	DefaultAbsorbMicros = 500
)

// RingBytes is the memory one receive queue's ring touches: entries WQEs,
// the frame's cache lines in as many buffers, and a CQ of twice the
// entries.
func RingBytes(entries, frame int) int {
	lines := max(1, (frame+CacheLine-1)/CacheLine)
	return entries*(WQEStride+lines*CacheLine) + 2*entries*CQEBytes
}

// CQEntries is the completion queue size derived from the ring size.
func CQEntries(entries int) int { return 2 * entries }

// ValidRing reports whether n is a ring size the engine takes: a power of
// 2 from MinRing to MaxRing.
func ValidRing(n int) error {
	if n < MinRing || n > MaxRing || n&(n-1) != 0 {
		return fmt.Errorf("rx ring entries %d: must be a power of 2 from %d to %d", n, MinRing, MaxRing)
	}
	return nil
}

// QueueParams are the inputs of the queue model.
type QueueParams struct {
	LinkGbps float64 `json:"link_gbps"`
	Queues   int     `json:"queue_count"`
	// GHz and CyclesPerPacket give each worker's CPU ceiling.
	GHz             float64 `json:"ghz"`
	CyclesPerPacket float64 `json:"cycles_per_packet"`
	// DrainMpps is how fast one queue's ring is emptied (0: the CPU
	// ceiling, i.e. nothing but the worker's speed bounds it).
	DrainMpps float64 `json:"queue_drain_mpps"`
	// OfferedMpps is the flood (0: line rate at FrameBytes).
	OfferedMpps float64 `json:"offered_mpps"`
	FrameBytes  int     `json:"frame_bytes"`
	Spread      Spread  `json:"flows"`
	// Seed picks the Flows sources (a fixed generator, so a plan is
	// repeatable).
	Seed     uint64 `json:"seed"`
	RETASize int    `json:"reta_size"`
	// RingEntries is the receive ring size per queue (0: the
	// recommendation).
	RingEntries int `json:"ring_entries"`
	// LLCShareKiB is the last-level cache one worker's core has (its
	// LLC's size over the cores sharing it); 0: unknown.
	LLCShareKiB  float64 `json:"llc_share_kib"`
	AbsorbMicros float64 `json:"absorb_us"`
	// MaxQueues bounds the recommended queue count.
	MaxQueues int `json:"max_queues"`
}

func (p *QueueParams) defaults() {
	if p.LinkGbps == 0 {
		p.LinkGbps = 100
	}
	if p.FrameBytes == 0 {
		p.FrameBytes = 64
	}
	if p.RETASize == 0 {
		p.RETASize = DefaultRETASize
	}
	if !p.Spread.Random && p.Spread.Flows == 0 {
		p.Spread.Random = true
	}
	if p.Seed == 0 {
		p.Seed = 1
	}
	if p.AbsorbMicros == 0 {
		p.AbsorbMicros = DefaultAbsorbMicros
	}
	if p.MaxQueues == 0 {
		p.MaxQueues = 64
	}
}

// Validate names the first bad parameter.
func (p QueueParams) Validate() error {
	pos := func(v float64) bool { return v > 0 && !math.IsInf(v, 0) }
	nonneg := func(v float64) bool { return v >= 0 && !math.IsInf(v, 0) }
	switch {
	case !pos(p.LinkGbps):
		return fmt.Errorf("link-gbps %v: must be a positive number", p.LinkGbps)
	case p.Queues < 1 || p.Queues > 4096:
		return fmt.Errorf("queues %d: must be from 1 to 4096", p.Queues)
	case !pos(p.GHz):
		return fmt.Errorf("ghz %v: must be a positive number", p.GHz)
	case !pos(p.CyclesPerPacket):
		return fmt.Errorf("cycles-per-packet %v: must be a positive number", p.CyclesPerPacket)
	case !nonneg(p.DrainMpps):
		return fmt.Errorf("queue-drain-mpps %v: must be a positive number", p.DrainMpps)
	case !nonneg(p.OfferedMpps):
		return fmt.Errorf("offered-mpps %v: must be a positive number", p.OfferedMpps)
	case p.FrameBytes < 64 || p.FrameBytes > 9216:
		return fmt.Errorf("frame %d: must be from 64 to 9216 bytes", p.FrameBytes)
	case p.RETASize < 1 || p.RETASize > 1<<16 || p.RETASize&(p.RETASize-1) != 0:
		return fmt.Errorf("reta-size %d: must be a power of 2 up to 65536", p.RETASize)
	case !p.Spread.Random && (p.Spread.Flows < 1 || p.Spread.Flows > 1<<24):
		return fmt.Errorf("flows %d: must be random or from 1 to %d", p.Spread.Flows, 1<<24)
	case p.RingEntries != 0 && ValidRing(p.RingEntries) != nil:
		return ValidRing(p.RingEntries)
	case !nonneg(p.LLCShareKiB):
		return fmt.Errorf("llc-kib %v: must not be negative", p.LLCShareKiB)
	case !pos(p.AbsorbMicros):
		return fmt.Errorf("absorb-us %v: must be a positive number", p.AbsorbMicros)
	case p.MaxQueues < 1 || p.MaxQueues > 4096:
		return fmt.Errorf("max-queues %d: must be from 1 to 4096", p.MaxQueues)
	}
	return nil
}

// QueueLoad is one queue's share of the flood.
type QueueLoad struct {
	Queue       int     `json:"queue"`
	RETAEntries int     `json:"reta_entries"`
	Share       float64 `json:"share"`
	OfferedMpps float64 `json:"offered_mpps"`
	CarriedMpps float64 `json:"carried_mpps"`
	LostMpps    float64 `json:"lost_mpps"`
	// Limit is "ring" or "cpu" where the queue loses packets, "" where
	// it carries all it is offered.
	Limit string `json:"limit,omitempty"`
}

// Ring is the ring-memory check.
type Ring struct {
	Entries   int `json:"entries"`
	CQEntries int `json:"cq_entries"`
	// BytesPerQueue is RingBytes(Entries, frame); Bytes all queues'.
	BytesPerQueue int     `json:"bytes_per_queue"`
	Bytes         int     `json:"bytes"`
	LLCShareKiB   float64 `json:"llc_share_kib,omitempty"`
	// Fits: a queue's ring memory is within its worker's LLC share
	// (false also when the share is unknown).
	Fits bool `json:"fits"`
	// Recommended is the ring size the model suggests, and why.
	Recommended int    `json:"recommended_entries"`
	Why         string `json:"why"`
}

// QueueResult is the queue model's answer.
type QueueResult struct {
	QueueParams
	LineRateMpps float64 `json:"line_rate_mpps"`
	// CPUCeilingMpps is one worker's clock / cycles per packet;
	// QueueCeilingMpps the smaller of it and the drain rate.
	CPUCeilingMpps   float64 `json:"cpu_ceiling_mpps"`
	QueueCeilingMpps float64 `json:"queue_ceiling_mpps"`
	ThroughputMpps   float64 `json:"throughput_mpps"`
	// ExpectedMpps is, for a number of flows, the mean throughput over
	// random choices of their sources (each flow's table entry uniform):
	// what that many flows give on average, where ThroughputMpps is what
	// this one set of sources (Seed) gives.
	ExpectedMpps float64 `json:"expected_throughput_mpps,omitempty"`
	// Limit is "link" (everything offered is carried), "ring" or "cpu".
	Limit string `json:"limit"`
	// Imbalance is the busiest queue's offered load over the mean.
	Imbalance   float64     `json:"imbalance"`
	BusiestMpps float64     `json:"busiest_queue_mpps"`
	PerQueue    []QueueLoad `json:"queues"`
	Ring        Ring        `json:"ring"`
	// RecommendedQueues is the fewest queues (up to MaxQueues) whose
	// throughput is the whole offered load; RecommendedHolds says
	// whether any did (if not, it is the count with the most throughput).
	RecommendedQueues int      `json:"recommended_queues"`
	RecommendedHolds  bool     `json:"recommended_holds"`
	Warnings          []string `json:"warnings,omitempty"`
}

// ErrQueueParams wraps every queue-model parameter error.
var ErrQueueParams = errors.New("bad queue model parameters")

// Shares returns each queue's share of a flood with the given spread over
// queues queues behind a uniform table of retaSize entries, hashed with
// key: for a random spread the exact shares (RandomSourceEntries), for a
// number of flows the shares of that many sources from a fixed generator
// seeded with seed. It also returns the table entries per queue.
func Shares(key []byte, spread Spread, queues, retaSize int, seed uint64) (shares []float64, entries []int, err error) {
	reta, err := UniformRETA(retaSize, queues)
	if err != nil {
		return nil, nil, err
	}
	shares = make([]float64, queues)
	if spread.Random {
		reach := RandomSourceEntries(key, FloodDst, retaSize)
		for _, e := range reach {
			shares[reta.Entries[e]] += 1 / float64(len(reach))
		}
	} else {
		src := splitmix{seed}
		for i := 0; i < spread.Flows; i++ {
			v := src.next()
			s := [4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}
			shares[reta.Queue(Toeplitz(key, RSSInputV4(s, FloodDst, 0, 0, false)))] += 1 / float64(spread.Flows)
		}
	}
	return shares, reta.PerQueue(queues), nil
}

// splitmix is SplitMix64: the model's fixed source of flow addresses.
type splitmix struct{ s uint64 }

func (r *splitmix) next() uint64 {
	r.s += 0x9e3779b97f4a7c15
	z := r.s
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// Carry applies the per-queue bound: it returns the throughput of offered
// Mpps spread by shares over queues each carrying at most ceiling, and the
// per-queue loads. ringLimited labels the losses "ring" (else "cpu").
func Carry(offered float64, shares []float64, ceiling float64, ringLimited bool) (float64, []QueueLoad) {
	out := make([]QueueLoad, len(shares))
	var sum float64
	for q, s := range shares {
		o := offered * s
		c := math.Min(o, ceiling)
		out[q] = QueueLoad{Queue: q, Share: s, OfferedMpps: o, CarriedMpps: c, LostMpps: o - c}
		if o-c > 1e-12 {
			out[q].Limit = "cpu"
			if ringLimited {
				out[q].Limit = "ring"
			}
		}
		sum += c
	}
	return sum, out
}

// ExpectedFlows is the mean throughput of flows flows of equal rate whose
// queues are drawn independently with the probabilities probs, each queue
// carrying at most ceiling: the sum over queues of E[min(X_q r, ceiling)]
// with X_q binomial(flows, probs[q]) and r = offered / flows.
func ExpectedFlows(offered float64, flows int, probs []float64, ceiling float64) float64 {
	r := offered / float64(flows)
	var sum float64
	for _, p := range probs {
		if p <= 0 {
			continue
		}
		if p >= 1 {
			sum += math.Min(float64(flows)*r, ceiling)
			continue
		}
		lp, lq := math.Log(p), math.Log1p(-p)
		lgN, _ := math.Lgamma(float64(flows + 1))
		for k := 1; k <= flows; k++ {
			lk, _ := math.Lgamma(float64(k + 1))
			lnk, _ := math.Lgamma(float64(flows - k + 1))
			pk := math.Exp(lgN - lk - lnk + float64(k)*lp + float64(flows-k)*lq)
			sum += pk * math.Min(float64(k)*r, ceiling)
		}
	}
	return sum
}

// QueueModel evaluates the model.
func QueueModel(p QueueParams) (QueueResult, error) {
	p.defaults()
	if err := p.Validate(); err != nil {
		return QueueResult{}, fmt.Errorf("%w: %w", ErrQueueParams, err)
	}
	res := QueueResult{QueueParams: p}
	res.LineRateMpps = LineRatePPS(p.LinkGbps*1e9, float64(p.FrameBytes)) / 1e6
	offered := p.OfferedMpps
	if offered == 0 {
		offered = res.LineRateMpps
	}
	if offered > res.LineRateMpps*(1+1e-9) {
		res.Warnings = append(res.Warnings, fmt.Sprintf("offered %.2f Mpps is above the %g Gb/s line rate at %d B (%.2f Mpps): the line rate is modelled",
			offered, p.LinkGbps, p.FrameBytes, res.LineRateMpps))
		offered = res.LineRateMpps
	}
	res.OfferedMpps = offered
	res.CPUCeilingMpps = p.GHz * 1e3 / p.CyclesPerPacket
	drain := p.DrainMpps
	if drain == 0 {
		drain = res.CPUCeilingMpps
	}
	res.DrainMpps = drain
	ringLimited := drain < res.CPUCeilingMpps
	res.QueueCeilingMpps = math.Min(drain, res.CPUCeilingMpps)
	eval := func(queues int) (float64, []QueueLoad, []float64, []int, error) {
		shares, entries, err := Shares(MicrosoftKey, p.Spread, queues, p.RETASize, p.Seed)
		if err != nil {
			return 0, nil, nil, nil, err
		}
		tp, loads := Carry(offered, shares, res.QueueCeilingMpps, ringLimited)
		return tp, loads, shares, entries, nil
	}
	tp, loads, _, entries, err := eval(p.Queues)
	if err != nil {
		return res, fmt.Errorf("%w: %w", ErrQueueParams, err)
	}
	for q := range loads {
		loads[q].RETAEntries = entries[q]
		if loads[q].OfferedMpps > res.BusiestMpps {
			res.BusiestMpps = loads[q].OfferedMpps
		}
	}
	res.PerQueue, res.ThroughputMpps = loads, tp
	res.Imbalance = res.BusiestMpps / (offered / float64(p.Queues))
	res.Limit = limitOf(tp, offered, ringLimited)
	if !p.Spread.Random {
		// Each flow's entry is uniform over those random sources reach.
		probs, _, err := Shares(MicrosoftKey, Spread{Random: true}, p.Queues, p.RETASize, p.Seed)
		if err != nil {
			return res, err
		}
		res.ExpectedMpps = ExpectedFlows(offered, p.Spread.Flows, probs, res.QueueCeilingMpps)
	}
	if p.RETASize < p.Queues {
		res.Warnings = append(res.Warnings, fmt.Sprintf("a %d-entry indirection table reaches only %d of the %d queues", p.RETASize, p.RETASize, p.Queues))
	}
	// The fewest queues that carry everything offered.
	best, bestTP := 0, -1.0
	for q := 1; q <= p.MaxQueues; q++ {
		t, _, _, _, err := eval(q)
		if err != nil {
			return res, err
		}
		if t >= offered*(1-1e-9) {
			best, res.RecommendedHolds = q, true
			break
		}
		if t > bestTP+1e-9 {
			best, bestTP = q, t
		}
	}
	res.RecommendedQueues = best
	if !res.RecommendedHolds {
		res.Warnings = append(res.Warnings, fmt.Sprintf("no queue count up to %d carries %.2f Mpps with this spread; %d queues carry the most (%.2f Mpps)",
			p.MaxQueues, offered, best, bestTP))
	}
	res.Ring = ringCheck(p, math.Min(res.BusiestMpps, res.QueueCeilingMpps))
	if p.LLCShareKiB > 0 && !res.Ring.Fits {
		res.Warnings = append(res.Warnings, fmt.Sprintf("rings outgrow the cache: %d entries take %.0f KiB per queue, above the %.0f KiB of last-level cache each worker's core has; packets and descriptors will miss the cache",
			res.Ring.Entries, float64(res.Ring.BytesPerQueue)/1024, p.LLCShareKiB))
	}
	return res, nil
}

func limitOf(tp, offered float64, ringLimited bool) string {
	switch {
	case tp >= offered*(1-1e-9):
		return "link"
	case ringLimited:
		return "ring"
	default:
		return "cpu"
	}
}

// RecommendRing returns the ring size for a queue carrying queueMpps: the
// smallest power of 2 that holds absorbMicros of that load (at least
// MinRing), but no more than fits the worker's LLC share (when known) or
// MaxRing; and why.
func RecommendRing(queueMpps, absorbMicros float64, frame int, llcShareKiB float64) (int, string) {
	need := queueMpps * absorbMicros // packets: Mpps x us
	n := MinRing
	for n < MaxRing && float64(n) < need {
		n <<= 1
	}
	why := fmt.Sprintf("holds %.0f us of the busiest queue's %.2f Mpps (%.0f packets)", absorbMicros, queueMpps, need)
	if llcShareKiB > 0 {
		fit := MaxRing
		for fit > MinRing && float64(RingBytes(fit, frame)) > llcShareKiB*1024 {
			fit >>= 1
		}
		if n > fit {
			why = fmt.Sprintf("the largest ring within the %.0f KiB LLC share (%.0f us of the busiest queue's load needs %.0f entries)", llcShareKiB, absorbMicros, need)
			n = fit
		} else {
			why += fmt.Sprintf(", within the %.0f KiB LLC share", llcShareKiB)
		}
	}
	return n, why
}

func ringCheck(p QueueParams, queueMpps float64) Ring {
	rec, why := RecommendRing(queueMpps, p.AbsorbMicros, p.FrameBytes, p.LLCShareKiB)
	n := p.RingEntries
	if n == 0 {
		n = rec
	}
	r := Ring{Entries: n, CQEntries: CQEntries(n), BytesPerQueue: RingBytes(n, p.FrameBytes), LLCShareKiB: p.LLCShareKiB,
		Recommended: rec, Why: why}
	r.Bytes = r.BytesPerQueue * p.Queues
	r.Fits = p.LLCShareKiB > 0 && float64(r.BytesPerQueue) <= p.LLCShareKiB*1024
	return r
}
