package classifier

import (
	"testing"

	"github.com/scrubd/scrubd/swpath/traffic"
)

// TestPrefetchLeaves: a group walk that prefetches its leaves decides as
// one that does not and as the linear reference. A prefetch changes no
// result, so this guards the call and its arguments, and runs the stub
// (arm64 under qemu-user) over real leaves and over no leaves, an empty
// leaf, a leaf of one record at the array's end and one of 16 records.
// Only the 100k-rule set prefetches by default (treePrefetchMin), and
// only where the build has the stub (prefetchStub). With the prefetch
// the scans read each leaf's first record themselves (leafPrefetch):
// the decisions here check that too.
func TestPrefetchLeaves(t *testing.T) {
	defer func(v int) { treeLanesMax = v }(treeLanesMax)
	defer func(v bool) { treeCBlocks = v }(treeCBlocks)
	treeLanesMax, treeCBlocks = 0, false // the group walk at 10k rules with lanes too
	set := traffic.ClassBenchRules(3, 10000)
	tab, err := Compile(set)
	if err != nil {
		t.Fatal(err)
	}
	if tab.tr == nil || !tab.tr.compact || tab.tr.prefetch {
		t.Fatalf("10k rules: trees %v, group walk %v, prefetch %v: want the group walk without prefetching", tab.tr != nil, tab.tr != nil && tab.tr.compact, tab.tr != nil && tab.tr.prefetch)
	}
	g := traffic.NewGenerator(traffic.Config{Seed: 5, Rules: set, RuleFraction: 0.9})
	fs := parseAll(g.Frames(4096))
	plain, pre := make([]int32, len(fs)), make([]int32, len(fs))
	var s treeScratch
	tab.decideBurst(fs, plain, nil, &s)
	tab.tr.prefetch = true
	tab.decideBurst(fs, pre, nil, &s)
	matched := 0
	for i := range fs {
		want := set.Decide(&fs[i])
		if int(pre[i]) != want || int(plain[i]) != want {
			t.Fatalf("packet %d %+v: %d with prefetching, %d without, reference %d", i, fs[i], pre[i], plain[i], want)
		}
		if want >= 0 {
			matched++
		}
	}
	if matched < len(fs)/2 {
		t.Fatalf("only %d of %d packets matched a rule", matched, len(fs))
	}
	d := &tab.tr.t[0]
	last := uint64(len(d.crec) - 1)
	leaves := []uint64{treeLeaf, treeLeaf | 1<<32 | last, treeLeaf | 16<<32}
	prefetchLeaves(&d.crec[0], &leaves[0], 0)
	prefetchLeaves(&d.crec[0], &leaves[0], len(leaves))

	big, err := Compile(traffic.ClassBenchRules(4, 100000))
	if err != nil {
		t.Fatal(err)
	}
	if big.tr == nil || big.tr.prefetch != prefetchStub {
		t.Fatalf("100k rules: trees %v, prefetch %v: want %v (the build's stub)", big.tr != nil, big.tr != nil && big.tr.prefetch, prefetchStub)
	}
}

// TestPrefetchCounters: a worker big enough to prefetch its counters
// (counterPrefetchMin) counts every rule's packets and bytes as the
// linear reference's decisions add up, packets no rule decides included
// (checkBurstCounts), and the stub (arm64 under qemu-user) runs over no
// decision, decisions of no rule only, and the last rule. A prefetch
// changes no count, so this guards the call and its arguments.
func TestPrefetchCounters(t *testing.T) {
	set := traffic.ClassBenchRules(7, 5000)
	tab, err := Compile(set)
	if err != nil {
		t.Fatal(err)
	}
	if tab.nslots < counterPrefetchMin {
		t.Fatalf("%d counter slots: fewer than %d, no prefetch", tab.nslots, counterPrefetchMin)
	}
	g := traffic.NewGenerator(traffic.Config{Seed: 8, Rules: set, RuleFraction: 0.8})
	frames := g.Frames(4096)
	fs := parseAll(frames)
	hit, passed := map[int]bool{}, 0
	for i := range fs {
		if r := set.Decide(&fs[i]); r >= 0 {
			hit[r] = true
		} else {
			passed++
		}
	}
	if len(hit) < 500 || passed == 0 {
		t.Fatalf("%d rules decided a packet, %d packets passed", len(hit), passed)
	}
	checkBurstCounts(t, "5000 rules", set, fs, frames)

	ctr := make([]counter, tab.nslots)
	ids := []int32{-1, -1, int32(len(set.Rules) - 1), 0}
	prefetchCounters(&ctr[0], &tab.slot[0], &ids[0], 0)
	prefetchCounters(&ctr[0], &tab.slot[0], &ids[0], 2)
	prefetchCounters(&ctr[0], &tab.slot[0], &ids[0], len(ids))
}
