package classifier

import (
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/scrubd/scrubd/swpath/rule"
)

// Patching. A change of a few rules costs a full Compile with Swap (at
// 100k ClassBench-style rules hundreds of milliseconds and some 200 MB
// allocated). Patch instead keeps the compiled table of an earlier set (the
// base) and lays the change over it:
//
//   - a base rule that is removed or changed is masked: its entry in the
//     table's key array (bkey, by base rule index) says "no rule". The key
//     is read only when the base lookup found that rule, so a packet whose
//     base rule is live pays one load; a packet whose base rule is masked
//     is looked up again for every base rule that matches it
//     (AppendMatching) and takes the best live one;
//   - added and changed rules form a small overlay set, compiled alone
//     (Compile of those rules only), which every lookup probes too;
//   - the decision is the better of the two in the new set's order
//     (rule.Before: priority, then key in the new set, rule.Set.Key: the
//     rule's index unless a change in place moved it). The kept base rules
//     keep their order, so the best live base rule in base order is the
//     best in new order; bkey and okey hold each rule's rank, priority<<32
//     | its key in the new set, so that one compare picks, and the result
//     is the winner's position (its index in the new set), which is not
//     the rank's low bits where a rule was moved: okey's rules' positions
//     are opos, and a base rule's is its index (in place since the base),
//     bpos or the rank's low bits (see patch). Holes mask by position: a
//     moved rule's key is the position of its old copy, a hole.
//
// When the overlay passes max(foldMin, √n) rules, or the masked base rules
// max(foldMin, n/16), the classifier folds: it compiles the current set in
// the background (as Swap would), replays on that table the changes
// patched in meanwhile (together, as one more patch on the new base), and
// publishes it in the current table's place (a Swap meanwhile drops it).
// An overlay past four times that bound is folded on the caller's path
// (Swap). So a change costs, amortized, a full compile per
// √n changes (at 100k rules one per 316) on another goroutine, plus its
// own part: the overlay's compile (at most 4√n rules) and one pass over
// the set's index arrays (the new table's counter slots and verdicts by
// rule, 5 bytes a rule, and the base key array, 8 bytes a base rule).
// That pass, the caller's own set, and Snapshot are what stay linear. A
// change in place (inplace.go) makes no such pass: a removal in place
// masks its base rules by the new set's holes, and an append or a rule
// changed in place (appended at its old key) grows the arrays by rule
// into their room.

// foldMin is the overlay size and the count of masked base rules below
// which no set folds.
var foldMin = 64

// foldAt is the overlay size past which a set of n rules folds.
func foldAt(n int) int { return max(foldMin, int(math.Sqrt(float64(n)))) }

// patch is the overlay of a patched Table (Table.pt).
type patch struct {
	base *Table // compiled, unpatched
	ov   *Table // the added and changed rules, compiled alone; nil for none
	// bkey by base rule index and okey by overlay rule index: the rule's
	// rank in the new set, priority<<32 | its key there (rule.Set.Key),
	// noRank for a masked base rule. bkey is nil when the base rules keep
	// their indexes and keys (the set was changed in place only since the
	// base was compiled, inplace.go): a base rule's rank is then
	// prio[i]<<32 | order.Key(i), and its position i.
	bkey []uint64
	// bpos by base rule index: its position in the new set, where the set
	// the walk (patchTable) matched moved rules (rule.Order), so that a
	// position is not its rank's low bits; nil otherwise.
	bpos  []int32
	prio  []uint32    // the base's priorities by rule index, when bkey is nil
	order *rule.Order // the base set's keys, when bkey is nil
	// The overlay's rules are compiled in their key order (okey ascends
	// by key), and opos is each one's position in the new set.
	okey []uint64
	opos []int32
	// holes masks the base rules removed in place since bkey was made (or
	// since the base, when bkey is nil): a base rule whose position in
	// the new set is one of them is masked too. nil when none is; else
	// the new set's holes (shared, read-only), which cover the older ones.
	holes *rule.Holes
	// keyed: bkey alone masks and gives positions (bkey non-nil, holes
	// and bpos nil), so a base rule's rank is its entry there and its
	// position the rank's low bits (keyedBaseKey).
	keyed bool
	dead  int // masked base rules
}

