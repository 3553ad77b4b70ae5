package classifier

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/scrubd/scrubd/swpath/rule"
	"github.com/scrubd/scrubd/swpath/traffic"
)

// TestWalkLanes: the lane walk (the AVX-512 stub where the CPU has it)
// reaches the leaf of the scalar walk for every lane, over every tree of
// a 1k-rule set (per-packet trees) and a 10k-rule set (group trees), for
// groups of every length from 1 to treeGroup: every lane to the group's
// length rounded up to eight walks from the root (a packet that is not
// IP too, with its zero key), and the lanes past them keep their words.
func TestWalkLanes(t *testing.T) {
	if !lanesWalk {
		t.Log("no AVX-512 here: walkLanes is walkLanesGo, checked against the scalar walk")
	}
	for _, n := range []int{1000, 10000} {
		set := traffic.ClassBenchRules(uint64(n)+7, n)
		tab, err := Compile(set)
		if err != nil {
			t.Fatal(err)
		}
		tr := tab.tr
		if tr == nil || len(tr.t) == 0 {
			t.Fatalf("%d rules: no trees", n)
		}
		// The same trees with 4-byte node words, whatever their size,
		// but for padded trees (no lane walk here), whose chains of one
		// child have no 4-byte form.
		tr32 := *tr
		tr32.t = slices.Clone(tr.t)
		for i := range tr32.t {
			d := &tr32.t[i]
			var ok bool
			if d.nodes32, d.root32, ok = d.words32(); ok == tr.padded {
				t.Fatalf("%d rules, tree %d: 4-byte node words %v, padded %v", n, i, ok, tr.padded)
			}
		}
		g := traffic.NewGenerator(traffic.Config{Seed: uint64(n), Rules: set, RuleFraction: 0.9})
		fs := parseAll(g.Frames(4 * treeGroup))
		for i := 0; i < len(fs); i += 37 {
			fs[i] = rule.Fields{} // not IP
		}
		var keys [3][treeGroup]uint64
		var cur, want [treeGroup]uint64
		var want2 [2][treeGroup]uint64 // the scalar walks of trees 0 and 1
		steps, walks := 0, 0
		for ln := 1; ln <= treeGroup; ln++ {
			grp := fs[ln%3*treeGroup:][:ln]
			for i := range grp {
				k := treeKey{grp[i].Src.Hi, grp[i].Dst.Hi, miscWord(&grp[i]) | tr.topBits(&grp[i])}
				keys[0][i], keys[1][i], keys[2][i] = k[0], k[1], k[2]
			}
			for ti := range tr.t {
				d := &tr.t[ti]
				pad := (ln + 7) &^ 7
				for i := range cur {
					cur[i] = treeLeaf | uint64(i) // past the rounded group: kept
				}
				for i := range pad {
					c := d.root
					for c&treeLeaf == 0 {
						c = d.nodes[uint32(c)+uint32(keys[c>>56&3][i]>>(c>>48&63))&uint32(c>>32&0xffff)]
						steps++
					}
					want[i] = c
					walks++
				}
				for i := pad; i < treeGroup; i++ {
					want[i] = cur[i]
				}
				got := cur
				d.walkLanes(&keys, &got, ln)
				if got != want {
					for i := range got {
						if got[i] != want[i] {
							t.Fatalf("%d rules, tree %d, group of %d: lane %d reached %#x, the scalar walk %#x", n, ti, ln, i, got[i], want[i])
						}
					}
				}
				got = cur
				d.walkLanesGo(&keys, &got, ln)
				if got != want {
					t.Fatalf("%d rules, tree %d, group of %d: walkLanesGo differs from the scalar walk", n, ti, ln)
				}
				if ti < 2 {
					want2[ti] = want
				}
			}
			// Both trees at once (walkLanes8x2 where the stub runs), and
			// over their 4-byte words (walkLanes8x2d, walkLanes2Go32).
			if len(tr.t) == 2 {
				for _, words := range [...]string{"8-byte", "4-byte", "4-byte with a tail"} {
					d0, d1 := tr.t[0], tr.t[1]
					if words != "8-byte" && tr.padded {
						continue
					}
					var tail *laneTail
					if words != "8-byte" {
						d0, d1 = tr32.t[0], tr32.t[1]
					}
					if words == "4-byte with a tail" {
						tail = new(laneTail)
					}
					got2 := [2][treeGroup]uint64{cur, cur}
					walkLanes2(&d0, &d1, &keys, &got2, ln, tail)
					if tail != nil && lanesWalk {
						checkTail(t, ln, [2]*dtree{&d0, &d1}, &keys, tail)
					}
					for ti := range got2 {
						for i := range got2[ti] {
							if got2[ti][i] != want2[ti][i] {
								t.Fatalf("%d rules, both trees, %s words, group of %d: tree %d lane %d reached %#x, the scalar walk %#x", n, words, ln, ti, i, got2[ti][i], want2[ti][i])
							}
						}
					}
				}
			}
		}
		// A tree that is one leaf: every lane to the rounded length
		// takes it.
		leaf := dtree{root: treeLeaf | 3<<32 | 8, nodes: []uint64{treeLeaf}}
		got := [treeGroup]uint64{}
		leaf.walkLanes(&keys, &got, 9)
		for i, c := range got {
			if w := map[bool]uint64{true: leaf.root, false: 0}[i < 16]; c != w {
				t.Fatalf("a one-leaf tree, 9 lanes: lane %d holds %#x, want %#x", i, c, w)
			}
		}
		if steps < walks {
			t.Fatalf("%d rules: %d walk steps over %d walks: the trees are too shallow to test the walk", n, steps, walks)
		}
		if len(tr.t) != 2 {
			t.Fatalf("%d rules: %d trees: want two, to test the walk of both at once", n, len(tr.t))
		}
	}
}

