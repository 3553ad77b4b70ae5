package placement

import (
	"slices"

	"github.com/scrubd/scrubd/agent/dataplane"
	"github.com/scrubd/scrubd/swpath/rule"
)

// giveSW hands set to the software path, unless it holds the same rules
// as the set pushed last (same reports that). An engine that takes changes
// (dataplane.SWPatcher: the Go classifier's) is given the rules removed
// and added (swDiff) when they are at most a quarter of the set, so that
// one rule added through the API or one FlowSpec route costs the engine
// what it touches rather than a compile of the set (at 100k rules hundreds
// of milliseconds); a refused change is followed by the whole set.
func (p *Placer) giveSW(set *rule.Set) (same bool, err error) {
	if p.pushed == nil {
		return false, p.sw.SetRules(set)
	}
	pt, ok := p.sw.(dataplane.SWPatcher)
	if !ok {
		if sameSet(set, p.pushed) {
			return true, nil
		}
		return false, p.sw.SetRules(set)
	}
	removed, added, ok := swDiff(p.pushed, set, set.Len()/4+64)
	if ok && len(removed)+len(added) == 0 {
		return true, nil
	}
	if ok {
		err := pt.PatchRules(p.pushed, set, removed, added)
		if err == nil {
			p.swPatches++
			return false, nil
		}
		p.log.Debug("software path refused a change; giving it the whole set", "removed", len(removed), "added", len(added), "err", err)
	}
	return false, p.sw.SetRules(set)
}

// swLookahead is how far swDiff looks along either set for the rule the
// other holds next, to tell a run of rules removed (or added) from a rule
// replaced.
const swLookahead = 8

// swDiff returns the indexes, ascending, of the rules of from that are not
// in to as they are (removed) and of the rules of to that are not in from
// as they are (added), such that every other rule of to is the next rule
// of from not removed (dataplane.SWPatcher's terms: the holes of either
// set are rules of neither); ok is false when they number more than
// limit.
//
// When to is from's array, with more holes and perhaps rules appended in
// place (a removal and an add of the placer's), the change is read from
// the holes alone (rule.Holes.New: the blocks of the bitmap the removals
// wrote): the rules that became holes are removed, those past from's end
// added. Otherwise it walks
// both sets once: a pair of equal rules (the same element of a shared
// array, or sameRule) is kept; where they differ it looks up to
// swLookahead rules ahead in either set for a run removed or added, else
// counts the pair as one rule replaced by another. A rule moved farther
// than that is listed as removed and added, which is correct, only not
// the least change. A rule changed in place whose copy was appended (its
// key not its own position: rule.Order) is outside that walk in either
// set: removed from from, added to to. The rules left decide in position
// order in both sets, so the rules kept are in the same order in both.
func swDiff(fromSet, toSet *rule.Set, limit int) (removed, added []int, ok bool) {
	from, to := fromSet.Rules, toSet.Rules
	if len(from) > 0 && len(to) >= len(from) && &from[0] == &to[0] {
		var past bool // a hole at or past from's end
		grew := toSet.Holes.New(fromSet.Holes, func(i int) {
			if i < len(from) {
				removed = append(removed, i)
			} else {
				past = true
			}
		})
		if grew && !past {
			for j := len(from); j < len(to); j++ {
				if toSet.Live(j) {
					added = append(added, j)
				}
			}
			return removed, added, len(removed)+len(added) <= limit
		}
		removed = nil
	}
	same := func(i, j int) bool { return &from[i] == &to[j] || sameRule(&from[i], &to[j]) }
	var movedFrom, movedTo []int
	fromSet.EachMoved(func(i int) { movedFrom = append(movedFrom, i) })
	toSet.EachMoved(func(j int) { movedTo = append(movedTo, j) })
	if len(movedFrom)+len(movedTo) > limit {
		return nil, nil, false
	}
	// walked: i is a live position of s and not an appended copy of a
	// rule changed in place. next returns the first such at or after i.
	walked := func(s *rule.Set, i int) bool { return s.Live(i) && s.Key(i) == i }
	next := func(s *rule.Set, i int) int {
		for i < len(s.Rules) && !walked(s, i) {
			i++
		}
		return i
	}
	i, j := next(fromSet, 0), next(toSet, 0)
	for i < len(from) && j < len(to) {
		if same(i, j) {
			i, j = next(fromSet, i+1), next(toSet, j+1)
			continue
		}
		if len(removed)+len(added) > limit {
			return nil, nil, false
		}
		if from[i].ID == to[j].ID { // changed in place
			removed, added = append(removed, i), append(added, j)
			i, j = next(fromSet, i+1), next(toSet, j+1)
			continue
		}
		found := false
		for d := 1; d <= swLookahead && !found; d++ {
			switch {
			case i+d < len(from) && walked(fromSet, i+d) && same(i+d, j):
				for k := i; k < i+d; k++ {
					if walked(fromSet, k) {
						removed = append(removed, k)
					}
				}
				i, found = i+d, true
			case j+d < len(to) && walked(toSet, j+d) && same(i, j+d):
				for k := j; k < j+d; k++ {
					if walked(toSet, k) {
						added = append(added, k)
					}
				}
				j, found = j+d, true
			}
		}
		if !found {
			removed, added = append(removed, i), append(added, j)
			i, j = next(fromSet, i+1), next(toSet, j+1)
		}
	}
	for ; i < len(from); i = next(fromSet, i+1) {
		removed = append(removed, i)
	}
	for ; j < len(to); j = next(toSet, j+1) {
		added = append(added, j)
	}
	if len(movedFrom) > 0 {
		removed = append(removed, movedFrom...)
		slices.Sort(removed)
	}
	if len(movedTo) > 0 {
		added = append(added, movedTo...)
		slices.Sort(added)
	}
	if len(removed)+len(added) > limit {
		return nil, nil, false
	}
	return removed, added, true
}

