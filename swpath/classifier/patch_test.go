package classifier

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/scrubd/scrubd/swpath/rule"
	"github.com/scrubd/scrubd/swpath/traffic"
)

// patchStep derives a new set from cur by removing, changing (in place or
// moved) and adding a few rules at random places, and returns it with the
// indexes Patch takes, built along with it: removed (in cur) and added (in
// the new set). pool supplies matches; ids numbers new rules' IDs, and
// gone holds IDs removed earlier, which may come back.
func patchStep(r *rand.Rand, cur *rule.Set, pool []rule.Rule, ids *int, gone *[]string) (next *rule.Set, removed, added []int, out []rule.Rule) {
	type item struct {
		r     rule.Rule
		added bool
	}
	prios := []uint32{0, 5, 10, 20, 30}
	pRemove, pChange := 2.0/float64(len(cur.Rules)+1), 2.0/float64(len(cur.Rules)+1)
	var items, moving []item
	for i, ru := range cur.Rules {
		u := r.Float64()
		switch {
		case u < pRemove:
			removed = append(removed, i)
			out = append(out, ru)
			*gone = append(*gone, ru.ID)
		case u < pRemove+pChange:
			removed = append(removed, i)
			out = append(out, ru)
			ch := ru
			switch r.IntN(3) {
			case 0:
				ch.Priority = prios[r.IntN(len(prios))]
			case 1:
				ch.Action = rule.Accept + rule.Drop - ch.Action
			default:
				ch.Match = pool[r.IntN(len(pool))].Match
			}
			if r.IntN(2) == 0 {
				moving = append(moving, item{ch, true})
			} else {
				items = append(items, item{ch, true})
			}
		default:
			items = append(items, item{ru, false})
		}
	}
	for range r.IntN(4) {
		// New, or an ID removed earlier back (it is in no set now).
		moving = append(moving, item{holeNewRule(r, pool, ids, gone), true})
	}
	for _, it := range moving {
		at := r.IntN(len(items) + 1)
		items = slices.Insert(items, at, it)
	}
	next = &rule.Set{Rules: make([]rule.Rule, len(items))}
	for j, it := range items {
		next.Rules[j] = it.r
		if it.added {
			added = append(added, j)
		}
	}
	// An ID removed and not added again this step is gone; one added again
	// (changed) is not.
	in := map[string]bool{}
	for _, ru := range next.Rules {
		in[ru.ID] = true
	}
	*gone = slices.DeleteFunc(*gone, func(id string) bool { return in[id] })
	return next, removed, added, out
}

// TestPatchDifferential applies random sequences of removals, changes and
// additions with Patch and, after each, compares every lookup of the
// patched classifier with the linear reference (rule.Set.Decide and
// Match.Matches of the new set) on packets steered at the new set's rules
// and at the rules just removed, and its counters with those of a twin
// classifier given the same sets by Swap.
func TestPatchDifferential(t *testing.T) {
	defer func(m int) { foldMin = m }(foldMin)
	foldMin = 8 // folds, background and on the caller's path, within a test's steps
	type tc struct {
		name  string
		mode  int
		set   *rule.Set
		steps int
	}
	cases := []tc{
		{"random 300 auto", treesAuto, traffic.RandomRules(51, 300), 60},
		{"random 300 trees", treesForce, traffic.RandomRules(52, 300), 60},
		{"random 300 hash tables", treesOff, traffic.RandomRules(53, 300), 60},
		{"random 40 hash tables", treesOff, traffic.RandomRules(54, 40), 40},
		{"classbench 2000 auto", treesAuto, traffic.ClassBenchRules(55, 2000), 25},
	}
	var fallbacks, patched, overlaid int
	for ci, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f, o, p := testPatchSequence(t, uint64(ci), c.mode, c.set, c.steps)
			fallbacks += f
			overlaid += o
			patched += p
		})
	}
	// The test proves little unless lookups took the masked-rule path,
	// and tables were patched with overlays.
	if fallbacks == 0 || patched == 0 || overlaid == 0 {
		t.Fatalf("%d packets decided past a masked base rule, %d patched tables, %d with an overlay: the steps do not exercise the patch", fallbacks, patched, overlaid)
	}
}