// rankPos returns the rank of base rule bi (>= 0) in the new set,
// priority<<32 | its key, and its position there; noRank and -1 when it
// is masked. The hole test is by position: a rule moved in place has the
// key of its old copy's position, which is a hole.
func (p *patch) rankPos(bi int32) (uint64, int32) {
	var k uint64
	pos := bi
	if p.bkey != nil {
		if k = p.bkey[bi]; k == noRank {
			return noRank, -1
		}
		pos = int32(uint32(k))
		if p.bpos != nil {
			pos = p.bpos[bi]
		}
	} else {
		k = uint64(p.prio[bi])<<32 | uint64(p.order.Key(int(bi)))
	}
	if p.holes.Dead(int(pos)) {
		return noRank, -1
	}
	return k, pos
}

// key returns the rank of base rule bi (>= 0) in the new set, or noRank
// when it is masked.
func (p *patch) key(bi int32) uint64 {
	k, _ := p.rankPos(bi)
	return k
}

// nbase is the number of base rules (positions of the base's set).
func (p *patch) nbase() int {
	if p.bkey != nil {
		return len(p.bkey)
	}
	return len(p.prio)
}

// PatchStats counts a classifier's patches and folds.
type PatchStats struct {
	Patches    uint64 // changes applied by Patch
	InPlace    uint64 // of them, changes in place: holes made and rules appended, no rule renumbered (inplace.go)
	Folds      uint64 // background folds published
	FoldsStale uint64 // background folds dropped: the set changed meanwhile
	SyncFolds  uint64 // patches that compiled the whole set (overlay too big)
	Replayed   uint64 // changes a fold replayed on its table (they came during its compile), as one
	Overlay    int    // rules in the current table's overlay
	Masked     int    // base rules the current table masks
}

// PatchStats returns the classifier's patch counts and the current
// table's overlay and masked rules.
func (c *Classifier) PatchStats() PatchStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.pstat
	if p := c.cur.Load().pt; p != nil {
		s.Overlay, s.Masked = len(p.okey), p.dead
	}
	return s
}

