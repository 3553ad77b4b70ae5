// Package store is scrubd's one rule store. Every source (rule files, the
// HTTP API, BGP FlowSpec peers) writes into it under its own source tag; the
// store checks each rule against the protect list, expires rules, and hands
// out consistent snapshots of the effective rule set for placement.
//
// A Store is safe for concurrent use. Changed returns a channel that receives
// (coalesced) after every change, for the one placement goroutine.
package store

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/scrubd/scrubd/agent/protect"
	"github.com/scrubd/scrubd/internal/holes"
	"github.com/scrubd/scrubd/swpath/rule"
)

// Status is a stored rule's standing.
type Status string

const (
	Active   Status = "active"   // in force
	Narrowed Status = "narrowed" // in force; protected traffic excepted
	Refused  Status = "refused"  // kept for display, not in force
)

// Entry is one stored rule.
type Entry struct {
	Rule   rule.Rule
	Source string // "file:PATH", "api", "bgp:PEER", "protect"
	Status Status
	Reason string
	Added  time.Time
	// StaleAt, when set, is when the rule is removed unless its source
	// refreshes it (FlowSpec session-down hold, restored state).
	StaleAt time.Time
	seq     uint64
}

// InForce reports whether the entry is enforced.
func (e *Entry) InForce() bool { return e.Status != Refused }

// Seq is the entry's place in the store's order (Snapshot.Seqs): a
// replaced rule keeps it, a rule added anew takes one after every other.
// Zero for an entry not made by the store.
func (e *Entry) Seq() uint64 { return e.seq }

// stored is an Entry as the store holds it: the rule by pointer, to a
// copy never written after it is made. Once a snapshot of the effective
// set is taken, an entry in force points at its rule in the snapshot's
// array, so the store and the snapshot's holders (placement, the software
// engine) share one copy of each rule instead of holding two.
//
// The rest is six words (48 bytes, where an Entry's fields took 112):
// what is the same for many entries or rare is held by pointer, to values
// never written after they are made: the source's name (one string per
// source, src), the time added (one for the entries one call stored), the
// stale deadline (nil: none; one for the entries one MarkStale marked),
// and the status with its reason (nil: Active, no reason; most rules).
type stored struct {
	r     *rule.Rule
	src   *string
	note  *note
	added *time.Time
	stale *time.Time
	seq   uint64
}

// note is a stored rule's status other than Active, with the reason.
type note struct {
	status Status
	reason string
}

// source returns the entry's source.
func (e *stored) source() string { return *e.src }

// status returns the entry's status.
func (e *stored) status() Status {
	if e.note == nil {
		return Active
	}
	return e.note.status
}

// reason returns why the entry is narrowed or refused, or "".
func (e *stored) reason() string {
	if e.note == nil {
		return ""
	}
	return e.note.reason
}

// staleAt returns the entry's stale deadline, or zero.
func (e *stored) staleAt() time.Time {
	if e.stale == nil {
		return time.Time{}
	}
	return *e.stale
}

// InForce reports whether the entry is enforced.
func (e *stored) InForce() bool { return e.note == nil || e.note.status != Refused }

// entry returns a copy of e as an Entry.
func (e *stored) entry() Entry {
	return Entry{Rule: *e.r, Source: *e.src, Status: e.status(), Reason: e.reason(), Added: *e.added, StaleAt: e.staleAt(), seq: e.seq}
}

// Snapshot is a consistent view of the store.
type Snapshot struct {
	Version uint64
	// Set is the effective rule set: protect rules first (priority 0), then
	// every rule in force in the order it was added. Read-only: its rules
	// are the store's own copies (shared, not copied again), so a holder
	// must not write them; placement copies the array before it writes.
	Set rule.Set
	// Entries lists every stored rule, refused ones too, in the same order.
	Entries []Entry
	// Seqs, when set, holds each rule of Set its place in the store's
	// order (0 for the protect rules, which come first): what a Delta's
	// Upserts are ordered by, so placement can put a rule that comes back
	// in force in its place.
	Seqs []uint64
}

// Delta is what changed in the effective set between two versions: the
// rules added to it or changed (in the store's order, each with its place)
// and the ids of the rules that left it (removed, expired, or refused by
// protection now). A rule changed and then removed is only removed; one
// removed and added again is an upsert.
type Delta struct {
	From, Version uint64
	Upserts       []Upsert
	Removed       []string
}

