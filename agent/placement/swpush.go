package placement

import (
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
		if sameRules(set.Rules, p.pushed.Rules) {
			return true, nil
		}
		return false, p.sw.SetRules(set)
	}
	removed, added, ok := swDiff(p.pushed.Rules, set.Rules, len(set.Rules)/4+64)
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
// of from not removed (dataplane.SWPatcher's terms); ok is false when they
// number more than limit. It walks both sets once: a pair of equal rules
// (the same element of a shared array, or sameRule) is kept; where they
// differ it looks up to swLookahead rules ahead in either set for a run
// removed or added, else counts the pair as one rule replaced by another.
// A rule moved farther than that is listed as removed and added, which
// is correct, only not the least change.
func swDiff(from, to []rule.Rule, limit int) (removed, added []int, ok bool) {
	same := func(i, j int) bool { return &from[i] == &to[j] || sameRule(&from[i], &to[j]) }
	i, j := 0, 0
	for i < len(from) && j < len(to) {
		if same(i, j) {
			i++
			j++
			continue
		}
		if len(removed)+len(added) > limit {
			return nil, nil, false
		}
		if from[i].ID == to[j].ID { // changed in place
			removed, added = append(removed, i), append(added, j)
			i++
			j++
			continue
		}
		found := false
		for d := 1; d <= swLookahead && !found; d++ {
			switch {
			case i+d < len(from) && same(i+d, j):
				for k := i; k < i+d; k++ {
					removed = append(removed, k)
				}
				i, found = i+d, true
			case j+d < len(to) && same(i, j+d):
				for k := j; k < j+d; k++ {
					added = append(added, k)
				}
				j, found = j+d, true
			}
		}
		if !found {
			removed, added = append(removed, i), append(added, j)
			i++
			j++
		}
	}
	for ; i < len(from); i++ {
		removed = append(removed, i)
	}
	for ; j < len(to); j++ {
		added = append(added, j)
	}
	if len(removed)+len(added) > limit {
		return nil, nil, false
	}
	return removed, added, true
}