// Patch makes set the current rule set, as Swap(set) would (the same
// decisions, the same counters by rule ID, atomically for lookups), at a
// cost that follows the change rather than the set (see above).
//
// from must be the current set (Table().Set(), the pointer). removed lists
// in ascending order the indexes in from of the rules that are not in set
// as they are (removed, or changed in any field); added in ascending order
// the indexes in set of the rules that are not in from as they are (new,
// or changed). Every other rule of set must be, in decision order (by key,
// rule.Set.Key), the next rule of from that is not removed: the kept rules
// keep their order. Patch checks the
// indexes and the counts, and the ID, priority and action of the kept
// pair after each change and of the last (it does not read every kept
// rule: at 100k rules that alone took milliseconds); a change of match
// must be listed all the same.
//
// Either set may have holes (rule.Holes), which are rules of neither:
// removed and added name rules, not holes (else an error names the
// index), the counts are of rules, and the kept rules are the rules of
// set not added, in order the rules of from not removed, holes skipped
// on both sides. So a removal in place (set's Rules from's, its holes
// from's with removed), an append in place (from's array grown, added the
// new positions), a change in place (a copy of a rule appended, its old
// position a hole, the copy at the old position's key: rule.Order;
// removed the old position, added the new) and a compaction (a new array
// of from's rules in decision order without its holes; removed and added
// the real changes) are patches, and the first three renumber no rule.
//
// On error the current set stays; the caller may Swap instead.
func (c *Classifier) Patch(from, set *rule.Set, removed, added []int) error {
	start := time.Now()
	cur := c.cur.Load()
	if cur == nil || cur.set != from {
		return fmt.Errorf("classifier: patch: from is not the current rule set")
	}
	if err := checkIndexes("removed", removed, from, "the current set"); err != nil {
		return err
	}
	if err := checkIndexes("added", added, set, "the new set"); err != nil {
		return err
	}
	if n, m := cur.live-len(removed)+len(added), set.Len(); n != m {
		return fmt.Errorf("classifier: patch: %d rules - %d removed + %d added = %d, but the new set has %d",
			cur.live, len(removed), len(added), n, m)
	}
	var t *Table
	var inplace bool
	for {
		var err error
		if t, inplace, err = c.patchAny(cur, set, removed, added); err != nil {
			return err
		}
		if t == nil {
			if err := c.Swap(set); err != nil {
				return err
			}
			c.mu.Lock()
			c.pstat.Patches++
			c.pstat.SyncFolds++
			c.mu.Unlock()
			return nil
		}
		c.mu.Lock()
		now := c.cur.Load()
		if now == cur {
			break
		}
		c.mu.Unlock()
		if now.set != from {
			return fmt.Errorf("classifier: patch: the rule set changed during the patch")
		}
		// A fold landed meanwhile (the same set, a new base): patch that.
		cur = now
	}
	defer c.mu.Unlock()
	c.reclaim()
	// Counters follow IDs as Swap's do: the added rules first (a changed
	// rule's ID is both removed and added and keeps its slot).
	for _, j := range added {
		id := set.Rules[j].ID
		ref, ok := c.slots[id]
		if !ok {
			ref.slot = c.newSlot()
		}
		ref.n++
		c.slots[id] = ref
		t.slot[j] = ref.slot
	}
	for _, i := range removed {
		id := from.Rules[i].ID
		ref := c.slots[id]
		if ref.n--; ref.n > 0 {
			c.slots[id] = ref
			continue
		}
		delete(c.slots, id)
		c.limbo = append(c.limbo, limboSlot{ref.slot, c.gen})
	}
	c.gen++
	t.gen = c.gen
	t.nslots = c.nslots
	t.build = time.Since(start)
	c.cur.Store(t)
	c.reclaim()
	c.pstat.Patches++
	if inplace {
		c.pstat.InPlace++
	}
	if c.folding {
		// The fold in flight replays this change on its table.
		c.flog = append(c.flog, patchRec{len(set.Rules), set.Holes, set.Order, slices.Clone(removed), slices.Clone(added)})
		c.flast = set
	}
	if c.foldDue(t) {
		c.foldLater(t)
	}
	return nil
}

// patchRec is a change Patch published while a fold was compiling: the
// new set's length, its holes and keys (shared with the set, read-only)
// and the indexes. Not the set itself: a burst of changes during a fold would
// keep every intermediate set alive (at 100k rules, each of its own
// array, 29 MB), where the fold needs the last.
type patchRec struct {
	n              int
	holes          *rule.Holes
	order          *rule.Order
	removed, added []int
}

