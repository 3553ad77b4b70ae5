// Package dataplane is the agent's view of its two enforcement paths, at rule
// granularity: HW (a hardware flow table behind an offload backend) and SW
// (a software engine running the classifier). agent/placement decides which
// path each drop rule is on and drives these interfaces; adapters over the
// real engines (offload backends, the Direct Verbs and XDP engines, the Go
// classifier) implement them.
//
// Both paths follow swpath/rule's semantics. Hardware holds drop rules only;
// accept rules (the protect list, allow-list entries) are enforced by keeping
// out of hardware every drop that could hit them (the backend's Compile says
// so) and by giving the software path every accept rule.
package dataplane

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/scrubd/scrubd/swpath/rule"
)

// Kind classifies why hardware did not take a rule.
type Kind int

const (
	KindUnsupported   Kind = iota + 1 // the match cannot be expressed exactly
	KindAcceptOverlap                 // it could drop traffic an accept rule lets through
	KindTableFull                     // no entries left
	KindMaskBudget                    // no flow groups (mask shapes) left
	KindDeviceGone                    // the device vanished or the backend is down
	KindOther
)

var kindNames = map[Kind]string{
	KindUnsupported: "unsupported", KindAcceptOverlap: "accept_overlap", KindTableFull: "table_full",
	KindMaskBudget: "mask_budget", KindDeviceGone: "device_gone", KindOther: "other",
}

func (k Kind) String() string {
	if s, ok := kindNames[k]; ok {
		return s
	}
	return fmt.Sprintf("kind(%d)", int(k))
}

// Kinds lists every kind, for metrics.
func Kinds() []Kind {
	return []Kind{KindUnsupported, KindAcceptOverlap, KindTableFull, KindMaskBudget, KindDeviceGone, KindOther}
}

// HWError is why hardware refused a rule.
type HWError struct {
	Rule   string
	Kind   Kind
	Detail string // the device's or compiler's words (extack)
	Err    error
}

func (e *HWError) Error() string {
	s := "hardware refused rule " + e.Rule + ": " + e.Kind.String()
	if e.Detail != "" {
		s += ": " + e.Detail
	}
	return s
}

func (e *HWError) Unwrap() error { return e.Err }

// KindOf returns the kind of a hardware error (KindOther for foreign errors).
func KindOf(err error) Kind {
	var he *HWError
	if errors.As(err, &he) {
		return he.Kind
	}
	return KindOther
}

// Cost is what a rule takes in hardware.
type Cost struct {
	Entries int
	// Masks are the distinct mask shapes the rule's entries use; the
	// backend's budget counts distinct shapes across rules.
	Masks []MaskShape
}

// MaskShape names a mask shape in one hardware table: the table (chain
// and priority) and a 64-bit hash of the mask, compared within one
// process only. Two shapes of a table that hash alike read as one.
type MaskShape struct {
	Hash  uint64
	Chain uint32
	Prio  uint16
}

// Budget is the hardware table's capacity and use.
type Budget struct {
	MaxEntries  int // 0: unknown/unbounded
	UsedEntries int
	MaxMasks    int // 0: unbounded
	UsedMasks   int
}

// Counter is a cumulative packet and byte count.
type Counter struct {
	Packets uint64
	Bytes   uint64
}

// HW is a hardware path. Implementations are safe for concurrent use.
type HW interface {
	Name() string
	// Compile reports the cost of putting drop rule r in hardware given the
	// whole effective set (whose accept rules it must not override), or an
	// *HWError saying why it cannot go there exactly. It changes nothing.
	Compile(r *rule.Rule, set *rule.Set) (Cost, error)
	// Key identifies a rule's hardware entries: it changes when the rule's
	// id or match changes, and it is recoverable from the device after a
	// restart (the cookie).
	Key(r *rule.Rule) string
	// Install puts r in hardware (all of its entries or none).
	Install(ctx context.Context, r *rule.Rule, set *rule.Set) error
	// Remove takes the rule with the given key out of hardware. Removing an
	// absent rule is not an error.
	Remove(ctx context.Context, key string) error
	// Installed lists the keys of rules this agent has in hardware (read
	// back from the device: after a restart, what the last run left).
	Installed(ctx context.Context) ([]string, error)
	Budget(ctx context.Context) (Budget, error)
	// Stats returns cumulative hardware counters per rule key.
	Stats(ctx context.Context) (map[string]Counter, error)
	// NICCounters returns the device's own drop counters by name
	// (rx_discards_phy, rx_out_of_buffer, ...); may be empty.
	NICCounters(ctx context.Context) (map[string]uint64, error)
}

// WorkerStats are one software worker's cumulative counters.
type WorkerStats struct {
	Worker      int
	RxPackets   uint64
	RxBytes     uint64
	Dropped     uint64
	Passed      uint64
	OutOfBuffer uint64
	// Unforwarded counts passed packets an inline engine could not send
	// on (dv: the send queue was full; xdp: no peer in the devmap, so the
	// frame went to the local stack instead).
	Unforwarded uint64
	// CacheHits counts received packets the classifier's flow cache
	// decided (dv; xdp has no flow cache and leaves it 0).
	CacheHits     uint64
	Cycles        uint64 // cycles spent processing
	PoolFree      int    // buffers free in the worker's pool
	PoolSize      int
	PoolNode      int
	PoolAllocFail uint64
}

