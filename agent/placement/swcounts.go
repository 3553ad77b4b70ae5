package placement

import "github.com/scrubd/scrubd/swpath/rule"

// inOrder reports whether the ids of rules appear in order, in that order,
// as a subsequence of order (ids are unique in each): then Tick pairs the
// software path's counts (dataplane.SWStats, by position in its set) with
// the placer's rules in one walk of both, with no lookup by id. The set
// the placer pushed to software is such a subsequence (swSet keeps the
// effective set's order); a set pushed before rules were removed or
// reordered need not be.
func inOrder(rules, order []rule.Rule) bool {
	j := 0
	for i := range order {
		if j == len(rules) {
			break
		}
		if rules[j].ID == order[i].ID {
			j++
		}
	}
	return j == len(rules)
}