// Upsert is one rule of a Delta that is in force at Delta.Version.
type Upsert struct {
	Rule rule.Rule
	Seq  uint64
}

// change records that rule id changed in store version ver, and the
// source and place (seq) the id had there: the new entry's for a rule
// stored, the old one's for a rule removed (SourceChanges).
type change struct {
	ver uint64
	id  string
	src *string
	seq uint64
}

// maxChanges bounds the change log (about 24 bytes a change). A reader
// further behind than that reads a whole snapshot instead of a delta.
const maxChanges = 16384

// Errors callers can test for.
var (
	ErrNotFound  = errors.New("rule not found")
	ErrIDInUse   = errors.New("rule id in use by another source")
	ErrProtected = errors.New("rule refused by protection")
	ErrExpired   = errors.New("rule already expired")
	// ErrGuard: the rule covers more than the guard allows (rule.Guard);
	// it is not stored.
	ErrGuard = errors.New("rule refused by the guard")
	// ErrTooMany: the change would leave a source holding more rules
	// than SetMaxPerSource allows; nothing changed.
	ErrTooMany = errors.New("too many rules from one source")
)

// Store holds the rules.
type Store struct {
	now     func() time.Time
	protect *protect.List
	guard   rule.Guard

	mu      sync.Mutex
	entries map[string]*stored // by rule id
	seq     uint64
	version uint64
	changed chan struct{}
	onDrop  []func(Entry, string)
	// perSource counts entries by source; maxPerSource bounds it (0: no
	// bound).
	perSource    map[string]int
	maxPerSource int
	// byStatus counts entries by source and status, for Counts.
	byStatus map[sourceStatus]int
	// srcVer is, per source holding rules, a number that changes whenever
	// one of its rules is added, replaced or removed (SourceVersions).
	srcVer  map[string]uint64
	lastVer uint64
	// changes logs, in version order, the ids of the rules added, changed
	// or removed, for Delta; it holds every change after version logFrom.
	changes []change
	logFrom uint64
	// sweepAt is the earliest expiry or stale deadline of the entries as
	// of the last full Sweep (zero: none), valid while sweepOK: a Sweep
	// before it removes nothing and walks nothing. Adding or replacing an
	// entry and setting a stale deadline clear sweepOK; a removal leaves
	// it (the cached deadline can only be early then, which costs one
	// walk).
	sweepAt time.Time
	sweepOK bool
	// sweepWalks counts the Sweeps that walked the entries (SweepWalks).
	sweepWalks uint64
	// srcs holds one copy of each source's name for the entries (stored.src).
	srcs map[string]*string
	// effRules and effSeqs are the effective set last handed out
	// (Effective, Snapshot) and its Seqs, at version effVer, valid while
	// effOK: read again at the same version they are handed out again,
	// not copied, so that placement and a second reader (the simulated
	// NIC's reference) share one array; the entries in force point into
	// it. Their arrays have room beyond their length, which no holder
	// sees (each gets them with the capacity at the length): rules added
	// since (effNew, in the store's order) are written there by the next
	// read, which hands out the longer set without a copy. Rules removed
	// since (effGone, their places in the order) are taken out by the
	// next read, which copies the set into a new array run by run between
	// them (closeEffLocked): a move of memory, not a walk and sort of
	// every entry. A rule replaced in force drops them (dropEff) and the
	// next read builds the set from the entries again. effEnt holds, by
	// position, the entry of each rule of effRules (nil: a protect rule),
	// to point the entries at a new array.
	effRules []rule.Rule
	effSeqs  []uint64
	effEnt   []*stored
	effNew   []*stored
	effGone  []uint64
	effVer   uint64
	effOK    bool
	// effBuilds counts the reads that built the effective set from the
	// entries (a walk and sort of every entry), for tests.
	effBuilds uint64
}

// dropEffLocked forgets the last effective set handed out: the set changed
// other than by rules added at its end or removed.
func (s *Store) dropEffLocked() {
	s.effRules, s.effSeqs, s.effEnt, s.effNew, s.effGone, s.effOK = nil, nil, nil, nil, nil, false
}