// patchTable returns the table of set as a patch over cur, whose set set
// differs from by removed and added (checked by Patch): its lookup, and its
// verdicts, priorities and counter slots by rule index, those of the added
// rules' slots left 0 (Patch fills them). It returns nil when the overlay
// would pass four times the fold bound: the set is to be compiled whole.
//
// It walks both sets' rules in decision order (by key; the positions'
// order where a set moves none), pairing each kept rule of set with the
// next rule of from not removed, and gives each its source in cur: a
// base rule, whose new rank goes to bkey (and its position to bpos where
// set moves rules), or an overlay rule, compiled again into the new
// overlay with the added ones.
func (c *Classifier) patchTable(cur *Table, set *rule.Set, removed, added []int) (*Table, error) {
	from := cur.set
	cp := cur.pt
	base := cur
	if cp != nil {
		base = cp.base
	} else {
		// The base's lookup only: not its set (whose rules, at 100k 29 MB,
		// are no longer the current ones and would be held until the
		// next fold) nor its arrays by rule index.
		b := *cur
		b.set, b.verdictAt, b.verdict, b.slot, b.prio, b.tail = &rule.Set{}, nil, nil, nil, nil, nil
		base = &b
	}
	nb := len(from.Rules)
	if cp != nil {
		nb = cp.nbase()
	}
	t := &Table{set: set}
	t.byRule(len(set.Rules))
	// Holes (rule.Holes) of either set are rules of neither: a hole of
	// set gets no slot and no source, a hole of from is skipped as if it
	// were not there (it has no source in cur: a base rule at a hole of
	// the base's set has no entry, and its key stays noRank).
	set.Holes.Each(len(set.Rules), func(j int) { t.slot[j] = noSlot })
	p := &patch{base: base, bkey: make([]uint64, nb)}
	for i := range p.bkey {
		p.bkey[i] = noRank
	}
	if set.Order.Moved() > 0 {
		p.bpos = make([]int32, nb)
	}
	// src: by position of from, the source of its rule in cur: its index
	// in the base, or -2 less its index in the overlay (nil: cur is not
	// patched, and a rule's index in the base is its position).
	var src []int32
	if cp != nil {
		src = make([]int32, len(from.Rules))
		if cp.bkey == nil {
			for i := range src {
				src[i] = int32(i)
			}
		} else {
			for bi := range cp.bkey {
				if _, pos := cp.rankPos(int32(bi)); pos >= 0 {
					src[pos] = int32(bi)
				}
			}
		}
		for oi, j := range cp.opos {
			src[j] = -2 - int32(oi)
		}
	}
	// removed and added in the order the walk meets them (by key).
	removed, added = byKey(from.Order, removed), byKey(set.Order, added)
	var ovIdx []int // positions in set of the overlay's rules
	fw, sw := walkOf(from), walkOf(set)
	ri, ai := 0, 0
	// The kept rules are not read (at 100k rules that is 29 MB of them):
	// the pair after each change, and the first and last, are checked.
	check := true
	nlive := set.Len()
	for {
		j := sw.next()
		if j < 0 {
			break
		}
		t.live++
		if ai < len(added) && added[ai] == j {
			ai++
			ovIdx = append(ovIdx, j)
			check = true
			continue
		}
		// The next kept rule of the current set.
		ci := fw.next()
		for ; ci >= 0 && ri < len(removed) && removed[ri] == ci; ci = fw.next() {
			ri++
			check = true
		}
		if ci < 0 {
			return nil, fmt.Errorf("classifier: patch: rule %d of the new set (%q) has no rule of the current set left to be", j, set.Rules[j].ID)
		}
		if check || t.live == nlive {
			check = false
			if a, b := &from.Rules[ci], &set.Rules[j]; a != b && (a.ID != b.ID || a.Priority != b.Priority || a.Action != b.Action) {
				return nil, fmt.Errorf("classifier: patch: rule %d of the new set (%q, priority %d, %v) is not rule %d of the current set (%q, priority %d, %v), yet neither is listed",
					j, b.ID, b.Priority, b.Action, ci, a.ID, a.Priority, a.Action)
			}
		}
		bi := int32(ci)
		if src != nil {
			bi = src[ci]
		}
		switch {
		case bi <= -2:
			ovIdx = append(ovIdx, j)
		case bi < 0 || int(bi) >= nb:
			return nil, fmt.Errorf("classifier: patch: rule %d of the current set has no source in its table", ci)
		default:
			p.bkey[bi] = uint64(cur.prio[ci])<<32 | uint64(set.Key(j))
			if p.bpos != nil {
				p.bpos[bi] = int32(j)
			}
		}
		t.slot[j] = cur.slot[ci]
		t.verdict[j] = cur.verdict[ci]
		t.prio[j] = cur.prio[ci]
	}
	// The current set's rules left over are all removed ones: the counts
	// agree, and the removed indexes ascend over live rules of from.
	live := 0
	for _, k := range p.bkey {
		if k != noRank {
			live++
		}
	}
	p.dead = base.live - live // the base's holes are not masked rules
	if len(ovIdx) > 4*foldAt(t.live) {
		return nil, nil
	}
	t.used = base.used
	if len(ovIdx) > 0 {
		var err error
		if p.ov, p.okey, p.opos, err = c.overlay(set, ovIdx); err != nil {
			return nil, err
		}
		t.used.or(&p.ov.used)
		for _, j := range added {
			t.prio[j] = set.Rules[j].Priority
			t.verdict[j] = Drop
			if set.Rules[j].Action == rule.Accept {
				t.verdict[j] = Accept
			}
		}
	}
	t.cacheW0, t.cacheW1 = t.used.cacheMasks()
	t.ntables = base.ntables
	if p.ov != nil {
		t.ntables = max(t.ntables, p.ov.ntables)
	}
	p.keyed = p.bpos == nil
	t.pt = p
	return t, nil
}

