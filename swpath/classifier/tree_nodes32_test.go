package classifier

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/scrubd/scrubd/swpath/rule"
	"github.com/scrubd/scrubd/swpath/traffic"
)

// TestNode32 checks node32 against words laid out by hand from the
// formats of tree.go (a leaf: bit 63, treeLong at 62, the count at
// 32-39, the first record at 0-31; an inner node: the key word at 56-57,
// the shift at 48-53, the child mask at 32-47, the first child at 0-31)
// and of tree_nodes32.go (a leaf: bit 31, treeLong at 30, the count at
// 22-29, the first record at 0-21; an inner node: the key word at 29-30,
// the shift at 23-28, the cut's bits less one at 19-22, the first child
// at 0-18), and that the words without a 4-byte form have none.
func TestNode32(t *testing.T) {
	for _, c := range []struct {
		name string
		x    uint64
		w    uint32
		ok   bool
	}{
		{"the empty leaf", 1 << 63, 0x80000000, true},
		{"a leaf of 3 from record 8", 1<<63 | 3<<32 | 8, 0x80c00008, true},
		{"a long leaf of 255 from the last record", 1<<63 | 1<<62 | 255<<32 | 0x3fffff, 0xffffffff, true},
		{"a leaf of 256", 1<<63 | 256<<32, 0, false},
		{"a leaf from record 2^22", 1<<63 | 1<<32 | 1<<22, 0, false},
		{"a leaf with bit 40", 1<<63 | 1<<40 | 1<<32, 0, false},
		{"key word 1, shift 44, 3 bits, first child 12345", 1<<56 | 44<<48 | 7<<32 | 12345, 1<<29 | 44<<23 | 2<<19 | 12345, true},
		{"key word 2, shift 0, 16 bits, first child 2^19-1", 2<<56 | 0xffff<<32 | 0x7ffff, 2<<29 | 15<<19 | 0x7ffff, true},
		{"key word 0, shift 63, 1 bit, first child 0", 63<<48 | 1<<32, 63 << 23, true},
		{"first child 2^19", 1<<32 | 1<<19, 0, false},
		{"a mask of one child (no cut)", 5, 0, false},
		{"a mask that is not low bits", 5<<32 | 7, 0, false},
		{"an inner node with bit 58", 1<<58 | 1<<32, 0, false},
		{"an inner node with bit 54", 1<<54 | 1<<32, 0, false},
	} {
		w, ok := node32(c.x)
		if ok != c.ok || ok && w != c.w {
			t.Errorf("%s: node32(%#x) = %#x, %v; want %#x, %v", c.name, c.x, w, ok, c.w, c.ok)
		}
		if c.ok {
			if x := node64(c.w); x != c.x {
				t.Errorf("%s: node64(%#x) = %#x, want %#x", c.name, c.w, x, c.x)
			}
		}
	}
}