// goneEffLocked records for the last effective set handed out that entry
// e, in force, left the set: taken out of the rules added since when it
// is one of them, else out of the set at the next read.
func (s *Store) goneEffLocked(e *stored) {
	if !s.effOK {
		return
	}
	if i, ok := slices.BinarySearchFunc(s.effNew, e.seq, func(x *stored, seq uint64) int { return cmp.Compare(x.seq, seq) }); ok && s.effNew[i] == e {
		s.effNew = slices.Delete(s.effNew, i, i+1)
		return
	}
	s.effGone = append(s.effGone, e.seq)
}

// noteEffLocked records for the last effective set handed out that entry
// e, in force, is added after every rule in it (or drops the set when its
// array has no room for it).
func (s *Store) noteEffLocked(e *stored) {
	if !s.effOK {
		return
	}
	if len(s.effGone) == 0 && len(s.effRules)+len(s.effNew) >= cap(s.effRules) {
		// No room to extend in place (with rules removed, the next read
		// copies into an array sized for the rules added).
		s.dropEffLocked()
		return
	}
	s.effNew = append(s.effNew, e)
}

// srcLocked returns the store's copy of source name src.
func (s *Store) srcLocked(src string) *string {
	if p, ok := s.srcs[src]; ok {
		return p
	}
	p := &src
	s.srcs[src] = p
	return p
}

// SweepWalks is how many Sweeps so far walked every entry; a Sweep before
// the earliest deadline walks none.
func (s *Store) SweepWalks() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sweepWalks
}

// noteLocked logs a change to the rule of entry e (stored or removed) in
// the version the store's next bump publishes.
func (s *Store) noteLocked(e *stored) {
	if len(s.changes) >= maxChanges {
		// Keep the newer half: deltas from before it read a snapshot.
		h := len(s.changes) / 2
		s.logFrom = s.changes[h-1].ver
		s.changes = append(s.changes[:0], s.changes[h:]...)
	}
	s.changes = append(s.changes, change{ver: s.version + 1, id: e.r.ID, src: e.src, seq: e.seq})
}

// Delta returns what changed in the effective set after version since, up
// to the current version, at a cost proportional to the changes, not to
// the rules stored. ok is false when the log no longer reaches back to
// since (more than maxChanges changes ago, or a version the store never
// had): the caller reads a snapshot then.
func (s *Store) Delta(since uint64) (d Delta, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if since < s.logFrom || since > s.version {
		return Delta{}, false
	}
	d = Delta{From: since, Version: s.version}
	i, _ := slices.BinarySearchFunc(s.changes, since+1, func(c change, v uint64) int { return cmp.Compare(c.ver, v) })
	seen := make(map[string]bool, len(s.changes)-i)
	for _, c := range s.changes[i:] {
		if seen[c.id] {
			continue
		}
		seen[c.id] = true
		if e, ok := s.entries[c.id]; ok && e.InForce() {
			d.Upserts = append(d.Upserts, Upsert{Rule: *e.r, Seq: e.seq})
		} else {
			d.Removed = append(d.Removed, c.id)
		}
	}
	slices.SortFunc(d.Upserts, func(a, b Upsert) int { return cmp.Compare(a.Seq, b.Seq) })
	slices.Sort(d.Removed)
	return d, true
}

// touchLocked records a change to source src's rules.
func (s *Store) touchLocked(src string) {
	s.lastVer++
	s.srcVer[src] = s.lastVer
}

// SourceVersions returns, for every source holding rules, a number that
// changes whenever one of the source's rules is added, replaced or
// removed (not when a stale deadline is set): the state saver rewrites
// only the sources whose number moved. A source that holds no rules any
// more is absent.
func (s *Store) SourceVersions() map[string]uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.srcVer)
}

type sourceStatus struct {
	src string
	st  Status
}

// Count is how many stored rules one source holds with one status.
type Count struct {
	Source string
	Status Status
	N      int
}

// Counts returns the stored rules counted by source and status, sorted,
// from counts kept as rules come and go: no copy of the rules, so a
// metrics scrape costs the number of sources, not of rules.
func (s *Store) Counts() []Count {
	s.mu.Lock()
	out := make([]Count, 0, len(s.byStatus))
	for k, n := range s.byStatus {
		out = append(out, Count{Source: k.src, Status: k.st, N: n})
	}
	s.mu.Unlock()
	slices.SortFunc(out, func(a, b Count) int { return cmp.Or(cmp.Compare(a.Source, b.Source), cmp.Compare(a.Status, b.Status)) })
	return out
}

