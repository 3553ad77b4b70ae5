package classifier

import (
	"math/bits"

	"github.com/scrubd/scrubd/swpath/rule"
)

// The lane walk. A fresh-5-tuple burst's tree walks are dependent loads,
// one a level, each behind a handful of shifts and masks: at 1k
// ClassBench-style rules the two trees' walks alone took about a third of
// the time of the whole lookup, two packets at a time (vecEntry2of2).
// With AVX-512 a zmm register holds eight walks and one gather loads their
// next node words (walkLanes8), a level at a time over a whole group, so
// that a level costs eight packets about what it cost one; a set's two
// trees take their levels together (walkLanes8x2), so that a group waits
// on as many levels as its deeper tree has, not on both trees' levels
// one after the other (with scanLanesC2's first prefetches, below,
// fresh 5-tuple bursts took 0.95 of the time at 1k ClassBench-style
// rules, 0.98 at 10k and about 0.9 at 100k: binaries alternated four
// times as processes, medians of 15 rounds). Sets of two trees with
// blocks (up to about 800 rules) then scan every packet's first block of
// each leaf in one call (scanLanes2), without leafScan2's call and setup
// a packet, and the stub decides every packet it can. Sets of two trees
// and up to treeLanesMax bytes (20k ClassBench-style rules) get blocks
// too, where the group walk scanned compact records in Go, each record's
// check a branch: leaves of one block where their records stay under
// treeOneBlockMax (about 15k rules), scanned by scanLanes2, else leaves
// of up to 16 records, whose scans test two blocks a leaf (scanLanes4).
// Sets of two trees past the first-level cache (from about 800 rules,
// cblockMin) and sets too big for leaves of one block get compact blocks
// (tree_cblock.go), leaves of one block again, scanned by scanLanesC2,
// where every entry's check fits; blocks are theirs where one does not.
// scanLanesC2 works out every packet's leaf lanes for the group first
// (laneWord, eight packets to an instruction), then tests a packet's two
// blocks together, one in each half of zmm registers (ZSCAN).
// The biggest of them get tight blocks where their lanes make few enough
// classes (tree_tblock.go), scanned by scanLanesT2 the same way. Each
// decides the group at the end, sixteen packets to an instruction
// (ZDECIDE). Sets whose node words pass nodes32Min walk a copy of them in
// 4 bytes (tree_nodes32.go, walkLanes8x2d).
// The others keep the group walk (treeGroup), with the lane walk and its
// Go scans.
//
// A group's lane words come from laneKeys8 (four gathers a chunk of
// eight packets) where the set has no IPv6 top bits, else from
// laneKeysGo.
//
// Where the CPU has no AVX-512, and on arm64 (whose Advanced SIMD has no
// gather), lanesWalk is false and bursts keep the walks without lanes.
// walkLanesGo, scanLanes2Go and scanLanes4Go are the stubs' reference in
// tests (TestWalkLanes, TestScanLanes2), and TestLanesForced runs the
// decision tests the other way round.

// walkLanesGo walks d for lanes 0 to n rounded up to a multiple of eight:
// lane i's key is keys[0][i], keys[1][i], keys[2][i] (the words of
// treeKey), and on return cur[i] is the leaf it reached (dtree.walk's).
// Every lane walks, a packet that is not IP too (its caller then gives it
// treeLeaf, the empty leaf); lanes past that are left as they are. It is
// the stub's reference.
func (d *dtree) walkLanesGo(keys *[3][treeGroup]uint64, cur *[treeGroup]uint64, n int) {
	for i := range (n + 7) &^ 7 {
		cur[i] = d.walk(&treeKey{keys[0][i], keys[1][i], keys[2][i]})
	}
}

// walkLanes2Go is walkLanesGo for trees d0 and d1, their leaves to
// cur[0] and cur[1]: walkLanes2Go32 where they have 4-byte node words.
// walkLanes2 is it where no lane stub runs.
func walkLanes2Go(d0, d1 *dtree, keys *[3][treeGroup]uint64, cur *[2][treeGroup]uint64, n int) {
	if d0.nodes32 != nil {
		walkLanes2Go32(d0, d1, keys, cur, n)
		return
	}
	d0.walkLanesGo(keys, &cur[0], n)
	d1.walkLanesGo(keys, &cur[1], n)
}