// byKey returns xs, positions of a set with keys o, in the order of
// their keys (a copy sorted by key where o moves rules, else xs).
func byKey(o *rule.Order, xs []int) []int {
	if o.Moved() == 0 || len(xs) < 2 {
		return xs
	}
	xs = slices.Clone(xs)
	slices.SortFunc(xs, func(a, b int) int { return o.Key(a) - o.Key(b) })
	return xs
}

// liveWalk steps through the live positions of a set (n positions, its
// holes and keys) in decision order, by key: the positions' own order
// where the set moves no rule, else the order rule.Order.Walk gives.
type liveWalk struct {
	n     int
	holes *rule.Holes
	seq   []int32
	i     int
}

// walkOf returns the walk of set's live positions in decision order.
func walkOf(set *rule.Set) liveWalk {
	return walkN(len(set.Rules), set.Holes, set.Order)
}

// walkN is walkOf of a set given by its length, holes and keys (o).
func walkN(n int, holes *rule.Holes, o *rule.Order) liveWalk {
	w := liveWalk{n: n, holes: holes}
	if o.Moved() == 0 {
		return w
	}
	// The live positions in key order (rule.Order.Walk), listed: each
	// moved one sits where its key would.
	w.seq = make([]int32, 0, n)
	o.Walk(n, holes, func(i int) { w.seq = append(w.seq, int32(i)) })
	return w
}

// next returns the next live position, or -1 at the end.
func (w *liveWalk) next() int {
	if w.seq != nil {
		if w.i >= len(w.seq) {
			return -1
		}
		w.i++
		return int(w.seq[w.i-1])
	}
	for w.i < w.n {
		w.i++
		if !w.holes.Dead(w.i - 1) {
			return w.i - 1
		}
	}
	return -1
}

// checkIndexes checks that xs is ascending, without repeats, within
// [0, len(set.Rules)), and names no hole of set (called what).
func checkIndexes(name string, xs []int, set *rule.Set, what string) error {
	n := len(set.Rules)
	for k, x := range xs {
		if x < 0 || x >= n || (k > 0 && x <= xs[k-1]) {
			return fmt.Errorf("classifier: patch: %s[%d] = %d: indexes must ascend within [0, %d)", name, k, x, n)
		}
		if !set.Live(x) {
			return fmt.Errorf("classifier: patch: %s[%d] = %d: a hole of %s, not a rule", name, k, x, what)
		}
	}
	return nil
}

// foldDue reports whether t's overlay or masked rules are past the bounds.
func (c *Classifier) foldDue(t *Table) bool {
	p := t.pt
	if p == nil {
		return false
	}
	n := t.live
	return len(p.okey) > foldAt(n) || p.dead > max(foldMin, n/16)
}