// SetMaxPerSource bounds the rules one source holds (0: no bound): a Put,
// Replace or Add that would leave a source with more is refused whole
// (ErrTooMany, naming rules.max_rules_per_source). Rules already stored
// stay.
func (s *Store) SetMaxPerSource(n int) {
	s.mu.Lock()
	s.maxPerSource = n
	s.mu.Unlock()
}

// tooManyLocked returns ErrTooMany if src would hold n rules.
func (s *Store) tooManyLocked(src string, n int) error {
	if s.maxPerSource > 0 && n > s.maxPerSource {
		return fmt.Errorf("%w: source %s would hold %d rules, more than the %d of rules.max_rules_per_source", ErrTooMany, src, n, s.maxPerSource)
	}
	return nil
}

// setLocked stores e under its rule id, keeping the per-source counts.
func (s *Store) setLocked(e *stored) {
	old, replaced := s.entries[e.r.ID]
	switch {
	case replaced && (old.InForce() || e.InForce()):
		s.dropEffLocked() // changed in its place
	case !replaced && e.InForce():
		s.noteEffLocked(e) // its seq is the store's last: at the end
	}
	if replaced {
		s.perSource[old.source()]--
		s.uncountLocked(old)
		if old.source() != e.source() {
			s.untouchLocked(old.source())
		}
	}
	s.entries[e.r.ID] = e
	s.sweepOK = false
	s.noteLocked(e)
	s.perSource[e.source()]++
	s.byStatus[sourceStatus{e.source(), e.status()}]++
	s.touchLocked(e.source())
}

// untouchLocked records a removal from source src: a change, or, once it
// holds no rules, its end.
func (s *Store) untouchLocked(src string) {
	if s.perSource[src] <= 0 {
		delete(s.perSource, src)
		delete(s.srcVer, src)
		delete(s.srcs, src)
		return
	}
	s.touchLocked(src)
}

func (s *Store) uncountLocked(e *stored) {
	k := sourceStatus{e.source(), e.status()}
	if s.byStatus[k]--; s.byStatus[k] <= 0 {
		delete(s.byStatus, k)
	}
}

// delLocked removes rule id, keeping the per-source counts.
func (s *Store) delLocked(id string) {
	if old, ok := s.entries[id]; ok {
		if old.InForce() {
			s.goneEffLocked(old)
		}
		s.perSource[old.source()]--
		s.untouchLocked(old.source())
		s.uncountLocked(old)
		delete(s.entries, id)
		s.noteLocked(old)
	}
}

// New returns an empty store. now is its clock (time.Now in production).
func New(protected *protect.List, now func() time.Time) *Store {
	if protected == nil {
		protected = &protect.List{}
	}
	return &Store{now: now, protect: protected, guard: rule.DefaultGuard, entries: map[string]*stored{}, changed: make(chan struct{}, 1),
		perSource: map[string]int{}, byStatus: map[sourceStatus]int{}, srcVer: map[string]uint64{}, srcs: map[string]*string{}}
}

// SetGuard sets the guard every rule put into the store must pass (from
// the start rule.DefaultGuard). Rules already stored are not rechecked.
func (s *Store) SetGuard(g rule.Guard) {
	s.mu.Lock()
	s.guard = g
	s.mu.Unlock()
}

// Guard returns the store's guard.
func (s *Store) Guard() rule.Guard {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.guard
}

func (s *Store) guardLocked(r *rule.Rule) error {
	if err := s.guard.Check(r); err != nil {
		return fmt.Errorf("%w: %w", ErrGuard, err)
	}
	return nil
}

// Changed receives after changes (several changes may coalesce into one).
func (s *Store) Changed() <-chan struct{} { return s.changed }

// OnRemove registers a callback run (without the lock) for every rule removed
// by expiry or staleness, with the reason; for logs and counters.
func (s *Store) OnRemove(f func(Entry, string)) {
	s.mu.Lock()
	s.onDrop = append(s.onDrop, f)
	s.mu.Unlock()
}

func (s *Store) bumpLocked() {
	s.version++
	select {
	case s.changed <- struct{}{}:
	default:
	}
}