// TestNodes32: sets of compact and tight blocks whose node words pass
// nodes32Min get 4-byte words, which keep every node word of their trees
// (node64), and decide as the linear reference (checkAgainstReference)
// and as the same sets with 8-byte words (nodes32Min raised), over
// bursts of every length up to two groups, each burst as DecideBurst
// takes it (with a laneTail on its stack) and as a worker does (with its
// own). A 10k-rule set (288 KiB of node words) gets none.
func TestNodes32(t *testing.T) {
	needLanes(t)
	small, err := Compile(classBenchSet(10000, false))
	if err != nil {
		t.Fatal(err)
	}
	if small.tr == nil || len(small.tr.t) != 2 || small.tr.t[0].nodes32 != nil || 8*(len(small.tr.t[0].nodes)+len(small.tr.t[1].nodes)) > nodes32Min {
		t.Fatalf("10000 rules: trees %v, 4-byte words %v", small.tr != nil, small.tr != nil && small.tr.t[0].nodes32 != nil)
	}
	sizes := []int{20000, 50000}
	if testing.Short() {
		sizes = sizes[:1]
	}
	for _, n := range sizes {
		set := withHeld(classBenchSet(n, false), 50)
		tab32, err := Compile(set)
		if err != nil {
			t.Fatal(err)
		}
		was := nodes32Min
		nodes32Min = 1 << 40
		tab, err := Compile(set)
		nodes32Min = was
		if err != nil {
			t.Fatal(err)
		}
		if tab.tr == nil || tab.tr.t[0].nodes32 != nil {
			t.Fatalf("%d rules: 4-byte words past any size", n)
		}
		if tab32.tr == nil || !tab32.tr.cvec || tab32.tr.tight != (n == 50000) {
			t.Fatalf("%d rules: compact blocks %v, tight %v", n, tab32.tr != nil && tab32.tr.cvec, tab32.tr != nil && tab32.tr.tight)
		}
		for i := range tab32.tr.t {
			d := &tab32.tr.t[i]
			if len(d.nodes32) != len(d.nodes) || node64(d.root32) != d.root {
				t.Fatalf("%d rules, tree %d: %d 4-byte words for %d nodes, root %#x for %#x", n, i, len(d.nodes32), len(d.nodes), node64(d.root32), d.root)
			}
			for j, w := range d.nodes32 {
				if node64(w) != d.nodes[j] {
					t.Fatalf("%d rules, tree %d, node %d: %#x for %#x", n, i, j, node64(w), d.nodes[j])
				}
			}
		}
		g := traffic.NewGenerator(traffic.Config{Seed: uint64(n), Rules: set, RuleFraction: 0.9, Odd: true})
		if m := checkAgainstReference(t, fmt.Sprintf("%d rules, 4-byte node words", n), set, parseAll(g.Frames(3000))); m < 1000 {
			t.Fatalf("%d rules: %d of 3000 packets matched", n, m)
		}
		// Fresh 5-tuples, bursts of every length up to two groups: the
		// same rules as the table with 8-byte words.
		fresh := parseAll(traffic.NewGenerator(traffic.Config{Seed: uint64(n) + 1, Rules: set, RuleFraction: 0.95}).Frames(8192))
		want, got, res := make([]int32, len(fresh)), make([]int32, len(fresh)), make([]Result, 2*treeGroup)
		lens := make([]uint32, 2*treeGroup)
		c, err := New(set)
		if err != nil {
			t.Fatal(err)
		}
		if c.Table().tr.t[0].nodes32 == nil {
			t.Fatalf("%d rules: a classifier's table without 4-byte words", n)
		}
		w := c.NewWorker()
		w.SetCachePolicy(CacheNever)
		for _, api := range []string{"DecideBurst", "ClassifyBurst"} {
			for off, ln := 0, 1; off < len(fresh); off, ln = off+ln, ln%(2*treeGroup)+1 {
				end := min(off+ln, len(fresh))
				tab.DecideBurst(fresh[off:end], want[off:end])
				if api == "DecideBurst" {
					tab32.DecideBurst(fresh[off:end], got[off:end])
					continue
				}
				w.ClassifyBurst(fresh[off:end], lens[:end-off], res)
				for i, r := range res[:end-off] {
					got[off+i] = r.Rule
				}
			}
			if !slices.Equal(got, want) {
				for i := range got {
					if got[i] != want[i] {
						t.Fatalf("%d rules, %s: packet %d decided by rule %d with 4-byte words, %d without", n, api, i, got[i], want[i])
					}
				}
			}
		}
		w.Close()
	}
}

// TestWalkLanes32Words walks two trees laid out by hand over their
// 4-byte words (walkLanes2: walkLanes8x2d where the stub runs, with and
// without a tail, and its reference walkLanes2Go32) against the scalar
// walk of their 8-byte words, for groups of every length, each tree as
// tree 0 and as tree 1. The first: a root that cuts 4 bits of the
// destination's top, whose children are leaves with every field of a
// 4-byte leaf at its extremes (treeLong, a count of 255, the last first
// record) and an inner node that cuts the protocol's top 2 bits into
// children at the end of 2^19 words (the last first child a 4-byte word
// holds), below a chain of cuts of each key word that leaves nearly
// every lane past nodes32Head levels (a tail of nearly the whole group);
// the second is one leaf (a tail of no lane).
func TestWalkLanes32Words(t *testing.T) {
	d, one := chainTrees32(t)
	for _, pair := range [][2]*dtree{{d, one}, {one, d}} {
		walkPair32(t, pair[0], pair[1])
	}
}

