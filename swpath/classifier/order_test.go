package classifier

import (
	"math/rand/v2"
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