func testPatchSequence(t *testing.T, seed uint64, mode int, set0 *rule.Set, steps int) (fallbacks, overlaid, patched int) {
	r := rand.New(rand.NewPCG(seed, 77))
	pool := traffic.RandomRules(seed+1000, 200).Rules
	if len(set0.Rules) > 1000 {
		pool = traffic.ClassBenchRules(seed+1000, 300).Rules
	}
	pc := &Classifier{slots: map[string]slotRef{}, workers: map[*Worker]struct{}{}, mode: mode}
	sc := &Classifier{slots: map[string]slotRef{}, workers: map[*Worker]struct{}{}, mode: mode}
	for _, c := range []*Classifier{pc, sc} {
		if err := c.Swap(set0); err != nil {
			t.Fatal(err)
		}
	}
	pw, sw := pc.NewWorker(), sc.NewWorker()
	defer pw.Close()
	defer sw.Close()
	cur := set0
	ids := 0
	var gone []string
	for step := range steps {
		next, removed, added, out := patchStep(r, cur, pool, &ids, &gone)
		if err := pc.Patch(cur, next, removed, added); err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
		if err := sc.Swap(next); err != nil {
			t.Fatal(err)
		}
		if r.IntN(4) == 0 {
			pc.Settle() // a fold in flight lands (or is dropped) before the lookups
		}
		cur = next
		tab := pc.Table()
		if tab.Set() != next {
			t.Fatalf("step %d: the table's set is not the set patched in", step)
		}
		if p := tab.pt; p != nil {
			patched++
			if p.ov != nil {
				overlaid++
			}
		}
		// Packets steered at the new set's rules and at those just
		// removed (whose masked entries the base still holds).
		frames, fs, lens := stepFrames(next, out, seed*1000+uint64(step))
		want := make([]int32, len(fs))
		for i := range fs {
			want[i] = int32(next.Decide(&fs[i]))
			if p := tab.pt; p != nil {
				if bi, _ := p.base.lookup(&fs[i]); bi >= 0 && p.key(bi) == noRank {
					fallbacks++
				}
			}
		}
		name := fmt.Sprintf("step %d (-%v +%v, overlay %v)", step, removed, added, tab.pt != nil && tab.pt.ov != nil)
		checkPatchedLookups(t, name, tab, next, fs, want)
		// Workers: bursts, single packets and frames, on both classifiers.
		rs := classifyAll([]*Worker{pw, sw}, frames, fs, lens)
		res, sres := rs[0], rs[1]
		for i := range fs {
			if res[i] != wantResult(next, want[i]) || sres[i] != res[i] {
				t.Fatalf("%s: packet %d %+v: worker %+v, swapped twin %+v, reference %d (%v)", name, i, &fs[i], res[i], sres[i], want[i], ruleStr(next, int(want[i])))
			}
		}
		comparePatchSnapshots(t, name, pc.Snapshot(), sc.Snapshot())
	}
	settlePatches(t, pc, steps)
	return fallbacks, overlaid, patched
}

// checkPatchedLookups compares Decide, Probes' lookup, DecideBurst and
// AppendMatching of tab with the reference decisions want and
// Match.Matches of set.
func checkPatchedLookups(t *testing.T, name string, tab *Table, set *rule.Set, fs []rule.Fields, want []int32) {
	t.Helper()
	out := make([]int32, len(fs))
	tab.DecideBurst(fs, out)
	var buf []int32
	for i := range fs {
		if got := tab.Decide(&fs[i]); got != int(want[i]) || out[i] != want[i] {
			t.Fatalf("%s: packet %d %+v: Decide %d, burst %d, reference %d (%v)", name, i, &fs[i], got, out[i], want[i], ruleStr(set, int(want[i])))
		}
		buf = tab.AppendMatching(buf[:0], &fs[i])
		slices.Sort(buf)
		if ref := refMatching(set, &fs[i]); !slices.Equal(buf, ref) {
			t.Fatalf("%s: packet %d %+v: matching %v, reference %v", name, i, &fs[i], buf, ref)
		}
	}
}

// comparePatchSnapshots checks that a patched classifier counts as its
// swapped twin: the same rules in the same order, the same counts.
// TablesProbed and CacheHits are not compared: the patched table probes
// its overlay too, and may use the flow cache where the twin does not.
func comparePatchSnapshots(t *testing.T, name string, p, s Snapshot) {
	t.Helper()
	if len(p.Rules) != len(s.Rules) {
		t.Fatalf("%s: snapshot of %d rules, twin %d", name, len(p.Rules), len(s.Rules))
	}
	hit := false
	for i := range p.Rules {
		if p.Rules[i] != s.Rules[i] {
			t.Fatalf("%s: snapshot rule %d %+v, twin %+v", name, i, p.Rules[i], s.Rules[i])
		}
		hit = hit || p.Rules[i].Packets > 0
	}
	if !hit {
		t.Fatalf("%s: no rule counted a packet: the comparison proves nothing", name)
	}
	if p.PassPackets != s.PassPackets || p.PassBytes != s.PassBytes || p.Packets != s.Packets {
		t.Fatalf("%s: pass %d/%d of %d packets, twin %d/%d of %d", name, p.PassPackets, p.PassBytes, p.Packets, s.PassPackets, s.PassBytes, s.Packets)
	}
}

