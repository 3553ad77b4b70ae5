// Package placement decides, rule by rule, whether a drop rule is enforced in
// hardware or in software, and carries the decisions out.
//
// Offload first: a rule the hardware path can express exactly goes there
// while entries and masks last; the rest go to software, each with a reason
// (unsupported key, accept overlap, table full, mask budget, device gone).
//
// Regime model: software capacity is the smaller of the CPU capacity,
// workers x clock / cycles per packet (calibrated at start, then measured
// live from the engine's counters), and the ring capacity: the load at
// which the busiest receive queue reaches its drain rate, queues x
// QueueDrainPPS / imbalance, where the imbalance is the busiest worker's
// offered packets (received plus out-of-buffer) over the mean, from the
// workers' counters each round (agent/plan's queue model, with the spread
// measured instead of hashed). Out-of-buffer counts are the ring's own
// verdict: a round in which they grew caps the ring capacity at what the
// workers did receive, and the load is what was offered (received plus
// out-of-buffer). Per
// rule, packet rate and average frame size come from the deltas of its
// hardware and software counters. When software load rises above HighWater x
// capacity, the software rules that cost the most cycles (highest packet
// rate, which is small frames at a given bit rate) move to hardware first.
// When hardware is full, a software rule whose rate exceeds a hardware rule's
// by SwapFactor swaps with it: the large-frame, low-rate rule moves back to
// software, if software has room for it below HighWater. Every rule dwells
// at least MinDwell on a path before it moves again; at most MaxMoves moves
// happen per round.
//
// A move installs in the new path before it removes from the old one, so no
// packet of a moved rule escapes. If the hardware backend reports the device
// gone, every hardware rule is put in software at once.
//
// A round places what changed: Run reads the store's delta since the
// version it holds (store.Delta) and applyDelta compiles, offloads and
// removes only the rules it names; Apply, which re-checks every rule
// against the accept rules, runs at start, when an accept rule changes and
// when the store's change log no longer reaches back. The software engine
// is handed a set only when it differs from the one it holds, one set at
// a time from Run's goroutine; changes made meanwhile go into the next
// round.
//
// A Placer is owned by one goroutine (Run); its state needs no lock. Other
// goroutines read the published View.
package placement

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/scrubd/scrubd/agent/dataplane"
	"github.com/scrubd/scrubd/agent/store"
	"github.com/scrubd/scrubd/swpath/rule"
)

// Path is where a rule is enforced.
type Path string

const (
	HW   Path = "hw"
	SW   Path = "sw"
	None Path = "none" // accept rules and refused rules: not placed
)

// Config tunes the placer.
type Config struct {
	HighWater float64
	LowWater  float64
	MinDwell  time.Duration
	MaxMoves  int
	// SwapFactor: a software rule must exceed a hardware rule's packet rate
	// by this factor to take its place in a full table (default 2).
	SwapFactor float64
	// CyclesPerPacket is the software path's cost per packet for the
	// capacity model: from calibration (`scrubd bench`) or the operator.
	CyclesPerPacket float64
	// LiveCycles: once the engine reports cycles, its measured cycles per
	// packet replace CyclesPerPacket. Without it CyclesPerPacket stays (a
	// fixed or modelled figure) and the measured one is only published
	// (View.MeasuredCyclesPerPacket). With CyclesPerPacket 0 the measured
	// figure is used either way.
	LiveCycles bool
	// LinkBps is the link speed, for line-rate context in decision logs.
	LinkBps float64
	// QueueDrainPPS is how fast one receive queue's ring drains (`scrubd
	// bench`'s queue_drain_mpps on the target, or software.queue_drain_mpps);
	// 0: unknown, and the ring capacity comes from out-of-buffer counts
	// alone.
	QueueDrainPPS float64
	// MaxDecisions kept in the View (default 256).
	MaxDecisions int
	// HWStatsPeriod is how often the hardware refreshes its counters (mlx5:
	// 1 s); a rate is measured over the time between refreshes, not over
	// one round, so a round that saw no refresh does not read as zero.
	HWStatsPeriod time.Duration
	// NoBackstop turns off the software backstop. By default the software
	// path also holds every drop rule placed in hardware, so that a packet
	// the NIC's parser reads differently from the rule semantics still meets
	// the rule: flower never reads the L4 header of a first fragment (seen
	// in the kernel lab), so a port rule in hardware misses first fragments
	// that the rule matches. Such packets reach software and are dropped
	// there. The backstop costs software lookups only for packets hardware
	// passed. If the software engine refuses the larger set (an engine
	// limit), the agent falls back to the software-placed rules alone and
	// logs it.
	NoBackstop bool
	// CounterMemory is how long the counter totals of a removed rule are
	// kept: a rule added again under the same id within that time continues
	// from them instead of from zero (a FlowSpec route withdrawn and
	// announced again, whose rule id is the route's). 0: not kept.
	CounterMemory time.Duration
}

// retired are the totals of a removed rule, kept for Config.CounterMemory.
type retired struct {
	hwTot, swTot dataplane.Counter
	moves        uint64
	at           time.Time
}

// Inputs are the figures a decision was made from.
type Inputs struct {
	RulePPS         float64 `json:"rule_pps"`
	RuleAvgFrame    float64 `json:"rule_avg_frame_bytes"`
	SWLoadPPS       float64 `json:"sw_load_pps"`
	SWCapacityPPS   float64 `json:"sw_capacity_pps"`
	CyclesPerPacket float64 `json:"cycles_per_packet"`
	// The two capacities SWCapacityPPS is the smaller of (ring 0:
	// unknown), which one limits, and the imbalance behind the ring's.
	CPUCapacityPPS  float64 `json:"cpu_capacity_pps,omitempty"`
	RingCapacityPPS float64 `json:"ring_capacity_pps,omitempty"`
	Limit           string  `json:"limit,omitempty"`
	Imbalance       float64 `json:"imbalance,omitempty"`
	HWUsedEntries   int     `json:"hw_used_entries"`
	HWMaxEntries    int     `json:"hw_max_entries"`
	OtherRule       string  `json:"other_rule,omitempty"`
	OtherPPS        float64 `json:"other_pps,omitempty"`
}

// Decision is one placement change.
type Decision struct {
	Time   time.Time `json:"time"`
	Rule   string    `json:"rule"`
	From   Path      `json:"from"`
	To     Path      `json:"to"`
	Reason string    `json:"reason"`
	Inputs Inputs    `json:"inputs"`
}

// RuleView is one rule's placement as published.
type RuleView struct {
	ID     string            `json:"id"`
	Action string            `json:"action"`
	Path   Path              `json:"path"`
	Reason string            `json:"reason"`
	Since  time.Time         `json:"since"`
	Moves  uint64            `json:"moves"`
	HW     dataplane.Counter `json:"hw"` // cumulative, monotonic
	SW     dataplane.Counter `json:"sw"`
	PPS    float64           `json:"pps"`
	HWPPS  float64           `json:"hw_pps"`
	SWPPS  float64           `json:"sw_pps"`
	// AvgFrame is the mean frame size of the rule's traffic (bytes).
	AvgFrame float64 `json:"avg_frame_bytes"`
}

// View is the placer's published state.
type View struct {
	Time time.Time
	// Rules are the rules in effective-set order. The list is shared with
	// the Views before and after: a round copies only the parts it changed.
	Rules           RuleList
	Decisions       []Decision // newest last
	Moves           map[[2]Path]uint64
	HWFailures      map[dataplane.Kind]uint64
	HWBudget        dataplane.Budget
	HWUp            bool
	SW              dataplane.SWStats
	SWLoadPPS       float64
	SWCapacityPPS   float64
	CyclesPerPacket float64
	// CPUCapacityPPS and RingCapacityPPS are the two bounds SWCapacityPPS
	// is the smaller of (ring 0: unknown); Limit says which ("cpu",
	// "ring", or "ring (out-of-buffer)" when the NIC's out-of-buffer
	// counts set it); Imbalance is the busiest worker's offered packets
	// over the mean; OutOfBufferPPS the out-of-buffer rate of the last
	// round.
	CPUCapacityPPS  float64
	RingCapacityPPS float64
	Limit           string
	Imbalance       float64
	OutOfBufferPPS  float64
	// MeasuredCyclesPerPacket is what the engine's counters gave over the
	// last round (0 when it reports no cycles or nothing flowed).
	MeasuredCyclesPerPacket float64
	// Per path: packet rate and mean frame size of the traffic dropped.
	HWPPS, SWPPS           float64
	HWAvgFrame, SWAvgFrame float64
	NIC                    map[string]uint64
	StoreVersion           uint64
	// Resyncs counts the times the hardware table was found to have lost
	// rules placed there (a deleted qdisc: OVS restarting) and they were
	// reinstalled; Ready is set once the first placement round is done.
	Resyncs uint64
	Ready   bool
}

