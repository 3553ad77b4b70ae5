package classifier

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"

	"github.com/scrubd/scrubd/swpath/rule"
	"github.com/scrubd/scrubd/swpath/traffic"
)

// moveStep changes k live rules of cur in place, as a placer does
// (rule.Order): a copy of each is appended to cur's array (grown in place
// when it has room), its old position made a hole, and the copy placed at
// the old position's key. A copy is the rule as it was (a move alone), or
// with its priority (one of prios), its action or its match (one of
// pool's) changed. It returns the new set with Patch's indexes (removed:
// the old positions, ascending; added: the copies' positions) and the old
// rules.
func moveStep(r *rand.Rand, cur *rule.Set, pool []rule.Rule, prios []uint32, k int) (next *rule.Set, removed, added []int, out []rule.Rule) {
	next = &rule.Set{Rules: cur.Rules, Holes: cur.Holes, Order: cur.Order}
	for range k {
		if next.Len() == 0 {
			break
		}
		old := r.IntN(len(next.Rules))
		for !next.Live(old) {
			old = r.IntN(len(next.Rules))
		}
		ru := next.Rules[old]
		out = append(out, ru)
		switch r.IntN(4) {
		case 1:
			ru.Priority = prios[r.IntN(len(prios))]
		case 2:
			ru.Action = rule.Accept + rule.Drop - ru.Action
		case 3:
			ru.Match = pool[r.IntN(len(pool))].Match
		}
		next.Rules = append(next.Rules, ru)
		j := len(next.Rules) - 1
		if old < len(cur.Rules) {
			removed = append(removed, old) // else a copy added this step: no longer added
		} else {
			added = slices.DeleteFunc(added, func(a int) bool { return a == old })
		}
		added = append(added, j)
		next.Holes = next.Holes.With(old)
		next.Order = next.Order.With(j, next.Key(old))
	}
	slices.Sort(removed)
	return next, removed, added, out
}

// unordered returns set with its moves undone: each position its own key,
// so that rules decide by position (what a lookup that ranks by position
// decides).
func unordered(set *rule.Set) *rule.Set {
	return &rule.Set{Rules: set.Rules, Holes: set.Holes}
}

// TestOrderCompile compiles sets with rules changed in place (moved: each
// decides at its old position's key, rule.Set.Key) with every lookup (the
// hash tables, the trees, IPv4 and IPv6, small and big trees, the vector
// scan where the build has it) and compares Decide, DecideBurst,
// AppendMatching and a worker's bursts and counters with the linear
// reference rule.Set.Decide of the same set, whose result is the
// deciding rule's position. The packets must tell keys from positions:
// some must be decided otherwise by the same set with its moves undone.
func TestOrderCompile(t *testing.T) {
	cb3k := traffic.ClassBenchRules(211, 3000)
	cases := []struct {
		name  string
		set   *rule.Set
		prios []uint32
		moves int
	}{
		{"random 300", traffic.RandomRules(212, 300), []uint32{0, 10, 20, 30}, 150},
		{"random 40", traffic.RandomRules(216, 40), []uint32{0, 10, 20, 30}, 45},
		{"classbench 3000", cb3k, []uint32{rule.DefaultPriority}, 400},
		{"classbench 3000 ipv6", classBenchV6(cb3k), []uint32{rule.DefaultPriority}, 400},
		{"classbench 12000", traffic.ClassBenchRules(214, shortOr(12000, 9000)), []uint32{rule.DefaultPriority}, 1500},
	}
	for ci, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(uint64(ci), 215))
			set := &rule.Set{Rules: slices.Clone(c.set.Rules)}
			var out []rule.Rule
			// Moves in a few rounds, so that rules are moved again and
			// keys chain (a copy of a copy keeps the first key).
			for range 3 {
				var o []rule.Rule
				set, _, _, o = moveStep(r, set, c.set.Rules, c.prios, c.moves/3)
				out = append(out, o...)
			}
			if set.Order.Moved() == 0 {
				t.Fatal("no rule moved")
			}
			frames, fs, _ := orderFrames(set, out, uint64(ci))
			moved, differ := 0, 0
			plain := unordered(set)
			for i := range fs {
				d := set.Decide(&fs[i])
				if d >= 0 && set.Key(d) != d {
					moved++
				}
				if d != plain.Decide(&fs[i]) {
					differ++
				}
			}
			if moved < 10 || differ < 5 {
				t.Fatalf("%d packets decided by a moved rule, %d decided otherwise by position: the packets do not tell keys from positions", moved, differ)
			}
			t.Logf("%d positions, %d moved, %d packets: %d decided by a moved rule, %d otherwise by position", len(set.Rules), set.Order.Moved(), len(fs), moved, differ)
			checkAgainstReference(t, c.name, set, fs)
			checkBurstCounts(t, c.name, set, fs, frames)
		})
	}
}