// lanePrefetch: the lane scans (scanLanes2, scanLanes4, scanLanesC2)
// prefetch the first block of each leaf of the packet this many ahead of
// the one they scan, in sets whose trees pass treeWalkMax (trees that
// stay in the cache take no prefetch); scanLanesC2 first prefetches the
// blocks of the group's first lanePrefetch packets, which no scan ahead
// of them reaches. A block is five cache lines, and in the Direct
// Verbs engine the engine's own memory traffic (completions, frames,
// refills, and the NIC emulator's copies) pushes a 10k-rule set's blocks
// (5.6 MiB) out of the core's caches between bursts: each scan then
// waited on its own lines, one packet after the other. With the prefetch,
// the engine on a 10k-rule flood took 0.89-0.91 of the cpu-ns a packet
// (the prefetch on and off ring by ring in one process, medians of three
// runs); scrubd bench, the builds before and after alternated run by run,
// 0.73-1.24 (median 0.84, twenty runs, where its 5-rule control read
// 0.70-1.18); the burst lookup alone (aclbench, 10k) 0.86-0.92. Also
// tried: the second block of each leaf too (20 prefetches a packet),
// 0.99-1.00 of the first blocks alone; a distance of 16, the same as 8;
// the prefetch at 1k rules (0.82 MiB, which stays in the cache),
// 1.02-1.06 in aclbench (BENCHMARKS.md). The group walk's scans of
// compact records prefetch ahead of themselves the same way
// (leafPrefetch, prefetchLeaves).
const lanePrefetch = 8

// laneScratch is vecLanes' working memory (and keys that of treeGroup's
// walks): about 10.4 KiB, which a DecideBurst clears on its stack. The
// scan stubs address its fields by their offsets (go_asm.h).
type laneScratch struct {
	keys  [3][treeGroup]uint64 // the packets' treeKey words, word by word
	cur   [2][treeGroup]uint64 // each tree's leaf
	sds   [treeGroup]uint64    // scanSD
	flags [treeGroup]uint32    // laneFlags, 0 for a packet that is not IP
	res   [treeGroup]uint64    // the scans' best | check<<32
	rest  [treeGroup]uint8     // the packets the scans left to Go
	lanes [treeGroup]uint32    // the group scans' laneWord of each packet
	mins  [treeGroup][4]uint32 // the group scans': each packet's scan's four lane minimums
	chk   [treeGroup]uint16    // and its lanes to check
}