// TestScanLanes2 checks scanLanes2 and scanLanes4 (the AVX-512 stubs
// where the CPU has them) against scanLanes2Go and scanLanes4Go (every
// packet's res, out and the list of the rest), and res against leafScan2
// and leafScan4 packet by packet (each leaf's first two blocks by
// leafBlocks for scanLanes4, leaves of up to 16 records), on random blocks
// as TestLeafScan4 makes them: lanes that pass, lanes that miss by one
// bit, masks of zero, entries with and without flags, packets with and
// without ports, and packets that are not IP (flags 0). The stubs run
// with prefetch distances of 0, 4 and 8 (round by round), which must
// change no result.
// randVrule returns a vrule of 1000 random rules and -1 last, for the
// lane scans' tests.
func randVrule(r *rand.Rand) []int32 {
	vrule := make([]int32, 1001)
	for i := range vrule {
		vrule[i] = int32(r.IntN(1 << 20))
	}
	vrule[1000] = -1
	return vrule
}

func TestScanLanes2(t *testing.T) {
	if !lanesWalk {
		t.Log("no AVX-512 here: the scans are scanLanes2Go and scanLanes4Go, checked against leafScan2 and leafScan4")
	}
	r := rand.New(rand.NewPCG(3, 4))
	rounds := 400
	if testing.Short() {
		rounds = 60
	}
	vrule := randVrule(r)
	var s, g laneScratch
	out, gout := make([]int32, treeGroup), make([]int32, treeGroup)
	var decided, passed, checked, total [2]int
	for it := range rounds {
		// Eight keys a round, so that a lane made to pass for one passes
		// for an eighth of the packets.
		var pool [8][4]uint32
		for i := range pool {
			pool[i] = [4]uint32{r.Uint32(), r.Uint32(), r.Uint32(), r.Uint32()}
		}
		var keys [treeGroup][4]uint32
		for i := range keys {
			keys[i] = pool[r.IntN(len(pool))]
			s.sds[i] = uint64(keys[i][0])<<32 | uint64(keys[i][1])
			s.keys[2][i] = uint64(keys[i][2])<<32 | uint64(keys[i][3])
			s.flags[i] = laneFull
			if r.IntN(2) == 0 {
				s.flags[i] |= lanePorts
			}
			if r.IntN(20) == 0 {
				s.flags[i] = 0 // not IP
			}
		}
		var blk [2][]sblock
		for ti := range blk {
			blk[ti] = make([]sblock, 16)
			blk[ti][0] = neverBlock[0]
			for b := 1; b < 16; b++ {
				// Lanes made to pass for one key each.
				bs := &blk[ti][b]
				for j := range vecBlock {
					key := keys[r.IntN(treeGroup)]
					for f := range 4 {
						m := r.Uint32() & r.Uint32()
						if r.IntN(4) == 0 {
							m = 0
						}
						bs.m[f][j], bs.v[f][j] = m, key[f]&m
					}
					if r.IntN(3) != 0 {
						f, bit := r.IntN(4), uint32(1)<<r.IntN(32)
						bs.m[f][j] |= bit
						bs.v[f][j] = key[f]&bs.m[f][j] ^ bit
					}
					bs.e[j] = uint32(r.IntN(1100))&laneEnt | uint32(r.IntN(4))<<30
				}
			}
		}
		// scanLanes2 narrows its checks (useful) in every other round.
		narrow := it%2 == 0
		for k, scan := range []struct {
			stub   func(*laneScratch, []sblock, []sblock, []int32, []int32, int, int) int
			ref    func(*laneScratch, []sblock, []sblock, []int32, []int32, int) int
			maxRec int // records a leaf
			long   uint64
		}{
			{
				func(s *laneScratch, b0, b1 []sblock, vrule, out []int32, n, pfd int) int {
					return scanLanes2(s, b0, b1, vrule, out, n, pfd, narrow)
				},
				func(s *laneScratch, b0, b1 []sblock, vrule, out []int32, n int) int {
					return scanLanes2Go(s, b0, b1, vrule, out, n, narrow)
				},
				vecBlock, treeLong,
			},
			{scanLanes4, scanLanes4Go, 2 * vecBlock, treeLonger},
		} {
			stub := scan.stub
			if !lanesCPU {
				stub = func(s *laneScratch, b0, b1 []sblock, vrule, out []int32, n, _ int) int {
					return scan.ref(s, b0, b1, vrule, out, n)
				}
			}
			for i := range treeGroup {
				// Leaf words: the record index names the block; the
				// count, and treeLong or treeLonger where the leaf is
				// longer than the blocks scanned (one in 16).
				for ti := range 2 {
					w := treeLeaf | uint64(r.IntN(scan.maxRec+1))<<32 | uint64(r.IntN(15)*vecBlock)
					if r.IntN(16) == 0 {
						w |= scan.long
					}
					s.cur[ti][i] = w
				}
			}
			n := 1 + r.IntN(treeGroup)
			if it%5 == 0 {
				n = treeGroup
			}
			s.res, s.rest = [treeGroup]uint64{}, [treeGroup]uint8{}
			for i := range out {
				out[i], gout[i] = -7, -7
			}
			g = s
			nr := stub(&s, blk[0], blk[1], vrule, out, n, it%3*4)
			gr := scan.ref(&g, blk[0], blk[1], vrule, gout, n)
			if nr != gr || s.rest != g.rest || s.res != g.res || !slices.Equal(out, gout) {
				t.Fatalf("round %d, scan %d, %d packets: %d left, res %x, out %v; Go %d left, res %x, out %v", it, k, n, nr, s.res[:n], out[:n], gr, g.res[:n], gout[:n])
			}
			rest := 0
			for i := range n {
				var b, c uint32
				if k == 0 {
					b0, b1 := &blk[0][uint32(s.cur[0][i])/vecBlock], &blk[1][uint32(s.cur[1][i])/vecBlock]
					b, c = leafScan2(s.sds[i], s.keys[2][i], s.flags[i], b0, b1)
					if narrow {
						c = useful(c, b, &b0.e, &b1.e)
					}
				} else {
					a0, c0 := leafBlocks(blk[0], s.cur[0][i])
					a1, c1 := leafBlocks(blk[1], s.cur[1][i])
					b, c = leafScan4(s.sds[i], s.keys[2][i], s.flags[i], a0, c0, a1, c1)
				}
				if uint64(b)|uint64(c)<<32 != s.res[i] {
					t.Fatalf("round %d, scan %d: packet %d: %#x, leafScan %#x %#x", it, k, i, s.res[i], b, c)
				}
				if rest < nr && int(s.rest[rest]) == i {
					rest++
					if out[i] != -7 {
						t.Fatalf("round %d, scan %d: packet %d left to Go, but out %d", it, k, i, out[i])
					}
				} else {
					decided[k]++
					if want := vrule[min(b, 1000)]; out[i] != want {
						t.Fatalf("round %d, scan %d: packet %d decided %d, want %d", it, k, i, out[i], want)
					}
				}
				total[k]++
				if b != treeNoRank {
					passed[k]++
				}
				if c>>8 != 0 {
					checked[k]++
				}
			}
			if rest != nr {
				t.Fatalf("round %d, scan %d: rest lists %d packets, not in order of packets", it, k, nr)
			}
		}
	}
	for k := range 2 {
		if passed[k] < total[k]/8 || checked[k] < total[k]/16 || decided[k] < total[k]/8 || decided[k] > total[k]*7/8 {
			t.Fatalf("scan %d: %d of %d packets with a deciding lane, %d with lanes to check past the first block, %d decided: the blocks test little", k, passed[k], total[k], checked[k], decided[k])
		}
	}
}