// sameSet reports whether a and b hold the same rules in the same order,
// their holes aside.
func sameSet(a, b *rule.Set) bool {
	if len(a.Rules) > 0 && len(b.Rules) > 0 && &a.Rules[0] == &b.Rules[0] {
		// One array, appended to in place (an element of a shared array
		// is not written): the same set when the length and the holes
		// are. A rule of the longer past the shorter's end is a rule
		// added (a rule put again as it was is not appended), and holes
		// only grow until the array is compacted into another, so more
		// of them is a rule gone.
		s, l := a, b
		if len(s.Rules) > len(l.Rules) {
			s, l = b, a
		}
		if len(s.Rules) == len(l.Rules) && a.Holes == b.Holes {
			return true
		}
		for j := len(s.Rules); j < len(l.Rules); j++ {
			if l.Live(j) {
				return false
			}
		}
		if a.Holes.Count() != b.Holes.Count() && (b.Holes.New(a.Holes, func(int) {}) || a.Holes.New(b.Holes, func(int) {})) {
			return false
		}
	}
	if a.Order.Moved() > 0 || b.Order.Moved() > 0 {
		// Rules changed in place and appended: compared in decision
		// order.
		var ai, bi []int
		a.Ordered(func(i int) { ai = append(ai, i) })
		b.Ordered(func(i int) { bi = append(bi, i) })
		return slices.EqualFunc(ai, bi, func(i, j int) bool { return sameRule(&a.Rules[i], &b.Rules[j]) })
	}
	if a.Holes.Count() == 0 && b.Holes.Count() == 0 {
		return sameRules(a.Rules, b.Rules)
	}
	i, j := 0, 0
	for {
		for i < len(a.Rules) && !a.Live(i) {
			i++
		}
		for j < len(b.Rules) && !b.Live(j) {
			j++
		}
		if i == len(a.Rules) || j == len(b.Rules) {
			return i == len(a.Rules) && j == len(b.Rules)
		}
		if !sameRule(&a.Rules[i], &b.Rules[j]) {
			return false
		}
		i, j = i+1, j+1
	}
}
