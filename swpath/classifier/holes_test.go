package classifier

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/scrubd/scrubd/swpath/rule"
	"github.com/scrubd/scrubd/swpath/traffic"
)

// Kinds of holeStep.
const (
	holeRemove  = iota // removal in place: the same array, removed positions made holes
	holeAppend         // append in place (the same array grown), with removals in place or not
	holeCopy           // append to a copy of the array, with the same holes
	holeCompact        // compaction: a new plain array of the live rules, changed as patchStep does
	holeKinds
)

var holeKindName = [holeKinds]string{"remove", "append", "copy", "compact"}

// holeNewRule returns a rule of pool with a random priority and action,
// and an ID new or of one gone (in no set now, maybe a hole's).
func holeNewRule(r *rand.Rand, pool []rule.Rule, ids *int, gone *[]string) rule.Rule {
	prios := []uint32{0, 5, 10, 20, 30}
	nr := pool[r.IntN(len(pool))]
	nr.Priority = prios[r.IntN(len(prios))]
	nr.Action = rule.Drop
	if r.IntN(3) == 0 {
		nr.Action = rule.Accept
	}
	if g := *gone; len(g) > 0 && r.IntN(2) == 0 {
		k := r.IntN(len(g))
		nr.ID = g[k]
		*gone = slices.Delete(g, k, k+1)
	} else {
		*ids++
		nr.ID = fmt.Sprintf("h%d", *ids)
	}
	return nr
}

// holeRemovals picks up to three live positions of cur at random
// (ascending), adds their IDs to gone, and returns them with their rules.
func holeRemovals(r *rand.Rand, cur *rule.Set, gone *[]string) (removed []int, out []rule.Rule) {
	live := cur.Len()
	if live < 8 {
		return nil, nil
	}
	for range 1 + r.IntN(3) {
		for {
			i := r.IntN(len(cur.Rules))
			if cur.Live(i) && !slices.Contains(removed, i) {
				removed = append(removed, i)
				break
			}
		}
	}
	slices.Sort(removed)
	for _, i := range removed {
		out = append(out, cur.Rules[i])
		*gone = append(*gone, cur.Rules[i].ID)
	}
	return removed, out
}

// holeStep derives a new set from cur by a change of the given kind, the
// kinds a placer that removes in place makes, and returns it with Patch's
// indexes and the rules removed. gone holds the IDs in no set (a hole's
// among them), which added rules may take again.
func holeStep(r *rand.Rand, kind int, cur *rule.Set, pool []rule.Rule, ids *int, gone *[]string) (next *rule.Set, removed, added []int, out []rule.Rule) {
	switch kind {
	case holeRemove:
		removed, out = holeRemovals(r, cur, gone)
		return &rule.Set{Rules: cur.Rules, Holes: cur.Holes.With(removed...), Order: cur.Order}, removed, nil, out
	case holeAppend, holeCopy:
		if r.IntN(2) == 0 {
			removed, out = holeRemovals(r, cur, gone)
		}
		rules := cur.Rules
		if kind == holeCopy {
			rules = slices.Clone(rules)
		}
		for range 1 + r.IntN(3) {
			added = append(added, len(rules))
			rules = append(rules, holeNewRule(r, pool, ids, gone))
		}
		return &rule.Set{Rules: rules, Holes: cur.Holes.With(removed...)}, removed, added, out
	}
	return compactStep(r, cur, pool, ids, gone)
}

// compactStep is a compaction with a change of a few rules (patchStep's)
// on the way: a new array of cur's live rules in decision order, changed
// as patchStep does. removed are the positions in cur of the live rules
// patchStep removed from the compacted set; cur's holes are rules of
// neither.
func compactStep(r *rand.Rand, cur *rule.Set, pool []rule.Rule, ids *int, gone *[]string) (next *rule.Set, removed, added []int, out []rule.Rule) {
	comp := cur.Compact()
	var pos []int
	cur.Ordered(func(i int) { pos = append(pos, i) })
	next, rem, added, out := patchStep(r, comp, pool, ids, gone)
	for _, k := range rem {
		removed = append(removed, pos[k])
	}
	slices.Sort(removed)
	next.Rules = slices.Grow(next.Rules, 16) // room to append in place later
	return next, removed, added, out
}