// TestLanesForced runs the tree tests with the lane walk the other way
// round: where the stubs run by default, with the walks two packets at a
// time (vecEntry2of2, walkGroup) that CPUs without AVX-512 take; where
// no stub is built (arm64, the purego tag), with the lane walk in Go
// (walkLanesGo, scanLanes2Go, scanLanes4Go). An amd64 CPU without AVX-512
// cannot run the stubs, and its default run is the first case. Then,
// with the lane walk, every set of more than treeWalkMax bytes takes
// the group walk (treeLanesMax 0), as sets too big for blocks do; and
// every set of more than treeBigEntries entries takes leaves of two
// blocks (treeOneBlockMax 0), as sets too big for one-block leaves do.
func TestLanesForced(t *testing.T) {
	if lanesStub && !lanesWalk {
		t.Log("amd64 without AVX-512: the default run takes the walks without lanes, and the stubs cannot run here")
		return
	}
	defer func(v bool) { lanesWalk = v }(lanesWalk)
	defer func(v int) { treeLanesMax = v }(treeLanesMax)
	defer func(v int) { treeOneBlockMax = v }(treeOneBlockMax)
	defer func(v int) { oneBlockEntries = v }(oneBlockEntries)
	defer func(v bool) { treeCBlocks = v }(treeCBlocks)
	lanesWalk = !lanesWalk
	t.Run("other", treeSuite)
	lanesWalk = true
	lanesMax, oneMax := treeLanesMax, treeOneBlockMax
	treeLanesMax = 0
	t.Run("group", treeSuite)
	treeLanesMax, treeOneBlockMax, treeCBlocks = lanesMax, 0, false
	t.Run("twoblock", treeSuite)
	// Compact blocks for sets of any size (not only those too big for
	// leaves of one sblock): the suite's sets are of up to 3000 rules.
	treeOneBlockMax, treeCBlocks, oneBlockEntries = 0, true, 0
	if tab, err := Compile(traffic.ClassBenchRules(3000, 3000)); err != nil || tab.tr == nil || !tab.tr.cvec {
		t.Fatalf("3000 rules with compact blocks forced: %v, trees %v", err, tab != nil && tab.tr != nil)
	}
	t.Run("cblocks", treeSuite)
	// Tight blocks for every set whose classes fit (tblockMin 0), where
	// the CPU has TSCAN's instructions.
	if lanesTight {
		defer func(v int) { tblockMin = v }(tblockMin)
		tblockMin = 0
		if tab, err := Compile(traffic.ClassBenchRules(3000, 3000)); err != nil || tab.tr == nil || !tab.tr.tight {
			t.Fatalf("3000 rules with tight blocks forced: %v, trees %v", err, tab != nil && tab.tr != nil)
		}
		t.Run("tblocks", treeSuite)
	}
	treeOneBlockMax = oneMax
}

