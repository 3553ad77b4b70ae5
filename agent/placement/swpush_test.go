package placement

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/scrubd/scrubd/agent/protect"
	"github.com/scrubd/scrubd/agent/store"
	"github.com/scrubd/scrubd/swpath/rule"
)

// applyChange is dataplane.SWPatcher's contract written out: to is from
// without the rules at removed, with the rules at added put in. It
// returns what the change says to is, or an error when it does not
// describe from and to.
func applyChange(from, to *rule.Set, removed, added []int) error {
	for k := range removed {
		if removed[k] < 0 || removed[k] >= len(from.Rules) || (k > 0 && removed[k] <= removed[k-1]) || !from.Live(removed[k]) {
			return fmt.Errorf("removed %v: not ascending indexes of the %d rules (holes aside)", removed, len(from.Rules))
		}
	}
	for k := range added {
		if added[k] < 0 || added[k] >= len(to.Rules) || (k > 0 && added[k] <= added[k-1]) || !to.Live(added[k]) {
			return fmt.Errorf("added %v: not ascending indexes of the %d rules (holes aside)", added, len(to.Rules))
		}
	}
	var kept []rule.Rule
	for i := range from.Rules {
		if from.Live(i) && !slices.Contains(removed, i) {
			kept = append(kept, from.Rules[i])
		}
	}
	var rest []rule.Rule
	for j := range to.Rules {
		if to.Live(j) && !slices.Contains(added, j) {
			rest = append(rest, to.Rules[j])
		}
	}
	if !sameRules(kept, rest) {
		return fmt.Errorf("-%v +%v: the rules kept are not the rules of the new set not added", removed, added)
	}
	return nil
}

func ids(rs ...string) []rule.Rule {
	var out []rule.Rule
	for _, id := range rs {
		out = append(out, drop(id, "192.0.2.0/24"))
	}
	return out
}