// TestHolesDifferential applies random sequences of the changes a placer
// that removes in place makes (removals in place, appends in place or to a
// copy, compactions with changes, in any order) with Patch, folds among
// them, and after each compares:
//   - every lookup (Decide, DecideBurst, AppendMatching, and the workers'
//     bursts, single packets and frames) with the linear reference
//     rule.Set.Decide of the new set, which skips holes, and with a table
//     compiled fresh from the compacted set (its rule mapped back to its
//     position), on packets steered at the set's rules, its holes' among
//     them, and at the rules just removed;
//   - the counters (Snapshot) with a twin given the same sets by Swap,
//     position by position, and with a classifier given the compacted
//     sets by Swap, summed by ID: a hole counts zero and has no ID, and an
//     ID removed and added again starts from zero as Swap says.
func TestHolesDifferential(t *testing.T) {
	holes := diffSpec{
		stream: 177, poolSeed: 2000, kinds: holeKindName[:], compact: holeCompact, pile: holeRemove, // holes pile up between compactions
		step: func(r *rand.Rand, kind int, cur *rule.Set, pool []rule.Rule, _ []uint32, ids *int, gone *[]string) (*rule.Set, []int, []int, []rule.Rule) {
			return holeStep(r, kind, cur, pool, ids, gone)
		},
	}
	st := testDifferential(t, holes, []diffCase{
		{"random 300 auto", treesAuto, traffic.RandomRules(151, 300), nil, 80},
		{"random 300 trees", treesForce, traffic.RandomRules(152, 300), nil, 80},
		{"random 300 hash tables", treesOff, traffic.RandomRules(153, 300), nil, 80},
		{"random 40 hash tables", treesOff, traffic.RandomRules(154, 40), nil, 60},
		{"classbench 2000 auto", treesAuto, traffic.ClassBenchRules(155, 2000), nil, 30},
	})
	t.Logf("steps by kind %v, %d patched in place, packets matching a hole's rule %d", st.kinds, st.inPlace, st.holeHits)
}

// TestHolesCompile: a set with holes compiles to the table of its
// compacted set, every rule at its own index: the holes' rules (steered
// at) never decide nor match, and Stats counts the live rules.
func TestHolesCompile(t *testing.T) {
	base := traffic.ClassBenchRules(161, 3000)
	r := rand.New(rand.NewPCG(161, 1))
	var dead []int
	for range 600 {
		dead = append(dead, r.IntN(len(base.Rules)))
	}
	set := &rule.Set{Rules: base.Rules, Holes: (*rule.Holes)(nil).With(dead...)}
	for _, mode := range []int{treesAuto, treesForce, treesOff} {
		tab, err := compile(set, mode)
		if err != nil {
			t.Fatal(err)
		}
		if tab.Stats().Rules != set.Len() {
			t.Fatalf("mode %d: Stats().Rules %d, want %d", mode, tab.Stats().Rules, set.Len())
		}
		fs, _ := burstFields(t, set, 162, shortOr(3000, 600))
		want := make([]int32, len(fs))
		onHole := 0
		for i := range fs {
			want[i] = int32(set.Decide(&fs[i]))
			if d := base.Decide(&fs[i]); d >= 0 && !set.Live(d) {
				onHole++
			}
		}
		if onHole == 0 {
			t.Fatal("no packet is decided by a hole's rule in the set without holes")
		}
		checkPatchedLookups(t, fmt.Sprintf("mode %d", mode), tab, set, fs, want)
	}
}

// TestHolesPatchChecks: removed must name rules of the current set and
// added rules of the new set, not holes, and the counts are of rules.
func TestHolesPatchChecks(t *testing.T) {
	base := traffic.RandomRules(171, 20)
	set := &rule.Set{Rules: base.Rules, Holes: (*rule.Holes)(nil).With(3)}
	c, err := New(set)
	if err != nil {
		t.Fatal(err)
	}
	grown := &rule.Set{Rules: append(slices.Clone(base.Rules), base.Rules[3]), Holes: set.Holes.With(20)}
	for _, x := range []struct {
		set            *rule.Set
		removed, added []int
		want           string
	}{
		{&rule.Set{Rules: set.Rules, Holes: set.Holes.With(3)}, []int{3}, nil, "removed[0] = 3: a hole of the current set"},
		{grown, nil, []int{20}, "added[0] = 20: a hole of the new set"},
		{&rule.Set{Rules: set.Rules, Holes: set.Holes.With(4)}, nil, nil, "19 rules - 0 removed + 0 added = 19, but the new set has 18"},
		{&rule.Set{Rules: set.Rules, Holes: set.Holes.With(4, 5)}, []int{4}, nil, "19 rules - 1 removed + 0 added = 18, but the new set has 17"},
		// In place, the counts right, but the hole made is not the rule
		// named removed: not a change in place, and the walk refuses it.
		{&rule.Set{Rules: set.Rules, Holes: set.Holes.With(5)}, []int{4}, nil, "rule 4 of the new set (\"r4\", priority 10, drop) is not rule 5 of the current set"},
	} {
		err := c.Patch(set, x.set, x.removed, x.added)
		if err == nil || !strings.Contains(err.Error(), x.want) {
			t.Errorf("Patch(-%v +%v): %v, want an error with %q", x.removed, x.added, err, x.want)
		}
		if c.Table().Set() != set {
			t.Fatal("a refused patch changed the set")
		}
	}
	next := &rule.Set{Rules: set.Rules, Holes: set.Holes.With(4, 5)}
	if err := c.Patch(set, next, []int{4, 5}, nil); err != nil {
		t.Fatal(err)
	}
	if c.Table().Set() != next || c.Table().Stats().Rules != 17 {
		t.Fatalf("not patched: %d rules", c.Table().Stats().Rules)
	}
}