// TestCGroupForced runs the tree suite where bursts take compact blocks
// without the lane walk (cvecGroup: the group walk, then cblockScan2 a
// packet at a time, cvecBurst) for sets of every size, on any CPU: with
// AVX2 the stub runs, elsewhere its Go reference; then again over 4-byte
// node words (walkGroup32) for every set.
func TestCGroupForced(t *testing.T) {
	defer func(v bool) { lanesWalk = v }(lanesWalk)
	defer func(v bool) { cvecGroup = v }(cvecGroup)
	defer func(v int) { oneBlockEntries = v }(oneBlockEntries)
	defer func(v int) { cgroupMin = v }(cgroupMin)
	defer func(v int) { cblockMin = v }(cblockMin)
	lanesWalk, cvecGroup, oneBlockEntries, cgroupMin, cblockMin = false, true, 0, 0, 0
	if tab, err := Compile(traffic.ClassBenchRules(3000, 3000)); err != nil || tab.tr == nil || !tab.tr.cvec {
		t.Fatalf("3000 rules with compact blocks forced: %v, trees %v", err, tab != nil && tab.tr != nil)
	}
	t.Run("cgroup", treeSuite)
	// And over 4-byte node words (walkGroup32) for every set.
	defer func(v int) { nodes32Min = v }(nodes32Min)
	nodes32Min = 0
	if tab, err := Compile(traffic.ClassBenchRules(3000, 3000)); err != nil || tab.tr == nil || tab.tr.t[0].nodes32 == nil {
		t.Fatalf("3000 rules with 4-byte node words forced: %v, trees %v", err, tab != nil && tab.tr != nil)
	}
	t.Run("cgroup32", treeSuite)
}

