package classifier

import (
	"sync/atomic"

	"github.com/scrubd/scrubd/swpath/rule"
)

// Patches in place. A placer that removes rules by making holes
// (rule.Holes), appends new rules to the same array, and changes a rule
// by appending its copy, its old position a hole and the copy at the old
// position's key (rule.Order), changes no rule's index or key: the kept
// rules are at the same positions, with the same keys, in both sets. Such
// a patch needs no walk that matches the kept rules of the two sets: the
// new table takes the current one's arrays by rule index as they are
// (grown when rules are appended, into the room past their length, which
// the first table to append claims, byRuleTail: the counter slots, the
// priorities and the verdicts; copied with room only when it runs out or
// another took it), and the overlay as it is unless a rule of it is
// removed or rules are added (a changed rule's copy is an added rule, in
// the overlay at its key). A removed rule needs no entry of its
// own changed: it is a hole of the new set, which no lookup decides (its
// counter slot entry stays, stale: nothing reads a hole's, see
// Table.slot), and the patch masks a base rule whose index is a hole of
// the new set (patch.holes: a bit test on the set's bitmap, only for the
// base rule a lookup found). So a removal in place costs O(holes/64)
// words and no array by rule, where the base keys with the rule masked
// and the slots copied took 12 bytes a rule (1.2 MB at 100k), and a
// change in place costs the overlay's compile and a few small objects,
// where the arrays by rule copied took 9 bytes a rule (TestChangeInPlaceCost).
//
// Lookups: a table patched by removals in place only (no overlay) has no
// base keys at all: the base lookup's rule is the set's, and the bit test
// replaces the load of its key. A table patched by the walk (patchTable)
// masks by its base keys alone (patch.keyed) and is looked up as before,
// one load; only one patched by the walk and then by removals in place
// pays both. A base whose set moves rules costs its masked-rule path and
// its compare with the overlay the load of the rule's key (patch.order),
// and a walk to a set that moves rules a load of the rule's position
// (patch.bpos) besides its rank; sets that move none pay neither.

// inPlace reports whether set is from changed in place by removed and
// added (checked by Patch: ascending, live): set's Rules are from's array,
// maybe grown; its holes below len(from.Rules) are from's and the removed
// positions; the added rules are the positions past from's that are not
// holes. It reads the blocks of the holes' bitmap the change wrote
// (rule.Holes.New) and the positions appended, never the kept rules.
func inPlace(from, set *rule.Set, removed, added []int) bool {
	nf, n := len(from.Rules), len(set.Rules)
	if n < nf || (nf > 0 && &set.Rules[0] != &from.Rules[0]) {
		return false
	}
	// The holes set has and from lacks below nf are the removed positions
	// exactly, and every hole of from is one of set's (Holes.New: the
	// blocks of the bitmap the removals wrote, not every hole).
	k, ok := 0, true
	grew := set.Holes.New(from.Holes, func(i int) {
		switch {
		case i >= nf: // past from's end: read with the positions appended
		case k < len(removed) && removed[k] == i:
			k++
		default:
			ok = false
		}
	})
	if !grew || !ok || k != len(removed) {
		return false
	}
	ai := 0
	for j := nf; j < n; j++ {
		isAdded := ai < len(added) && added[ai] == j
		if isAdded {
			ai++
		}
		if isAdded == set.Holes.Dead(j) {
			return false
		}
	}
	return ai == len(added)
}

// patchAny is patchTable, or patchInPlace for a change in place (and
// then inplace true).
func (c *Classifier) patchAny(cur *Table, set *rule.Set, removed, added []int) (t *Table, inplace bool, err error) {
	if inPlace(cur.set, set, removed, added) {
		t, err = c.patchInPlace(cur, set, removed, added)
		return t, true, err
	}
	t, err = c.patchTable(cur, set, removed, added)
	return t, false, err
}