// makeEntry returns a new entry of rule r from source src, added at *now
// (shared by the entries of one call, never written).
func (s *Store) makeEntry(src string, r rule.Rule, now *time.Time) *stored {
	s.seq++
	e := &stored{r: &r, src: s.srcLocked(src), added: now, seq: s.seq}
	if r.Expired(*now) {
		e.note = &note{Refused, "refused: already expired at " + r.Expires.UTC().Format(time.RFC3339)}
		return e
	}
	switch v, why := s.protect.Check(&r); v {
	case protect.Refused:
		e.note = &note{Refused, why}
	case protect.Narrowed:
		e.note = &note{Narrowed, why}
	}
	return e
}

// Put adds or replaces one rule of a source. A rule id owned by another
// source is refused with ErrIDInUse, and one that fails the guard with
// ErrGuard (not stored). A rule the protect list refuses is
// stored (for display) but not enforced, and ErrProtected is returned.
func (s *Store) Put(src string, r rule.Rule) (Entry, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, err := s.putLocked(src, r)
	if e.Rule.ID != "" {
		s.bumpLocked()
	}
	return e, err
}

// putLocked is Put without the version bump; a stored rule (refused by
// protection too) comes back with its id set. The caller holds s.mu.
func (s *Store) putLocked(src string, r rule.Rule) (Entry, error) {
	if err := s.guardLocked(&r); err != nil {
		return Entry{}, err
	}
	if old, ok := s.entries[r.ID]; ok && old.source() != src {
		return Entry{}, fmt.Errorf("%w: %q is owned by %s", ErrIDInUse, r.ID, old.source())
	}
	if _, ok := s.entries[r.ID]; !ok {
		if err := s.tooManyLocked(src, s.perSource[src]+1); err != nil {
			return Entry{}, err
		}
	}
	now := s.now()
	e := s.makeEntry(src, r, &now)
	if old, ok := s.entries[r.ID]; ok {
		e.seq = old.seq // a replaced rule keeps its place
		e.added = old.added
	}
	s.setLocked(e)
	return e.entry(), entryErr(e)
}

func entryErr(e *stored) error {
	if e.InForce() {
		return nil
	}
	if e.r.Expired(*e.added) {
		return fmt.Errorf("%w: rule %q: %s", ErrExpired, e.r.ID, e.reason())
	}
	return fmt.Errorf("%w: rule %q: %s", ErrProtected, e.r.ID, e.reason())
}

// Delete removes a rule of a source.
func (s *Store) Delete(src, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	err := s.deleteLocked(src, id)
	if err == nil {
		s.bumpLocked()
	}
	return err
}

func (s *Store) deleteLocked(src, id string) error {
	e, ok := s.entries[id]
	if !ok || e.source() != src {
		return fmt.Errorf("%w: %q (source %s)", ErrNotFound, id, src)
	}
	s.delLocked(id)
	return nil
}

// Replace makes rules the whole content of source src, atomically. If any id
// is owned by another source, or any rule fails the guard (ErrGuard),
// nothing changes and the error names it. Rules refused by protection are stored as refused; their reasons are returned in
// the entries, not as an error.
func (s *Store) Replace(src string, rules []rule.Rule) ([]Entry, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.tooManyLocked(src, len(rules)); err != nil {
		return nil, err
	}
	seen := make(map[string]bool, len(rules))
	var guardErrs []error
	for i := range rules {
		if err := s.guard.Check(&rules[i]); err != nil {
			guardErrs = append(guardErrs, err)
		}
	}
	if guardErrs != nil {
		return nil, fmt.Errorf("%w: %w", ErrGuard, errors.Join(guardErrs...))
	}
	for _, r := range rules {
		if old, ok := s.entries[r.ID]; ok && old.source() != src {
			return nil, fmt.Errorf("%w: %q is owned by %s", ErrIDInUse, r.ID, old.source())
		}
		if seen[r.ID] {
			return nil, fmt.Errorf("duplicate rule id %q", r.ID)
		}
		seen[r.ID] = true
	}
	now := s.now()
	out := make([]Entry, 0, len(rules))
	for id, e := range s.entries {
		if e.source() == src && !seen[id] {
			s.delLocked(id)
		}
	}
	for _, r := range rules {
		e := s.makeEntry(src, r, &now)
		if old, ok := s.entries[r.ID]; ok {
			e.seq, e.added = old.seq, old.added
		}
		s.setLocked(e)
		out = append(out, e.entry())
	}
	s.bumpLocked()
	return out, nil
}