// TestPatchChecks: a patch whose indexes do not describe the change is
// refused, naming what is wrong, and the current set stays.
func TestPatchChecks(t *testing.T) {
	set := traffic.RandomRules(61, 20)
	c, err := New(set)
	if err != nil {
		t.Fatal(err)
	}
	next := &rule.Set{Rules: slices.Clone(set.Rules[1:])}
	other := &rule.Set{Rules: slices.Clone(set.Rules)}
	swapped := &rule.Set{Rules: slices.Clone(set.Rules[1:])}
	swapped.Rules[0], swapped.Rules[1] = swapped.Rules[1], swapped.Rules[0] // right after the change
	for _, x := range []struct {
		from, set      *rule.Set
		removed, added []int
		want           string
	}{
		{other, next, []int{0}, nil, "not the current rule set"},
		{set, next, []int{0, 0}, nil, "removed[1] = 0"},
		{set, next, []int{20}, nil, "removed[0] = 20"},
		{set, next, nil, []int{-1}, "added[0] = -1"},
		{set, next, nil, nil, "20 rules - 0 removed + 0 added = 20, but the new set has 19"},
		{set, swapped, []int{0}, nil, "rule 0 of the new set"},
	} {
		err := c.Patch(x.from, x.set, x.removed, x.added)
		if err == nil || !strings.Contains(err.Error(), x.want) {
			t.Errorf("Patch(-%v +%v): %v, want an error with %q", x.removed, x.added, err, x.want)
		}
		if c.Table().Set() != set {
			t.Fatal("a refused patch changed the set")
		}
	}
	if err := c.Patch(set, next, []int{0}, nil); err != nil {
		t.Fatal(err)
	}
	if c.Table().Set() != next || c.Table().pt == nil {
		t.Fatal("the patch was not applied as a patch")
	}
	// The base's lookup is kept, not the old set's rules.
	if b := c.Table().pt.base; len(b.set.Rules) != 0 || b.slot != nil || b.verdict != nil {
		t.Fatal("the patch holds the old set's rules or its arrays by rule")
	}
}

// TestPatchZeroAllocs: a patched table's lookups allocate nothing, on a
// set with an overlay and masked rules whose packets take the masked-rule
// path.
func TestPatchZeroAllocs(t *testing.T) {
	set := traffic.RandomRules(71, 300)
	c, err := New(set)
	if err != nil {
		t.Fatal(err)
	}
	// Remove every tenth rule and add five.
	next := &rule.Set{}
	var removed, added []int
	for i, ru := range set.Rules {
		if i%10 == 0 {
			removed = append(removed, i)
			continue
		}
		next.Rules = append(next.Rules, ru)
	}
	for k, ru := range traffic.RandomRules(72, 5).Rules {
		ru.ID = fmt.Sprintf("add%d", k)
		at := 7 * k
		next.Rules = slices.Insert(next.Rules, at, ru)
		added = append(added, at)
	}
	if err := c.Patch(set, next, removed, added); err != nil {
		t.Fatal(err)
	}
	p := c.Table().pt
	if p == nil || p.ov == nil || p.dead != len(removed) {
		t.Fatalf("not patched as set up: %+v", p)
	}
	steer := &rule.Set{Rules: append(slices.Clip(next.Rules), set.Rules...)}
	fs, lens := burstFields(t, steer, 3, 256)
	masked := 0
	for i := range fs {
		if bi, _ := p.base.lookup(&fs[i]); bi >= 0 && p.key(bi) == noRank {
			masked++
		}
	}
	if masked == 0 {
		t.Fatal("no packet takes the masked-rule path")
	}
	frames := traffic.NewGenerator(traffic.Config{Seed: 4, Rules: steer, RuleFraction: 0.8, Odd: true}).Frames(256)
	checkNoAllocs(t, c, fs, lens, frames, true)
}