// foldLater compiles t's set on a goroutine of its own, replays on that
// table the changes Patch published meanwhile (flog), and publishes the
// result in the current table's place; a Swap meanwhile drops it. One fold
// at a time. c.mu held.
func (c *Classifier) foldLater(t *Table) {
	if c.folding {
		return
	}
	c.folding, c.foldBroken, c.flog, c.flast = true, false, nil, nil
	c.folds.Add(1)
	go func() {
		defer c.folds.Done()
		nt, err := compile(t.set, c.mode)
		if err == nil {
			nt.prio = t.prio
		}
		applied := 0
		for {
			c.mu.Lock()
			cur := c.cur.Load()
			if err != nil || c.foldBroken || (applied == len(c.flog) && cur.set != nt.set) {
				c.folding, c.flog, c.flast = false, nil, nil
				c.pstat.FoldsStale++
				if c.foldDue(cur) {
					c.foldLater(cur)
				}
				c.mu.Unlock()
				return
			}
			if applied == len(c.flog) {
				// The current set: its slots, verdicts and priorities by
				// rule index are the current table's.
				nt.slot, nt.nslots, nt.prio, nt.verdictAt, nt.verdict, nt.tail = cur.slot, cur.nslots, cur.prio, cur.verdictAt, cur.verdict, cur.tail
				c.pstat.Replayed += uint64(applied)
				c.gen++
				nt.gen = c.gen
				c.cur.Store(nt)
				c.reclaim()
				c.folding, c.flog, c.flast = false, nil, nil
				c.pstat.Folds++
				if c.foldDue(nt) {
					c.foldLater(nt)
				}
				c.mu.Unlock()
				return
			}
			recs, last := c.flog[applied:], c.flast
			c.mu.Unlock()
			// The changes since, as one (replayed one by one, they would
			// take as long as they took to patch in, and a steady stream
			// would never be caught up with).
			removed, added := composeChanges(nt.set, recs)
			var pt *Table
			if pt, _, err = c.patchAny(nt, last, removed, added); err == nil && pt == nil {
				// Past the overlay's bound: compiled whole.
				if pt, err = compile(last, c.mode); err == nil {
					pt.prio = make([]uint32, len(last.Rules))
					for i := range last.Rules {
						pt.prio[i] = last.Rules[i].Priority
					}
				}
			}
			if err == nil {
				nt = pt
				applied += len(recs)
			}
		}
	}()
}

// composeChanges returns the change from set from to the set of the last
// of recs, each rec a change from the set before it (Patch's removed and
// added indexes): the rules of from no set since holds as they are, and
// the rules of the last set added since. Holes of each set (from's, then
// each rec's) are rules of none: neither kept, removed nor added. Each
// change pairs its sets' kept rules in decision order (by key), as Patch
// does.
func composeChanges(from *rule.Set, recs []patchRec) (removed, added []int) {
	const hole, fresh = -2, -1
	// orig: by position of the latest set, the index in from of its
	// rule, fresh for a rule added since, hole for a hole.
	orig := make([]int32, len(from.Rules))
	for i := range orig {
		orig[i] = int32(i)
		if !from.Live(i) {
			orig[i] = hole
		}
	}
	pn, pholes, porder := len(from.Rules), from.Holes, from.Order // the set before r
	for _, r := range recs {
		next := make([]int32, r.n)
		for j := range next {
			next[j] = hole
		}
		pw, cw := walkN(pn, pholes, porder), walkN(r.n, r.holes, r.order)
		removed, added := byKey(porder, r.removed), byKey(r.order, r.added)
		ri, ai := 0, 0
		for j := cw.next(); j >= 0; j = cw.next() {
			if ai < len(added) && added[ai] == j {
				ai++
				next[j] = fresh
				continue
			}
			ci := pw.next()
			for ; ci >= 0 && ri < len(removed) && removed[ri] == ci; ci = pw.next() {
				ri++
			}
			if ci < 0 {
				break // not a change Patch took (it checked the counts)
			}
			next[j] = orig[ci]
		}
		orig, pn, pholes, porder = next, r.n, r.holes, r.order
	}
	kept := make([]bool, len(from.Rules))
	for j, o := range orig {
		switch {
		case o == fresh:
			added = append(added, j)
		case o >= 0:
			kept[o] = true
		}
	}
	for i, k := range kept {
		if !k && from.Live(i) {
			removed = append(removed, i)
		}
	}
	return removed, added
}

