//go:build !purego

package classifier

import (
	"math/rand/v2"
	"testing"
)

// TestWalkQuads checks walkQuads (walkQuads2, and walkQuads2d over
// 4-byte node words) against a scalar walk, one 8-byte node word at a
// time, whatever
// walkLanes2 takes on this CPU: the two trees of ClassBench-style sets
// of 1k, 10k and 100k rules, every group length up to treeGroup, the keys
// of generated packets and random keys, and lanes past the rounded group
// left as they were.
func TestWalkQuads(t *testing.T) {
	if !quadsCPU {
		t.Skip("this CPU lacks AVX2, BMI1 or BMI2: walkQuads2 cannot run (a CPU feature, which no package installs)")
	}
	sizes := []int{1000, 10000, 100000}
	if testing.Short() {
		sizes = sizes[:2]
	}
	for _, n := range sizes {
		tr, fs := twoTrees(t, n, 11, treeGroup)
		d0, d1 := tr.t[0], tr.t[1]
		d0.nodes32, d1.nodes32 = nil, nil
		w0, w1 := d0, d1
		var ok0, ok1 bool
		w0.nodes32, w0.root32, ok0 = d0.words32()
		w1.nodes32, w1.root32, ok1 = d1.words32()
		rng := rand.New(rand.NewPCG(uint64(n), 5))
		var keys [3][treeGroup]uint64
		steps := 0
		for ln := 1; ln <= treeGroup; ln++ {
			for i := range treeGroup {
				if ln%2 == 0 {
					keys[0][i], keys[1][i], keys[2][i] = rng.Uint64(), rng.Uint64(), rng.Uint64()
					continue
				}
				f := &fs[i]
				keys[0][i], keys[1][i], keys[2][i] = f.Src.Hi, f.Dst.Hi, miscWord(f)|tr.topBits(f)
			}
			steps += checkQuads(t, &d0, &d1, &keys, ln)
			if ok0 && ok1 {
				checkQuads(t, &w0, &w1, &keys, ln)
			}
		}
		if !(ok0 && ok1) && !tr.padded {
			t.Fatalf("%d rules: no 4-byte node words", n)
		}
		if steps < treeGroup*treeGroup {
			t.Fatalf("%d rules: %d walk steps: the trees are too shallow to test the walk", n, steps)
		}
	}
	// A chain of levels whose last words are the last a 4-byte word can
	// name, beside a tree that is one leaf, either way round, over both
	// word sizes (random keys: the chain cuts each key word).
	d, one := chainTrees32(t)
	rng := rand.New(rand.NewPCG(7, 8))
	var keys [3][treeGroup]uint64
	for _, pair := range [][2]*dtree{{d, one}, {one, d}} {
		p8 := [2]dtree{*pair[0], *pair[1]}
		p8[0].nodes32, p8[1].nodes32 = nil, nil
		for ln := 1; ln <= treeGroup; ln++ {
			for i := range treeGroup {
				keys[0][i], keys[1][i], keys[2][i] = rng.Uint64(), rng.Uint64(), rng.Uint64()
			}
			checkQuads(t, pair[0], pair[1], &keys, ln)
			checkQuads(t, &p8[0], &p8[1], &keys, ln)
		}
	}
}

// checkQuads checks walkQuads over trees d0 and d1 for lanes 0 to ln
// against the scalar walk, and returns the scalar walks' steps.
func checkQuads(t *testing.T, d0, d1 *dtree, keys *[3][treeGroup]uint64, ln int) int {
	t.Helper()
	var start [2][treeGroup]uint64 // past the rounded group: kept
	for i := range start[0] {
		start[0][i], start[1][i] = uint64(i)|7<<40, uint64(i)<<1|9<<40
	}
	want := start
	steps := 0
	for i := range (ln + 7) &^ 7 {
		k := treeKey{keys[0][i], keys[1][i], keys[2][i]}
		for ti, d := range [2]*dtree{d0, d1} {
			x, st := wordWalk(d, &k)
			want[ti][i] = x
			steps += st
		}
	}
	got := start
	walkQuads(d0, d1, keys, &got, ln)
	for ti := range got {
		for i := range got[ti] {
			if got[ti][i] != want[ti][i] {
				t.Fatalf("group of %d, 4-byte words %v: tree %d lane %d holds %#x, the scalar walk %#x", ln, d0.nodes32 != nil, ti, i, got[ti][i], want[ti][i])
			}
		}
	}
	return steps
}