// ruleState is one rule's placement, in two parts: what every rule has
// (80 bytes), and what only a rule that has been in hardware, moved,
// carried traffic or been refused by Compile has (ruleExtra, allocated
// then). At 100k rules with a 4096-entry table, most rules are placed in
// software once and never see traffic: one state with every field was 280
// bytes.
type ruleState struct {
	r *rule.Rule // in Placer.set: one copy of each rule, not two
	// seq is the rule's place in the store's order (store.Snapshot.Seqs).
	seq uint64
	// since is when it took its path (with placed set).
	since stamp
	// hwRetryAt is when hardware may be tried again after a refusal (0:
	// now).
	hwRetryAt stamp
	// reason is why it is where it is; hwReason why Compile refused it
	// (both interned: Placer.intern; nil for none).
	reason   *string
	hwReason *string
	// masks (the first of nmasks: maskList) and entries are its hardware
	// cost (dataplane.Cost) as Compile last gave it: 12 bytes for the
	// list where a slice takes 24.
	masks   *dataplane.MaskShape
	nmasks  uint32
	entries int32
	path    place
	hwKind  uint8 // dataplane.Kind
	hwOK    bool  // Compile accepted it against the current set
	// compiled says hwOK, hwReason, hwKind and the cost hold for this
	// rule in a set with the accept rules of Placer.acceptSig: an
	// unchanged rule in a set whose accept rules did not change is not
	// compiled again.
	compiled bool
	// dirty: its RuleView changed since the last publish (Placer.dirty
	// lists it).
	dirty bool
	// placed: since holds (a path was recorded).
	placed bool
	x      *ruleExtra
}

// ruleExtra is the part of a rule's state that most rules never need.
type ruleExtra struct {
	key string // hardware key while in hardware
	// cumulative monotonic totals and last raw readings
	hwTot, swTot   dataplane.Counter
	hwLast, swLast dataplane.Counter
	// rates over the last round
	hwPPS, swPPS, avgFrame float64
	moves                  uint64
	// hwChanged is when the hardware counters last moved (0: never).
	hwChanged stamp
}

// noExtra is the extra part of a rule without one: read, never written.
var noExtra ruleExtra

// ex returns rs's extra part to read (the zero one if it has none).
func (rs *ruleState) ex() *ruleExtra {
	if rs.x == nil {
		return &noExtra
	}
	return rs.x
}

// ext returns rs's extra part to write, allocated first if it has none.
func (rs *ruleState) ext() *ruleExtra {
	if rs.x == nil {
		rs.x = &ruleExtra{}
	}
	return rs.x
}

// key is rs's hardware key ("" while not in hardware).
func (rs *ruleState) key() string { return rs.ex().key }

// setKey sets rs's hardware key.
func (rs *ruleState) setKey(k string) {
	if k != "" || rs.x != nil {
		rs.ext().key = k
	}
}

// kind is the dataplane.Kind of Compile's refusal.
func (rs *ruleState) kind() dataplane.Kind { return dataplane.Kind(rs.hwKind) }