// Settle waits until no fold is compiling (tests and shutdown: a fold's
// goroutine ends by itself once its compile is done).
func (c *Classifier) Settle() { c.folds.Wait() }

// or adds the fields u2 looks at to u.
func (u *used) or(u2 *used) {
	u.ports = u.ports || u2.ports
	u.tcpFlags = u.tcpFlags || u2.tcpFlags
	u.icmp = u.icmp || u2.icmp
	u.frag = u.frag || u2.frag
	u.length = u.length || u2.length
	u.dscp = u.dscp || u2.dscp
}

// liveMatches is how many matching base rules liveBest looks at without
// allocating; a packet matching more allocates a bigger list.
const liveMatches = 64

// liveBest returns the rank and position of the best live base rule that
// matches f (noRank and -1 for none): the base lookup's own best was
// masked.
func (p *patch) liveBest(f *rule.Fields) (uint64, int32) {
	var buf [liveMatches]int32
	best, at := noRank, int32(-1)
	for _, r := range p.base.plainMatching(buf[:0], f) {
		if k, pos := p.rankPos(r); k < best {
			best, at = k, pos
		}
	}
	return best, at
}

// baseKey returns the rank and position of the best live base rule for
// f given the base lookup's rule bi.
func (p *patch) baseKey(f *rule.Fields, bi int32) (uint64, int32) {
	if bi < 0 {
		return noRank, -1
	}
	if k, pos := p.rankPos(bi); k != noRank {
		return k, pos
	}
	return p.liveBest(f)
}

// keyedBaseKey is baseKey of a keyed patch: one load of bkey, whose low
// bits are the position.
func (p *patch) keyedBaseKey(f *rule.Fields, bi int32) (uint64, int32) {
	if bi < 0 {
		return noRank, -1
	}
	if k := p.bkey[bi]; k != noRank {
		return k, int32(uint32(k))
	}
	return p.liveBest(f)
}

// patchLookup is lookup on a patched table: the deciding rule and the
// tables probed. The best live base rule's rank and position, and the
// overlay's: the better rank decides, its position the result.
func (t *Table) patchLookup(f *rule.Fields) (int32, int) {
	p := t.pt
	bi, n := p.base.lookup(f)
	var best uint64
	var r int32
	switch {
	case p.keyed:
		best, r = p.keyedBaseKey(f, bi)
	case p.bkey == nil && p.ov == nil:
		// Removals in place only: the base's rule is the set's, masked
		// when it is a hole.
		if bi >= 0 && p.holes.Dead(int(bi)) {
			_, r = p.liveBest(f)
			return r, n
		}
		return bi, n
	default:
		best, r = p.baseKey(f, bi)
	}
	if p.ov == nil {
		return r, n
	}
	oi, m := p.ov.lookup(f)
	if oi >= 0 && p.okey[oi] < best {
		r = p.opos[oi]
	}
	return r, n + m
}