// swDiff on hand-made pairs of sets: the least change where a run of
// rules was removed or added within the lookahead, a changed rule as
// removed and added, and a valid (not least) change where a rule moved
// far.
func TestSWDiff(t *testing.T) {
	changed := ids("a", "b", "c")
	changed[1].Priority = 7
	far := ids("b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l", "a")
	for _, x := range []struct {
		name              string
		from, to          []rule.Rule
		removed, added    []int
		limit             int
		ok                bool
		checkLeast, anyOK bool
	}{
		{"same", ids("a", "b"), ids("a", "b"), nil, nil, 10, true, true, false},
		{"append", ids("a", "b"), ids("a", "b", "c"), nil, []int{2}, 10, true, true, false},
		{"insert", ids("a", "b", "c"), ids("a", "x", "y", "b", "c"), nil, []int{1, 2}, 10, true, true, false},
		{"remove run", ids("a", "b", "c", "d", "e"), ids("a", "e"), []int{1, 2, 3}, nil, 10, true, true, false},
		{"remove last", ids("a", "b", "c"), ids("a", "b"), []int{2}, nil, 10, true, true, false},
		{"changed", ids("a", "b", "c"), changed, []int{1}, []int{1}, 10, true, true, false},
		{"replaced", ids("a", "b", "c"), ids("a", "x", "c"), []int{1}, []int{1}, 10, true, true, false},
		{"moved far", ids("a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l"), far, nil, nil, 100, true, false, true},
		{"over the limit", ids("a", "b", "c", "d"), ids("w", "x", "y", "z"), nil, nil, 3, false, false, false},
	} {
		removed, added, ok := swDiff(&rule.Set{Rules: x.from}, &rule.Set{Rules: x.to}, x.limit)
		if ok != x.ok {
			t.Errorf("%s: ok %v, want %v", x.name, ok, x.ok)
			continue
		}
		if !ok {
			continue
		}
		if err := applyChange(&rule.Set{Rules: x.from}, &rule.Set{Rules: x.to}, removed, added); err != nil {
			t.Errorf("%s: %v", x.name, err)
		}
		if x.checkLeast && (!slices.Equal(removed, x.removed) || !slices.Equal(added, x.added)) {
			t.Errorf("%s: -%v +%v, want -%v +%v", x.name, removed, added, x.removed, x.added)
		}
	}
	// Random edits: every change swDiff returns describes the two sets.
	rng := rand.New(rand.NewPCG(3, 4))
	for n := range 500 {
		from := ids()
		for i := range 1 + rng.IntN(40) {
			from = append(from, drop(fmt.Sprintf("r%d", i), "192.0.2.0/24"))
		}
		to := slices.Clone(from)
		for range 1 + rng.IntN(5) {
			switch k := rng.IntN(4); {
			case k == 0 && len(to) > 0:
				i := rng.IntN(len(to))
				to = slices.Delete(to, i, i+1)
			case k == 1:
				to = slices.Insert(to, rng.IntN(len(to)+1), drop(fmt.Sprintf("n%d", rng.IntN(1000)), "198.51.100.0/24"))
			case k == 2 && len(to) > 0:
				to[rng.IntN(len(to))].Priority++
			case len(to) > 1:
				i, j := rng.IntN(len(to)), rng.IntN(len(to))
				r := to[i]
				to = slices.Insert(slices.Delete(to, i, i+1), min(j, len(to)-1), r)
			}
		}
		// Holes: some of from's rules are holes already, some of to's too
		// (where to is a copy, any; where it is from's array, those of from
		// and more, rules perhaps appended in place).
		fs, ts := &rule.Set{Rules: from}, &rule.Set{Rules: to}
		if rng.IntN(2) == 0 && len(from) > 0 {
			fs.Holes = fs.Holes.With(rng.IntN(len(from)))
			if rng.IntN(2) == 0 {
				ts = &rule.Set{Rules: from[:len(from):len(from)], Holes: fs.Holes.With(rng.IntN(len(from)))}
				if rng.IntN(2) == 0 {
					grown := append(slices.Clone(from), drop(fmt.Sprintf("a%d", n), "198.51.100.0/24"))
					fs.Rules, ts.Rules = grown[:len(from)], grown
				}
			} else if len(to) > 0 {
				ts.Holes = ts.Holes.With(rng.IntN(len(to)))
			}
		}
		removed, added, ok := swDiff(fs, ts, 1000)
		if !ok {
			t.Fatalf("edit %d: refused under a limit of 1000", n)
		}
		if err := applyChange(fs, ts, removed, added); err != nil {
			t.Fatalf("edit %d: %v", n, err)
		}
	}
}

// swDiff of a set and the same array with more holes and rules appended
// in place (what a removal and an add leave) reads the change from the
// holes: the new holes removed, the appended rules added, and nothing else.
func TestSWDiffHoles(t *testing.T) {
	arr := ids("a", "b", "c", "d", "e", "f")
	from := &rule.Set{Rules: arr[:4:4], Holes: (*rule.Holes)(nil).With(1)}
	to := &rule.Set{Rules: arr, Holes: from.Holes.With(2, 4)}
	removed, added, ok := swDiff(from, to, 10)
	if !ok || !slices.Equal(removed, []int{2}) || !slices.Equal(added, []int{5}) {
		t.Fatalf("-%v +%v (ok %v), want -[2] +[5]", removed, added, ok)
	}
	if err := applyChange(from, to, removed, added); err != nil {
		t.Fatal(err)
	}
	// Compacted into a new array: the walk skips from's holes.
	compact := to.Compact()
	removed, added, ok = swDiff(to, compact, 10)
	if !ok || len(removed)+len(added) != 0 {
		t.Fatalf("compaction: -%v +%v (ok %v), want no change", removed, added, ok)
	}
	if !sameSet(to, compact) || sameSet(from, to) {
		t.Fatal("sameSet does not tell holes from rules")
	}
}

// patchSW is the fake software path taking changes: it checks that each
// change describes the set it holds and the new one (applyChange), then
// holds the new set, as SetRules would.
type patchSW struct {
	*fakeSW
	patches, patched int // changes taken, and rules they listed
}

