package classifier

import (
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"

	"github.com/scrubd/scrubd/swpath/rule"
	"github.com/scrubd/scrubd/swpath/traffic"
)

// removeInPlaceBytes makes k removals in place, one rule at a time, on a
// ClassBench-style set of n rules (the masked rules stay under the fold
// bound), and returns the median of the bytes Patch allocated for each
// (the new sets and their holes, the caller's, are made before; the
// median leaves out what the runtime may allocate meanwhile).
func removeInPlaceBytes(t *testing.T, n, k int) uint64 {
	set := traffic.ClassBenchRules(uint64(n), n)
	c, err := New(set)
	if err != nil {
		t.Fatal(err)
	}
	sets := []*rule.Set{set}
	var removed [][]int
	for i := range k {
		at := (i*7919 + n/3) % n
		cur := sets[len(sets)-1]
		sets = append(sets, &rule.Set{Rules: cur.Rules, Holes: cur.Holes.With(at)})
		removed = append(removed, []int{at})
	}
	var ms runtime.MemStats
	bytes := make([]uint64, k)
	runtime.GC()
	for i := range k {
		runtime.ReadMemStats(&ms)
		a0 := ms.TotalAlloc
		if err := c.Patch(sets[i], sets[i+1], removed[i], nil); err != nil {
			t.Fatal(err)
		}
		runtime.ReadMemStats(&ms)
		bytes[i] = ms.TotalAlloc - a0
	}
	c.Settle()
	if ps := c.PatchStats(); ps.InPlace != uint64(k) || ps.Folds+ps.FoldsStale+ps.SyncFolds != 0 || ps.Masked != k {
		t.Fatalf("n=%d: %+v: want %d removals in place, masked, and no fold", n, ps, k)
	}
	slices.Sort(bytes)
	return bytes[k/2]
}

// TestRemoveInPlaceCost: a removal in place allocates a few small
// objects (the new table's header and its patch), whatever the set's
// size: no array by rule (the counter slots, the base keys), which cost
// 12 bytes a rule (at 100k rules 1.2 MB a removal). At 10k and at 100k
// rules, 32 removals each: the bytes of a removal (the median) may not
// grow with the rules, and stay under 2 KiB.
func TestRemoveInPlaceCost(t *testing.T) {
	small, big := 10000, 100000
	if testing.Short() {
		small, big = 2000, 20000
	}
	const k = 32
	bs, bb := removeInPlaceBytes(t, small, k), removeInPlaceBytes(t, big, k)
	t.Logf("bytes a removal in place (median of %d): %d at %d rules, %d at %d", k, bs, small, bb, big)
	if bb > bs+64 || bb > 2048 {
		t.Errorf("a removal in place allocates %d bytes at %d rules, %d at %d: want no growth with the rules, under 2 KiB",
			bs, small, bb, big)
	}
}

// TestRemoveInPlaceLookups: removals in place masked by the set's holes,
// over a table patched in place only (its base rules keep their indexes:
// no base keys) and over one patched by a copy first (base keys, then the
// holes), decide as the reference on packets steered at the removed
// rules, take the masked-rule path, and allocate nothing on any lookup
// API.
func TestRemoveInPlaceLookups(t *testing.T) {
	set := traffic.RandomRules(201, 400)
	extra := traffic.RandomRules(202, 1).Rules[0]
	extra.ID = "extra"
	for _, how := range []string{"in place only", "after a copy"} {
		t.Run(how, func(t *testing.T) {
			c, err := New(set)
			if err != nil {
				t.Fatal(err)
			}
			cur := set
			if how == "after a copy" {
				// A rule added in the middle of a new array: the walk
				// that matches the kept rules, which makes base keys.
				next := &rule.Set{Rules: append(append(append([]rule.Rule{}, set.Rules[:200]...), extra), set.Rules[200:]...)}
				if err := c.Patch(cur, next, nil, []int{200}); err != nil {
					t.Fatal(err)
				}
				cur = next
			}
			for k := range 40 {
				at := 10*k + 7
				next := &rule.Set{Rules: cur.Rules, Holes: cur.Holes.With(at)}
				if err := c.Patch(cur, next, []int{at}, nil); err != nil {
					t.Fatal(err)
				}
				cur = next
			}
			c.Settle()
			p := c.Table().pt
			if ps := c.PatchStats(); p == nil || ps.InPlace != 40 || ps.Masked != 40 || ps.Folds+ps.FoldsStale+ps.SyncFolds != 0 {
				t.Fatalf("%+v: want 40 removals in place, masked, and no fold", ps)
			}
			if (p.bkey == nil) != (how == "in place only") || p.holes != cur.Holes {
				t.Fatalf("base keys %v, holes the set's %v: not the patch the test means", p.bkey != nil, p.holes == cur.Holes)
			}
			steer := &rule.Set{Rules: set.Rules}
			fs, lens := burstFields(t, steer, 203, 1024)
			want := make([]int32, len(fs))
			masked := 0
			for i := range fs {
				want[i] = int32(cur.Decide(&fs[i]))
				if bi, _ := p.base.lookup(&fs[i]); bi >= 0 && p.key(bi) == noRank {
					masked++
				}
			}
			if masked < 10 {
				t.Fatalf("%d packets take the masked-rule path: want 10 or more", masked)
			}
			checkPatchedLookups(t, how, c.Table(), cur, fs, want)
			frames := traffic.NewGenerator(traffic.Config{Seed: 204, Rules: steer, RuleFraction: 0.8}).Frames(256)
			checkNoAllocs(t, c, fs, lens, frames, true)
		})
	}
}