// MarkStale sets a removal deadline on every rule of src (zero clears it).
func (s *Store) MarkStale(src string, at time.Time) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	var p *time.Time // one deadline for every entry marked
	if !at.IsZero() {
		p = &at
	}
	for _, e := range s.entries {
		if e.source() == src {
			e.stale = p
			s.sweepOK = false
			n++
		}
	}
	if n > 0 {
		s.bumpLocked()
	}
	return n
}

// SetStale sets (zero: clears) the removal deadline of one rule of src. It
// reports whether the rule was found. A source that tracks several origins
// per rule (FlowSpec routes learned from two route reflectors) marks a rule
// stale only when every origin is.
func (s *Store) SetStale(src, id string, at time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	found, changed := s.setStaleLocked(src, id, at)
	if changed {
		s.bumpLocked()
	}
	return found
}

func (s *Store) setStaleLocked(src, id string, at time.Time) (found, changed bool) {
	e, ok := s.entries[id]
	if !ok || e.source() != src {
		return false, false
	}
	if !e.staleAt().Equal(at) {
		e.stale = nil
		if !at.IsZero() {
			e.stale = &at
		}
		s.sweepOK = false
		return true, true
	}
	return true, false
}

// Tx is one store transaction: the changes made through it are one
// version of the store (one Changed signal, one snapshot for placement,
// one state save), made under the store's lock when the Update that opened
// it returns. Its methods are those of Store, with the same checks and
// results. A Tx is valid only inside its Update's function.
type Tx struct {
	s       *Store
	changed bool
}

// Update runs fn with a transaction holding the store's lock: readers and
// placement see the store before fn or after all of it, never a part. fn
// must not call the Store's own methods (the lock is held), only tx's.
// A batch of FlowSpec routes received together is one Update.
func (s *Store) Update(fn func(tx *Tx)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	tx := &Tx{s: s}
	fn(tx)
	tx.s = nil
	if tx.changed {
		s.bumpLocked()
	}
}

// Put is Store.Put within the transaction.
func (tx *Tx) Put(src string, r rule.Rule) (Entry, error) {
	e, err := tx.s.putLocked(src, r)
	if e.Rule.ID != "" {
		tx.changed = true
	}
	return e, err
}

// Delete is Store.Delete within the transaction.
func (tx *Tx) Delete(src, id string) error {
	err := tx.s.deleteLocked(src, id)
	if err == nil {
		tx.changed = true
	}
	return err
}

// SetStale is Store.SetStale within the transaction.
func (tx *Tx) SetStale(src, id string, at time.Time) bool {
	found, changed := tx.s.setStaleLocked(src, id, at)
	tx.changed = tx.changed || changed
	return found
}

// Get returns one rule.
func (s *Store) Get(id string) (Entry, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.entries[id]
	if !ok {
		return Entry{}, false
	}
	return e.entry(), true
}

// Source returns the rules of one source in order. It copies that
// source's rules only, not the store's.
func (s *Store) Source(src string) []Entry {
	s.mu.Lock()
	out := make([]Entry, 0, s.perSource[src])
	for _, e := range s.entries {
		if e.source() == src {
			out = append(out, e.entry())
		}
	}
	s.mu.Unlock()
	slices.SortFunc(out, func(a, b Entry) int { return cmp.Compare(a.seq, b.seq) })
	return out
}

// SourceRules returns the rules in force of one source, in order, as
// pointers to the store's own copies: a stored rule is never modified (a
// change stores a new entry), so they may be read after the call, and must
// not be written: a source of 100k rules costs 800 KB of pointers, not 40
// MB of copied entries. It is SourceState without the places.
func (s *Store) SourceRules(src string) []*rule.Rule {
	rules, _, _ := s.SourceState(src)
	return rules
}