// TestPatchSyncFold: a change bigger than four times the fold bound (at
// 400 rules and foldMin 8: 4 x 20) is
// compiled whole, on the caller's path, as Swap would.
func TestPatchSyncFold(t *testing.T) {
	defer func(m int) { foldMin = m }(foldMin)
	foldMin = 8
	set := traffic.RandomRules(81, 300)
	c, err := New(set)
	if err != nil {
		t.Fatal(err)
	}
	next := &rule.Set{Rules: slices.Clone(set.Rules)}
	var added []int
	for k, ru := range traffic.RandomRules(82, 100).Rules {
		ru.ID = fmt.Sprintf("add%d", k)
		next.Rules = append(next.Rules, ru)
		added = append(added, len(next.Rules)-1)
	}
	if err := c.Patch(set, next, nil, added); err != nil {
		t.Fatal(err)
	}
	if ps := c.PatchStats(); ps.SyncFolds != 1 || c.Table().pt != nil || c.Table().Set() != next {
		t.Fatalf("%+v, patched %v: want one fold on the caller's path to an unpatched table", ps, c.Table().pt != nil)
	}
	fs, _ := burstFields(t, next, 5, 500)
	want := make([]int32, len(fs))
	for i := range fs {
		want[i] = int32(next.Decide(&fs[i]))
	}
	checkPatchedLookups(t, "sync fold", c.Table(), next, fs, want)
}