// chainTrees32 returns TestWalkLanes32Words' trees, with their 4-byte
// node words: a chain of levels whose last words are the last that a
// 4-byte word can name, and a tree that is one leaf.
func chainTrees32(t *testing.T) (*dtree, *dtree) {
	t.Helper()
	const last = 1<<19 - 4
	d := dtree{root: 1<<56 | 63<<48 | 1<<32 | 1, nodes: make([]uint64, last+4)}
	leaves := []uint64{1 << 63, 1<<63 | 1<<62 | 255<<32 | 0x3fffff, 1<<63 | 8<<32 | 0x2aaaaa, 1<<63 | 1<<62 | 1<<32 | 0x155555}
	for i := range d.nodes {
		d.nodes[i] = treeLeaf // the words no walk reaches
	}
	// The chain: level 1 a pair of words (both naming the next pair, as
	// the builder shares equal children) cutting key word 1, level 2 a
	// pair cutting 5 bits of key word 0 into a leaf and 31 words of level
	// 3 (so that about one lane in 32 is at a leaf after nodes32Head
	// levels, and a full group's tail is nearly all its lanes), which cut
	// key word 2 into a leaf and level 4.
	d.nodes[1] = 1<<56 | 50<<48 | 1<<32 | 3
	d.nodes[3] = 7<<48 | 0x1f<<32 | 32
	d.nodes[32] = leaves[1]
	for i := 33; i < 64; i++ {
		d.nodes[i] = 2<<56 | 20<<48 | 1<<32 | 7
	}
	d.nodes[2], d.nodes[4] = d.nodes[1], d.nodes[3]
	d.nodes[7] = 1<<56 | 60<<48 | 0xf<<32 | 9
	d.nodes[8] = leaves[2] | 0x11
	for i := range 16 { // level 5
		d.nodes[9+i] = leaves[i%len(leaves)]
	}
	d.nodes[9+9] = 2<<56 | 38<<48 | 3<<32 | last // the protocol's top 2 bits
	for i := range 4 {
		d.nodes[last+i] = leaves[3-i] | uint64(i)<<8
	}
	one := dtree{root: 1<<63 | 5<<32 | 40, nodes: []uint64{1 << 63}}
	for _, tr := range []*dtree{&d, &one} {
		var ok bool
		if tr.nodes32, tr.root32, ok = tr.words32(); !ok {
			t.Fatal("no 4-byte words")
		}
	}
	return &d, &one
}

// walkPair32 is TestWalkLanes32Words for trees d0 and d1.
func walkPair32(t *testing.T, d0, d1 *dtree) {
	t.Helper()
	rng := rand.New(rand.NewPCG(3, 4))
	var keys [3][treeGroup]uint64
	for ln := 1; ln <= treeGroup; ln++ {
		for i := range treeGroup {
			keys[0][i], keys[1][i], keys[2][i] = rng.Uint64(), rng.Uint64(), rng.Uint64()
		}
		var start [2][treeGroup]uint64 // past the rounded group: kept
		for i := range start[0] {
			start[0][i], start[1][i] = uint64(i), uint64(i)<<1
		}
		want := start
		for i := range (ln + 7) &^ 7 {
			k := treeKey{keys[0][i], keys[1][i], keys[2][i]}
			want[0][i], want[1][i] = d0.walk(&k), d1.walk(&k)
		}
		ref := start
		walkLanes2Go32(d0, d1, &keys, &ref, ln)
		if ref != want {
			t.Fatalf("group of %d: walkLanes2Go32 differs from the scalar walk", ln)
		}
		for _, tail := range []*laneTail{nil, new(laneTail)} {
			got := start
			walkLanes2(d0, d1, &keys, &got, ln, tail)
			if got != want {
				for ti := range got {
					for i := range got[ti] {
						if got[ti][i] != want[ti][i] {
							t.Fatalf("group of %d, tail %v: tree %d lane %d reached %#x, the scalar walk %#x", ln, tail != nil, ti, i, got[ti][i], want[ti][i])
						}
					}
				}
			}
			if tail != nil && lanesWalk {
				checkTail(t, ln, [2]*dtree{d0, d1}, &keys, tail)
			}
		}
	}
}