// TestTreeInBounds: the trees the stubs walk without bounds checks are
// checked when built; a node or leaf word that points past its tree fails
// the check, as does a node's key word 3 (treeKey has three).
func TestTreeInBounds(t *testing.T) {
	keepBlocks(t)
	defer func(v bool) { vecScan = v }(vecScan)
	for _, c := range []struct {
		n   int
		vec bool // vecScan; without it the 1k set takes windows
	}{{1000, vecScan}, {10000, vecScan}, {1000, false}, {20000, vecScan}} {
		vecScan = c.vec
		n := c.n
		tab, err := Compile(traffic.ClassBenchRules(uint64(n), n))
		if err != nil {
			t.Fatal(err)
		}
		if want := n == 1000 && !tab.tr.vec; tab.tr.window != want {
			t.Fatalf("%d rules, vecScan %v: windows %v, want %v", n, c.vec, tab.tr.window, want)
		}
		win := tab.tr.window
		d := &tab.tr.t[0]
		if !d.inBounds(win) {
			t.Fatalf("%d rules: a built tree fails the check", n)
		}
		leaf, node := -1, -1
		for i, w := range d.nodes {
			if w&treeLeaf != 0 && w>>32&0xffffff > 0 {
				leaf = i
			} else if w&treeLeaf == 0 {
				node = i
			}
		}
		if leaf < 0 || node < 0 {
			t.Fatalf("%d rules: no leaf with records (%d) or no node (%d) below the root", n, leaf, node)
		}
		nrec := uint64(max(len(d.rec), len(d.crec), vecBlock*len(d.cblk)))
		if n == 20000 && d.cblk == nil && lanesWalk {
			t.Fatalf("%d rules: no compact blocks", n)
		}
		for _, c := range []struct {
			at   int
			word uint64
		}{
			{node, d.nodes[node]&^0xffffffff | uint64(len(d.nodes))}, // children past the nodes
			{node, d.nodes[node] | 3<<56},                            // key word 3
			{leaf, treeLeaf | 1<<32 | nrec},                          // a record past the records
			{leaf, treeLeaf | nrec},                                  // an empty leaf past them
			{leaf, treeLeaf | 2<<32 | (nrec - 1)},                    // two records from the last
		} {
			old := d.nodes[c.at]
			d.nodes[c.at] = c.word
			if d.inBounds(win) {
				t.Errorf("%d rules: word %d set to %#x passes the check", n, c.at, c.word)
			}
			d.nodes[c.at] = old
		}
		// One record whose window runs past the records: only a window
		// reads past it.
		old := d.nodes[leaf]
		d.nodes[leaf] = treeLeaf | 1<<32 | (nrec - recWindow + 1)
		if got := d.inBounds(win); got == win {
			t.Errorf("%d rules, windows %v: a leaf whose window runs past the records: check %v, want %v", n, win, got, !win)
		}
		d.nodes[leaf] = old
		if !d.inBounds(win) {
			t.Fatalf("%d rules: the tree restored fails the check", n)
		}
	}
}

