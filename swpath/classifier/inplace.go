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
// priorities and the verdicts; a removed rule's slot entry stays, stale:
// nothing reads a hole's, see Table.slot), the base keys with the removed
// rules masked, and the overlay as it is unless a rule of it is removed
// or rules are added.

// inPlace reports whether set is from changed in place by removed and
// added (checked by Patch: ascending, live): set's Rules are from's array,
// maybe grown; its holes below len(from.Rules) are from's and the removed
// positions; the added rules are the positions past from's that are not
// holes. It reads the holes of both sets (O(holes)) and the positions
// appended, never the kept rules.
func inPlace(from, set *rule.Set, removed, added []int) bool {
	nf, n := len(from.Rules), len(set.Rules)
	if n < nf || (nf > 0 && &set.Rules[0] != &from.Rules[0]) {
		return false
	}
	for _, i := range removed {
		if set.Live(i) {
			return false
		}
	}
	ok := true
	below := 0 // set's holes below nf
	set.Holes.Each(nf, func(int) { below++ })
	from.Holes.Each(nf, func(i int) { ok = ok && !set.Live(i) })
	if !ok || below != from.Holes.Count()+len(removed) {
		return false
	}
	// from's holes are all below nf (Each went over all of them: Holes
	// marks positions of the set's Rules only, and With is given no other).
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
	// The base keys: the current ones with the removed rules' masked.
	// Keys ascend with the rule index among the live ones (the kept base
	// rules keep their order), so one pass merges them with removed.
	var ovIdx []int // the overlay's rules, ascending
	if cp == nil {
		b := *cur
		b.set, b.verdictAt, b.verdict, b.slot, b.prio = &rule.Set{}, nil, nil, nil, nil
		p.base = &b
		p.bkey = make([]uint64, nf)
		ri := 0
		for i := range p.bkey {
			p.bkey[i] = noRank
			if ri < len(removed) && removed[ri] == i {
				ri++
				continue
			}
			if from.Live(i) {
				p.bkey[i] = uint64(cur.prio[i])<<32 | uint64(i)
			}
		}
		p.dead = len(removed)
	} else {
		p.base, p.dead = cp.base, cp.dead
		p.bkey = cp.bkey
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
				p.bkey = make([]uint64, len(cp.bkey))
				copy(p.bkey, cp.bkey)
				ri = 0
				for b, k := range p.bkey {
					if k == noRank {
						continue
					}
					i := int(uint32(k))
					for ri < len(removed) && removed[ri] < i {
						ri++
					}
					if ri == len(removed) {
						break
					}
					if removed[ri] == i {
						p.bkey[b] = noRank
					}
				}
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
		ovSet := &rule.Set{Rules: make([]rule.Rule, len(ovIdx))}
		p.okey = make([]uint64, len(ovIdx))
		for k, j := range ovIdx {
			ovSet.Rules[k] = set.Rules[j]
			p.okey[k] = uint64(set.Rules[j].Priority)<<32 | uint64(j)
		}
		ov, err := compile(ovSet, c.mode)
		if err != nil {
			return nil, err
		}
		p.ov = ov
		t.used.or(&ov.used)
	}
	t.cacheW0, t.cacheW1 = t.used.cacheMasks()
	t.ntables = p.base.ntables
	if p.ov != nil {
		t.ntables = max(t.ntables, p.ov.ntables)
	}
	t.pt = p
	return t, nil
}