// vecLanes decides fs (at most treeGroup packets) into out for sets of at
// most two trees with blocks (trees.vec2): both trees' walks for all of
// them with walkLanes, then their leaves' first blocks with scanLanes2
// (what vecEntry2of2 does two packets at a time), or the first two blocks
// of each leaf with scanLanes4 in sets of leaves of up to 16 records
// (trees.vecLong). The scans decide every packet they can; only a
// packet that is not IP, one with a leaf longer than the blocks scanned,
// or one with a passing lane to check takes Go (vecRest, vecResolve,
// vecChecked). It returns the trees walked, as vecEntry counts them.
// tail is walkLanes2's memory for the last levels of 4-byte node words
// (nil: none, and the walk takes every level over the whole group).
func (t *Table) vecLanes(fs []rule.Fields, out []int32, s *laneScratch, tail *laneTail) int {
	tr := t.tr
	trs := tr.t
	ks, cur := &s.keys, &s.cur
	ip := tr.laneKeys(fs, s)
	if len(trs) == 2 {
		walkLanes2(&trs[0], &trs[1], ks, cur, len(fs), tail)
	} else {
		for ti := range trs {
			trs[ti].walkLanes(ks, &cur[ti], len(fs))
		}
	}
	if len(trs) < 2 {
		for i := range fs {
			cur[1][i] = treeLeaf
		}
	}
	vb := &tr.vblk
	// Trees past the cache prefetch their blocks (lanePrefetch) and
	// narrow the packets' checks (useful); those that stay in it do
	// neither.
	pf, narrow := lanePrefetch, !tr.walk
	if !narrow {
		pf = 0
	}
	var nrest int
	switch {
	case tr.tight && tr.v6 && tr.tident:
		nrest = scanLanesT6I(s, tr.tblk[0], tr.tblk[1], tr.trule, out, len(fs), pf, narrow, tr.tcls)
	case tr.tight && tr.v6:
		nrest = scanLanesT6(s, tr.tblk[0], tr.tblk[1], tr.trule, out, len(fs), pf, narrow, tr.tcls)
	case tr.tight && tr.tident:
		nrest = scanLanesT2I(s, tr.tblk[0], tr.tblk[1], tr.trule, out, len(fs), pf, narrow, tr.tcls)
	case tr.tight:
		nrest = scanLanesT2(s, tr.tblk[0], tr.tblk[1], tr.trule, out, len(fs), pf, narrow, tr.tcls)
	case tr.cvec:
		nrest = scanLanesC2(s, tr.cblk[0], tr.cblk[1], tr.vrule, out, len(fs), pf, narrow)
	case tr.vecLong:
		nrest = scanLanes4(s, vb[0], vb[1], tr.vrule, out, len(fs), pf)
	default:
		nrest = scanLanes2(s, vb[0], vb[1], tr.vrule, out, len(fs), pf, narrow)
	}
	never := &neverBlock[0]
	for _, i := range s.rest[:nrest] {
		f := &fs[i]
		if f.Family == 0 {
			out[i] = -1
			continue
		}
		n0, n1 := cur[0][i], cur[1][i]
		b, c := uint32(s.res[i]), uint32(s.res[i]>>32)
		if tr.tight {
			e0, e1 := &tr.tent[0][uint32(n0)/vecBlock], &tr.tent[1][uint32(n1)/vecBlock]
			out[i] = tr.vecRule(t.cvecRest(f, ks[2][i], tr.tentry(b), c, [2]uint64{n0, n1}, [2]*[vecBlock]uint32{e0, e1}))
			continue
		}
		if tr.cvec {
			es := [2]*[vecBlock]uint32{&tr.cblk[0][uint32(n0)/vecBlock].e, &tr.cblk[1][uint32(n1)/vecBlock].e}
			out[i] = tr.vecRule(t.cvecRest(f, ks[2][i], b, c, [2]uint64{n0, n1}, es))
			continue
		}
		bs, long := [4]*sblock{&vb[0][uint32(n0)/vecBlock], &vb[1][uint32(n1)/vecBlock], never, never}, treeLong
		if tr.vecLong {
			bs[0], bs[1] = leafBlocks(vb[0], n0)
			bs[2], bs[3] = leafBlocks(vb[1], n1)
			long = treeLonger
		}
		out[i] = tr.vecRule(t.vecRest(f, s.sds[i], ks[2][i], b, c, [4]uint64{n0, n1, treeLeaf, treeLeaf}, bs, long))
	}
	return ip * len(trs)
}

// laneKeysGo writes the lane words of fs (at most treeGroup packets) to
// s: each packet's treeKey words to s.keys, scanSD to s.sds and
// laneFlags (0 for a packet that is not IP) to s.flags. It returns the
// packets that are IP. Apart from vecLanes, whose loop reloaded seven
// spilled values a packet, and with the set's IPv6 test outside the
// loop's arithmetic. laneKeys is it, or the stub (laneKeys8) where there
// is one.
func (tr *trees) laneKeysGo(fs []rule.Fields, s *laneScratch) int {
	fs = fs[:min(len(fs), treeGroup)]
	v6, ip := tr.v6, 0
	for i := range fs {
		f := &fs[i]
		misc := miscWord(f)
		if v6 {
			misc |= tr.topBits(f)
		}
		s.keys[0][i], s.keys[1][i], s.keys[2][i] = f.Src.Hi, f.Dst.Hi, misc
		s.sds[i] = scanSD(f)
		s.flags[i] = laneFlags(f) & -uint32(min(f.Family, 1))
		ip += int(min(f.Family, 1))
	}
	return ip
}

