package classifier

import (
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