// patchInPlace is patchTable for a change in place (inPlace): the table
// of set as a patch over cur, or nil when the overlay would pass four
// times the fold bound. added's slots are left 0 (Patch fills them).
func (c *Classifier) patchInPlace(cur *Table, set *rule.Set, removed, added []int) (*Table, error) {
	from := cur.set
	nf, n := len(from.Rules), len(set.Rules)
	cp := cur.pt
	t := &Table{set: set, live: cur.live - len(removed) + len(added)}
	if n == nf {
		// Read-only once published: shared. A hole's slot, priority and
		// verdict are never read (its slot goes to limbo, and maybe to a
		// rule added later, when Patch returns: the entry here is stale).
		t.slot, t.prio, t.verdictAt, t.verdict, t.tail = cur.slot, cur.prio, cur.verdictAt, cur.verdict, cur.tail
	} else {
		t.growFrom(cur, n)
		for _, j := range added {
			t.prio[j] = set.Rules[j].Priority
			t.verdict[j] = Drop
			if set.Rules[j].Action == rule.Accept {
				t.verdict[j] = Accept
			}
		}
	}
	p := &patch{}
	var ovIdx []int // the overlay's rules
	if cp == nil {
		// The base's lookup only (as patchTable's), its rules by their
		// own indexes and keys: no base keys, the priorities the table's.
		b := *cur
		b.set, b.verdictAt, b.verdict, b.slot, b.prio, b.tail = &rule.Set{}, nil, nil, nil, nil, nil
		p.base, p.prio, p.order = &b, cur.prio, from.Order
		p.dead = len(removed)
		if len(removed) > 0 {
			p.holes = set.Holes
		}
	} else {
		p.base, p.dead = cp.base, cp.dead
		p.bkey, p.bpos, p.prio, p.order, p.holes = cp.bkey, cp.bpos, cp.prio, cp.order, cp.holes
		// Removed rules of the overlay: those whose position is a hole of
		// set (a removal in place makes the removed positions holes, and
		// no other below nf: inPlace).
		ovGone := 0
		if len(removed) > 0 {
			for _, j := range cp.opos {
				if set.Holes.Dead(int(j)) {
					ovGone++
				}
			}
			if ovGone < len(removed) {
				// The others are base rules: masked by the new set's
				// holes, which hold the older ones.
				p.holes = set.Holes
				p.dead += len(removed) - ovGone
			}
		}
		if ovGone == 0 && len(added) == 0 {
			p.ov, p.okey, p.opos = cp.ov, cp.okey, cp.opos
		} else {
			for _, j := range cp.opos {
				if !set.Holes.Dead(int(j)) {
					ovIdx = append(ovIdx, int(j))
				}
			}
		}
	}
	ovIdx = append(ovIdx, added...)
	if len(ovIdx) > 4*foldAt(t.live) {
		return nil, nil
	}
	t.used = p.base.used
	if p.ov != nil {
		t.used.or(&p.ov.used)
	} else if len(ovIdx) > 0 {
		var err error
		if p.ov, p.okey, p.opos, err = c.overlay(set, ovIdx); err != nil {
			return nil, err
		}
		t.used.or(&p.ov.used)
	}
	t.cacheW0, t.cacheW1 = t.used.cacheMasks()
	t.ntables = p.base.ntables
	if p.ov != nil {
		t.ntables = max(t.ntables, p.ov.ntables)
	}
	p.keyed = p.bkey != nil && p.holes == nil && p.bpos == nil
	t.pt = p
	return t, nil
}

// byRuleTail is how far the arrays by rule index (Table.slot, prio and
// verdictAt) that tables share have been written: their length in the
// table that wrote last. A table patched in place with appends extends
// cur's arrays into their spare room only when it moves n from cur's
// length (compare-and-swap), so that one successor of a table ever writes
// there (a second, such as a patch that loses a race or a fold's replay,
// copies); the tables before read only below their own length. So a
// change in place that appends copies no array by rule but when the room
// runs out, as appending to a slice does.
type byRuleTail struct{ n atomic.Int64 }

// byRuleRoom is the capacity given to arrays by rule index of n rules:
// room for changes in place to append to.
func byRuleRoom(n int) int { return n + n/8 + 64 }

// byRule makes t's arrays by rule index for n rules (zeroed), with room
// to grow in place (byRuleTail).
func (t *Table) byRule(n int) {
	c := byRuleRoom(n)
	t.slot = make([]uint32, n, c)
	t.prio = make([]uint32, n, c)
	t.verdictAt = make([]Verdict, n+1, c+1)
	t.verdict = t.verdictAt[1:]
	t.tail = new(byRuleTail)
	t.tail.n.Store(int64(n))
}

// growFrom gives t cur's arrays by rule index grown to n (> cur's) rules:
// cur's own arrays when their room past cur's length is unclaimed and
// large enough (byRuleTail), else copies with room. The positions
// appended are holes (noSlot, Pass) until the caller writes them.
func (t *Table) growFrom(cur *Table, n int) {
	nf := len(cur.slot)
	if tl := cur.tail; tl != nil && cap(cur.slot) >= n && cap(cur.prio) >= n && cap(cur.verdictAt) >= n+1 &&
		len(cur.prio) == nf && len(cur.verdictAt) == nf+1 && tl.n.CompareAndSwap(int64(nf), int64(n)) {
		t.slot, t.prio, t.verdictAt, t.tail = cur.slot[:n], cur.prio[:n], cur.verdictAt[:n+1], tl
		t.verdict = t.verdictAt[1:]
	} else {
		t.byRule(n)
		copy(t.slot, cur.slot)
		copy(t.prio, cur.prio)
		copy(t.verdictAt, cur.verdictAt)
	}
	for j := nf; j < n; j++ {
		t.slot[j], t.prio[j], t.verdict[j] = noSlot, 0, Pass
	}
}