// orderFrames is stepFrames with as many packets again steered at the
// moved rules of set (live positions whose key is not their own) and at
// the rules out.
func orderFrames(set *rule.Set, out []rule.Rule, seed uint64) (frames [][]byte, fs []rule.Fields, lens []uint32) {
	frames, _, _ = stepFrames(set, out, seed)
	steer := &rule.Set{Rules: slices.Clone(out)}
	for i := range set.Rules {
		if set.Live(i) && set.Key(i) != i {
			steer.Rules = append(steer.Rules, set.Rules[i])
		}
	}
	if len(steer.Rules) > 0 {
		frames = append(frames, traffic.NewGenerator(traffic.Config{Seed: seed + 1, Rules: steer, RuleFraction: 0.9, Odd: true,
			Sizes: traffic.Sizes{Min: 64, Max: 1518}}).Frames(len(frames))...)
	}
	fs = parseAll(frames)
	lens = make([]uint32, len(fs))
	for i := range frames {
		lens[i] = uint32(len(frames[i]))
	}
	return frames, fs, lens
}

// Kinds of orderStep.
const (
	orderMove    = iota // changes in place (moves), with removals in place and appends or not, in one round
	orderRemove         // removals in place
	orderAppend         // appends in place
	orderCopy           // moves and appends to a copy of the array: the walk, on sets that both move rules
	orderCompact        // a new array of the live rules in decision order, changed as patchStep does
	orderKinds
)

var orderKindName = [orderKinds]string{"move", "remove", "append", "copy", "compact"}

// orderStep derives a new set from cur by a change of the given kind, the
// kinds a placer that changes rules in place makes, and returns it with
// Patch's indexes and the rules removed or changed.
func orderStep(r *rand.Rand, kind int, cur *rule.Set, pool []rule.Rule, prios []uint32, ids *int, gone *[]string) (next *rule.Set, removed, added []int, out []rule.Rule) {
	switch kind {
	case orderRemove:
		return holeStep(r, holeRemove, cur, pool, ids, gone)
	case orderAppend:
		next = &rule.Set{Rules: cur.Rules, Holes: cur.Holes, Order: cur.Order}
		for range 1 + r.IntN(3) {
			added = append(added, len(next.Rules))
			next.Rules = append(next.Rules, holeNewRule(r, pool, ids, gone))
		}
		return next, nil, added, nil
	case orderMove, orderCopy:
		base := cur
		if kind == orderCopy {
			base = &rule.Set{Rules: slices.Clone(cur.Rules), Holes: cur.Holes, Order: cur.Order}
		}
		if r.IntN(2) == 0 {
			removed, out = holeRemovals(r, base, gone)
			base = &rule.Set{Rules: base.Rules, Holes: base.Holes.With(removed...), Order: base.Order}
		}
		if r.IntN(2) == 0 {
			base = &rule.Set{Rules: base.Rules, Holes: base.Holes, Order: base.Order}
			added = append(added, len(base.Rules))
			base.Rules = append(base.Rules, holeNewRule(r, pool, ids, gone))
		}
		next, rem, add, o := moveStep(r, base, pool, prios, 1+r.IntN(3))
		// moveStep's removed are positions of base, which are cur's (or a
		// copy's at the same positions), but for an append of this step.
		for _, i := range rem {
			if i < len(cur.Rules) {
				removed = append(removed, i)
			} else {
				added = slices.DeleteFunc(added, func(a int) bool { return a == i })
			}
		}
		slices.Sort(removed)
		added = append(added, add...)
		slices.Sort(added)
		return next, removed, slices.Compact(added), append(out, o...)
	}
	return compactStep(r, cur, pool, ids, gone)
}

// TestOrderDifferential applies random sequences of the changes a placer
// that changes rules in place makes (moves: a copy appended, the old
// position a hole, the copy at its key; removals in place; appends; moves
// to a copy of the array; compactions with changes; mixed in one round)
// with Patch, folds among them, and after each compares every lookup
// (Decide, DecideBurst, AppendMatching, and the workers' bursts, single
// packets and frames) with the linear reference rule.Set.Decide of the
// new set, whose result is a position, and with a table compiled fresh
// from the compacted set (its rule mapped back to its position), on
// packets steered at the set's rules, the moved ones and the ones just
// removed or changed; and the counters with a twin given the same sets by
// Swap, position by position, and with one given the compacted sets, by
// ID.
func TestOrderDifferential(t *testing.T) {
	order := diffSpec{
		stream: 227, poolSeed: 3000, kinds: orderKindName[:], compact: orderCompact, pile: orderMove, // moves pile up between compactions
		moves: true, step: orderStep,
	}
	st := testDifferential(t, order, []diffCase{
		{"random 300 auto", treesAuto, traffic.RandomRules(221, 300), nil, 80},
		{"random 300 trees", treesForce, traffic.RandomRules(222, 300), nil, 80},
		{"random 300 hash tables", treesOff, traffic.RandomRules(223, 300), nil, 80},
		{"random 40 hash tables", treesOff, traffic.RandomRules(224, 40), nil, 60},
		{"classbench 2000 auto", treesAuto, traffic.ClassBenchRules(225, 2000), []uint32{rule.DefaultPriority}, 30},
		{"classbench 2000 ipv6", treesAuto, classBenchV6(traffic.ClassBenchRules(226, 2000)), []uint32{rule.DefaultPriority}, 30},
	})
	t.Logf("%+v", st)
}