// scanLanes2Go is leafScan2Go for the first n packets of s, the stub's
// reference: packet i's lane words are s.sds[i] (scanSD) and
// s.keys[2][i], its flags s.flags[i] (laneFlags, or 0: not IP), and its
// blocks the first of its leaves s.cur[0][i] in b0 and s.cur[1][i] in
// b1; s.res[i] is leafScan2's best | check<<32, the check narrowed by
// useful where narrow is true. A packet that is IP, whose leaves are of
// one block (no treeLong) and whose check is zero is decided, out[i] =
// vrule[best] (the last for treeNoRank, as vecRule); the others are
// listed in s.rest, and rest is how many.
func scanLanes2Go(s *laneScratch, b0, b1 []sblock, vrule, out []int32, n int, narrow bool) (rest int) {
	for i := range n {
		c0, c1 := s.cur[0][i], s.cur[1][i]
		bl0, bl1 := &b0[uint32(c0)/vecBlock], &b1[uint32(c1)/vecBlock]
		best, check := leafScan2Go(s.sds[i], s.keys[2][i], s.flags[i], bl0, bl1)
		if narrow {
			check = useful(check, best, &bl0.e, &bl1.e)
		}
		rest = s.decide(i, best, check, (c0|c1)&treeLong != 0, vrule, out, rest)
	}
	return rest
}

// scanLanes4Go is scanLanes2Go over the first two blocks of each leaf
// (leafScan4Go's four blocks: the first leaf's first and second, then the
// second leaf's), the second block of a leaf of at most eight records
// being block 0, which never passes; a packet is listed in s.rest for a
// leaf of more than two blocks (treeLonger).
func scanLanes4Go(s *laneScratch, b0, b1 []sblock, vrule, out []int32, n int) (rest int) {
	for i := range n {
		c0, c1 := s.cur[0][i], s.cur[1][i]
		a0, d0 := leafBlocks(b0, c0)
		a1, d1 := leafBlocks(b1, c1)
		best, check := leafScan4Go(s.sds[i], s.keys[2][i], s.flags[i], a0, d0, a1, d1)
		rest = s.decide(i, best, check, (c0|c1)&treeLonger != 0, vrule, out, rest)
	}
	return rest
}

// decide is the Go scans' end for packet i: see scanLanes2Go.
func (s *laneScratch) decide(i int, best, check uint32, long bool, vrule, out []int32, rest int) int {
	s.res[i] = uint64(best) | uint64(check)<<32
	if s.flags[i] == 0 || long || check != 0 {
		s.rest[rest] = uint8(i)
		return rest + 1
	}
	out[i] = vrule[min(best, uint32(len(vrule)-1))]
	return rest
}

// useful returns the lanes of a two-block scan's check (bit 8k+j for lane
// j of block k, whose entry words are e0 and e1) that can lower best:
// those whose records need holds (laneFull) with an entry below best.
// Any other lane in check needs ports the packet lacks, which fails it,
// or cannot beat best, and vecChecked would pass over it. With narrow,
// the lane scans (USEFUL, ZLISTN) leave a packet to Go only for the lanes
// that matter. On floods aimed at ClassBench-style rules (bench.Frames, seed
// 1), the packets left to Go went from 9.2 % to 5.2 % at 10k rules and
// from 16.5 % to 7.6 % at 100k: most were there for a port range
// (chkPortSpan) of a record that could not beat the best. DecideBurst
// over them, the test binaries before and after alternated, best of
// fifteen blocks each, thread CPU: 49.0-58.9 ns a packet before,
// 43.7-45.8 after at 100k; 25.7-26.3 and 25.2-25.4 at 10k. At 1k (trees
// in the cache, tr.walk) the narrowing cost more than it saved (17.6-17.8
// without, 18.7-18.8 with), and vecLanes leaves it off there.
func useful(check, best uint32, e0, e1 *[vecBlock]uint32) uint32 {
	var u uint32
	for c := check; c != 0; c &= c - 1 {
		l := bits.TrailingZeros32(c)
		e := e0[l%vecBlock]
		if l >= vecBlock {
			e = e1[l%vecBlock]
		}
		if e&laneFull != 0 && e&laneEnt < best {
			u |= 1 << l
		}
	}
	return u
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
