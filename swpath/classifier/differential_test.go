package classifier

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/scrubd/scrubd/swpath/rule"
	"github.com/scrubd/scrubd/swpath/traffic"
)

// diffSpec is the kind of changes a differential sequence makes
// (TestHolesDifferential: removals and appends in place; and
// TestOrderDifferential: changes in place, moves, too).
type diffSpec struct {
	stream, poolSeed uint64   // the steps' random stream, and the seed of the rules they add
	kinds            []string // the steps' kinds, by index
	compact, pile    int      // the compaction kind, replaced by pile half the time (what piles up between compactions)
	// moves: the steps change rules in place, and the sequence steers
	// packets at the moved rules (orderFrames) and checks that they tell
	// keys from positions.
	moves bool
	step  func(r *rand.Rand, kind int, cur *rule.Set, pool []rule.Rule, prios []uint32, ids *int, gone *[]string) (next *rule.Set, removed, added []int, out []rule.Rule)
}

// diffCase is a sequence of steps over a set, with a lookup mode; prios
// (nil: 0, 5, 10, 20, 30) are the priorities a change in place may give.
type diffCase struct {
	name  string
	mode  int
	set   *rule.Set
	prios []uint32
	steps int
}

// diffStats are what testDiffSequence saw: steps by kind, steps, patches
// in place, tables patched over a base whose set moves rules (orderBase)
// and with base positions of their own (bpos), packets that match a
// hole's rule, packets decided by a moved rule, packets the set with its
// moves undone decides otherwise, and packets whose base rule was masked.
type diffStats struct {
	kinds                            []int
	steps, inPlace, orderBase, bpos  int
	holeHits                         int
	movedHits, byPosition, fallbacks int
}

func (s *diffStats) add(o diffStats) {
	if len(s.kinds) < len(o.kinds) {
		s.kinds = append(s.kinds, make([]int, len(o.kinds)-len(s.kinds))...)
	}
	for i, n := range o.kinds {
		s.kinds[i] += n
	}
	s.steps += o.steps
	s.inPlace += o.inPlace
	s.orderBase += o.orderBase
	s.bpos += o.bpos
	s.holeHits += o.holeHits
	s.movedHits += o.movedHits
	s.byPosition += o.byPosition
	s.fallbacks += o.fallbacks
}

// testDifferential runs the cases' sequences (subtests, by name) with
// folds among the steps, and checks that the steps exercised what they
// test: every kind, patches in place and by the walk, packets matching a
// hole's rule, and with moves, packets that tell keys from positions on
// tables patched in place over bases whose set moved rules and over ones
// that did not, and on tables the walk patched with positions of its own
// (bpos).
func testDifferential(t *testing.T, spec diffSpec, cases []diffCase) (st diffStats) {
	t.Helper()
	defer func(m int) { foldMin = m }(foldMin)
	foldMin = 8 // folds, background and on the caller's path, within a test's steps
	for ci, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			prios := c.prios
			if prios == nil {
				prios = []uint32{0, 5, 10, 20, 30}
			}
			st.add(testDiffSequence(t, spec, uint64(ci), c.mode, c.set, prios, c.steps))
		})
	}
	for k, n := range st.kinds {
		if n == 0 {
			t.Errorf("no step of kind %s", spec.kinds[k])
		}
	}
	// Both ways of patching must be exercised: in place (inplace.go) and
	// the walk that matches the kept rules (patchTable).
	if st.inPlace == 0 || st.inPlace == st.steps {
		t.Errorf("%d of %d patches in place: want some of each", st.inPlace, st.steps)
	}
	if st.holeHits == 0 {
		t.Error("no packet matched a hole's rule: the steps do not test that holes never decide")
	}
	if spec.moves && (st.movedHits < 100 || st.byPosition < 50 || st.orderBase == 0 || st.bpos == 0 || st.fallbacks == 0) {
		t.Errorf("%+v: the steps do not exercise the keys", st)
	}
	return st
}