func (s *patchSW) PatchRules(from, to *rule.Set, removed, added []int) error {
	if from != s.set {
		s.w.t.Fatalf("a change from a set the engine does not hold")
	}
	if err := applyChange(from, to, removed, added); err != nil {
		s.w.t.Fatalf("PatchRules: %v", err)
	}
	s.patches++
	s.patched += len(removed) + len(added)
	s.set = to
	s.w.check(fmt.Sprintf("sw=%d (-%d +%d)", to.Len(), len(removed), len(added)))
	return nil
}

// A placer whose software path takes changes hands it the same sets, round
// by round, as a twin whose path takes whole sets, through random puts,
// deletes, transactions and file replaces read as store deltas (with the
// backstop and without), and the changes it hands are the few rules each
// round touched.
func TestPushSWPatches(t *testing.T) {
	for _, noBackstop := range []bool{false, true} {
		t.Run(fmt.Sprintf("nobackstop=%v", noBackstop), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(11, 12))
			pl := &protect.List{}
			pl.Entries = append(pl.Entries, protect.Entry{Rule: rule.Rule{ID: "protect-0", Priority: 1,
				Action: rule.Accept, Match: rule.Match{Dst: netip.MustParsePrefix("203.0.113.7/32")}}})
			wi, wt := newWorld(t, 20), newWorld(t, 20) // hardware too small: some rules stay in software
			st := store.New(pl, func() time.Time { return wi.clock })
			c := cfg()
			c.NoBackstop = noBackstop
			psw := &patchSW{fakeSW: wi.sw}
			inc := New(c, orderHW{wi.hw}, psw, quiet(), wi.now)
			twin := New(c, orderHW{wt.hw}, wt.sw, quiet(), wt.now)
			ctx := context.Background()
			// A base of rules the random ones do not touch, so that a
			// change is a few rules of many.
			var base []rule.Rule
			for i := range 200 {
				base = append(base, drop(fmt.Sprintf("base%d", i), fmt.Sprintf("10.%d.%d.0/24", i/256, i%256)))
			}
			if _, err := st.Replace("file:base", base); err != nil {
				t.Fatal(err)
			}
			apply := func() {
				eff := st.Effective()
				wi.want(eff.Set.Rules...)
				wt.want(eff.Set.Rules...)
				inc.ApplyStore(ctx, st)
				twin.ApplyStore(ctx, st)
			}
			apply()
			rounds := 0
			for step := range 300 {
				wi.clock = wi.clock.Add(time.Second)
				wt.clock = wi.clock
				switch k := rng.IntN(10); {
				case k < 5:
					_, _ = st.Put("api", randomRule(rng, false))
				case k < 8:
					_ = st.Delete("api", fmt.Sprintf("r%d", rng.IntN(48)))
				default:
					st.Update(func(tx *store.Tx) {
						for range 1 + rng.IntN(4) {
							if rng.IntN(3) == 0 {
								_ = tx.Delete("api", fmt.Sprintf("r%d", rng.IntN(48)))
								continue
							}
							_, _ = tx.Put("api", randomRule(rng, false))
						}
					})
				}
				before := psw.patches
				apply()
				if psw.patches > before {
					rounds++
				}
				if !sameSet(psw.set, wt.sw.set) {
					t.Fatalf("step %d: the patched engine holds %d rules, the twin's %d, or others", step, psw.set.Len(), wt.sw.set.Len())
				}
				// With the backstop every rule is in software: the engine
				// holds the store's effective set, rule for rule (not the
				// holes the placer left).
				if eff := st.Effective(); !noBackstop && !sameSet(psw.set, &eff.Set) {
					t.Fatalf("step %d: the engine holds %d rules, the store %d, or others", step, psw.set.Len(), len(eff.Set.Rules))
				}
			}
			// Most rounds change something; each change is a few rules.
			if rounds < 100 || psw.patched > 8*psw.patches {
				t.Fatalf("%d rounds of 300 patched, %d changes listing %d rules (placer counted %d)", rounds, psw.patches, psw.patched, inc.swPatches)
			}
			if inc.swPatches != uint64(psw.patches) {
				t.Fatalf("placer counted %d patches, engine %d", inc.swPatches, psw.patches)
			}
			t.Logf("%d rounds patched, %d changes, %d rules listed", rounds, psw.patches, psw.patched)
		})
	}
}