// TestHolesFoldReplays: changes with holes (removals and appends in
// place, a compaction) patched in while a fold compiles a set with holes
// are replayed on the folded table, which lands and decides as the
// reference.
func TestHolesFoldReplays(t *testing.T) {
	base := traffic.ClassBenchRules(181, 20000)
	set := &rule.Set{Rules: slices.Grow(slices.Clone(base.Rules), 64)}
	c, err := New(set)
	if err != nil {
		t.Fatal(err)
	}
	// Removals in place past the masked bound start a fold (of a set with
	// holes; compiling 20k rules takes far longer than the patches below).
	var removed []int
	for i := range 20000 / 16 * 2 {
		removed = append(removed, 7*i+3)
	}
	cur := &rule.Set{Rules: set.Rules, Holes: set.Holes.With(removed...)}
	if err := c.Patch(set, cur, removed, nil); err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(181, 2))
	pool := traffic.ClassBenchRules(182, 100).Rules
	ids := 0
	var gone []string
	cur, out := replayChanges(t, c, cur, 24, func(k int, cur *rule.Set) (string, *rule.Set, []int, []int, []rule.Rule) {
		kind := []int{holeRemove, holeAppend, holeCopy}[k%3]
		if k == 16 {
			kind = holeCompact
		}
		next, rem, add, o := holeStep(r, kind, cur, pool, &ids, &gone)
		return holeKindName[kind], next, rem, add, o
	})
	fs, _ := burstFields(t, &rule.Set{Rules: append(append(slices.Clip(cur.Rules), out...), set.Rules[:200]...)}, 8, shortOr(2000, 300))
	want := make([]int32, len(fs))
	for i := range fs {
		want[i] = int32(cur.Decide(&fs[i]))
	}
	checkPatchedLookups(t, "after the replayed fold", c.Table(), cur, fs, want)
}

// replayChanges patches n changes into c from cur, change k made by
// change (with its kind's name), while a fold compiles; then it settles
// and checks that the fold landed with changes replayed and published
// the last set, which it returns with the rules the changes removed or
// changed.
func replayChanges(t *testing.T, c *Classifier, cur *rule.Set, n int, change func(k int, cur *rule.Set) (kind string, next *rule.Set, removed, added []int, out []rule.Rule)) (*rule.Set, []rule.Rule) {
	t.Helper()
	var outs []rule.Rule
	for k := range n {
		kind, next, rem, add, out := change(k, cur)
		if err := c.Patch(cur, next, rem, add); err != nil {
			t.Fatalf("change %d (%s): %v", k, kind, err)
		}
		outs = append(outs, out...)
		cur = next
	}
	c.Settle()
	ps := c.PatchStats()
	t.Logf("%+v", ps)
	if ps.Folds < 1 || ps.FoldsStale != 0 || ps.Replayed == 0 {
		t.Fatalf("%+v: want a fold, landed, with changes replayed", ps)
	}
	if c.Table().Set() != cur {
		t.Fatal("the fold published another set")
	}
	return cur, outs
}

// TestHolesNotMasked: the holes of a table's base set are not masked
// rules (they have no entries to mask): a removal in place on a set with
// many holes masks one rule and starts no fold, where counting the
// holes as masked would fold the whole set on every change.
func TestHolesNotMasked(t *testing.T) {
	base := traffic.RandomRules(191, 2000)
	var dead []int
	for i := range 400 {
		dead = append(dead, 5*i)
	}
	set := &rule.Set{Rules: base.Rules, Holes: (*rule.Holes)(nil).With(dead...)}
	c, err := New(set)
	if err != nil {
		t.Fatal(err)
	}
	cur := set
	for k := range 3 {
		next := &rule.Set{Rules: cur.Rules, Holes: cur.Holes.With(5*k + 1)}
		if err := c.Patch(cur, next, []int{5*k + 1}, nil); err != nil {
			t.Fatal(err)
		}
		cur = next
	}
	c.Settle()
	if ps := c.PatchStats(); ps.Masked != 3 || ps.Folds+ps.FoldsStale+ps.SyncFolds != 0 {
		t.Fatalf("%+v: want 3 masked rules and no fold", ps)
	}
	if got := c.Table().Stats().Rules; got != 1597 {
		t.Fatalf("Stats().Rules %d, want 1597", got)
	}
}
