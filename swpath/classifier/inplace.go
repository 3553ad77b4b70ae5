package classifier

import (
	"github.com/scrubd/scrubd/swpath/rule"
)

// Patches in place. A placer that removes rules by making holes
// (rule.Holes) and appends new rules to the same array changes no rule's
// index: the kept rules are at the same positions in both sets. Such a
// patch needs no walk that matches the kept rules of the two sets: the
// new table takes the current one's arrays by rule index as they are
// (copied, grown, only when rules are appended: the counter slots, the
// priorities and the verdicts), and the overlay as it is unless a rule of
// it is removed or rules are added. A removed rule needs no entry of its
// own changed: it is a hole of the new set, which no lookup decides (its
// counter slot entry stays, stale: nothing reads a hole's, see
// Table.slot), and the patch masks a base rule whose index is a hole of
// the new set (patch.holes: a bit test on the set's bitmap, only for the
// base rule a lookup found). So a removal in place costs O(holes/64)
// words and no array by rule, where the base keys with the rule masked
// and the slots copied took 12 bytes a rule (1.2 MB at 100k).
//
// Lookups: a table patched by removals in place only (no overlay) has no
// base keys at all: the base lookup's rule is the set's, and the bit test
// replaces the load of its key. A table patched by the walk (patchTable)
// masks by its base keys alone (patch.keyed) and is looked up as before,
// one load; only one patched by the walk and then by removals in place
// pays both.

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
		t.slot, t.prio, t.verdictAt, t.verdict = cur.slot, cur.prio, cur.verdictAt, cur.verdict
	} else {
		t.slot = make([]uint32, n)
		copy(t.slot, cur.slot)
		for j := nf; j < n; j++ {
			t.slot[j] = noSlot // a hole, or an added rule's (Patch sets it)
		}
		t.prio = make([]uint32, n)
		copy(t.prio, cur.prio)
		t.verdictAt = make([]Verdict, n+1)
		copy(t.verdictAt, cur.verdictAt)
		t.verdict = t.verdictAt[1:]
		for _, j := range added {
			t.prio[j] = set.Rules[j].Priority
			t.verdict[j] = Drop
			if set.Rules[j].Action == rule.Accept {
				t.verdict[j] = Accept
			}
		}
	}
	p := &patch{}
	var ovIdx []int // the overlay's rules, ascending
	if cp == nil {
		// The base's lookup only (as patchTable's), its rules by their
		// own indexes: no base keys, the priorities the table's.
		b := *cur
		b.set, b.verdictAt, b.verdict, b.slot, b.prio = &rule.Set{}, nil, nil, nil, nil
		p.base, p.prio = &b, cur.prio
		p.dead = len(removed)
		if len(removed) > 0 {
			p.holes = set.Holes
		}
	} else {
		p.base, p.dead = cp.base, cp.dead
		p.bkey, p.prio, p.holes = cp.bkey, cp.prio, cp.holes
		ri := 0
		var ovGone int // removed rules of the overlay
		if len(removed) > 0 {
			// Removed rules from the overlay: those okey names.
			for _, k := range cp.okey {
				for ri < len(removed) && removed[ri] < int(uint32(k)) {
					ri++
				}
				if ri < len(removed) && removed[ri] == int(uint32(k)) {
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
			p.ov, p.okey = cp.ov, cp.okey
		} else {
			ri = 0
			for _, k := range cp.okey {
				i := int(uint32(k))
				for ri < len(removed) && removed[ri] < i {
					ri++
				}
				if ri == len(removed) || removed[ri] != i {
					ovIdx = append(ovIdx, i)
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
		if p.ov, p.okey, err = c.overlay(set, ovIdx); err != nil {
			return nil, err
		}
		t.used.or(&p.ov.used)
	}
	t.cacheW0, t.cacheW1 = t.used.cacheMasks()
	t.ntables = p.base.ntables
	if p.ov != nil {
		t.ntables = max(t.ntables, p.ov.ntables)
	}
	p.keyed = p.bkey != nil && p.holes == nil
	t.pt = p
	return t, nil
}