// SWStats are the software path's cumulative counters.
type SWStats struct {
	At time.Time
	// Set is the rule set the engine enforces: the one it was last given
	// (SetRules or PatchRules), shared, never written; its holes (if any)
	// count nothing. Counts[i] is the
	// packets and bytes Set.Rules[i] decided (dropped or accepted) since
	// the rule first came to the engine: a rule's counts follow its id
	// across sets. Set is nil, and Counts empty, when the engine has no
	// per-rule counters. Counts is the engine's own buffer, reused: it
	// holds until the engine's second Stats call after the one that
	// returned it (engines keep two and write them in turn, so that a
	// read of 100k counters allocates nothing). A reader that keeps
	// counts longer copies them.
	Set     *rule.Set
	Counts  []Counter
	Workers []WorkerStats
	// EstCyclesPerPacket is, for an engine that counts no cycles (xdp),
	// its cost per packet estimated from test runs of its program with the
	// rules in force (0: no estimate). The placer takes it where it would
	// take measured cycles.
	EstCyclesPerPacket float64
	// LookupBytes is the memory of the software lookup's structures for
	// Set (the classifier's hash tables or decision trees and their
	// entries), and LookupBuild how long building that lookup took (a
	// whole set's compile, or the patch of the rules that changed); both 0
	// for an engine without the classifier (xdp).
	LookupBytes int64
	LookupBuild time.Duration
}

// Rule returns the counts of the rule with the given id, by a walk of the
// set (linear: for tests and one-off reads; the placer reads by position).
// A hole of the set is no rule, whatever its ID.
func (s SWStats) Rule(id string) (Counter, bool) {
	if s.Set == nil {
		return Counter{}, false
	}
	for i := range s.Set.Rules {
		if s.Set.Rules[i].ID == id && i < len(s.Counts) && s.Set.Live(i) {
			return s.Counts[i], true
		}
	}
	return Counter{}, false
}

// Totals sums the workers.
func (s *SWStats) Totals() WorkerStats {
	var t WorkerStats
	t.Worker = -1
	for _, w := range s.Workers {
		t.RxPackets += w.RxPackets
		t.RxBytes += w.RxBytes
		t.Dropped += w.Dropped
		t.Passed += w.Passed
		t.OutOfBuffer += w.OutOfBuffer
		t.Unforwarded += w.Unforwarded
		t.CacheHits += w.CacheHits
		t.Cycles += w.Cycles
		t.PoolFree += w.PoolFree
		t.PoolSize += w.PoolSize
		t.PoolAllocFail += w.PoolAllocFail
	}
	return t
}

// SW is a software path.
type SW interface {
	Name() string
	// SetRules makes set the rules the software path enforces, atomically:
	// no packet sees half of one set. The set may have holes (rule.Set's
	// Holes: positions that are not rules, left by removals in place) and
	// rules changed in place (its Order: appended copies that decide at
	// another position's key); an engine that does not read Live and Key
	// compacts it (rule.Set.Compact).
	SetRules(set *rule.Set) error
	Stats() SWStats
	// Capacity returns the engine's configured workers and clock, for the
	// regime model.
	Capacity() (workers int, hz float64)
}

// SWPatcher is implemented by a software path that can be given a change
// rather than a whole set (the Go classifier's engines): a change of a few
// rules then costs what it touches, not a compile of the set.
type SWPatcher interface {
	// PatchRules makes to the rules the software path enforces, exactly as
	// SetRules(to) would, given that from is the set it holds (the last
	// one it accepted, the same pointer) and that to differs from it only
	// in removed (ascending indexes in from of the rules not in to as they
	// are: gone, or changed in any field) and added (ascending indexes in
	// to of the rules not in from as they are): every other rule of to is
	// the next rule of from not removed. Either set may have holes, which
	// are rules of neither: a removal in place makes to the array of from
	// with the removed positions made holes (removed lists them, added
	// none), so that no index moves. Either may have rules changed in
	// place (rule.Order: a copy appended, deciding at the key of the hole
	// it left): such a copy is removed or added like any other rule, the
	// rules kept are in the same order of keys in both sets, and the
	// engine decides by key (rule.Before). On error nothing
	// changed and the caller may call SetRules(to).
	PatchRules(from, to *rule.Set, removed, added []int) error
}

// Causes of protected-traffic loss: the keys of ProtectedLoss's counts and
// the values of scrubd_protected_lost_packets_total's cause label.
const (
	LostHWRule      = "hw_rule"       // a hardware flow-table entry dropped it
	LostSWRule      = "sw_rule"       // the software engine's rules dropped it
	LostOutOfBuffer = "out_of_buffer" // no receive buffer was posted for it (mlx5 rx_out_of_buffer)
	LostUnforwarded = "unforwarded"   // passed, but the peer's send queue was full
)

// LostCauses lists every cause of protected-traffic loss, in display order.
var LostCauses = []string{LostHWRule, LostSWRule, LostOutOfBuffer, LostUnforwarded}

// ProtectedLoss is implemented by a data plane that can tell, packet by
// packet, which of the packets it lost were protected traffic, whatever
// lost them: the simulated NIC, which knows the flow of every frame it
// sends. A real NIC drops for want of buffers before any software sees the
// packet, so the real paths do not implement it; their loss that may hit
// protected traffic is in the per-worker and NIC drop counters.
type ProtectedLoss interface {
	// ProtectedLost returns the protected packets lost so far by cause
	// (a key of LostCauses for each), cumulative.
	ProtectedLost() map[string]uint64
}