// patchBurst is decideBurst on a patched table (jobs nil: DecideBurst's
// own scratch).
func (t *Table) patchBurst(fs []rule.Fields, out []int32, jobs []stagedProbe, tree *treeScratch) int {
	p := t.pt
	out = out[:len(fs)]
	var n int
	if jobs == nil {
		n = p.base.DecideBurst(fs, out)
	} else {
		n = p.base.decideBurst(fs, out, jobs, tree)
	}
	if p.ov == nil {
		if p.bkey == nil {
			// Removals in place only: the base's rules are the set's,
			// masked when they are holes.
			for i, bi := range out {
				if bi >= 0 && p.holes.Dead(int(bi)) {
					_, out[i] = p.liveBest(&fs[i])
				}
			}
			return n
		}
		if p.keyed {
			for i := range fs {
				_, out[i] = p.keyedBaseKey(&fs[i], out[i])
			}
			return n
		}
		for i := range fs {
			_, out[i] = p.baseKey(&fs[i], out[i])
		}
		return n
	}
	// The overlay decides the burst too, a group at a time.
	var ovOut [stagedGroup]int32
	for g := 0; g < len(fs); g += stagedGroup {
		gfs := fs[g:min(g+stagedGroup, len(fs))]
		n += p.ov.DecideBurst(gfs, ovOut[:len(gfs)])
		if p.keyed {
			for i := range gfs {
				k, r := p.keyedBaseKey(&gfs[i], out[g+i])
				if oi := ovOut[i]; oi >= 0 && p.okey[oi] < k {
					r = p.opos[oi]
				}
				out[g+i] = r
			}
			continue
		}
		for i := range gfs {
			k, r := p.baseKey(&gfs[i], out[g+i])
			if oi := ovOut[i]; oi >= 0 && p.okey[oi] < k {
				r = p.opos[oi]
			}
			out[g+i] = r
		}
	}
	return n
}

// plainMatching is AppendMatching of an unpatched table (the base or the
// overlay of a patched one; not AppendMatching itself, whose call back into
// patchMatching would make every caller's list escape to the heap).
func (t *Table) plainMatching(dst []int32, f *rule.Fields) []int32 {
	if f.Family == 0 {
		return dst
	}
	if t.tr != nil {
		return t.treeMatching(dst, f)
	}
	return t.tssMatching(dst, f)
}

// patchMatching is AppendMatching on a patched table: the live base
// rules' and the overlay's, as indexes in the new set.
func (t *Table) patchMatching(dst []int32, f *rule.Fields) []int32 {
	p := t.pt
	start := len(dst)
	dst = p.base.plainMatching(dst, f)
	k := start
	for _, r := range dst[start:] {
		if _, pos := p.rankPos(r); pos >= 0 {
			dst[k] = pos
			k++
		}
	}
	dst = dst[:k]
	if p.ov != nil {
		m := len(dst)
		dst = p.ov.plainMatching(dst, f)
		for i := m; i < len(dst); i++ {
			dst[i] = p.opos[dst[i]]
		}
	}
	return dst
}

// patchStats is Stats of a patched table: the base's and the overlay's
// lookups together, plus the key arrays.
func (t *Table) patchStats() Stats {
	p := t.pt
	st := p.base.Stats()
	st.Rules, st.Build = t.live, t.build
	st.Bytes += 8*(len(p.bkey)+len(p.okey)) + 4*(len(p.bpos)+len(p.opos))
	if p.ov != nil {
		o := p.ov.Stats()
		st.Entries += o.Entries
		st.Tuples += o.Tuples
		st.Trees += o.Trees
		st.Residuals += o.Residuals
		st.Bytes += o.Bytes
	}
	return st
}

// overlay compiles the rules of set at positions ovIdx alone, as a
// patch's overlay, in their key order (so that the overlay's own order,
// priority then index, is theirs in set), and returns it with their ranks
// in set, priority<<32 | key (rule.Set.Key), and positions, by overlay
// index. It sorts ovIdx.
func (c *Classifier) overlay(set *rule.Set, ovIdx []int) (*Table, []uint64, []int32, error) {
	slices.SortFunc(ovIdx, func(a, b int) int { return set.Key(a) - set.Key(b) })
	ovSet := &rule.Set{Rules: make([]rule.Rule, len(ovIdx))}
	okey := make([]uint64, len(ovIdx))
	opos := make([]int32, len(ovIdx))
	for k, j := range ovIdx {
		ovSet.Rules[k] = set.Rules[j]
		okey[k] = uint64(set.Rules[j].Priority)<<32 | uint64(set.Key(j))
		opos[k] = int32(j)
	}
	ov, err := compile(ovSet, c.mode)
	if err != nil {
		return nil, nil, nil, err
	}
	return ov, okey, opos, nil
}
