package classifier

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/scrubd/scrubd/swpath/traffic"
)

// TestLeafScan4 checks leafScan4 and leafScan2 (the stubs where they are
// built) against leafScan4Go and leafScan2Go on random blocks: lanes that pass, lanes that miss by one
// bit, masks of zero, entries with and without flags, packets with and
// without ports.
func TestLeafScan4(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var bs [4]sblock
	n := 20000
	if testing.Short() {
		n = 2000
	}
	passed, checked, passed2, checked2 := 0, 0, 0, 0
	for it := range n {
		key := [4]uint32{r.Uint32(), r.Uint32(), r.Uint32(), r.Uint32()}
		for i := range bs {
			for j := range vecBlock {
				for f := range 4 {
					m := r.Uint32() & r.Uint32()
					if r.IntN(4) == 0 {
						m = 0
					}
					bs[i].m[f][j], bs[i].v[f][j] = m, key[f]&m
				}
				if r.IntN(48) != 0 {
					// The lane misses by one bit of one field.
					f, b := r.IntN(4), uint32(1)<<r.IntN(32)
					bs[i].m[f][j] |= b
					bs[i].v[f][j] = key[f]&bs[i].m[f][j] ^ b
				}
			}
			for j := range vecBlock {
				bs[i].e[j] = r.Uint32()&laneEnt | uint32(r.IntN(4))<<30
			}
		}
		if it%7 == 0 {
			bs[r.IntN(4)] = neverBlock[0]
		}
		sd := uint64(key[0])<<32 | uint64(key[1])
		misc := uint64(key[2])<<32 | uint64(key[3])
		fl := uint32(laneFull)
		if r.IntN(2) == 0 {
			fl |= lanePorts
		}
		best, check := leafScan4(sd, misc, fl, &bs[0], &bs[1], &bs[2], &bs[3])
		wantBest, wantCheck := leafScan4Go(sd, misc, fl, &bs[0], &bs[1], &bs[2], &bs[3])
		if best != wantBest || check != wantCheck {
			t.Fatalf("round %d: best %#x check %#x, Go gives %#x %#x", it, best, check, wantBest, wantCheck)
		}
		// leafScan2 over the first two blocks: what leafScan4 gives when
		// the other two never pass, and leafScan2Go.
		best2, check2 := leafScan2(sd, misc, fl, &bs[0], &bs[1])
		want2, wantCheck2 := leafScan4(sd, misc, fl, &bs[0], &bs[1], &neverBlock[0], &neverBlock[0])
		go2, goCheck2 := leafScan2Go(sd, misc, fl, &bs[0], &bs[1])
		if best2 != want2 || check2 != wantCheck2 || best2 != go2 || check2 != goCheck2 {
			t.Fatalf("round %d: leafScan2 best %#x check %#x, leafScan4 %#x %#x, Go %#x %#x", it, best2, check2, want2, wantCheck2, go2, goCheck2)
		}
		if best2 != treeNoRank {
			passed2++
		}
		if check2 != 0 {
			checked2++
		}
		if best != treeNoRank {
			passed++
		}
		if check != 0 {
			checked++
		}
	}
	if passed < n/8 || checked < n/8 || passed > n*7/8 || checked > n*7/8 || passed2 < n/16 || checked2 < n/16 {
		t.Fatalf("%d of %d rounds with a deciding lane (%d in two blocks), %d with lanes to check (%d): the blocks test little", passed, n, passed2, checked, checked2)
	}
}

// TestTreeBlocks: a 1k ClassBench-style set decides with blocks when the
// scan stub is on, two trees of them (leafScan2), or four without the
// join (leafScan4); every leaf's records start a block, the blocks hold
// the records' checks, leaves of more than a block are marked (treeLong),
// and block 0 (the empty leaves') passes nothing.
func TestTreeBlocks(t *testing.T) {
	keepBlocks(t)
	for _, join := range []bool{true, false} {
		t.Run(fmt.Sprint("join=", join), func(t *testing.T) {
			defer func(v bool) { treeJoin = v }(treeJoin)
			treeJoin = join
			treeBlocks(t, join)
		})
	}
}