// text is the string s points to ("" for nil).
func text(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// place is a Path as a rule state holds it.
type place uint8

const (
	pNone place = iota
	pHW
	pSW
)

// Path is the Path of p.
func (p place) Path() Path {
	switch p {
	case pHW:
		return HW
	case pSW:
		return SW
	}
	return None
}

// placeOf is the place of path ("" and None: none).
func placeOf(path Path) place {
	switch path {
	case HW:
		return pHW
	case SW:
		return pSW
	}
	return pNone
}

// carry gives rs (new) the totals, moves and last software reading of
// old, the state of the same id before its rule changed.
func (rs *ruleState) carry(old *ruleState) {
	if o := old.x; o != nil {
		x := rs.ext()
		x.hwTot, x.swTot, x.moves, x.swLast = o.hwTot, o.swTot, o.moves, o.swLast
	}
}

// carryRetired gives rs (new) the totals and moves of a removed rule of
// its id.
func (rs *ruleState) carryRetired(rt retired) {
	if rt.hwTot != (dataplane.Counter{}) || rt.swTot != (dataplane.Counter{}) || rt.moves != 0 {
		x := rs.ext()
		x.hwTot, x.swTot, x.moves = rt.hwTot, rt.swTot, rt.moves
	}
}

// stamp is a time as the nanoseconds since the placer's epoch (its clock
// when New ran: monotonic when the clock is), 0 for none: 8 bytes where a
// time.Time is 24.
type stamp int64

// stamp returns t as a stamp.
func (p *Placer) stamp(t time.Time) stamp {
	if s := stamp(t.Sub(p.epoch)); s != 0 {
		return s
	}
	return 1 // the epoch itself, a nanosecond on: 0 is none
}

// since is the time from stamp s to t.
func (p *Placer) since(t time.Time, s stamp) time.Duration { return time.Duration(p.stamp(t) - s) }

// before reports whether t is before stamp s.
func (p *Placer) before(t time.Time, s stamp) bool { return p.stamp(t) < s }

// roundCounts are what one placement round did, for its one log line.
type roundCounts struct {
	addedHW, addedSW, moved, removed int
	hwRefused                        map[dataplane.Kind]int
}

// Placer is the placement state machine. Not safe for concurrent use except
// View.
type Placer struct {
	cfg Config
	hw  dataplane.HW // may be nil: software only
	sw  dataplane.SW
	log *slog.Logger
	now func() time.Time
	// epoch is the clock when New ran: stamps count from it.
	epoch time.Time

	// swBackstop: the last set pushed to software held the hardware
	// rules too (the backstop).
	swBackstop bool
	// pushed is the last set the software path accepted: a set equal to
	// it is not pushed again (the engine would compile the same rules).
	pushed *rule.Set
	// swPatches counts the sets pushed to software as changes (giveSW).
	swPatches uint64
	// noneDrops counts the drop rules of the set placed nowhere yet
	// (path None): with none outside a push's extra rules, the backstop
	// set is every rule and swSet hands out the array without walking it.
	// Apply counts them; record, and applyDelta for the rules it adds and
	// removes, keep the count.
	noneDrops int
	// shared says set.Rules' array is also held outside the placer: by
	// the caller of Apply (a snapshot), or by the software engine, which
	// swSet hands the array itself when every rule goes to software (the
	// backstop's usual case). A shared array is never written in place:
	// unshare copies it first, so no engine sees a set change under it.
	shared bool

	// texts holds one copy of each reason text (intern): at 100k rules
	// refused by hardware for the same reason, one string instead of
	// 100k equal ones (about 25 MB).
	texts map[string]*string

	rules     map[string]*ruleState
	set       rule.Set // effective set as last applied
	version   uint64
	hwUp      bool
	budget    dataplane.Budget
	decisions []Decision
	moves     map[[2]Path]uint64
	failures  map[dataplane.Kind]uint64
	lastTick  time.Time
	lastSW    dataplane.SWStats
	swLoad    float64
	rxPPS     float64 // received by the workers, last round
	oobPPS    float64 // lost for want of receive buffers, last round
	imbalance float64 // busiest worker's offered packets over the mean
	cpp       float64
	measured  float64
	nic       map[string]uint64
	stale     []string // hw rule ids found at reconcile and not (yet) wanted
	resyncs   uint64
	ready     bool
	resyncReq chan string
	view      atomic.Pointer[View]
	retired   map[string]retired // removed rules' totals, by id
	// states are the rules' states, by position; seqs their places in
	// the store's order (nil when the last snapshot had none: the next
	// round reads a snapshot again, not a delta).
	states []*ruleState
	seqs   []uint64
	// seqsOwn: seqs is an array of the placer's own (not the snapshot's,
	// which the store shares and extends), so a removal may close its
	// hole in place.
	seqsOwn bool
	// movedTo maps the key of each rule changed in place since the set's
	// holes were last closed to the slot it took (moveInPlace): nil when
	// none was.
	movedTo map[int]int
	// deltas counts the rounds applied from a store delta (applyDelta).
	deltas uint64
	// compactions counts the times the set's holes were closed (compact).
	compactions uint64
	// movedInPlace counts the rules changed in place whose new copy was
	// appended (moveInPlace) rather than written over the old.
	movedInPlace uint64
	// overlapHeld are the rules Compile last refused for an accept rule
	// in front of them (stale entries are dropped when read): see
	// applyDelta.
	overlapHeld map[*ruleState]struct{}
	// acceptSig describes the accept rules of the set last compiled
	// against (id, priority, match and position, in order); when it
	// changes every drop rule is compiled again.
	acceptSig string
	round     roundCounts
	// fullTables are the hardware tables (chain, prio) that refused a
	// rule for want of a mask shape since hardware last changed; shapes
	// are the mask shapes (Cost.Masks) of the rules in hardware then. A
	// rule needing a shape outside shapes in a full table is not tried
	// (at 100k rules and a full table, each try costs a compile and a
	// capacity check). Cleared by any removal and every round.
	fullTables map[hwTable]bool
	shapes     map[dataplane.MaskShape]bool
	// regimeSorted is how many candidates the last regime pass gathered
	// and sorted (RegimeSorted).
	regimeSorted int
	// list is the published View.Rules, kept in step with states: rules
	// added and removed are inserted and taken out where they are, and
	// publish writes the entries of the rules in dirty (touch) alone,
	// or, with viewAll (after Apply), builds the list anew.
	list    listEditor
	dirty   []*ruleState
	viewAll bool
}

// touch notes that rs's RuleView changed: the next publish writes it.
func (p *Placer) touch(rs *ruleState) {
	if !rs.dirty {
		rs.dirty = true
		p.dirty = append(p.dirty, rs)
	}
}

// viewOf is rs's RuleView.
func (p *Placer) viewOf(rs *ruleState) RuleView {
	e := p.entryOf(rs)
	return e.view(p.epoch)
}

// entryOf is rs's entry in the published list (the list's epoch is the
// placer's).
func (p *Placer) entryOf(rs *ruleState) ruleEntry {
	e := ruleEntry{id: rs.r.ID, reason: rs.reason, path: rs.path, since: int64(rs.since), seq: rs.seq, placed: rs.placed}
	var f ruleFigures
	if a := rs.r.Action; a < actionOther-1 {
		e.action = uint8(a) + 1
	} else {
		e.action, f.action = actionOther, a.String()
	}
	if x := rs.x; x != nil {
		f.hw, f.sw, f.pps, f.hwPPS, f.swPPS, f.avgFrame, f.moves = x.hwTot, x.swTot, x.hwPPS+x.swPPS, x.hwPPS, x.swPPS, x.avgFrame, x.moves
	}
	if f != (ruleFigures{}) {
		e.fig = &f
	}
	return e
}

// RegimeSorted is how many software rules the last regime pass (Tick)
// gathered and sorted as candidates for hardware: the rules that could
// move that round, not every software rule.
func (p *Placer) RegimeSorted() int { return p.regimeSorted }

func (p *Placer) countRefused(k dataplane.Kind) {
	if p.round.hwRefused == nil {
		p.round.hwRefused = map[dataplane.Kind]int{}
	}
	p.round.hwRefused[k]++
}

// maskTableRE finds the table in hwpath's mask-budget refusal.
var maskTableRE = regexp.MustCompile(`mask shapes in chain (\d+) prio (\d+)`)

// shapesFull notes the table a mask-budget refusal names as full and the
// shapes the rules in hardware use.
func (p *Placer) shapesFull(err error) {
	m := maskTableRE.FindStringSubmatch(err.Error())
	if m == nil {
		return
	}
	chain, err1 := strconv.ParseUint(m[1], 10, 32)
	prio, err2 := strconv.ParseUint(m[2], 10, 16)
	if err1 != nil || err2 != nil {
		return
	}
	if p.fullTables == nil {
		p.fullTables = map[hwTable]bool{}
		p.shapes = map[dataplane.MaskShape]bool{}
		for _, rs := range p.rules {
			if rs.path == pHW {
				for _, s := range rs.maskList() {
					p.shapes[s] = true
				}
			}
		}
	}
	p.fullTables[hwTable{uint32(chain), uint16(prio)}] = true
}

// hwTable is a hardware table: its chain and priority.
type hwTable struct {
	chain uint32
	prio  uint16
}

func (t hwTable) String() string { return fmt.Sprintf("%d/%d", t.chain, t.prio) }

// noShape says why rs cannot go to hardware now ("" if it may be tried):
// it needs a mask shape no rule in hardware has, in a table that refused
// new shapes since hardware last changed.
func (p *Placer) noShape(rs *ruleState) (hwTable, string) {
	if len(p.fullTables) == 0 {
		return hwTable{}, ""
	}
	for _, m := range rs.maskList() {
		if p.shapes[m] {
			continue
		}
		if t := (hwTable{m.Chain, m.Prio}); p.fullTables[t] {
			return t, fmt.Sprintf("mask_budget: needs a new mask shape in chain %d prio %d, none left", m.Chain, m.Prio)
		}
	}
	return hwTable{}, ""
}

// New returns a placer. hw may be nil (no offload).
func New(cfg Config, hw dataplane.HW, sw dataplane.SW, log *slog.Logger, now func() time.Time) *Placer {
	if cfg.SwapFactor <= 1 {
		cfg.SwapFactor = 2
	}
	if cfg.MaxMoves <= 0 {
		cfg.MaxMoves = 8
	}
	if cfg.MaxDecisions <= 0 {
		cfg.MaxDecisions = 256
	}
	if cfg.HighWater <= 0 {
		cfg.HighWater = 0.8
	}
	if cfg.HWStatsPeriod <= 0 {
		cfg.HWStatsPeriod = time.Second
	}
	p := &Placer{cfg: cfg, hw: hw, sw: sw, log: log, now: now, epoch: now(), rules: map[string]*ruleState{},
		moves: map[[2]Path]uint64{}, failures: map[dataplane.Kind]uint64{}, hwUp: hw != nil, cpp: cfg.CyclesPerPacket,
		resyncReq: make(chan string, 1), retired: map[string]retired{}}
	p.list.l.epoch = p.epoch
	p.publish()
	return p
}

// View returns the last published view. Safe from any goroutine.
func (p *Placer) View() *View { return p.view.Load() }

// Reconcile reads what the hardware holds from a previous run. Entries of
// rules that are wanted once the first Apply runs are adopted in place
// (no reinstall, no gap); the others are removed after that Apply has put
// every wanted rule somewhere.
func (p *Placer) Reconcile(ctx context.Context) error {
	if p.hw == nil {
		return nil
	}
	ids, err := p.hw.Installed(ctx)
	if err != nil {
		p.hwFailed(err, "reconcile")
		return fmt.Errorf("reading installed hardware rules: %w", err)
	}
	p.stale = ids
	p.log.Info("reconcile: found rules in hardware from a previous run", "count", len(ids))
	return nil
}

// cpuCapacityPPS is workers x clock / cycles per packet (0: unknown).
func (p *Placer) cpuCapacityPPS() float64 {
	w, hz := p.sw.Capacity()
	if p.cpp <= 0 {
		return 0
	}
	return float64(w) * hz / p.cpp
}

// capacity returns the software capacity, its CPU and ring parts (ring 0:
// unknown) and which one limits.
func (p *Placer) capacity() (capPPS, cpu, ring float64, limit string) {
	cpu = p.cpuCapacityPPS()
	queues := len(p.lastSW.Workers)
	if queues == 0 {
		queues, _ = p.sw.Capacity()
	}
	if p.cfg.QueueDrainPPS > 0 && queues > 0 {
		ring = float64(queues) * p.cfg.QueueDrainPPS / max(p.imbalance, 1)
	}
	oob := false
	if p.oobPPS > 0 {
		// The ring's own verdict: it drained what the workers received.
		if v := max(p.rxPPS, 1); ring == 0 || v < ring {
			ring, oob = v, true
		}
	}
	switch {
	case ring > 0 && (cpu <= 0 || ring < cpu):
		limit = "ring"
		if oob {
			limit = "ring (out-of-buffer)"
		}
		return ring, cpu, ring, limit
	case cpu > 0:
		return cpu, cpu, ring, "cpu"
	}
	return 0, cpu, ring, ""
}

func (p *Placer) inputs(rs *ruleState) Inputs {
	capPPS, cpu, ring, limit := p.capacity()
	in := Inputs{SWLoadPPS: p.swLoad, SWCapacityPPS: capPPS, CyclesPerPacket: p.cpp,
		CPUCapacityPPS: cpu, RingCapacityPPS: ring, Limit: limit, Imbalance: p.imbalance,
		HWUsedEntries: p.budget.UsedEntries, HWMaxEntries: p.budget.MaxEntries}
	if rs != nil {
		in.RulePPS = rs.ex().hwPPS + rs.ex().swPPS
		in.RuleAvgFrame = rs.ex().avgFrame
	}
	return in
}

func (p *Placer) record(rs *ruleState, from, to Path, reason string, in Inputs) {
	rp := p.intern(reason)
	reason = *rp
	now := p.now()
	d := Decision{Time: now, Rule: rs.r.ID, From: from, To: to, Reason: reason, Inputs: in}
	// Only appended to: a View holds the last MaxDecisions of the array
	// (publish), which no later record writes. Past twice that many, the
	// last MaxDecisions go to a new array.
	p.decisions = append(p.decisions, d)
	if len(p.decisions) >= 2*p.cfg.MaxDecisions {
		p.decisions = append(make([]Decision, 0, 2*p.cfg.MaxDecisions), p.decisions[len(p.decisions)-p.cfg.MaxDecisions:]...)
	}
	if from != to && from != None && from != "" {
		p.moves[[2]Path{from, to}]++
		rs.ext().moves++
		p.round.moved++
	} else if from == None || from == "" {
		switch to {
		case HW:
			p.round.addedHW++
		case SW:
			p.round.addedSW++
		}
	}
	if rs.r.Action == rule.Drop {
		if rs.path == pNone {
			p.noneDrops--
		}
		if to == None {
			p.noneDrops++
		}
	}
	rs.path, rs.reason, rs.since, rs.placed = placeOf(to), rp, stamp(now.Sub(p.epoch)), true
	p.touch(rs)
	// One line per rule at debug level; each round logs its counts once
	// (endRound), so 100k rules are one INFO line, not 100k.
	p.log.Debug("placement", "rule", rs.r.ID, "from", string(from), "to", string(to), "reason", reason,
		"rule_pps", in.RulePPS, "rule_avg_frame", in.RuleAvgFrame, "sw_load_pps", in.SWLoadPPS,
		"sw_capacity_pps", in.SWCapacityPPS, "cycles_per_packet", in.CyclesPerPacket,
		"hw_used", in.HWUsedEntries, "hw_max", in.HWMaxEntries, "other", in.OtherRule)
}

func (p *Placer) hwFailed(err error, op string) {
	k := dataplane.KindOf(err)
	p.failures[k]++
	if k == dataplane.KindDeviceGone && p.hwUp {
		p.hwUp = false
		p.log.Error("hardware path down; every hardware rule goes to software", "op", op, "err", err)
	}
}

// swSet builds the software rule set: every accept rule and every drop rule
// whose path is SW (or in transit, listed in extra), in effective-set order.
// When that is every rule of the set (with the backstop, the usual case),
// the set shares the placer's array instead of copying it (at 100k rules
// 30 MB a round, and a second copy held by the engine); the array is then
// shared, and written only after unshare.
func (p *Placer) swSet(extra map[string]bool, backstop bool) *rule.Set {
	in := func(i int) bool {
		r := &p.set.Rules[i]
		rs := p.states[i]
		if rs == nil {
			return false // a hole, or (Apply) an id's other place
		}
		if r.Action == rule.Accept {
			return true
		}
		if rs.r != r && !sameMatch(&rs.r.Match, &r.Match) {
			return false // an id twice in the set: rs is its other place's
		}
		return rs.path == pSW || (len(extra) > 0 && extra[r.ID]) || (backstop && rs.path == pHW)
	}
	live := p.live()
	n := 0
	if backstop && p.seqs != nil && p.noneDrops == p.noneIn(extra) {
		// Every drop rule is in hardware or software or in extra, and
		// each id has one place (seqs): every rule is in.
		n = live
	} else {
		for i := range p.set.Rules {
			if in(i) {
				n++
			}
		}
	}
	if n == live {
		// The array itself, holes and all.
		p.shared = true
		k := len(p.set.Rules)
		return &rule.Set{Rules: p.set.Rules[:k:k], Holes: p.set.Holes, Order: p.set.Order}
	}
	out := &rule.Set{Rules: make([]rule.Rule, 0, n)}
	p.set.Ordered(func(i int) {
		if in(i) {
			out.Rules = append(out.Rules, p.set.Rules[i])
		}
	})
	return out
}

// noneIn counts the drop rules placed nowhere yet (path None) among the
// rules of ids extra.
func (p *Placer) noneIn(extra map[string]bool) int {
	k := 0
	for id := range extra {
		if rs := p.rules[id]; rs != nil && rs.path == pNone && rs.r.Action == rule.Drop {
			k++
		}
	}
	return k
}

// unshare gives the placer its own copy of set.Rules if the array is
// shared, pointing every rule state at it, before a write in place.
func (p *Placer) unshare() {
	if !p.shared {
		return
	}
	old := p.set.Rules
	p.set.Rules = slices.Clone(old)
	for i, rs := range p.states {
		if rs != nil && i < len(old) && rs.r == &old[i] {
			rs.r = &p.set.Rules[i]
		}
	}
	p.shared = false
}

// pushSW hands the software path its set (swSet), unless the set equals
// the one it holds: the engine compiles every set it is given (the Go
// classifier's Compile is linear in the set: at 100k rules hundreds of ms),
// and with the backstop a rule moving between hardware and software, or a
// rule put again unchanged, leaves the software set as it was. An engine
// that takes changes is given the change (giveSW, swpush.go).
func (p *Placer) pushSW(extra map[string]bool) error {
	p.swBackstop = false
	if !p.cfg.NoBackstop {
		set := p.swSet(extra, true)
		same, err := p.giveSW(set)
		if same {
			p.swBackstop = true
			return nil
		}
		if err == nil {
			p.swBackstop, p.pushed = true, set
			return nil
		}
		p.log.Warn("software path refused the backstop set; enforcing software-placed rules only", "err", err)
	}
	set := p.swSet(extra, false)
	same, err := p.giveSW(set)
	if same {
		return nil
	}
	if err != nil {
		p.log.Error("software path refused the rule set", "err", err)
		return err
	}
	p.pushed = set
	return nil
}

// Apply brings placement in line with a store snapshot: new rules placed,
// removed rules taken out, changed rules re-placed without a gap, and every
// hardware rule re-checked against the new accept rules.
func (p *Placer) Apply(ctx context.Context, snap store.Snapshot) {
	now := p.now()
	start := time.Now()
	p.fullTables = nil
	old := p.rules
	p.set = snap.Set
	p.movedTo = nil
	// The caller's snapshot: not written in place, and appended to only
	// in a new array (the capacity ends at its length).
	p.set.Rules = p.set.Rules[:len(p.set.Rules):len(p.set.Rules)]
	p.shared = true
	p.version = snap.Version
	p.viewAll = true // every position may have changed: publish builds the list anew
	p.rules = make(map[string]*ruleState, len(snap.Set.Rules))
	var removedHW []string // hardware keys to remove
	keep := map[string]bool{}
	p.states = make([]*ruleState, len(snap.Set.Rules))
	p.seqs, p.seqsOwn = nil, false
	if n := len(snap.Set.Rules); len(snap.Seqs) == n {
		p.seqs = snap.Seqs[:n:n] // the caller's: appended to in a new array
	}
	var sig strings.Builder
	for i, r := range snap.Set.Rules {
		rs, ok := old[r.ID]
		if r.Action == rule.Accept {
			fmt.Fprintf(&sig, "%d %s %d %s\n", i, r.ID, r.Priority, r.Match.String())
		}
		// Unchanged: rs.r is still the last set's copy, compared field
		// for field (a rule whose match changed in any field is placed
		// again).
		if ok && sameMatch(&r.Match, &rs.r.Match) && rs.r.Action == r.Action {
			if rs.r.Priority != r.Priority {
				rs.compiled = false
			}
			rs.r = &p.set.Rules[i]
			p.rules[r.ID] = rs
			p.states[i] = rs
			keep[r.ID] = true
			continue
		}
		nrs := &ruleState{r: &p.set.Rules[i]}
		if ok { // changed: carry counters, re-place
			nrs.carry(rs)
			// The software engine keeps its counter slot by rule id across
			// a change of match (XDP does; one that starts afresh reads
			// lower and is taken as a reset by delta). Keep the last
			// reading, or its whole count is added to the total again.
			// The hardware entry is new (a new key): its reading restarts.
			if rs.path == pHW {
				removedHW = append(removedHW, rs.key())
			}
		} else if rt, found := p.retired[r.ID]; found { // back: continue its counters
			nrs.carryRetired(rt)
		}
		delete(p.retired, r.ID)
		p.rules[r.ID] = nrs
		p.states[i] = nrs
	}
	if len(p.rules) != len(p.states) {
		// An id twice in the set: one state, that of its last place, for
		// both places; and no deltas.
		p.seqs = nil
		for i := range p.states {
			p.states[i] = p.rules[p.set.Rules[i].ID]
		}
	}
	for i, rs := range p.states {
		if p.seqs != nil {
			rs.seq = p.seqs[i]
		} else {
			rs.seq = 0 // no places: the published list is all place 0 (RuleList.Find walks it)
		}
	}
	for id, rs := range old {
		if !keep[id] && rs.path == pHW && p.rules[id] == nil {
			removedHW = append(removedHW, rs.key())
		}
		if p.rules[id] == nil {
			p.round.removed++
		}
		if p.rules[id] == nil && p.cfg.CounterMemory > 0 {
			p.retired[id] = retired{hwTot: rs.ex().hwTot, swTot: rs.ex().swTot, moves: rs.ex().moves, at: now}
		}
	}
	for id, rt := range p.retired {
		if now.Sub(rt.at) > p.cfg.CounterMemory {
			delete(p.retired, id)
		}
	}
	// Accept rules that overlap a hardware drop get their pass entries
	// before the drops are re-checked (hwpath's pass entries).
	if as, ok := p.hw.(acceptSyncer); ok && p.hwUp {
		as.SyncAccepts(ctx, &p.set)
	}
	// Compile the drop rules against the new set: all of them when its
	// accept rules changed; otherwise the new and changed ones, those in
	// hardware and those an accept rule kept out (whose pass entries
	// SyncAccepts just tried again).
	all := sig.String() != p.acceptSig
	p.acceptSig = sig.String()
	for n, rs := range p.states {
		if n&1023 == 1023 && ctx.Err() != nil {
			return
		}
		if rs.r.Action != rule.Drop {
			rs.path, rs.reason = pNone, p.intern("accept rule: enforced by software, and in hardware by pass entries in front of the drops it overlaps")
			continue
		}
		if all || !rs.compiled || rs.path == pHW || rs.kind() == dataplane.KindAcceptOverlap {
			p.compile(rs)
		}
	}
	// Rules in hardware that no longer compile (a new accept rule overlaps)
	// go to software first.
	var demote []*ruleState
	for _, rs := range p.states {
		if rs.path == pHW && !rs.hwOK {
			demote = append(demote, rs)
		}
	}
	// New rules: offload first.
	var fresh []*ruleState
	for _, rs := range p.states {
		if rs.r.Action == rule.Drop && rs.path == pNone {
			fresh = append(fresh, rs)
		}
	}
	p.noneDrops = len(fresh)
	// Adopt what reconcile found in hardware.
	staleSet := map[string]bool{}
	for _, id := range p.stale {
		staleSet[id] = true
	}
	pending := map[string]bool{}
	for _, rs := range fresh {
		k := ""
		if p.hw != nil {
			k = p.hw.Key(rs.r)
		}
		if k != "" && staleSet[k] && rs.hwOK && p.hwUp {
			rs.setKey(k)
			p.record(rs, None, HW, "adopted: already in hardware from the previous run", p.inputs(rs))
			delete(staleSet, k)
		} else {
			pending[rs.r.ID] = true
		}
	}
	for _, rs := range demote {
		p.record(rs, HW, SW, "no longer offloadable: "+text(rs.hwReason), p.inputs(rs))
	}
	// Software now holds every new, changed and demoted rule (and still
	// nothing was removed from hardware): no gap.
	backstopped := p.pushSW(pending) == nil && p.swBackstop
	for _, rs := range demote {
		p.hwRemove(ctx, rs.key())
	}
	for _, k := range removedHW {
		p.hwRemove(ctx, k)
	}
	for k := range staleSet {
		if p.hw != nil && p.hwUp {
			p.log.Info("reconcile: removing stale hardware rule", "key", k)
			p.hwRemove(ctx, k)
		}
	}
	p.stale = nil
	p.refreshBudget(ctx)
	// Offload first: every new rule that compiles goes to hardware; the
	// rest stay in software, where they already are.
	for n, rs := range fresh {
		if n&255 == 255 && ctx.Err() != nil {
			return // every fresh rule is in the software set already
		}
		if !pending[rs.r.ID] {
			continue
		}
		p.placeFresh(ctx, rs, now)
	}
	// With the backstop, the set pushed above already holds every rule
	// the hardware pass placed, in hardware (backstop) or in software
	// (pending) alike: the same set again would only make the software
	// engine compile it twice (at 100k rules, twice per round).
	if !backstopped {
		_ = p.pushSW(nil)
	}
	if p.hw != nil && !p.hwUp {
		p.evacuate(ctx)
	}
	if as, ok := p.hw.(acceptSyncer); ok && p.hwUp {
		if err := as.PruneAccepts(ctx, &p.set); err != nil {
			p.hwFailed(err, "remove pass entries")
			p.log.Error("removing pass entries no hardware drop needs failed", "err", err)
		}
	}
	p.publish()
	p.endRound("apply", start, true)
}

// ApplyStore reads st the cheapest way that is exact: the store's delta since
// the version placement last applied when it has one and the delta
// touches drop rules only (applyDelta), else a snapshot (Apply).
func (p *Placer) ApplyStore(ctx context.Context, st *store.Store) {
	if p.seqs != nil && p.stale == nil {
		if d, ok := st.Delta(p.version); ok && p.applyDelta(ctx, d, st) {
			return
		}
	}
	p.Apply(ctx, st.Effective())
}

// endRound logs what the round did in one line (rules added to each path,
// moved, removed, refused by hardware by kind, and where the rules are
// now), and starts the next round's counts. A round that changed nothing
// logs nothing unless always.
func (p *Placer) endRound(what string, start time.Time, always bool) {
	c := p.round
	p.round = roundCounts{}
	refused := 0
	for _, n := range c.hwRefused {
		refused += n
	}
	if !always && c.addedHW+c.addedSW+c.moved+c.removed+refused == 0 {
		return
	}
	var hw, sw int
	if l := p.view.Load().Rules; p.seqs != nil && l.Len() == p.live() {
		// Each id once (the order has places): the published list's
		// counts, summed per chunk. The caller published the round.
		hw, sw = l.paths()
	} else {
		for i, rs := range p.states {
			if rs == nil || rs.r != &p.set.Rules[i] {
				continue // counted at its id's last place
			}
			switch rs.path {
			case pHW:
				hw++
			case pSW:
				sw++
			}
		}
	}
	args := []any{"round", what, "rules", p.live(), "store_version", p.version,
		"added_hw", c.addedHW, "added_sw", c.addedSW, "moved", c.moved, "removed", c.removed,
		"hw_refused", refused, "in_hw", hw, "in_sw", sw, "took", time.Since(start).Round(time.Microsecond).String()}
	kinds := make([]dataplane.Kind, 0, len(c.hwRefused))
	for k := range c.hwRefused {
		kinds = append(kinds, k)
	}
	slices.Sort(kinds)
	for _, k := range kinds {
		args = append(args, "hw_refused_"+k.String(), c.hwRefused[k])
	}
	p.log.Info("placement round", args...)
}

// acceptSyncer is a hardware path that excepts accept rules from its drops
// in hardware (hwpath.Path's pass entries): SyncAccepts puts the entries of
// new accept rules in front of the drops already there, PruneAccepts takes
// out those no hardware drop needs once the set's drops are placed.
type acceptSyncer interface {
	SyncAccepts(ctx context.Context, set *rule.Set)
	PruneAccepts(ctx context.Context, set *rule.Set) error
}

// intern returns the placer's copy of s. The table is bounded: past
// maxTexts distinct texts it starts over.
func (p *Placer) intern(s string) *string {
	if t, ok := p.texts[s]; ok {
		return t
	}
	if p.texts == nil || len(p.texts) >= maxTexts {
		p.texts = map[string]*string{}
	}
	p.texts[s] = &s
	return &s
}

const maxTexts = 4096

func (p *Placer) compile(rs *ruleState) {
	if p.hw == nil {
		rs.hwOK, rs.hwReason, rs.hwKind = false, p.intern("no hardware offload configured"), uint8(dataplane.KindUnsupported)
		return
	}
	c, err := p.hw.Compile(rs.r, &p.set)
	if err != nil {
		rs.hwOK, rs.hwKind, rs.compiled = false, uint8(dataplane.KindOf(err)), true
		why := err.Error()
		var he *dataplane.HWError
		if asHW(err, &he) {
			why = he.Kind.String() + ": " + he.Detail
		}
		rs.hwReason = p.intern(why)
		p.noteOverlap(rs)
		return
	}
	rs.hwOK, rs.hwReason, rs.hwKind, rs.compiled = true, nil, 0, true
	rs.setMasks(c.Masks)
	rs.entries = int32(c.Entries)
}

// noteOverlap remembers rs if an accept rule keeps it out of hardware.
func (p *Placer) noteOverlap(rs *ruleState) {
	if rs.kind() != dataplane.KindAcceptOverlap {
		return
	}
	if p.overlapHeld == nil {
		p.overlapHeld = map[*ruleState]struct{}{}
	}
	p.overlapHeld[rs] = struct{}{}
}

// anyOverlapHeld reports whether a rule of the set is kept out of
// hardware by an accept rule, forgetting the entries that no longer say so.
func (p *Placer) anyOverlapHeld() bool {
	for rs := range p.overlapHeld {
		if p.rules[rs.r.ID] == rs && !rs.hwOK && rs.kind() == dataplane.KindAcceptOverlap {
			return true
		}
		delete(p.overlapHeld, rs)
	}
	return false
}

func (p *Placer) hwRemove(ctx context.Context, key string) {
	if p.hw == nil || !p.hwUp || key == "" {
		return
	}
	p.fullTables = nil // a shape may have been freed
	if err := p.hw.Remove(ctx, key); err != nil {
		p.hwFailed(err, "remove")
		p.log.Error("hardware remove failed", "key", key, "err", err)
	}
}

func (p *Placer) refreshBudget(ctx context.Context) {
	if p.hw == nil || !p.hwUp {
		return
	}
	b, err := p.hw.Budget(ctx)
	if err != nil {
		p.hwFailed(err, "budget")
		return
	}
	p.budget = b
}

func (p *Placer) hasRoom(rs *ruleState) bool {
	b := p.budget
	return b.MaxEntries == 0 || b.UsedEntries+int(rs.entries) <= b.MaxEntries
}

// placeFresh places a rule that is on no path yet (it is in the software
// set already): offload first, into hardware when the rule compiles for it
// and the hardware path is up; otherwise it stays in software, recorded
// with the reason.
func (p *Placer) placeFresh(ctx context.Context, rs *ruleState, now time.Time) {
	if rs.hwOK && p.hwUp && p.toHW(ctx, rs, "offload first: hardware can express it exactly", now) {
		return
	}
	why := text(rs.reason)
	if !rs.hwOK {
		why = "software: " + text(rs.hwReason)
	} else if !p.hwUp {
		why = "software: hardware path down"
	}
	p.record(rs, None, SW, why, p.inputs(rs))
}

// toHW installs rs in hardware; the caller then pushes the software set
// (which drops rs) afterwards. It reports success.
func (p *Placer) toHW(ctx context.Context, rs *ruleState, why string, now time.Time) bool {
	if !p.hwUp {
		return false
	}
	if !p.hasRoom(rs) {
		rs.reason = p.intern(fmt.Sprintf("software: hardware table full (%d/%d entries, rule needs %d)", p.budget.UsedEntries, p.budget.MaxEntries, int(rs.entries)))
		p.touch(rs)
		return false
	}
	if rs.hwRetryAt != 0 && p.before(now, rs.hwRetryAt) {
		return false
	}
	if t, why := p.noShape(rs); why != "" {
		// Known to fail without asking the device: the table has no mask
		// shape left and the rule needs one it does not have.
		p.failures[dataplane.KindMaskBudget]++
		rs.reason = p.intern("software: hardware refused: " + why)
		p.touch(rs)
		rs.hwRetryAt = p.stamp(now.Add(p.cfg.MinDwell))
		p.countRefused(dataplane.KindMaskBudget)
		p.log.Debug("hardware install not tried; rule stays in software", "rule", rs.r.ID, "table", t, "why", why)
		return false
	}
	if err := p.hw.Install(ctx, rs.r, &p.set); err != nil {
		p.hwFailed(err, "install")
		k := dataplane.KindOf(err)
		if k == dataplane.KindMaskBudget {
			p.shapesFull(err)
		}
		rs.reason = p.intern("software: hardware refused: " + err.Error())
		p.touch(rs)
		if k == dataplane.KindUnsupported || k == dataplane.KindAcceptOverlap {
			rs.hwOK, rs.hwKind, rs.hwReason = false, uint8(k), p.intern(err.Error())
			p.noteOverlap(rs)
			rs.compiled = false // the next Apply asks Compile again
		}
		rs.hwRetryAt = p.stamp(now.Add(p.cfg.MinDwell))
		p.countRefused(k)
		p.log.Debug("hardware install failed; rule stays in software", "rule", rs.r.ID, "kind", k.String(), "err", err)
		return false
	}
	x := rs.ext()
	x.key = p.hw.Key(rs.r)
	x.hwChanged = p.stamp(now)
	for _, m := range rs.maskList() {
		if p.shapes != nil {
			p.shapes[m] = true
		}
	}
	p.record(rs, rs.path.Path(), HW, why, p.inputs(rs))
	p.budget.UsedEntries += int(rs.entries)
	return true
}

// toSW moves rs from hardware to software: software first, then removal.
func (p *Placer) toSW(ctx context.Context, rs *ruleState, why string, in Inputs) {
	if err := p.pushSW(map[string]bool{rs.r.ID: true}); err != nil {
		return // it stays in hardware: still enforced
	}
	p.hwRemove(ctx, rs.key())
	rs.setKey("")
	p.record(rs, HW, SW, why, in)
	p.budget.UsedEntries -= int(rs.entries)
}

// Tick reads counters, updates rates and applies the regime model.
func (p *Placer) Tick(ctx context.Context) {
	start := time.Now()
	p.fullTables = nil
	now := p.now()
	dt := now.Sub(p.lastTick).Seconds()
	first := p.lastTick.IsZero()
	p.lastTick = now
	// Hardware health and counters.
	var hwStats map[string]dataplane.Counter
	if p.hw != nil && p.hwUp {
		var err error
		hwStats, err = p.hw.Stats(ctx)
		if err != nil {
			p.hwFailed(err, "stats")
		}
		if nic, err := p.hw.NICCounters(ctx); err == nil {
			p.nic = nic
		}
		p.refreshBudget(ctx)
	}
	if p.hw != nil && !p.hwUp {
		p.evacuate(ctx)
		if _, err := p.hw.Budget(ctx); err == nil {
			p.log.Info("hardware path answers again")
			p.Recover(ctx)
		}
	}
	sw := p.sw.Stats()
	// Software counts by position: the engine's set is the subsequence of
	// the set it was pushed as (swSet keeps the order), so one walk pairs
	// each rule with its count (j follows the engine's set). A set that is
	// not (a push refused, a rule of the old set gone before the push) is
	// paired by an index of its ids, built for this tick only.
	var swRules []rule.Rule
	var swIdx map[string]int
	if sw.Set != nil && len(sw.Counts) == len(sw.Set.Rules) {
		swRules = sw.Set.Rules
		if sameArray := len(swRules) > 0 && len(p.set.Rules) > 0 && &p.set.Rules[0] == &swRules[0] && sw.Set.Holes == p.set.Holes; !sameArray && !inOrder(sw.Set, &p.set) {
			swIdx = make(map[string]int, len(swRules))
			for j := range swRules {
				if sw.Set.Live(j) {
					swIdx[swRules[j].ID] = j
				}
			}
			swRules = nil
		}
	}
	j := 0
	// Rates. The states by position (p.states follows p.set.Rules), not a map
	// lookup per rule; only rules in hardware have a key to look up. A
	// rule without an extra part (never in hardware, never moved, no
	// traffic yet) whose software count reads zero has nothing to update:
	// its totals, last reading and rates are zero and stay so, and it is
	// given no extra part.
	for i, rs := range p.states {
		if rs == nil {
			continue // a hole
		}
		id := p.set.Rules[i].ID
		x := rs.x
		var was counts
		if x != nil {
			was = x.counts()
		}
		var dh, ds dataplane.Counter
		if x != nil && x.key != "" { // in hardware: no map lookup for the others
			if c, ok := hwStats[x.key]; ok {
				dh = delta(&x.hwLast, c)
				x.hwTot.Packets += dh.Packets
				x.hwTot.Bytes += dh.Bytes
			}
		}
		at := -1
		for j < len(swRules) && !sw.Set.Live(j) {
			j++ // a hole of the engine's set
		}
		if j < len(swRules) && swRules[j].ID == id {
			at, j = j, j+1
		} else if k, ok := swIdx[id]; ok {
			at = k
		}
		if at >= 0 && (x != nil || sw.Counts[at] != (dataplane.Counter{})) {
			x = rs.ext()
			ds = delta(&x.swLast, sw.Counts[at])
			x.swTot.Packets += ds.Packets
			x.swTot.Bytes += ds.Bytes
		}
		if x == nil {
			continue
		}
		if !first && dt > 0 {
			switch {
			case dh.Packets > 0:
				since := dt
				if x.hwChanged != 0 {
					since = p.since(now, x.hwChanged).Seconds()
				}
				x.hwPPS = float64(dh.Packets) / since
				x.hwChanged = p.stamp(now)
			case x.hwChanged == 0 || p.since(now, x.hwChanged) > 2*p.cfg.HWStatsPeriod+time.Duration(dt*float64(time.Second)):
				x.hwPPS = 0
			}
			if dh.Packets == 0 && x.hwChanged == 0 {
				x.hwChanged = p.stamp(now)
			}
			x.swPPS = float64(ds.Packets) / dt
			if n := dh.Packets + ds.Packets; n > 0 {
				x.avgFrame = float64(dh.Bytes+ds.Bytes) / float64(n)
			}
		}
		if x.counts() != was {
			p.touch(rs)
		}
	}
	prev, cur := p.lastSW.Totals(), sw.Totals()
	if !first && dt > 0 && cur.RxPackets >= prev.RxPackets {
		rx := cur.RxPackets - prev.RxPackets
		var oob uint64
		if cur.OutOfBuffer >= prev.OutOfBuffer {
			oob = cur.OutOfBuffer - prev.OutOfBuffer
		}
		// The load is what was offered to the software path: what the
		// workers received and what the rings had no buffer for.
		p.rxPPS, p.oobPPS = float64(rx)/dt, float64(oob)/dt
		p.swLoad = float64(rx+oob) / dt
		p.imbalance = imbalance(p.lastSW.Workers, sw.Workers)
		if cyc := cur.Cycles - prev.Cycles; rx > 0 && cur.Cycles >= prev.Cycles && cyc > 0 {
			p.measured = float64(cyc) / float64(rx)
			if p.cfg.LiveCycles || p.cpp <= 0 {
				p.cpp = p.measured
			}
		}
	}
	if cur.Cycles == 0 && sw.EstCyclesPerPacket > 0 {
		// An engine without cycle counters: its estimate stands in.
		p.measured = sw.EstCyclesPerPacket
		if p.cfg.LiveCycles || p.cpp <= 0 {
			p.cpp = p.measured
		}
	}
	// Kept for the next tick's totals and the View: the workers, not the
	// per-rule counts (the engine's buffer, written again two reads on).
	p.lastSW = sw
	p.lastSW.Set, p.lastSW.Counts = nil, nil
	if !first && p.hw != nil && p.hwUp {
		p.regime(ctx, now)
	}
	p.publish()
	p.endRound("tick", start, false)
}

// imbalance is the busiest worker's offered packets (received plus
// out-of-buffer) over the mean, between two readings of the workers'
// counters; 1 when there are too few packets to tell.
func imbalance(prev, cur []dataplane.WorkerStats) float64 {
	if len(prev) != len(cur) || len(cur) == 0 {
		return 1
	}
	var total, busiest uint64
	for i := range cur {
		c, o := cur[i], prev[i]
		if c.RxPackets < o.RxPackets || c.OutOfBuffer < o.OutOfBuffer {
			return 1 // a counter reset
		}
		n := c.RxPackets - o.RxPackets + c.OutOfBuffer - o.OutOfBuffer
		total += n
		busiest = max(busiest, n)
	}
	if total < 100*uint64(len(cur)) {
		return 1
	}
	return float64(busiest) * float64(len(cur)) / float64(total)
}

// counts are the figures of a rule's RuleView that Tick updates.
type counts struct {
	hwTot, swTot           dataplane.Counter
	hwPPS, swPPS, avgFrame float64
}

func (x *ruleExtra) counts() counts {
	return counts{hwTot: x.hwTot, swTot: x.swTot, hwPPS: x.hwPPS, swPPS: x.swPPS, avgFrame: x.avgFrame}
}

// delta is reading c less the last reading (zero before the first: a
// counter starts from zero), or c itself when it went down (a counter
// reset); c becomes the last reading.
func delta(last *dataplane.Counter, c dataplane.Counter) dataplane.Counter {
	d := c
	if c.Packets >= last.Packets && c.Bytes >= last.Bytes {
		d = dataplane.Counter{Packets: c.Packets - last.Packets, Bytes: c.Bytes - last.Bytes}
	}
	*last = c
	return d
}

// evacuate puts every hardware rule in software after the device went away.
func (p *Placer) evacuate(ctx context.Context) {
	var moved []*ruleState
	for _, rs := range p.states {
		if rs != nil && rs.path == pHW {
			moved = append(moved, rs)
		}
	}
	if len(moved) == 0 {
		return
	}
	for _, rs := range moved {
		rs.setKey("")
		p.record(rs, HW, SW, "hardware path down (device gone): enforced in software", p.inputs(rs))
	}
	_ = p.pushSW(nil)
}

// HWUp reports whether the hardware path is usable; Recover marks it usable
// again (after the backend came back) and the next Apply re-offloads.
func (p *Placer) Recover(ctx context.Context) {
	if p.hw == nil || p.hwUp {
		return
	}
	p.hwUp = true
	p.refreshBudget(ctx)
	p.set.Ordered(func(i int) {
		if rs := p.states[i]; rs != nil && rs.path == pSW && rs.hwOK {
			p.toHW(ctx, rs, "hardware path back: offload first", p.now())
		}
	})
	_ = p.pushSW(nil)
	p.publish()
}

func (p *Placer) regime(ctx context.Context, now time.Time) {
	capPPS, cpuPPS, ringPPS, limit := p.capacity()
	dwelt := func(rs *ruleState) bool {
		return !rs.placed || now.Sub(p.epoch)-time.Duration(rs.since) >= p.cfg.MinDwell
	}
	moves := 0
	changed := false
	hot := capPPS > 0 && p.swLoad > p.cfg.HighWater*capPPS
	// Candidates: software rules hardware can take, costliest first. Only
	// those that can act this round are gathered and sorted: under load,
	// the rules that carry traffic (a rule without traffic is skipped
	// below); otherwise, the rules the table has room for (below the high
	// water nothing frees an entry during the round, so a rule without
	// room now gets none later in it) and whose retry time has come (toHW
	// passes over the others without a side effect). An idle agent with a
	// full table sorts nothing, where it sorted every software rule each
	// round.
	var cands []*ruleState
	p.set.Ordered(func(i int) { // in order: ties keep it (as Apply's set has it)
		rs := p.states[i]
		if rs == nil || rs.path != pSW || !rs.hwOK || rs.r.Action != rule.Drop || !dwelt(rs) {
			return
		}
		if hot && rs.ex().swPPS == 0 {
			return
		}
		if !hot && (!p.hasRoom(rs) || (rs.hwRetryAt != 0 && p.before(now, rs.hwRetryAt))) {
			return
		}
		cands = append(cands, rs)
	})
	p.regimeSorted = len(cands)
	slices.SortStableFunc(cands, func(a, b *ruleState) int {
		if c := cmp.Compare(b.ex().swPPS, a.ex().swPPS); c != 0 {
			return c
		}
		return cmp.Compare(a.ex().avgFrame, b.ex().avgFrame)
	})
	// Hardware rules, cheapest (lowest rate, then largest frames) first:
	// swap victims, needed only under load.
	var hwRules []*ruleState
	if hot && len(cands) > 0 {
		p.set.Ordered(func(i int) {
			if rs := p.states[i]; rs != nil && rs.path == pHW && dwelt(rs) {
				hwRules = append(hwRules, rs)
			}
		})
	}
	slices.SortStableFunc(hwRules, func(a, b *ruleState) int {
		if c := cmp.Compare(a.ex().hwPPS, b.ex().hwPPS); c != 0 {
			return c
		}
		return cmp.Compare(b.ex().avgFrame, a.ex().avgFrame)
	})
	load := p.swLoad
	// The load counts what the rings had no buffer for; a rule's software
	// counters count only what reached the classifier. Its offered rate is
	// taken as its decided rate scaled by the share the rings lost (its
	// packets lost in proportion), so that moving it takes its lost packets
	// off the load too.
	lossScale := 1.0
	if p.rxPPS > 0 && p.swLoad > p.rxPPS {
		lossScale = p.swLoad / p.rxPPS
	}
	// Attempts are bounded too: with a table that refuses (no mask shape
	// left) a round tries a bounded number of rules, not every one, and
	// the refused wait MinDwell before they are tried again.
	tries := 0
	for _, rs := range cands {
		if moves >= p.cfg.MaxMoves || tries >= 8*p.cfg.MaxMoves || ctx.Err() != nil {
			break
		}
		offered := rs.ex().swPPS * lossScale
		// Rules that carry no traffic are worth offloading only when the
		// table has room (offload first); under load only traffic counts.
		if hot && rs.ex().swPPS == 0 {
			continue
		}
		in := p.inputs(rs)
		if p.hasRoom(rs) {
			if rs.hwRetryAt == 0 || !p.before(now, rs.hwRetryAt) {
				tries++
			}
			why := "offload first: room in hardware again"
			if hot {
				why = fmt.Sprintf("software load %.0f%% of capacity (high water %.0f%%; %s): costliest rule to hardware",
					100*load/capPPS, 100*p.cfg.HighWater, p.limitText(capPPS, cpuPPS, ringPPS, limit))
			}
			if p.toHW(ctx, rs, why, now) {
				load -= offered
				moves++
				changed = true
			}
			continue
		}
		if !hot {
			continue
		}
		// Full table: swap with the cheapest hardware rule if this one is
		// SwapFactor times costlier and software can take the victim.
		for i, v := range hwRules {
			if v == nil || int(v.entries) < int(rs.entries) {
				continue
			}
			if offered < p.cfg.SwapFactor*v.ex().hwPPS || load-offered+v.ex().hwPPS > p.cfg.HighWater*capPPS {
				continue
			}
			vin := p.inputs(v)
			vin.OtherRule, vin.OtherPPS = rs.r.ID, offered
			p.toSW(ctx, v, fmt.Sprintf("hardware full: makes room for %s (%.0f pps vs %.0f pps, frames %.0f B vs %.0f B)",
				rs.r.ID, offered, v.ex().hwPPS, rs.ex().avgFrame, v.ex().avgFrame), vin)
			hwRules[i] = nil
			in.OtherRule, in.OtherPPS = v.r.ID, v.ex().hwPPS
			if p.toHW(ctx, rs, fmt.Sprintf("software load %.0f%% of capacity (%s); swapped with %s", 100*load/capPPS,
				p.limitText(capPPS, cpuPPS, ringPPS, limit), v.r.ID), now) {
				load += v.ex().hwPPS - offered
				changed = true
			}
			moves += 2
			break
		}
	}
	if changed {
		_ = p.pushSW(nil)
	}
}

// limitText says which capacity limits, with both figures.
func (p *Placer) limitText(capPPS, cpu, ring float64, limit string) string {
	switch limit {
	case "ring":
		return fmt.Sprintf("limit ring: %d queues x %.2f Mpps drain / imbalance %.2f = %.2f Mpps, below the CPU's %.2f Mpps",
			len(p.lastSW.Workers), p.cfg.QueueDrainPPS/1e6, max(p.imbalance, 1), ring/1e6, cpu/1e6)
	case "ring (out-of-buffer)":
		return fmt.Sprintf("limit ring: out-of-buffer %.2f Mpps, the rings drained %.2f Mpps, below the CPU's %.2f Mpps",
			p.oobPPS/1e6, ring/1e6, cpu/1e6)
	}
	s := fmt.Sprintf("limit cpu: %.2f Mpps", capPPS/1e6)
	if ring > 0 {
		s += fmt.Sprintf(", ring %.2f Mpps", ring/1e6)
	}
	return s
}

func (p *Placer) publish() {
	ds := p.decisions[max(0, len(p.decisions)-p.cfg.MaxDecisions):]
	v := &View{Time: p.now(), Decisions: ds[:len(ds):len(ds)], Moves: map[[2]Path]uint64{},
		HWFailures: map[dataplane.Kind]uint64{}, HWBudget: p.budget, HWUp: p.hwUp, SW: p.lastSW,
		SWLoadPPS: p.swLoad, CyclesPerPacket: p.cpp, MeasuredCyclesPerPacket: p.measured, NIC: p.nic, StoreVersion: p.version,
		Resyncs: p.resyncs, Ready: p.ready}
	if p.sw != nil {
		v.SWCapacityPPS, v.CPUCapacityPPS, v.RingCapacityPPS, v.Limit = p.capacity()
	}
	v.Imbalance, v.OutOfBufferPPS = p.imbalance, p.oobPPS
	for k, n := range p.moves {
		v.Moves[k] = n
	}
	for k, n := range p.failures {
		v.HWFailures[k] = n
	}
	v.Rules = p.publishRules()
	var hwB, swB float64
	v.HWPPS, v.SWPPS, hwB, swB = v.Rules.totals()
	if v.HWPPS > 0 {
		v.HWAvgFrame = hwB / v.HWPPS
	}
	if v.SWPPS > 0 {
		v.SWAvgFrame = swB / v.SWPPS
	}
	p.view.Store(v)
}

// publishRules brings the list in line with the rules' states and returns
// it for a View: the entries of the rules touched since the last publish
// are written where they are (a binary search by place in the store's
// order), or, after Apply, when the order has no places (an id twice) or
// when most rules changed, the list is built anew.
func (p *Placer) publishRules() RuleList {
	if p.viewAll || (p.seqs == nil && len(p.dirty) > 0) || len(p.dirty) > p.live()/8 {
		rvs := make([]ruleEntry, 0, p.live())
		p.set.Ordered(func(i int) {
			if rs := p.states[i]; rs != nil {
				rvs = append(rvs, p.entryOf(rs))
			}
		})
		p.list.reset(rvs)
		p.viewAll = false
	} else {
		for _, rs := range p.dirty {
			if p.rules[rs.r.ID] != rs {
				continue // removed
			}
			if i := p.slot(rs); i >= 0 {
				p.list.set(p.pos(i), p.entryOf(rs))
			}
		}
	}
	for _, rs := range p.dirty {
		rs.dirty = false
	}
	clear(p.dirty)
	p.dirty = p.dirty[:0]
	if cap(p.dirty) > maxDirtyKept {
		p.dirty = nil // a round that touched every rule: not kept for the next
	}
	return p.list.published()
}

// maxDirtyKept is the largest list of touched rules publish keeps for
// the next round to reuse (a round touching more allocates its own).
const maxDirtyKept = 1024

// RequestResync asks the placer's goroutine (Run) to check the hardware
// table against its placements soon: something (a qdisc monitor) saw the
// table lose entries. Safe from any goroutine; never blocks (requests made
// while one is pending merge).
func (p *Placer) RequestResync(reason string) {
	select {
	case p.resyncReq <- reason:
	default:
	}
}

// Resync reads back what the hardware holds and reinstalls every rule
// placed there that it lost (OVS deletes the ingress qdisc, and every
// filter with it, when it restarts). The lost rules go to software first,
// at once, since nothing enforces them now; then back to hardware, which
// re-creates the qdisc. It returns how many rules were lost.
func (p *Placer) Resync(ctx context.Context, reason string) int {
	if p.hw == nil || !p.hwUp {
		return 0
	}
	ids, err := p.hw.Installed(ctx)
	if err != nil {
		p.hwFailed(err, "resync")
		p.log.Error("resync: reading the hardware table failed", "reason", reason, "err", err)
		p.publish()
		return 0
	}
	have := map[string]bool{}
	for _, k := range ids {
		have[k] = true
	}
	var lost []*ruleState
	for _, rs := range p.states {
		if rs != nil && rs.path == pHW && !have[rs.key()] {
			lost = append(lost, rs)
		}
	}
	if len(lost) == 0 {
		p.log.Info("resync: hardware holds every rule placed there", "reason", reason)
		return 0
	}
	p.resyncs++
	p.log.Warn("resync: hardware lost rules; software enforces them until they are reinstalled", "reason", reason, "rules", len(lost))
	for _, rs := range lost {
		rs.setKey("")
		p.record(rs, HW, SW, "hardware lost the rule ("+reason+"): software enforces it", p.inputs(rs))
	}
	_ = p.pushSW(nil)
	p.refreshBudget(ctx)
	now := p.now()
	for _, rs := range lost {
		rs.hwRetryAt = 0
		p.toHW(ctx, rs, "reinstalled after "+reason, now)
	}
	_ = p.pushSW(nil)
	p.publish()
	return len(lost)
}

// RemoveAllHW takes every rule out of hardware (shutdown with
// keep_on_shutdown: false). Call it only after Run has returned.
func (p *Placer) RemoveAllHW(ctx context.Context) int {
	n := 0
	for _, rs := range p.states {
		if rs != nil && rs.path == pHW {
			p.hwRemove(ctx, rs.key())
			rs.setKey("")
			n++
		}
	}
	return n
}