// changeInPlaceBytes makes k changes in place (rule.Order: a copy of the
// rule appended, its old position a hole, the copy at the old key), one
// rule at a time, on a ClassBench-style set of n rules, and returns the
// median of the bytes Patch allocated for each less those of making its
// overlay (the changed rules so far, copied and compiled alone: what the
// change costs whatever the set's size), and the median of the overlay's.
func changeInPlaceBytes(t *testing.T, n, k int) (patch, overlay uint64) {
	base := traffic.ClassBenchRules(uint64(n), n)
	set := &rule.Set{Rules: slices.Grow(slices.Clone(base.Rules), k)}
	c, err := New(set)
	if err != nil {
		t.Fatal(err)
	}
	sets := []*rule.Set{set}
	var removed, added [][]int
	for i := range k {
		at := (i*7919 + n/3) % n
		cur := sets[len(sets)-1]
		ru := cur.Rules[at]
		ru.Match.DstPort = rule.Ranges{{Lo: 53, Hi: 53}} // its content changed
		next := &rule.Set{Rules: append(cur.Rules, ru), Holes: cur.Holes.With(at)}
		next.Order = cur.Order.With(len(next.Rules)-1, cur.Key(at))
		sets = append(sets, next)
		removed, added = append(removed, []int{at}), append(added, []int{len(next.Rules) - 1})
	}
	slot0, prio0 := &c.Table().slot[0], &c.Table().prio[0]
	var ms runtime.MemStats
	bytes, ovBytes := make([]uint64, k), make([]uint64, k)
	runtime.GC()
	for i := range k {
		runtime.ReadMemStats(&ms)
		a0 := ms.TotalAlloc
		if err := c.Patch(sets[i], sets[i+1], removed[i], added[i]); err != nil {
			t.Fatal(err)
		}
		runtime.ReadMemStats(&ms)
		pb := ms.TotalAlloc - a0
		ovIdx := make([]int, 0, len(c.Table().pt.opos))
		for _, j := range c.Table().pt.opos {
			ovIdx = append(ovIdx, int(j))
		}
		runtime.ReadMemStats(&ms)
		a1 := ms.TotalAlloc
		if _, _, _, err := c.overlay(sets[i+1], ovIdx); err != nil {
			t.Fatal(err)
		}
		runtime.ReadMemStats(&ms)
		ovBytes[i] = ms.TotalAlloc - a1
		bytes[i] = pb - min(pb, ovBytes[i])
	}
	c.Settle()
	if ps := c.PatchStats(); ps.InPlace != uint64(k) || ps.Folds+ps.FoldsStale+ps.SyncFolds != 0 || ps.Masked != k || ps.Overlay != k {
		t.Fatalf("n=%d: %+v: want %d changes in place, masked, in the overlay, and no fold", n, ps, k)
	}
	if tab := c.Table(); &tab.slot[0] != slot0 || &tab.prio[0] != prio0 || len(tab.slot) != len(sets[k].Rules) {
		t.Fatalf("n=%d: %d counter slots for %d positions, the array Swap made %v, its priorities' %v", n, len(tab.slot), len(sets[k].Rules),
			&tab.slot[0] == slot0, &tab.prio[0] == prio0)
	}
	slices.Sort(bytes)
	slices.Sort(ovBytes)
	return bytes[k/2], ovBytes[k/2]
}

