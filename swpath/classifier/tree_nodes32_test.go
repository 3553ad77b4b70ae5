package classifier

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

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

// TestNodes32: sets of compact and tight blocks with 4-byte node words
// (nodes32Min lowered) decide as the linear reference (and as their
// tables without them, checkAgainstReference), and every node word of
// their trees is kept (node64). At the default nodes32Min, a 20k-rule
// set (0.6 MiB of node words) gets none.
func TestNodes32(t *testing.T) {
	needCBlocks(t)
	sizes := []int{20000, 50000}
	if testing.Short() {
		sizes = sizes[:1]
	}
	for _, n := range sizes {
		set := withHeld(classBenchSet(n, false), 50)
		tab, err := Compile(set)
		if err != nil {
			t.Fatal(err)
		}
		if tab.tr == nil || len(tab.tr.t) != 2 || tab.tr.t[0].nodes32 != nil {
			t.Fatalf("%d rules: trees %v, 4-byte words at the default nodes32Min", n, tab.tr != nil)
		}
		was := nodes32Min
		nodes32Min = 0
		tab32, err := Compile(set)
		nodes32Min = was
		if err != nil {
			t.Fatal(err)
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
		fs := parseAll(g.Frames(3000))
		nodes32Min = 0
		m := checkAgainstReference(t, fmt.Sprintf("%d rules, 4-byte node words", n), set, fs)
		nodes32Min = was
		if m < 1000 {
			t.Fatalf("%d rules: %d of 3000 packets matched", n, m)
		}
		// Fresh 5-tuples, bursts of every length up to two groups: the
		// same rules as the table with 8-byte words.
		fresh := parseAll(traffic.NewGenerator(traffic.Config{Seed: uint64(n) + 1, Rules: set, RuleFraction: 0.95}).Frames(8192))
		want, got := make([]int32, len(fresh)), make([]int32, len(fresh))
		for off, ln := 0, 1; off < len(fresh); off, ln = off+ln, ln%(2*treeGroup)+1 {
			end := min(off+ln, len(fresh))
			tab.DecideBurst(fresh[off:end], want[off:end])
			tab32.DecideBurst(fresh[off:end], got[off:end])
		}
		if !slices.Equal(got, want) {
			for i := range got {
				if got[i] != want[i] {
					t.Fatalf("%d rules: packet %d decided by rule %d with 4-byte words, %d without", n, i, got[i], want[i])
				}
			}
		}
	}
}

// TestWalkLanes32Words walks two trees laid out by hand over their
// 4-byte words (walkLanes2: walkLanes8x2d where the stub runs, and its
// reference walkLanes2Go32) against
// the scalar walk of their 8-byte words, for groups of every length: a
// root that cuts 4 bits of the destination's top, whose children are
// leaves with every field of a 4-byte leaf at its extremes (treeLong, a
// count of 255, the last first record) and an inner node that cuts the
// protocol's top 2 bits into children at the end of 2^19 words (the
// last first child a 4-byte word holds); the second tree is one leaf.
func TestWalkLanes32Words(t *testing.T) {
	const last = 1<<19 - 4
	d := dtree{root: 1<<56 | 60<<48 | 0xf<<32 | 1, nodes: make([]uint64, last+4)}
	leaves := []uint64{1 << 63, 1<<63 | 1<<62 | 255<<32 | 0x3fffff, 1<<63 | 8<<32 | 0x2aaaaa, 1<<63 | 1<<62 | 1<<32 | 0x155555}
	for i := range d.nodes {
		d.nodes[i] = treeLeaf // the words no walk reaches
	}
	for i := range 16 {
		d.nodes[1+i] = leaves[i%len(leaves)]
	}
	d.nodes[1+9] = 2<<56 | 38<<48 | 3<<32 | last // the protocol's top 2 bits
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
	rng := rand.New(rand.NewPCG(3, 4))
	var keys [3][treeGroup]uint64
	for ln := 1; ln <= treeGroup; ln++ {
		for i := range treeGroup {
			keys[0][i], keys[1][i], keys[2][i] = rng.Uint64(), rng.Uint64(), rng.Uint64()
		}
		var got [2][treeGroup]uint64
		for i := range got[0] {
			got[0][i], got[1][i] = uint64(i), uint64(i)<<1
		}
		want := got
		for i := range (ln + 7) &^ 7 {
			k := treeKey{keys[0][i], keys[1][i], keys[2][i]}
			want[0][i], want[1][i] = d.walk(&k), one.walk(&k)
		}
		ref := got
		walkLanes2Go32(&d, &one, &keys, &ref, ln)
		if ref != want {
			t.Fatalf("group of %d: walkLanes2Go32 differs from the scalar walk", ln)
		}
		walkLanes2(&d, &one, &keys, &got, ln)
		if got != want {
			for ti := range got {
				for i := range got[ti] {
					if got[ti][i] != want[ti][i] {
						t.Fatalf("group of %d: tree %d lane %d reached %#x, the scalar walk %#x", ln, ti, i, got[ti][i], want[ti][i])
					}
				}
			}
		}
	}
}