// checkPatchKeys checks the ranks and positions a patched table gives its
// base and overlay rules against its set: each live rule of the set is
// one rule of the base or the overlay, at its position, ranked
// priority<<32 | its key (rule.Set.Key), and the overlay's rules are in
// key order.
func checkPatchKeys(t *testing.T, name string, tab *Table) {
	t.Helper()
	p, set := tab.pt, tab.Set()
	if p == nil {
		return
	}
	rank := func(i int) uint64 { return uint64(set.Rules[i].Priority)<<32 | uint64(set.Key(i)) }
	seen := make([]bool, len(set.Rules))
	see := func(what string, i int, k uint64, pos int32) {
		if pos < 0 || int(pos) >= len(set.Rules) || !set.Live(int(pos)) || seen[pos] || k != rank(int(pos)) {
			t.Fatalf("%s: %s %d: rank %#x at position %d (live and unseen %v; bkey %v bpos %v moved %d), want its rank %#x", name, what, i, k, pos,
				pos >= 0 && int(pos) < len(set.Rules) && set.Live(int(pos)) && !seen[pos], p.bkey != nil, p.bpos != nil, p.order.Moved(), rank(max(0, min(int(pos), len(set.Rules)-1))))
		}
		seen[pos] = true
	}
	for bi := range p.nbase() {
		if p.bkey == nil && !set.Live(bi) {
			continue // a hole of the base's set too, which has no entry; or masked
		}
		if k, pos := p.rankPos(int32(bi)); k != noRank {
			see("base rule", bi, k, pos)
		}
	}
	for oi, k := range p.okey {
		see("overlay rule", oi, k, p.opos[oi])
		if oi > 0 && uint32(k) <= uint32(p.okey[oi-1]) {
			t.Fatalf("%s: overlay rule %d (rank %#x) comes after %#x: not in key order", name, oi, k, p.okey[oi-1])
		}
	}
	for i := range set.Rules {
		if set.Live(i) && !seen[i] {
			t.Fatalf("%s: rule %d (%q) is no rule of the base or the overlay", name, i, set.Rules[i].ID)
		}
	}
}