// checkTail checks what walkLanes8x2d left in tail for a group of ln
// lanes where some lane of trees ds is deeper than nodes32Head levels:
// for each tree, the lanes deeper than that, in their order, with their
// keys and their leaves' 4-byte words.
func checkTail(t *testing.T, ln int, ds [2]*dtree, keys *[3][treeGroup]uint64, tail *laneTail) {
	t.Helper()
	var deep [2][]int
	for ti, d := range ds {
		for i := range (ln + 7) &^ 7 {
			x, depth := d.root, 0
			for ; x&treeLeaf == 0; depth++ {
				x = d.nodes[uint32(x)+uint32(keys[x>>56&3][i]>>(x>>48&63))&uint32(x>>32&0xffff)]
			}
			if depth > nodes32Head {
				deep[ti] = append(deep[ti], i)
			}
		}
	}
	if len(deep[0])+len(deep[1]) == 0 {
		return // no tail
	}
	for ti, d := range ds {
		for j, i := range deep[ti] {
			k := treeKey{keys[0][i], keys[1][i], keys[2][i]}
			leaf, _ := node32(d.walk(&k))
			if tail.idx[ti][j] != uint64(i) || tail.cur[ti][j] != uint64(leaf) {
				t.Fatalf("group of %d, tree %d, tail entry %d: lane %d, word %#x; want lane %d, word %#x", ln, ti, j, tail.idx[ti][j], tail.cur[ti][j], i, leaf)
			}
			for w := range 3 {
				if tail.keys[ti][w][j] != keys[w][i] {
					t.Fatalf("group of %d, tree %d, tail entry %d: key word %d %#x, want lane %d's %#x", ln, ti, j, w, tail.keys[ti][w][j], i, keys[w][i])
				}
			}
		}
	}
}

// TestWalkGroups checks the group walks (walkGroup over 8-byte node
// words, walkGroup32 over 4-byte ones), which cvecBurst takes where
// walkQuads does not run, against the scalar walk (dtree.walk): the two
// trees of ClassBench-style sets of 1k and 10k rules, every group length
// up to treeGroup, a packet that is not IP at the empty leaf.
func TestWalkGroups(t *testing.T) {
	for _, n := range []int{1000, 10000} {
		tr, fs := twoTrees(t, n, 13, 2*treeGroup)
		for i := 0; i < len(fs); i += 29 {
			fs[i] = rule.Fields{} // not IP
		}
		var keys [treeGroup]treeKey
		var got, got32 [treeGroup]uint64
		steps := 0
		for ti := range tr.t {
			d := tr.t[ti]
			// Padded trees' chains of one child have no 4-byte form.
			var ok bool
			if d.nodes32, d.root32, ok = d.words32(); ok == tr.padded {
				t.Fatalf("%d rules, tree %d: 4-byte node words %v, padded %v", n, ti, ok, tr.padded)
			}
			if n == 10000 && !ok {
				t.Fatalf("%d rules, tree %d: no 4-byte node words to test", n, ti)
			}
			for ln := 1; ln <= treeGroup; ln++ {
				grp := fs[ln%2*treeGroup:][:ln]
				for i := range grp {
					keys[i] = treeKey{grp[i].Src.Hi, grp[i].Dst.Hi, miscWord(&grp[i]) | tr.topBits(&grp[i])}
				}
				d.walkGroup(grp, &got, &keys)
				got32 = got
				if ok {
					d.walkGroup32(grp, &got32, &keys)
				}
				for i := range grp {
					want := treeLeaf
					if grp[i].Family != 0 {
						want = d.walk(&keys[i])
						_, st := wordWalk(&d, &keys[i])
						steps += st
					}
					if got[i] != want || got32[i] != want {
						t.Fatalf("%d rules, tree %d, group of %d: lane %d reached %#x (8-byte words) and %#x (4-byte), the scalar walk %#x", n, ti, ln, i, got[i], got32[i], want)
					}
				}
			}
		}
		if steps < treeGroup*treeGroup {
			t.Fatalf("%d rules: %d walk steps: the trees are too shallow to test the walks", n, steps)
		}
	}
}

// wordWalk walks d for key k from its root, one 8-byte node word at a
// time, and returns the leaf word it reaches and the steps it took.
func wordWalk(d *dtree, k *treeKey) (leaf uint64, steps int) {
	x := d.root
	for x&treeLeaf == 0 {
		x = d.nodes[child(x, k[x>>56&3])]
		steps++
	}
	return x, steps
}

// twoTrees compiles a set of n ClassBench-style rules (seed n+seed) and
// returns its trees, which must be two, and k packets generated from it.
func twoTrees(t *testing.T, n int, seed uint64, k int) (*trees, []rule.Fields) {
	t.Helper()
	set := traffic.ClassBenchRules(uint64(n)+seed, n)
	tab, err := Compile(set)
	if err != nil {
		t.Fatal(err)
	}
	if tab.tr == nil || len(tab.tr.t) != 2 {
		t.Fatalf("%d rules: want two trees", n)
	}
	g := traffic.NewGenerator(traffic.Config{Seed: uint64(n), Rules: set, RuleFraction: 0.9})
	return tab.tr, parseAll(g.Frames(k))
}