// TestPatchAtomic runs bursts while patches flip the set between A and B
// (B is A with some rules removed, changed and added): every burst must
// agree entirely with one of them. Run with -race, it also checks the
// folds' goroutine against the workers and the patches.
func TestPatchAtomic(t *testing.T) {
	defer func(m int) { foldMin = m }(foldMin)
	foldMin = 2
	setA := traffic.RandomRules(91, 40)
	r := rand.New(rand.NewPCG(91, 1))
	ids := 0
	var gone []string
	setB, removed, added, _ := patchStep(r, setA, traffic.RandomRules(92, 50).Rules, &ids, &gone)
	for len(removed)+len(added) < 6 {
		setB, removed, added, _ = patchStep(r, setA, traffic.RandomRules(92, 50).Rules, &ids, &gone)
	}
	fs, lens := burstFields(t, &rule.Set{Rules: append(slices.Clip(setA.Rules), setB.Rules...)}, 9, 256)
	wantA, wantB := make([]int32, len(fs)), make([]int32, len(fs))
	differ := 0
	for i := range fs {
		wantA[i], wantB[i] = int32(setA.Decide(&fs[i])), int32(setB.Decide(&fs[i]))
		if wantA[i] != wantB[i] {
			differ++
		}
	}
	if differ < 3 {
		t.Fatalf("sets differ on only %d packets", differ)
	}
	c, err := New(setA)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Settle()
	var stop atomic.Bool
	var wg sync.WaitGroup
	for g := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w := c.NewWorker()
			defer w.Close()
			out := make([]Result, len(fs))
			for n := 0; !stop.Load() || n < 50; n++ {
				w.ClassifyBurst(fs, lens, out)
				isA, isB := true, true
				for i := range out {
					isA = isA && out[i].Rule == wantA[i]
					isB = isB && out[i].Rule == wantB[i]
				}
				if !isA && !isB {
					t.Errorf("worker %d burst %d saw half a rule set", g, n)
					return
				}
			}
		}()
	}
	// B from A by the step's indexes; A from B by the same, reversed.
	for i := range 200 {
		var err error
		if i%2 == 0 {
			err = c.Patch(setA, setB, removed, added)
		} else {
			err = c.Patch(setB, setA, added, removed)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	stop.Store(true)
	wg.Wait()
	c.Settle()
	if ps := c.PatchStats(); ps.Patches != 200 || ps.Folds+ps.FoldsStale == 0 {
		t.Fatalf("%+v: want 200 patches and folds tried", ps)
	}
}

// TestPatchFoldReplays: changes patched in while a fold compiles are
// replayed on the folded table, which then lands (not dropped as stale),
// and decides as the reference.
func TestPatchFoldReplays(t *testing.T) {
	set := traffic.ClassBenchRules(101, 20000)
	c, err := New(set)
	if err != nil {
		t.Fatal(err)
	}
	// One change past the fold bound starts a fold (compiling 20k rules
	// takes far longer than the patches below).
	adds := traffic.ClassBenchRules(102, foldAt(20000)+30).Rules
	next := &rule.Set{Rules: slices.Clone(set.Rules)}
	var added []int
	for k, r := range adds {
		r.ID = fmt.Sprintf("add%d", k)
		at := k * 100
		next.Rules = slices.Insert(next.Rules, at, r)
		added = append(added, at)
	}
	if err := c.Patch(set, next, nil, added); err != nil {
		t.Fatal(err)
	}
	cur := next
	for k := range 20 {
		nx := &rule.Set{Rules: slices.Delete(slices.Clone(cur.Rules), 5*k, 5*k+1)}
		if err := c.Patch(cur, nx, []int{5 * k}, nil); err != nil {
			t.Fatal(err)
		}
		cur = nx
	}
	c.Settle()
	ps := c.PatchStats()
	if ps.Folds != 1 || ps.FoldsStale != 0 || ps.Replayed == 0 {
		t.Fatalf("%+v: want one fold, landed, with changes replayed", ps)
	}
	if c.Table().Set() != cur {
		t.Fatal("the fold published another set")
	}
	fs, _ := burstFields(t, &rule.Set{Rules: append(slices.Clip(cur.Rules), set.Rules[:100]...)}, 7, shortOr(2000, 300))
	want := make([]int32, len(fs))
	for i := range fs {
		want[i] = int32(cur.Decide(&fs[i]))
	}
	checkPatchedLookups(t, "after the replayed fold", c.Table(), cur, fs, want)
}

// TestPatchStream: rules appended one by one, 4√n + 64 of them, as a
// store delta appends them: the folds start by themselves and land as the
// stream goes on (a fold that lands during a patch is patched over, not
// overwritten), so the overlay never reaches the bound that compiles the
// set on the caller's path.
//
// The stream waits for a fold in flight only when its overlay reaches
// three times the fold bound: a fold of 10k rules takes tens of
// milliseconds, and on a loaded machine (CI runs the packages' tests side
// by side on two CPUs) its goroutine could wait longer than the stream's
// next √n patches, and the overlay would pass four times the bound first.
// A stream faster than its folds is the caller's path by design. A fold
// that never starts, or never lands, leaves nothing to wait for, and the
// overlay grows past that bound as before.
func TestPatchStream(t *testing.T) {
	n := 10000
	set := traffic.ClassBenchRules(uint64(n), n)
	k := 4*foldAt(n) + 64
	adds := traffic.ClassBenchRules(uint64(n)+2, k).Rules
	all := append(slices.Clone(set.Rules), adds...)
	for i := range adds {
		all[n+i].ID = fmt.Sprintf("added%d", i)
	}
	cur := &rule.Set{Rules: all[:n:n]}
	c, err := New(cur)
	if err != nil {
		t.Fatal(err)
	}
	waits := 0
	for i := range k {
		next := &rule.Set{Rules: all[: n+i+1 : n+i+1]}
		if err := c.Patch(cur, next, nil, []int{n + i}); err != nil {
			t.Fatal(err)
		}
		cur = next
		if c.PatchStats().Overlay >= 3*foldAt(n) {
			waits++
			c.Settle()
		}
	}
	c.Settle()
	t.Logf("waited for a fold %d times", waits)
	if ps := c.PatchStats(); ps.SyncFolds != 0 || ps.Folds < 2 {
		t.Fatalf("%+v: want folds in the background only", ps)
	}
	fs, _ := burstFields(t, cur, 8, shortOr(2000, 300))
	want := make([]int32, len(fs))
	for i := range fs {
		want[i] = int32(cur.Decide(&fs[i]))
	}
	checkPatchedLookups(t, "after the stream", c.Table(), cur, fs, want)
}

// shortOr is n, or short under -short.
func shortOr(n, short int) int {
	if testing.Short() {
		return short
	}
	return n
}

// TestPatchFlowCache: a worker's flow cache, hit by a few flows, serves
// no decision of the set before a patch: the rules that decided the
// flows are removed and others added, and the same flows must get the
// new set's decisions at once (and hit the cache again after).
func TestPatchFlowCache(t *testing.T) {
	set := traffic.RandomRules(111, 300)
	c := cachingSet(t, set)
	frames := traffic.NewGenerator(traffic.Config{Seed: 112, Rules: set, RuleFraction: 0.9, Flows: 20}).Frames(640)
	fs := parseAll(frames)
	lens := make([]uint32, len(fs))
	w := c.NewWorker()
	defer w.Close()
	w.SetCachePolicy(CacheAlways) // through the cache, whatever it costs here
	out := make([]Result, 64)
	run := func(s *rule.Set, name string) {
		t.Helper()
		for i := 0; i < len(fs); i += 64 {
			w.ClassifyBurst(fs[i:i+64], lens[i:i+64], out)
			for j := range out {
				if want := s.Decide(&fs[i+j]); out[j].Rule != int32(want) {
					t.Fatalf("%s: packet %d: rule %d, reference %d", name, i+j, out[j].Rule, want)
				}
			}
		}
	}
	run(set, "before")
	hits := c.Snapshot().CacheHits
	if hits == 0 {
		t.Fatal("no cache hits: the test proves nothing")
	}
	// Remove every rule that decided a packet; add two that match the
	// flows' packets (a copy of a removed rule under a new id, and its
	// action turned).
	decided := map[int]bool{}
	for i := range fs {
		if d := set.Decide(&fs[i]); d >= 0 {
			decided[d] = true
		}
	}
	next := &rule.Set{}
	var removed, added []int
	for i, r := range set.Rules {
		if decided[i] {
			removed = append(removed, i)
			continue
		}
		next.Rules = append(next.Rules, r)
	}
	for k, i := range removed[:2] {
		r := set.Rules[i]
		r.ID = fmt.Sprintf("again%d", k)
		r.Action = rule.Accept + rule.Drop - r.Action
		next.Rules = append(next.Rules, r)
		added = append(added, len(next.Rules)-1)
	}
	if err := c.Patch(set, next, removed, added); err != nil {
		t.Fatal(err)
	}
	differ := 0
	for i := range fs {
		if set.Decide(&fs[i]) != next.Decide(&fs[i]) {
			differ++
		}
	}
	if differ == 0 {
		t.Fatal("the patch changes no decision of the flows")
	}
	run(next, "after")
	if c.Snapshot().CacheHits == hits {
		t.Fatal("no cache hits after the patch")
	}
}

// settlePatches waits for pc's folds and checks its patch counts after a
// differential run of steps changes: one patch a step, and a fold among
// them.
func settlePatches(t *testing.T, pc *Classifier, steps int) PatchStats {
	t.Helper()
	pc.Settle()
	ps := pc.PatchStats()
	if ps.Patches != uint64(steps) {
		t.Errorf("%d patches counted, want %d", ps.Patches, steps)
	}
	if ps.Folds+ps.SyncFolds == 0 {
		t.Errorf("no fold in %d steps: %+v", steps, ps)
	}
	t.Logf("%+v", ps)
	return ps
}

// stepFrames returns a differential step's packets: frames steered at the
// rules of next (every position's, holes' too) and at the rules out just
// removed, parsed, with their lengths. Fewer with -short (the race step:
// the linear reference is the cost).
func stepFrames(next *rule.Set, out []rule.Rule, seed uint64) (frames [][]byte, fs []rule.Fields, lens []uint32) {
	steer := &rule.Set{Rules: append(slices.Clip(next.Rules), out...)}
	npk := 400
	if testing.Short() {
		npk = 150
	}
	frames = traffic.NewGenerator(traffic.Config{Seed: seed, Rules: steer, RuleFraction: 0.85, Odd: true,
		Sizes: traffic.Sizes{Min: 64, Max: 1518}}).Frames(npk)
	fs = parseAll(frames)
	lens = make([]uint32, len(fs))
	for i := range frames {
		lens[i] = uint32(len(frames[i]))
	}
	return frames, fs, lens
}

// classifyAll returns each worker's results for the packets: bursts of 64,
// then the first 50 one by one and the next 50 as frames (their burst
// results cleared first), so that every worker API is compared.
func classifyAll(ws []*Worker, frames [][]byte, fs []rule.Fields, lens []uint32) [][]Result {
	out := make([][]Result, len(ws))
	for k, w := range ws {
		res := make([]Result, len(fs))
		for i := 0; i < len(fs); i += 64 {
			j := min(i+64, len(fs))
			w.ClassifyBurst(fs[i:j], lens[i:j], res[i:j])
		}
		clear(res[:100]) // what the other APIs write is their own
		for i := range fs[:50] {
			res[i] = w.Classify(&fs[i], lens[i])
		}
		w.ClassifyFrames(frames[50:100], res[50:100])
		out[k] = res
	}
	return out
}

// wantResult is the result of the reference's deciding rule k of set (-1
// for none: the packet passes).
func wantResult(set *rule.Set, k int32) Result {
	v := Pass
	if k >= 0 {
		v = Drop
		if set.Rules[k].Action == rule.Accept {
			v = Accept
		}
	}
	return Result{v, k}
}