// TestOrderPatchScenario: rules of one priority whose order alone decides,
// changed in place so that a moved rule sits past another rule of the
// overlay it must beat by key: over a base compiled from a set that moves
// rules (its moved rule's rank is its key, not its position), then over
// the walk to a copy of the array that moves rules (bkey holds keys, bpos
// positions), then with a removal in place of a rule below (the holes mask
// by position: the moved rules' keys are holes). Each table must decide
// the rule Set.Decide does, named here.
func TestOrderPatchScenario(t *testing.T) {
	var rules []rule.Rule
	for i := range 10 {
		dst := netip.MustParsePrefix("10.0.0.0/8")
		if i < 2 {
			dst = netip.MustParsePrefix("192.168.0.0/16")
		}
		rules = append(rules, rule.Rule{ID: fmt.Sprintf("r%d", i), Priority: 7, Action: rule.Drop, Match: rule.Match{Dst: dst}})
	}
	f := rule.Fields{Family: rule.IPv4, Proto: rule.ProtoUDP, L4: true, Src: rule.AddrFrom(netip.MustParseAddr("1.2.3.4")),
		Dst: rule.AddrFrom(netip.MustParseAddr("10.1.2.3")), SrcPort: 1000, DstPort: 53, Length: 100}
	move := func(s *rule.Set, old int) *rule.Set {
		n := &rule.Set{Rules: append(s.Rules, s.Rules[old]), Holes: s.Holes.With(old), Order: s.Order}
		n.Order = n.Order.With(len(n.Rules)-1, s.Key(old))
		return n
	}
	for _, mode := range []int{treesAuto, treesOff} {
		c := &Classifier{slots: map[string]slotRef{}, workers: map[*Worker]struct{}{}, mode: mode}
		check := func(what string, set *rule.Set, want int) {
			t.Helper()
			if d := set.Decide(&f); d != want {
				t.Fatalf("%s: the reference decides %d, the scenario says %d", what, d, want)
			}
			tab := c.Table()
			if tab.Set() != set {
				t.Fatalf("%s: not the current set", what)
			}
			checkPatchedLookups(t, fmt.Sprintf("mode %d: %s", mode, what), tab, set, []rule.Fields{f}, []int32{int32(want)})
			checkPatchKeys(t, what, tab)
		}
		patch := func(what string, from, to *rule.Set, removed, added []int, want int) {
			t.Helper()
			if err := c.Patch(from, to, removed, added); err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			check(what, to, want)
		}
		s0 := &rule.Set{Rules: slices.Grow(slices.Clone(rules), 16)}
		s1 := move(s0, 2) // r2 at 10, key 2
		if err := c.Swap(s1); err != nil {
			t.Fatal(err)
		}
		check("swapped", s1, 10)
		s2 := move(s1, 5)
		patch("r5 moved to 11 over a base that moved r2", s1, s2, []int{5}, []int{11}, 10)
		s3 := move(&rule.Set{Rules: slices.Grow(slices.Clone(s2.Rules), 16), Holes: s2.Holes, Order: s2.Order}, 6)
		patch("a copy, r6 moved to 12", s2, s3, []int{6}, []int{12}, 10)
		s4 := &rule.Set{Rules: s3.Rules, Holes: s3.Holes.With(10), Order: s3.Order}
		patch("r2 removed in place: r3 at its own key", s3, s4, []int{10}, nil, 3)
		s5 := &rule.Set{Rules: s4.Rules, Holes: s4.Holes.With(3), Order: s4.Order}
		patch("r3 removed in place: r4 before r5's copy", s4, s5, []int{3}, nil, 4)
		s6 := &rule.Set{Rules: s5.Rules, Holes: s5.Holes.With(4), Order: s5.Order}
		patch("r4 removed in place: r5's copy", s5, s6, []int{4}, nil, 11)
		s7 := move(s6, 11)
		patch("r5's copy moved again, to 13 (key 5)", s6, s7, []int{11}, []int{13}, 13)
		if p := c.Table().pt; p == nil || p.bpos == nil {
			t.Fatalf("mode %d: the last table is not patched over the walk's positions", mode)
		}
	}
}

// TestOrderFoldReplays: changes in place (moves), removals, appends, a
// move to a copy and a compaction, patched in while a fold compiles a set
// that moves rules, are replayed on the folded table (composed into one
// change, paired in decision order), which lands and decides as the
// reference.
func TestOrderFoldReplays(t *testing.T) {
	base := traffic.ClassBenchRules(241, 20000)
	r := rand.New(rand.NewPCG(241, 2))
	pool := traffic.ClassBenchRules(242, 100).Rules
	prios := []uint32{rule.DefaultPriority}
	set := &rule.Set{Rules: slices.Grow(slices.Clone(base.Rules), 256)}
	set, _, _, _ = moveStep(r, set, pool, prios, 50)
	c, err := New(set)
	if err != nil {
		t.Fatal(err)
	}
	// Removals in place past the masked bound start a fold (of a set that
	// moves rules; compiling 20k rules takes far longer than the patches
	// below).
	var removed []int
	for i := range 20000 / 16 * 2 {
		if at := 7*i + 3; set.Live(at) {
			removed = append(removed, at)
		}
	}
	cur := &rule.Set{Rules: set.Rules, Holes: set.Holes.With(removed...), Order: set.Order}
	if err := c.Patch(set, cur, removed, nil); err != nil {
		t.Fatal(err)
	}
	ids := 0
	var goneIDs []string
	cur, out := replayChanges(t, c, cur, 30, func(k int, cur *rule.Set) (string, *rule.Set, []int, []int, []rule.Rule) {
		kind := []int{orderMove, orderRemove, orderAppend, orderMove}[k%4]
		switch k {
		case 5:
			kind = orderCompact
		case 9, 21:
			kind = orderCopy
		}
		next, rem, add, o := orderStep(r, kind, cur, pool, prios, &ids, &goneIDs)
		return orderKindName[kind], next, rem, add, o
	})
	if cur.Order.Moved() == 0 {
		t.Fatal("the last set moves no rule")
	}
	_, fs, _ := orderFrames(cur, append(out, set.Rules[:200]...), 243)
	want := make([]int32, len(fs))
	moved := 0
	for i := range fs {
		want[i] = int32(cur.Decide(&fs[i]))
		if w := int(want[i]); w >= 0 && cur.Key(w) != w {
			moved++
		}
	}
	if moved < 4 {
		t.Fatalf("%d packets decided by a moved rule", moved)
	}
	checkPatchKeys(t, "after the replayed fold", c.Table())
	checkPatchedLookups(t, "after the replayed fold", c.Table(), cur, fs, want)
}