// Sweep removes rules whose expiry or stale deadline has passed, and returns
// them with the reason.
func (s *Store) Sweep() []Entry {
	s.mu.Lock()
	now := s.now()
	if s.sweepOK && (s.sweepAt.IsZero() || now.Before(s.sweepAt)) {
		// No deadline has come: an idle agent's every tick, without a
		// walk over every rule.
		s.mu.Unlock()
		return nil
	}
	var gone []Entry
	var next time.Time
	for id, e := range s.entries {
		var why string
		switch stale := e.staleAt(); {
		case e.r.Expired(now):
			why = "expired at " + e.r.Expires.UTC().Format(time.RFC3339)
		case !stale.IsZero() && !now.Before(stale):
			why = "source gone; hold time ended at " + stale.UTC().Format(time.RFC3339)
		default:
			for _, d := range [2]time.Time{e.r.Expires, stale} {
				if !d.IsZero() && (next.IsZero() || d.Before(next)) {
					next = d
				}
			}
			continue
		}
		g := e.entry()
		g.Reason = why
		gone = append(gone, g)
		s.delLocked(id)
	}
	s.sweepAt, s.sweepOK = next, true
	s.sweepWalks++
	if len(gone) > 0 {
		s.bumpLocked()
	}
	cbs := slices.Clone(s.onDrop)
	s.mu.Unlock()
	slices.SortFunc(gone, func(a, b Entry) int { return int(a.seq) - int(b.seq) })
	for _, e := range gone {
		for _, f := range cbs {
			f(e, e.Reason)
		}
	}
	return gone
}

// NextDeadline returns the earliest expiry or stale deadline, or zero.
func (s *Store) NextDeadline() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	var t time.Time
	for _, e := range s.entries {
		for _, d := range [2]time.Time{e.r.Expires, e.staleAt()} {
			if !d.IsZero() && (t.IsZero() || d.Before(t)) {
				t = d
			}
		}
	}
	return t
}

// Snapshot returns the effective set and every entry. Snapshots of one
// version share their Set and Seqs (read-only).
func (s *Store) Snapshot() Snapshot { return s.snapshot(true, true) }

// Effective returns a Snapshot's Version and Set, Entries left nil: what
// placement reads, without a second copy of every rule. Read again at the
// same version it returns the same arrays, not a new copy; read after
// rules were only added, the same arrays, longer (extendEffLocked).
func (s *Store) Effective() Snapshot { return s.snapshot(true, false) }

// List returns a Snapshot's Entries (every stored rule, refused ones too,
// in order) without the effective set.
func (s *Store) List() []Entry { return s.snapshot(false, true).Entries }

func (s *Store) snapshot(set, entries bool) Snapshot {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.snapshotLocked(set, entries)
}

func (s *Store) snapshotLocked(set, entries bool) Snapshot {
	snap := Snapshot{Version: s.version}
	if set && s.effOK {
		// Nothing changed since the last copy but rules added after it
		// and rules removed: hand it out again, with those written after
		// its end, or a copy without the rules removed.
		if !s.closeEffLocked() {
			s.dropEffLocked()
			return s.snapshotLocked(set, entries)
		}
		s.extendEffLocked()
		n := len(s.effRules)
		snap.Set.Rules, snap.Seqs = s.effRules[:n:n], s.effSeqs[:n:n]
		if !entries {
			return snap
		}
		set = false
	}
	first := 0 // where the stored rules start in snap.Set.Rules
	if set {
		s.effBuilds++
		pr := s.protect.Rules()
		first = len(pr)
		// Room for rules added later (extendEffLocked), about 6%.
		n := len(pr) + len(s.entries)
		c := n + n/16 + 16
		snap.Set.Rules = make([]rule.Rule, 0, c)
		snap.Set.Rules = append(snap.Set.Rules, pr...)
		snap.Seqs = make([]uint64, len(pr), c)
	}
	if entries {
		snap.Entries = make([]Entry, 0, len(s.entries))
	}
	es := make([]*stored, 0, len(s.entries))
	for _, e := range s.entries {
		es = append(es, e)
	}
	slices.SortFunc(es, func(a, b *stored) int { return cmp.Compare(a.seq, b.seq) })
	for _, e := range es {
		if entries {
			snap.Entries = append(snap.Entries, e.entry())
		}
		if set && e.InForce() {
			snap.Set.Rules = append(snap.Set.Rules, *e.r)
			snap.Seqs = append(snap.Seqs, e.seq)
		}
	}
	if set {
		// The entries in force now point at their rules in the snapshot
		// (read-only from here on): the copies they held are let go.
		k := first
		ent := make([]*stored, first, cap(snap.Seqs))
		for _, e := range es {
			if e.InForce() {
				e.r = &snap.Set.Rules[k]
				ent = append(ent, e)
				k++
			}
		}
		// Shared by every reader of this version and the store: the
		// capacity handed out ends at the length, so a holder that
		// appends gets an array of its own.
		s.effRules, s.effSeqs, s.effEnt, s.effNew, s.effGone, s.effVer, s.effOK = snap.Set.Rules, snap.Seqs, ent, nil, nil, s.version, true
		n := len(snap.Set.Rules)
		snap.Set.Rules, snap.Seqs = snap.Set.Rules[:n:n], snap.Seqs[:n:n]
	}
	return snap
}