// TestChangeInPlaceCost: a change in place (a rule's copy appended at its
// old key) allocates, besides its overlay's compile, a few small objects
// whatever the set's size: no array by rule (the counter slots, the
// priorities and verdicts grow into their room, claimed, not copied),
// which cost 9 bytes a rule (at 100k rules 900 KB a change). At 10k and
// 100k rules, 32 changes each: the bytes of a change (the median, its
// overlay's compile less) may not grow with the rules, and stay under 4
// KiB.
func TestChangeInPlaceCost(t *testing.T) {
	small, big := 10000, 100000
	if testing.Short() {
		small, big = 2000, 20000
	}
	const k = 32
	bs, os := changeInPlaceBytes(t, small, k)
	bb, ob := changeInPlaceBytes(t, big, k)
	t.Logf("bytes a change in place (median of %d), its overlay's compile less: %d at %d rules, %d at %d (the overlay's compile: %d, %d)",
		k, bs, small, bb, big, os, ob)
	if bb > bs+256 || bb > 4096 {
		t.Errorf("a change in place allocates %d bytes at %d rules, %d at %d, its overlay's compile less: want no growth with the rules, under 4 KiB",
			bs, small, bb, big)
	}
}

// TestAppendInPlaceClaims: two changes in place made from the same table
// (a patch that loses the race to publish, or a fold's replay, beside the
// one published) both append to the set's array; only the first may
// write into the room past the table's arrays by rule index, which the
// second must copy, so that the first's counter slots, priorities and
// verdicts of its appended rules stay its own.
func TestAppendInPlaceClaims(t *testing.T) {
	base := traffic.RandomRules(231, 50)
	set := &rule.Set{Rules: slices.Grow(slices.Clone(base.Rules), 8)}
	c, err := New(set)
	if err != nil {
		t.Fatal(err)
	}
	cur := c.Table()
	mk := func(prio uint32, act rule.Action) *rule.Set {
		ru := base.Rules[7]
		ru.Priority, ru.Action = prio, act
		next := &rule.Set{Rules: append(set.Rules, ru), Holes: set.Holes.With(7)}
		next.Order = set.Order.With(50, 7)
		return next
	}
	ta, _, err := c.patchAny(cur, mk(3, rule.Accept), []int{7}, []int{50})
	if err != nil {
		t.Fatal(err)
	}
	ta.slot[50] = 12345 // as Patch fills it
	// The second set appends over the first's rule (the same array): the
	// first table read it already.
	tb, _, err := c.patchAny(cur, mk(4, rule.Drop), []int{7}, []int{50})
	if err != nil {
		t.Fatal(err)
	}
	tb.slot[50] = 777
	if ta.slot[50] != 12345 || ta.prio[50] != 3 || ta.verdict[50] != Accept {
		t.Fatalf("the first table's appended rule: slot %d, priority %d, verdict %v; the second wrote over them", ta.slot[50], ta.prio[50], ta.verdict[50])
	}
	if tb.prio[50] != 4 || tb.verdict[50] != Drop || &tb.slot[0] == &cur.slot[0] || &ta.slot[0] != &cur.slot[0] {
		t.Fatalf("the second: priority %d, verdict %v, its arrays the first's %v (want a copy), the first's cur's %v (want them)",
			tb.prio[50], tb.verdict[50], &tb.slot[0] == &cur.slot[0], &ta.slot[0] == &cur.slot[0])
	}
}