func treeBlocks(t *testing.T, join bool) {
	defer func(v bool) { vecScan = v }(vecScan)
	vecScan = true
	tab, err := Compile(traffic.ClassBenchRules(1000, 1000))
	if err != nil {
		t.Fatal(err)
	}
	want := 4
	if join {
		want = 2
	}
	if tab.tr == nil || !tab.tr.vec || len(tab.tr.t) != want || tab.tr.vec2 != join {
		t.Fatalf("trees %v: want %d trees with blocks", tab.tr != nil, want)
	}
	for i := range tab.tr.t {
		d := &tab.tr.t[i]
		if len(d.rec) != vecBlock*len(d.blk) || &tab.tr.vblk[i][0] != &d.blk[0] {
			t.Fatalf("tree %d: %d records, %d blocks", i, len(d.rec), len(d.blk))
		}
		for _, n := range append([]uint64{d.root}, d.nodes...) {
			if n&treeLeaf != 0 && uint32(n)%vecBlock != 0 {
				t.Fatalf("tree %d: leaf %#x does not start a block", i, n)
			}
			if long := n&treeLeaf != 0 && n>>32&0xffffff > vecBlock; long != (n&treeLong != 0) {
				t.Fatalf("tree %d: leaf %#x marked long %v", i, n, !long)
			}
		}
		var want sblock
		for j := range d.rec {
			want.setLane(j%vecBlock, &d.rec[j])
			if j%vecBlock == vecBlock-1 && want != d.blk[j/vecBlock] {
				t.Fatalf("tree %d: block %d differs from its records", i, j/vecBlock)
			}
		}
		if d.blk[0] != neverBlock[0] {
			t.Fatalf("tree %d: block 0 is not the never-passing block", i)
		}
	}
	for _, key := range [][4]uint32{{}, {^uint32(0), ^uint32(0), ^uint32(0), ^uint32(0)}, {1, 1, 1, 1}} {
		if m := blockMask(&key, &neverBlock[0]); m != 0 {
			t.Fatalf("key %v passes lanes %#x of the never-passing block", key, m)
		}
	}
}

// TestTreesVecForced runs the differential and allocation tests with the
// other leaf scan than this build picks: the records scanned in Go where
// the stub is on (vecScan), the blocks through leafScan4 (leafScan4Go under
// the purego tag) where it is off, so both lookups are checked against
// the linear reference on every build.
func TestTreesVecForced(t *testing.T) {
	defer func(v bool) { vecScan = v }(vecScan)
	vecScan = !vecScan
	tab, err := Compile(traffic.ClassBenchRules(1000, 1000))
	if err != nil {
		t.Fatal(err)
	}
	if tab.tr == nil || tab.tr.vec != vecScan {
		t.Fatalf("trees %v: blocks %v, want %v", tab.tr != nil, tab.tr != nil && tab.tr.vec, vecScan)
	}
	treeSuite(t)
}

// treeSuite runs the tests of the tree lookups' decisions, each as a
// subtest: for the tests that force one of the lookup's variants.
func treeSuite(t *testing.T) {
	for _, c := range []struct {
		name string
		fn   func(*testing.T)
	}{
		{"DifferentialClassBench", TestDifferentialClassBench},
		{"DifferentialRandom", TestDifferentialRandom},
		{"EdgeRules", TestEdgeRules},
		{"RangePrefixes", TestRangePrefixes},
		{"TreeCounts", TestTreeCounts},
		{"TreesIPv6LikeIPv4", TestTreesIPv6LikeIPv4},
		{"TreeBurstHeldRecords", TestTreeBurstHeldRecords},
		{"DifferentialSlotForms", TestDifferentialSlotForms},
		{"ZeroAllocs", TestZeroAllocs},
	} {
		t.Run(c.name, c.fn)
	}
}

// leafScanSink keeps BenchmarkLeafScan2's results live.
var leafScanSink uint32

// BenchmarkLeafScan2 calls the one-packet scan of two blocks (the stub
// where there is one) in a loop: a call's cost, which an SSE/AVX
// transition inside it multiplies (TestStubsVEX).
func BenchmarkLeafScan2(b *testing.B) {
	var b0, b1 sblock
	for i := range b.N {
		best, check := leafScan2(uint64(i), 7, laneFull, &b0, &b1)
		leafScanSink += best + check
	}
}