// TestLanesLayout: which layout a set gets. With the lane walk, the 500
// ClassBench-style set (two trees, in the cache) is laid out in blocks,
// and the 1k, 3k, 10k, 20k and 100k sets of two trees in compact blocks
// (the 1k and 3k sets' trees pass cblockMin, the others have more than
// oneBlockEntries entries); a 10k set of four trees (treeJoin off) keeps
// the group walk's compact records. Without compact blocks (treeCBlocks
// off, as for sets whose checks do not fit them) the 3k and 10k sets take
// blocks, the 20k set blocks of leaves of two (vecLong: its trees of
// leaves of one block pass treeOneBlockMax), and the 100k set the group
// walk. Without the lane walk only the 1k and 3k sets have blocks (where
// a scan stub is built); where bursts take compact blocks without it
// (cvecGroup), the 10k, 20k and 100k sets of two trees have those.
func TestLanesLayout(t *testing.T) {
	defer func(v bool) { lanesWalk = v }(lanesWalk)
	defer func(v bool) { cvecGroup = v }(cvecGroup)
	modes := [][2]bool{{false, false}, {false, true}}
	if lanesWalk {
		modes = append(modes, [2]bool{true, false})
	}
	for _, m := range modes {
		lanesWalk, cvecGroup = m[0], m[1]
		t.Run(fmt.Sprintf("lanes=%v/cgroup=%v", m[0], m[1]), testLanesLayout)
	}
}

func testLanesLayout(t *testing.T) {
	defer func(v bool) { treeJoin = v }(treeJoin)
	defer func(v bool) { treeCBlocks = v }(treeCBlocks)
	for _, c := range []struct {
		n          int
		join       bool
		cblocks    bool // treeCBlocks
		lanes      bool // the layout with the lane walk: blocks
		long       bool
		trees      int
		noLanesVec bool // blocks without the lane walk
	}{
		{500, true, true, true, false, 2, true},
		{1000, true, true, false, false, 2, true},
		{3000, true, true, false, false, 2, true},
		{10000, true, true, false, false, 2, false},
		{20000, true, true, false, false, 2, false},
		{10000, false, true, false, false, 4, false},
		{100000, true, true, false, false, 2, false},
		{3000, true, false, true, false, 2, true},
		{10000, true, false, true, false, 2, false},
		{20000, true, false, true, true, 2, false},
		{100000, true, false, false, false, 2, false},
	} {
		treeJoin, treeCBlocks = c.join, c.cblocks
		tab, err := Compile(traffic.ClassBenchRules(uint64(c.n), c.n))
		if err != nil {
			t.Fatal(err)
		}
		tr := tab.tr
		if tr == nil || len(tr.t) != c.trees {
			t.Fatalf("%d rules, join %v: %d trees, want %d", c.n, c.join, len(tr.t), c.trees)
		}
		wantVec, wantLong := c.noLanesVec && vecScan, false
		if lanesWalk {
			wantVec, wantLong = c.lanes, c.long
		}
		// With the lane walk, the sets of two trees past the cache get
		// compact blocks.
		wantCVec := c.cblocks && !c.lanes && c.trees == 2 && (lanesWalk && vecScan && c.n >= 1000 || !lanesWalk && cvecGroup && c.n >= 10000)
		// The 500, 1k and 3k sets' trees are small enough for the walk of one
		// packet at a time; the others are compact without blocks.
		wantCompact := c.n > 3000 && !(lanesWalk && c.lanes) && !wantCVec
		// Of those, the sets past tblockMin get tight blocks (the 100k
		// set's 19.6 MB of compact blocks; the 20k set's are 3.9 MB), only
		// with the lane walk: only its scans read them (cvecBurst scans
		// compact blocks).
		if want := wantCVec && lanesWalk && lanesTight && c.n == 100000; tr.tight != want {
			t.Fatalf("%d rules, join %v, compact blocks %v: tight blocks %v, want %v", c.n, c.join, c.cblocks, tr.tight, want)
		}
		if tr.vec != wantVec || tr.compact != wantCompact || tr.vecLong != wantLong || tr.cvec != wantCVec {
			t.Fatalf("%d rules, join %v, compact blocks %v, lanes %v, compact blocks without lanes %v: blocks %v, compact %v, two-block leaves %v, compact blocks %v; want %v, %v, %v, %v", c.n, c.join, c.cblocks, lanesWalk, cvecGroup, tr.vec, tr.compact, tr.vecLong, tr.cvec, wantVec, wantCompact, wantLong, wantCVec)
		}
	}
}
