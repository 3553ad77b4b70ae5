package classifier

import "github.com/scrubd/scrubd/swpath/rule"

// The lane walk. A fresh-5-tuple burst's tree walks are dependent loads,
// one a level, each behind a handful of shifts and masks: at 1k
// ClassBench-style rules the two trees' walks alone took about a third of
// the time of the whole lookup, two packets at a time (vecEntry2of2).
// With AVX-512 a zmm register holds eight walks and one gather loads their
// next node words (walkLanes8), a level at a time over a whole group, so
// that a level costs eight packets about what it cost one. Sets of two
// trees with blocks (1k rules) then scan every packet's two first blocks
// in one call (scanLanes2), without leafScan2's call and setup a packet.
// Sets of up to treeLanesMax bytes of trees (20k ClassBench-style rules)
// get blocks too, and leaves of up to 16 records: their scans test two
// blocks a leaf (scanLanes4) where the group walk scanned compact records
// in Go, each record's check a branch. Bigger sets keep the group walk
// (treeGroup), with the lane walk and its Go scans. Where the CPU has no AVX-512, and on arm64 (whose Advanced
// SIMD has no gather), lanesWalk is false and bursts keep the walks
// without lanes; walkLanesGo and scanLanes2Go are the stubs' reference in
// tests (TestWalkLanes, TestScanLanes2), and TestLanesForced runs the
// decision tests the other way round.

// walkLanesGo walks the tree of node words nodes from root for lanes 0 to
// n rounded up to a multiple of eight: lane i's key is keys[0][i],
// keys[1][i], keys[2][i] (the words of treeKey), and on return cur[i] is
// the leaf it reached. Every lane walks, a packet that is not IP too (its
// caller then gives it treeLeaf, the empty leaf); lanes past that are
// left as they are. It is the stub's reference: the walk of treeLookup,
// lane by lane.
func walkLanesGo(nodes []uint64, root uint64, keys *[3][treeGroup]uint64, cur *[treeGroup]uint64, n int) {
	for i := range (n + 7) &^ 7 {
		c := root
		for c&treeLeaf == 0 {
			c = nodes[uint32(c)+uint32(keys[c>>56&3][i]>>(c>>48&63))&uint32(c>>32&0xffff)]
		}
		cur[i] = c
	}
}

// laneScratch is vecLanes' working memory (and keys that of treeGroup's
// walks): about 7.5 KiB, which a DecideBurst clears on its stack.
type laneScratch struct {
	keys  [3][treeGroup]uint64 // the packets' treeKey words, word by word
	cur   [2][treeGroup]uint64 // each tree's leaf
	sds   [treeGroup]uint64    // scanSD
	flags [treeGroup]uint32    // laneFlags
	res   [treeGroup]uint64    // scanLanes2's
}