// testDiffSequence applies steps of spec's kinds from set0 with Patch
// and after each compares:
//   - every lookup (Decide, DecideBurst, AppendMatching, and the workers'
//     bursts, single packets and frames) with the linear reference
//     rule.Set.Decide of the new set, which skips holes and whose result
//     is a position, and with a table compiled fresh from the compacted
//     set (its rule mapped back to its position), on packets steered at
//     the set's rules, its holes' among them, at the rules just removed or
//     changed and, with moves, at the moved ones;
//   - the ranks and positions the patched table gives its rules
//     (checkPatchKeys);
//   - the counters (Snapshot) with a twin given the same sets by Swap,
//     position by position, and with a classifier given the compacted
//     sets by Swap, summed by ID: a hole counts zero and has no ID, and an
//     ID removed and added again starts from zero as Swap says.
func testDiffSequence(t *testing.T, spec diffSpec, seed uint64, mode int, set0 *rule.Set, prios []uint32, steps int) (st diffStats) {
	r := rand.New(rand.NewPCG(seed, spec.stream))
	pool := traffic.RandomRules(seed+spec.poolSeed, 200).Rules
	if len(set0.Rules) > 1000 {
		pool = traffic.ClassBenchRules(seed+spec.poolSeed, 300).Rules
	}
	set0 = &rule.Set{Rules: slices.Grow(slices.Clone(set0.Rules), 16)} // room to append in place
	mk := func() *Classifier {
		c := &Classifier{slots: map[string]slotRef{}, workers: map[*Worker]struct{}{}, mode: mode}
		if err := c.Swap(set0); err != nil {
			t.Fatal(err)
		}
		return c
	}
	pc, sc, kc := mk(), mk(), mk() // patched; swapped the same sets; swapped the compacted sets
	pw, sw, kw := pc.NewWorker(), sc.NewWorker(), kc.NewWorker()
	defer pw.Close()
	defer sw.Close()
	defer kw.Close()
	st.kinds = make([]int, len(spec.kinds))
	st.steps = steps
	cur := set0
	ids := 0
	var gone []string
	for step := range steps {
		kind := r.IntN(len(spec.kinds))
		if kind == spec.compact && r.IntN(2) == 0 {
			kind = spec.pile
		}
		st.kinds[kind]++
		next, removed, added, out := spec.step(r, kind, cur, pool, prios, &ids, &gone)
		if err := pc.Patch(cur, next, removed, added); err != nil {
			t.Fatalf("step %d (%s -%v +%v): %v", step, spec.kinds[kind], removed, added, err)
		}
		comp := next.Compact()
		if err := sc.Swap(next); err != nil {
			t.Fatal(err)
		}
		if err := kc.Swap(comp); err != nil {
			t.Fatal(err)
		}
		if r.IntN(4) == 0 {
			pc.Settle() // a fold in flight lands (or is dropped) before the lookups
		}
		cur = next
		tab := pc.Table()
		name := fmt.Sprintf("step %d (%s -%v +%v, %d holes, %d moved)", step, spec.kinds[kind], removed, added, next.Holes.Count(), next.Order.Moved())
		if tab.Set() != next {
			t.Fatalf("%s: the table's set is not the set patched in", name)
		}
		if got, sw := tab.Stats().Rules, sc.Table().Stats().Rules; got != next.Len() || sw != next.Len() {
			t.Fatalf("%s: Stats().Rules %d patched, %d swapped, want %d", name, got, sw, next.Len())
		}
		p := tab.pt
		if p != nil && p.bkey == nil && p.order.Moved() > 0 {
			st.orderBase++
		}
		if p != nil && p.bpos != nil {
			st.bpos++
		}
		// pos: by rule of the compacted set, its position in next.
		var pos []int32
		next.Ordered(func(i int) { pos = append(pos, int32(i)) })
		back := func(k int32) int32 {
			if k < 0 {
				return -1
			}
			return pos[k]
		}
		var frames [][]byte
		var fs []rule.Fields
		var lens []uint32
		if spec.moves {
			frames, fs, lens = orderFrames(next, out, seed*1000+uint64(step))
		} else {
			frames, fs, lens = stepFrames(next, out, seed*1000+uint64(step))
		}
		want := make([]int32, len(fs))
		ktab := kc.Table()
		var plain *rule.Set // next with its moves undone, if it moves rules
		if next.Order.Moved() > 0 {
			plain = unordered(next)
		}
		for i := range fs {
			want[i] = int32(next.Decide(&fs[i]))
			if got := back(int32(ktab.Decide(&fs[i]))); got != want[i] {
				t.Fatalf("%s: packet %d: the compacted set's table decides rule %d, the reference %d", name, i, got, want[i])
			}
			for h := range next.Rules {
				if !next.Live(h) && next.Rules[h].Match.Matches(&fs[i]) {
					st.holeHits++
					break
				}
			}
			if w := want[i]; w >= 0 && next.Key(int(w)) != int(w) {
				st.movedHits++
			}
			if plain != nil && int32(plain.Decide(&fs[i])) != want[i] {
				st.byPosition++
			}
			if p != nil {
				if bi, _ := p.base.lookup(&fs[i]); bi >= 0 && p.key(bi) == noRank {
					st.fallbacks++
				}
			}
		}
		checkPatchKeys(t, name, tab)
		checkPatchedLookups(t, name, tab, next, fs, want)
		rs := classifyAll([]*Worker{pw, sw, kw}, frames, fs, lens)
		res, sres, kres := rs[0], rs[1], rs[2]
		for i := range fs {
			kres[i].Rule = back(kres[i].Rule)
			if res[i] != wantResult(next, want[i]) || sres[i] != res[i] || kres[i] != res[i] {
				t.Fatalf("%s: packet %d %+v: worker %+v, swapped twin %+v, compacted %+v, reference %d (%v)",
					name, i, &fs[i], res[i], sres[i], kres[i], want[i], ruleStr(next, int(want[i])))
			}
		}
		ps, ks := pc.Snapshot(), kc.Snapshot()
		comparePatchSnapshots(t, name, ps, sc.Snapshot())
		if len(ps.Rules) != len(next.Rules) {
			t.Fatalf("%s: snapshot of %d rules, the set has %d positions", name, len(ps.Rules), len(next.Rules))
		}
		byID := map[string]RuleCount{}
		for i, rc := range ps.Rules {
			if !next.Live(i) {
				if rc != (RuleCount{}) {
					t.Fatalf("%s: the hole at %d (%q) counts %+v", name, i, next.Rules[i].ID, rc)
				}
				continue
			}
			s := byID[rc.ID]
			s.Packets += rc.Packets
			s.Bytes += rc.Bytes
			byID[rc.ID] = s
		}
		kbyID := map[string]RuleCount{}
		for _, rc := range ks.Rules {
			s := kbyID[rc.ID]
			s.Packets += rc.Packets
			s.Bytes += rc.Bytes
			kbyID[rc.ID] = s
		}
		for id, s := range kbyID {
			if byID[id] != s {
				t.Fatalf("%s: rule %q counts %+v, the compacted sets' classifier %+v", name, id, byID[id], s)
			}
		}
		if len(byID) != len(kbyID) || ps.PassPackets != ks.PassPackets || ps.PassBytes != ks.PassBytes {
			t.Fatalf("%s: %d IDs counted, the compacted sets' classifier %d; pass %d/%d, there %d/%d",
				name, len(byID), len(kbyID), ps.PassPackets, ps.PassBytes, ks.PassPackets, ks.PassBytes)
		}
	}
	ps := settlePatches(t, pc, steps)
	st.inPlace = int(ps.InPlace)
	return st
}