// TestChangeInPlaceLookups: changes in place (a rule's copy, changed,
// appended at its old key; rule.Order) over a table patched in place only,
// over one patched by a copy first (base keys), and over a base compiled
// from a set that moves rules (its ranks by key), decide as the reference
// on packets steered at the changed rules, old and new, take the
// masked-rule path and decide by moved rules, and allocate nothing on any
// lookup API.
func TestChangeInPlaceLookups(t *testing.T) {
	set := traffic.RandomRules(201, 400)
	extra := traffic.RandomRules(252, 1).Rules[0]
	extra.ID = "extra"
	pool := set.Rules // changed matches like the set's own
	for _, how := range []string{"in place only", "after a copy", "over a moved base"} {
		t.Run(how, func(t *testing.T) {
			r := rand.New(rand.NewPCG(254, 1))
			start := &rule.Set{Rules: slices.Grow(slices.Clone(set.Rules), 64)}
			if how == "over a moved base" {
				// 30 rules moved as they are (the set decides as before).
				r2 := rand.New(rand.NewPCG(254, 2))
				for range 30 {
					old := r2.IntN(len(start.Rules))
					for !start.Live(old) {
						old = r2.IntN(len(start.Rules))
					}
					next := &rule.Set{Rules: append(start.Rules, start.Rules[old]), Holes: start.Holes.With(old)}
					next.Order = start.Order.With(len(next.Rules)-1, start.Key(old))
					start = next
				}
			}
			c, err := New(start)
			if err != nil {
				t.Fatal(err)
			}
			cur := start
			if how == "after a copy" {
				// A rule added in the middle of a new array: the walk
				// that matches the kept rules, which makes base keys.
				next := &rule.Set{Rules: slices.Grow(slices.Insert(slices.Clone(set.Rules), 200, extra), 64)}
				if err := c.Patch(cur, next, nil, []int{200}); err != nil {
					t.Fatal(err)
				}
				cur = next
			}
			// The rules changed are those that decide packets (random
			// sets have a few broad rules that decide most).
			aim, _ := burstFields(t, set, 257, 256)
			var out []rule.Rule
			for range 40 {
				old := cur.Decide(&aim[r.IntN(len(aim))])
				for old < 0 {
					old = r.IntN(len(cur.Rules))
					for !cur.Live(old) {
						old = r.IntN(len(cur.Rules))
					}
				}
				o := cur.Rules[old]
				ru := o
				ru.Priority = []uint32{0, 10, 20, 30}[r.IntN(4)]
				if r.IntN(2) == 0 {
					ru.Match = pool[r.IntN(len(pool))].Match
				}
				next := &rule.Set{Rules: append(cur.Rules, ru), Holes: cur.Holes.With(old)}
				next.Order = cur.Order.With(len(next.Rules)-1, cur.Key(old))
				removed, added := []int{old}, []int{len(next.Rules) - 1}
				if err := c.Patch(cur, next, removed, added); err != nil {
					t.Fatal(err)
				}
				cur, out = next, append(out, o)
			}
			c.Settle()
			p := c.Table().pt
			if ps := c.PatchStats(); p == nil || ps.InPlace != 40 || ps.Folds+ps.FoldsStale+ps.SyncFolds != 0 {
				t.Fatalf("%+v: want 40 changes in place and no fold", ps)
			}
			if (p.bkey == nil) == (how == "after a copy") || (p.order.Moved() > 0) != (how == "over a moved base") {
				t.Fatalf("base keys %v, the base's moves %d: not the patch the test means", p.bkey != nil, p.order.Moved())
			}
			_, fs, lens := orderFrames(cur, out, 255)
			want := make([]int32, len(fs))
			masked, moved := 0, 0
			for i := range fs {
				want[i] = int32(cur.Decide(&fs[i]))
				if bi, _ := p.base.lookup(&fs[i]); bi >= 0 && p.key(bi) == noRank {
					masked++
				}
				if w := int(want[i]); w >= 0 && cur.Key(w) != w {
					moved++
				}
			}
			t.Logf("%s: %d packets take the masked-rule path, %d are decided by a moved rule", how, masked, moved)
			if masked < 10 || moved < 10 {
				t.Fatalf("%d packets take the masked-rule path, %d are decided by a moved rule: want 10 or more of each", masked, moved)
			}
			checkPatchedLookups(t, how, c.Table(), cur, fs, want)
			checkPatchKeys(t, how, c.Table())
			frames := traffic.NewGenerator(traffic.Config{Seed: 256, Rules: &rule.Set{Rules: out}, RuleFraction: 0.8}).Frames(256)
			checkNoAllocs(t, c, fs[:256], lens[:256], frames, true)
		})
	}
}