// vecLanes decides fs (at most treeGroup packets) into out for sets of at
// most two trees with blocks (trees.vec2): both trees' walks for all of
// them with walkLanes, then their leaves' first blocks with scanLanes2
// (what vecEntry2of2 does two packets at a time), or the first two blocks
// of each leaf with scanLanes4 in sets of leaves of up to 16 records
// (trees.vecLong). Only a leaf longer than the blocks scanned, or a
// passing lane with a flag, takes Go (vecRest, vecResolve, vecChecked).
// It returns the trees walked, as vecEntry counts them.
func (t *Table) vecLanes(fs []rule.Fields, out []int32, s *laneScratch) int {
	tr := t.tr
	trs := tr.t
	ks, cur := &s.keys, &s.cur
	for i := range fs {
		f := &fs[i]
		ks[0][i], ks[1][i], ks[2][i] = f.Src.Hi, f.Dst.Hi, tr.miscWord(f)
		s.sds[i], s.flags[i] = scanSD(f), laneFlags(f)
	}
	for ti := range trs {
		trs[ti].walkLanes(ks, &cur[ti], len(fs))
	}
	if len(trs) < 2 {
		for i := range fs {
			cur[1][i] = treeLeaf
		}
	}
	vb := &tr.vblk
	never := &neverBlock[0]
	res := &s.res
	if tr.vecLong {
		scanLanes4(vb[0], vb[1], &cur[0], &cur[1], &s.sds, &ks[2], &s.flags, res, len(fs))
		probes := 0
		for i := range fs {
			f := &fs[i]
			if f.Family == 0 {
				out[i] = -1
				continue
			}
			probes += len(trs)
			n0, n1 := cur[0][i], cur[1][i]
			b, c := uint32(res[i]), uint32(res[i]>>32)
			if (n0|n1)&treeLonger != 0 {
				b = t.vecResolve(f, s.sds[i], ks[2][i], [4]uint64{n0, n1, treeLeaf, treeLeaf})
			} else if c != 0 {
				a0, c0 := leafBlocks(vb[0], n0)
				a1, c1 := leafBlocks(vb[1], n1)
				b = t.vecChecked(f, ks[2][i], b, c, [4]*sblock{a0, c0, a1, c1})
			}
			out[i] = tr.vecRule(b)
		}
		return probes
	}
	scanLanes2(vb[0], vb[1], &cur[0], &cur[1], &s.sds, &ks[2], &s.flags, res, len(fs))
	probes := 0
	for i := range fs {
		f := &fs[i]
		if f.Family == 0 {
			out[i] = -1
			continue
		}
		probes += len(trs)
		n0, n1 := cur[0][i], cur[1][i]
		b, c := uint32(res[i]), uint32(res[i]>>32)
		if (n0|n1)&treeLong != 0 || c != 0 {
			a0, a1 := &vb[0][uint32(n0)/vecBlock], &vb[1][uint32(n1)/vecBlock]
			b = t.vecRest(f, s.sds[i], ks[2][i], b, c, [4]uint64{n0, n1, treeLeaf, treeLeaf}, [4]*sblock{a0, a1, never, never})
		}
		out[i] = tr.vecRule(b)
	}
	return probes
}

// scanLanes2Go is leafScan2Go for the first n packets of a group, the
// stub's reference: packet i's lane words are sds[i] (scanSD) and misc[i],
// its flags flags[i] (laneFlags), and its blocks the first of its leaves
// cur0[i] in b0 and cur1[i] in b1; res[i] is leafScan2's best | check<<32.
func scanLanes2Go(b0, b1 []sblock, cur0, cur1, sds, misc *[treeGroup]uint64, flags *[treeGroup]uint32, res *[treeGroup]uint64, n int) {
	for i := range n {
		best, check := leafScan2Go(sds[i], misc[i], flags[i], &b0[uint32(cur0[i])/vecBlock], &b1[uint32(cur1[i])/vecBlock])
		res[i] = uint64(best) | uint64(check)<<32
	}
}

// scanLanes4Go is scanLanes2Go over the first two blocks of each leaf
// (leafScan4Go's four blocks: the first leaf's first and second, then the
// second leaf's), the second block of a leaf of at most eight records
// being block 0, which never passes.
func scanLanes4Go(b0, b1 []sblock, cur0, cur1, sds, misc *[treeGroup]uint64, flags *[treeGroup]uint32, res *[treeGroup]uint64, n int) {
	for i := range n {
		a0, c0 := leafBlocks(b0, cur0[i])
		a1, c1 := leafBlocks(b1, cur1[i])
		best, check := leafScan4Go(sds[i], misc[i], flags[i], a0, c0, a1, c1)
		res[i] = uint64(best) | uint64(check)<<32
	}
}

// leafBlocks returns the first two blocks of leaf n in blk, block 0 for
// the second when the leaf holds at most eight records.
func leafBlocks(blk []sblock, n uint64) (*sblock, *sblock) {
	b := uint32(n) / vecBlock
	if n>>32&0xffffff <= vecBlock {
		return &blk[b], &blk[0]
	}
	return &blk[b], &blk[b+1]
}
