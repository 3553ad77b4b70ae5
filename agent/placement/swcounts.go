package placement

import "github.com/scrubd/scrubd/swpath/rule"

// inOrder reports whether the ids of rules appear in order, in that order,
// as a subsequence of order (ids are unique in each; holes are skipped in
// both): then Tick pairs the software path's counts (dataplane.SWStats, by
// position in its set) with the placer's rules in one walk of both, with
// no lookup by id. The set
// the placer pushed to software is such a subsequence (swSet keeps the
// effective set's order); a set pushed before rules were removed or
// reordered need not be.
func inOrder(rules, order *rule.Set) bool {
	j := 0
	next := func() {
		for j < len(rules.Rules) && !rules.Live(j) {
			j++
		}
	}
	next()
	for i := range order.Rules {
		if j == len(rules.Rules) {
			break
		}
		if order.Live(i) && rules.Rules[j].ID == order.Rules[i].ID {
			j++
			next()
		}
	}
	return j == len(rules.Rules)
}