// extendEffLocked brings the last effective set handed out to the current
// version: the rules added since are written after its end, in the room
// its array has (noteEffLocked checked), where no holder of a shorter
// set reads, and their entries point at them there.
func (s *Store) extendEffLocked() {
	if s.effVer == s.version {
		return
	}
	n := len(s.effRules)
	rules, seqs := s.effRules[:n+len(s.effNew)], s.effSeqs[:n+len(s.effNew)]
	for i, e := range s.effNew {
		rules[n+i], seqs[n+i] = *e.r, e.seq
		e.r = &rules[n+i]
		s.effEnt = append(s.effEnt, e)
	}
	s.effRules, s.effSeqs, s.effNew, s.effVer = rules, seqs, nil, s.version
}

// Extended returns the effective set as Effective would, but only where
// that costs no copy of the set: the array last handed out begins at
// first, and since then rules were only added, into its spare room (they
// are written after its end, where no holder's capped slice reaches).
// Otherwise ok is false and nothing is built: a holder that keeps its own
// copy of an older set (placement, after a delta that only added rules)
// can take the store's array in place of copying it again.
func (s *Store) Extended(first *rule.Rule) (snap Snapshot, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.effOK || len(s.effGone) != 0 || len(s.effRules) == 0 || &s.effRules[0] != first {
		return Snapshot{}, false
	}
	s.extendEffLocked()
	n := len(s.effRules)
	return Snapshot{Version: s.version, Set: rule.Set{Rules: s.effRules[:n:n]}, Seqs: s.effSeqs[:n:n]}, true
}

// closeEffLocked takes the rules removed since the last effective set was
// handed out (effGone) out of it: the rules and their places go into new
// arrays (holders read the old ones), copied run by run between the
// holes, with room for the rules added since and as much again as a
// fresh copy leaves; the entries in force point at their rules there.
// It costs a move of the set's memory (at 100k rules about 30 MB), not a
// walk of the entries and a sort. It reports false, with nothing changed,
// when a rule removed is not in the set (which the store's bookkeeping
// rules out): the caller builds the set from the entries then.
func (s *Store) closeEffLocked() bool {
	if len(s.effGone) == 0 {
		return true
	}
	n := len(s.effRules)
	gone := make([]int, 0, len(s.effGone))
	for _, seq := range s.effGone {
		i, ok := slices.BinarySearch(s.effSeqs[:n], seq)
		if !ok || s.effEnt[i] == nil || s.effEnt[i].seq != seq {
			return false
		}
		gone = append(gone, i)
	}
	slices.Sort(gone)
	m := n - len(gone)
	c := m + len(s.effNew)
	c += c/16 + 16
	rules := make([]rule.Rule, m, c)
	seqs := make([]uint64, m, c)
	holes.Close(rules, s.effRules, gone)
	holes.Close(seqs, s.effSeqs[:n], gone)
	ent := make([]*stored, m, c)
	holes.Close(ent, s.effEnt, gone)
	for i, e := range ent {
		if e != nil {
			e.r = &rules[i]
		}
	}
	s.effRules, s.effSeqs, s.effEnt, s.effGone = rules, seqs, ent, nil
	s.effVer = 0 // not a version handed out: extendEffLocked brings it to the current one
	return true
}

// ProtectRules returns the protect list's accept rules.
func (s *Store) ProtectRules() []rule.Rule { return s.protect.Rules() }

// Version returns the store's version (Snapshot().Version) without the
// copy of every rule a snapshot makes.
func (s *Store) Version() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.version
}

// Len returns the number of stored rules.
func (s *Store) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.entries)
}
