package classifier

import (
	"math/bits"

	"github.com/scrubd/scrubd/swpath/rule"
)

// Compact blocks. A block (sblock) keeps each record's check as four
// values and four masks, 36 bytes a record with its entry, and the set
// keeps the records (trec, 40 bytes) beside the blocks: 76 bytes a
// record in all, and every leaf starts a block of its own. That held the
// lane scans to sets of up to about 15k ClassBench-style rules
// (treeOneBlockMax): at 100k rules, leaves of one block took 133 MB, and
// the bursts no less time than the group walk's Go scans of compact
// records (crec). Yet every mask there is a prefix or a whole field, so
// a record's check fits in 24 bytes (cblock): the source and destination
// values, each with a marker bit just past its prefix (cblockAddr), the
// ports as ranges (a port prefix's, or the entry's own range, clane),
// one word (c) with the family, protocol and IPv6 top-bit values and
// which of them are compared, and the entry with its flags. The scans
// rebuild the masks in registers (CSCAN in tree_lanes_amd64.s,
// cblockMask in Go). And leaves share blocks: a leaf of up to eight
// records takes a run of lanes of one block (layPacked), and the scans
// test only its lanes (leafLanes). In blocks of their own, the 100k
// set's leaves (4.2 records on average) filled 53 % of the lanes;
// packed, 99.4 %.
//
// Where bursts take the lane walk, sets of two trees whose entries' checks
// all fit (clanes) and whose trees pass cblockMin (or that have more than
// oneBlockEntries entries) are cut to leaves of one block and get compact
// blocks and no other records (trees.cvec): a burst's group scans them
// with scanLanesC2, Decide with cleafScan2, and the rare paths (a passing
// record that needs holds, a leaf longer than a block, AppendMatching) in
// Go. At 100k ClassBench-style rules the lookup held 31.9 MB (the group
// walk's compact records 28.0; 34.7 since the lanes hold port ranges,
// clane), and fresh 5-tuple bursts took 0.66-0.68 of the time of the group
// walk (52.3-53.1 against 77.3-80.9 ns a packet, each alone in a process,
// three each, alternated, pinned; in aclbench, the binaries alternated
// four times, DecideBurst 68.2-71.8 against 83.1-90.0); at 20k 0.95 of the
// time of two-block sblock leaves (32.1 against 33.6) in 5.3 MB instead of
// 12.5. Decide, a packet at a time down the deeper trees of leaves of
// eight, took about 1.2 times as long at 100k, and the build 0.40 s
// instead of 0.24. At 10k and 5k, where sblocks of one block fit, compact
// blocks took 1.11 and 1.15 of their time (the masks' rebuilding, about a
// dozen instructions a block, where the blocks stay in the cache), for a
// quarter of the memory, and the Direct Verbs engine at 10k no less time
// (scrubd bench, 66.8-73.4 against 63.1-67.3 cpu-ns a packet, alternated
// four times), so those sets kept sblocks, until the scans narrowed their
// checks and compact lanes held port ranges (cblockMin).

// cblock holds the checks of eight records of a leaf in 32-bit lanes:
// s, d the source and destination words (cblockAddr), p and q the ports'
// ranges (the source port's in the top 16 bits, the destination's in the
// bottom: p the low end, q its span, so that a port x passes where x-p
// <= q in 16-bit arithmetic), c the rest of the check (the cLane bits),
// e the entry and its flags (laneFull, lanePorts) as in sblock. Lanes
// that no leaf takes, and block 0 of every tree, never pass (cNever).
// 192 bytes: three cache lines where the array starts on one, as Go's
// allocations of more than 32 KiB do.
type cblock struct {
	s, d, p, c, e, q [vecBlock]uint32
}

// The bits of a compact lane's c word. Bits 0-11 are compared with the
// packet's hiLane under the mask in bits 16-27 (the word shifted right by
// cMasks; bits 12-15 and 28-29 are zero, so the shift leaves nothing else
// under the mask), and bits 30 and 31 say which address words are whole,
// where the scan spreads them with arithmetic shifts.
const (
	cFamily6   = 1 << 8         // the family is IPv6 (the value; bit 1 of 4 and 6)
	cV6Top     = 9              // bits 9-10: v6SrcTop and v6DstTop (the values)
	cNever     = 1 << 11        // a value no packet's hiLane has
	cMasks     = 16             // bits 16-27: the masks of bits 0-11
	cProtoMask = 0xff << cMasks // the protocol is compared
	cDstFull   = 1 << 30        // the destination word is a whole 32-bit value
	cSrcFull   = 1 << 31        // the source word is
)

// neverCLane is the c word of a lane that never passes.
const neverCLane = cNever | cNever<<cMasks

// hiLane returns the lane a packet's c words are compared with: its
// protocol, bit 1 of its family (set for IPv6, clear for IPv4) and its
// IPv6 top bits (trees.topBits), from its tree misc word.
func hiLane(misc uint64) uint32 {
	return uint32(misc>>32)&0xff | uint32(misc>>41&1)<<8 | uint32(misc>>48&3)<<cV6Top
}

// cblockAddr returns the lane form of a 32-bit address word with value v
// under mask m: v with a marker bit just past its prefix, or v itself
// and full for a prefix of 32 bits. ok is false when m is not a prefix or
// v has bits outside it.
func cblockAddr(v, m uint32) (lane uint32, full, ok bool) {
	n := bits.LeadingZeros32(^m)
	if m != ^uint32(0)<<(32-n) || v&^m != 0 {
		return 0, false, false
	}
	if n == 32 {
		return v, true, true
	}
	return v | 1<<(31-n), false, true
}

// portLen returns the prefix length of a 16-bit port mask, ok false when
// m is not a prefix.
func portLen(m uint32) (int, bool) {
	n := bits.LeadingZeros16(^uint16(m))
	return n, uint16(m) == uint16(0xffff<<(16-n))
}

// clane is one record's compact lane: a cblock's words at one index.
type clane struct{ s, d, p, q, c, e uint32 }

// neverCLaneWords is the lane of a record that never passes (treeNoRank).
var neverCLaneWords = clane{c: neverCLane, e: treeNoRank}

// cencode returns the compact lane of record r, its ports the ranges of
// their prefixes; ok is false when r's check has a mask that the lane
// cannot hold.
func cencode(r *trec) (l clane, ok bool) {
	if r.ent == treeNoRank {
		return neverCLaneWords, true
	}
	s, sFull, ok1 := cblockAddr(uint32(r.sd>>32), uint32(r.sdm>>32))
	d, dFull, ok2 := cblockAddr(uint32(r.sd), uint32(r.sdm))
	mm := r.miscMask &^ (chkPortsBit | chkFullBit)
	hv, hm := uint32(r.misc>>32), uint32(mm>>32)
	lo, p := uint32(mm), uint32(r.misc)
	sl, ok3 := portLen(lo >> 16)
	dl, ok4 := portLen(lo)
	if !ok1 || !ok2 || !ok3 || !ok4 || hm&^0x3ffff != 0 || hv&^hm != 0 || p&^lo != 0 {
		return clane{}, false
	}
	c := hv&0xff | (hv>>16&3)<<cV6Top | (hm>>16&3)<<(cV6Top+cMasks)
	switch hm & 0xff {
	case 0:
	case 0xff:
		c |= cProtoMask
	default:
		return clane{}, false
	}
	switch hm >> 8 & 0xff {
	case 0:
	case 0xff:
		fam := rule.Family(hv >> 8 & 0xff)
		if fam != rule.IPv4 && fam != rule.IPv6 {
			return clane{}, false
		}
		c |= (hv>>9&1)<<8 | cFamily6<<cMasks
	default:
		return clane{}, false
	}
	if sFull {
		c |= cSrcFull
	}
	if dFull {
		c |= cDstFull
	}
	q := uint32(0xffff)>>sl<<16 | uint32(0xffff)>>dl
	return clane{s: s, d: d, p: p, q: q, c: c, e: laneEntry(r)}, true
}

// clane returns the compact lane of record r of tr. A record whose entry
// holds one port range a side (chkPortSpan), each where the key leaves
// its port whole, takes the ranges into its lane: its flags are then
// those of the entry without them (lanePorts: the ranges hold only for a
// packet with ports), so that the scans decide it without holds. The
// ClassBench-style sets have such ranges in a tenth of their entries.
// With each flood packet that passed one of them left to Go (holds),
// 7.6 % of a flood aimed at 100k rules (bench.Frames, seed 1) took that
// path; with the ranges in the lanes, 0.4 %, for 19.6 MB of blocks
// instead of 16.4 (24 bytes a record instead of 20; the CSCAN's port
// test is three instructions instead of ten). A test binary timing
// DecideBurst over that flood, before and after alternated five times,
// took 0.91 of the CPU time as a whole process (median; 0.76-1.01), the
// lookup being about 70 % of it. ok is false when r's check does not fit
// (cencode).
func (tr *trees) clane(r *trec) (clane, bool) {
	l, ok := cencode(r)
	if !ok || r.ent == treeNoRank {
		return l, ok
	}
	en := &tr.ents[r.ent]
	if en.flags&chkPortSpan == 0 || en.flags&needPorts == 0 {
		return l, true
	}
	// A side's range takes the lane only where the key's port mask there
	// is 0 (q all ones); a side without a range has the whole span.
	p := uint32(en.spLo)<<16 | uint32(en.dpLo)
	q := uint32(en.spSpan)<<16 | uint32(en.dpSpan)
	for _, half := range [2]uint32{0xffff0000, 0xffff} {
		if q&half != half && l.q&half != half {
			return l, true // a range and a prefix on one side: holds
		}
	}
	plain := *en
	plain.flags &^= chkPortSpan
	rr := recOf(plain.check(), r.ent, r.rule)
	pl, ok := cencode(&rr)
	if !ok {
		return l, true
	}
	for _, half := range [2]uint32{0xffff0000, 0xffff} {
		if q&half != half {
			pl.p = pl.p&^half | p&half
			pl.q = pl.q&^half | q&half
		}
	}
	return pl, true
}

// setLane stores the compact check of r in lane j of b, its ports
// taken as prefixes (cencode); ok is false (and b unchanged) when r's
// check does not fit.
func (b *cblock) setLane(j int, r *trec) bool {
	l, ok := cencode(r)
	if ok {
		b.putLane(j, l)
	}
	return ok
}

// putLane stores l in lane j of b.
func (b *cblock) putLane(j int, l clane) {
	b.s[j], b.d[j], b.p[j], b.q[j], b.c[j], b.e[j] = l.s, l.d, l.p, l.q, l.c, l.e
}

// cblockMask returns the lanes of b that a packet passes, bit j for lane
// j: key is its source and destination words (scanSD's halves), its
// hiLane and its ports (the low half of its misc word). It is the lane
// scan's work for one block in Go, the masks rebuilt as the stub does:
// an address mask from its marker bit m as -(2m) (all ones where the
// word is whole); each port x passes where x-p <= q, in 16 bits.
func cblockMask(key *[4]uint32, b *cblock) uint32 {
	var pass uint32
	sp, dp := uint16(key[3]>>16), uint16(key[3])
	for j := range vecBlock {
		c := b.c[j]
		sm := -((b.s[j] & -b.s[j]) << 1)
		if c&cSrcFull != 0 {
			sm = ^uint32(0)
		}
		dm := -((b.d[j] & -b.d[j]) << 1)
		if c&cDstFull != 0 {
			dm = ^uint32(0)
		}
		hm := c >> cMasks & 0xfff
		ports := sp-uint16(b.p[j]>>16) <= uint16(b.q[j]>>16) && dp-uint16(b.p[j]) <= uint16(b.q[j])
		if (key[0]^b.s[j])&sm|(key[1]^b.d[j])&dm|(key[2]^c)&hm == 0 && ports {
			pass |= 1 << j
		}
	}
	return pass
}

// layPacked lays out the leaves of d for compact blocks. Records 0-7
// are the empty leaves' block. A leaf of at most vecBlock records takes
// consecutive lanes of one block, which it shares with other such
// leaves: the block with the fewest free lanes that still hold it (best
// fit), or a new one; the scans test only its lanes (leafLanes). A longer
// leaf (cut short by treeMaxDepth) starts a block of its own, takes whole
// blocks, and is marked treeLong. In blocks of their own, leaves of one
// block filled 53 % of the lanes at 100k ClassBench-style rules (820k
// records in 1.55M lanes, 4.2 records a leaf on average).
func (d *dtree) layPacked() {
	rec := blockRecords(len(d.rec) + vecBlock)
	// open[k]: the first records of the blocks whose last k lanes are free.
	var open [vecBlock][]uint32
	newBlock := func() uint32 {
		b := uint32(len(rec))
		for range vecBlock {
			rec = append(rec, neverRec)
		}
		return b
	}
	d.relay(func(first, cnt uint32) uint64 {
		var at uint32
		m := treeLeaf | uint64(cnt)<<32
		if cnt > vecBlock {
			at = newBlock()
			for range (cnt - 1) / vecBlock {
				newBlock()
			}
			m |= treeLong
		} else {
			k := int(cnt)
			for k < vecBlock && len(open[k]) == 0 {
				k++
			}
			var b uint32
			if k < vecBlock {
				b = open[k][len(open[k])-1]
				open[k] = open[k][:len(open[k])-1]
			} else {
				b = newBlock()
			}
			at = b + uint32(vecBlock-k)
			if left := k - int(cnt); left > 0 {
				open[left] = append(open[left], b)
			}
		}
		copy(rec[at:at+cnt], d.rec[first:first+cnt])
		return m | uint64(at)
	})
	d.rec = rec
}

// leafLanes returns the lanes of its first block that leaf word n holds
// in trees of compact blocks (layPacked), bit j for lane j: all eight
// for a leaf longer than a block. The scans test only these: a passing
// lane of another leaf of the tree would be no error (its entry matches
// the packet, so the packet's own leaf holds it too), but its checks
// would be work done twice, and Go's scans of a leaf stop at the first
// record that holds, in the leaf's order.
func leafLanes(n uint64) uint32 {
	cnt := min(n>>32&0xffffff, vecBlock)
	return uint32((1<<cnt-1)<<(n&(vecBlock-1))) & 0xff
}

// laneLong is the bit of laneWord that says a packet's leaf is longer
// than a block (treeLong).
const laneLong = 1 << 31

// laneWord is what scanLanesC2 works out for a packet whose leaves are c0
// and c1 before it scans (laneScratch.lanes, ZLANES in
// tree_lanes_amd64.s): leafLanes(c0) in bits 0-7, leafLanes(c1) in bits
// 8-15, and laneLong where either leaf is longer than a block.
func laneWord(c0, c1 uint64) uint32 {
	lw := leafLanes(c0) | leafLanes(c1)<<vecBlock
	if (c0|c1)&treeLong != 0 {
		lw |= laneLong
	}
	return lw
}

// cblocksOf returns the compact blocks of recs (laid out by layPacked: a
// multiple of vecBlock records), whose entries' lanes are lanes (clanes:
// a tree's record of an entry is that entry's check, whichever leaf
// holds it).
func cblocksOf(recs []trec, lanes []clane) []cblock {
	blk := make([]cblock, len(recs)/vecBlock)
	for i := range recs {
		l := neverCLaneWords
		if e := recs[i].ent; e != treeNoRank {
			l = lanes[e]
		}
		blk[i/vecBlock].putLane(i%vecBlock, l)
	}
	return blk
}

// cblockKey returns the compact lanes of packet f with tree misc word
// misc (cblockMask's key).
func cblockKey(f *rule.Fields, misc uint64) [4]uint32 {
	sd := scanSD(f)
	return [4]uint32{uint32(sd >> 32), uint32(sd), hiLane(misc), uint32(misc)}
}

// cleafBest returns the best of best and the entries of leaf n's records
// in d (compact blocks; tight ones take tleafBest) that hold for f, in
// Go: the records in entry order, so a leaf's scan stops at its first
// record that holds, or at one that cannot beat best. It tests only the
// leaf's lanes.
func (t *Table) cleafBest(d *dtree, n uint64, key *[4]uint32, f *rule.Fields, misc uint64, best uint32) uint32 {
	if d.tblk != nil {
		return t.tleafBest(d, n, key, f, misc, best)
	}
	first, end := uint32(n), uint32(n)+uint32(n>>32)&0xffffff
	for at := first; at < end; at = at&^(vecBlock-1) + vecBlock {
		blk := d.cblock(at / vecBlock)
		for m := cblockMask(key, &blk) & spanLanes(at, end); m != 0; m &= m - 1 {
			e := blk.e[bits.TrailingZeros32(m)]
			if e&laneEnt >= best {
				return best
			}
			if !t.laneRest(e, f, misc) {
				continue
			}
			return e & laneEnt
		}
	}
	return best
}

// spanLanes returns the lanes of the block of record at that records at
// to end (past at) take, bit j for lane j.
func spanLanes(at, end uint32) uint32 {
	lo := at % vecBlock
	hi := min(vecBlock, lo+end-at)
	return (1<<hi - 1) &^ (1<<lo - 1)
}

// laneRest is recRest for a lane's entry word e, whose flags (laneFull,
// lanePorts) are chkFullBit and chkPortsBit 32 bits down.
func (t *Table) laneRest(e uint32, f *rule.Fields, misc uint64) bool {
	return t.recRest(uint64(e&^laneEnt)<<32, e&laneEnt, f, misc)
}

// cvecScan is treeLookup's scan for trees of compact blocks (at most
// two), over the leaves cur (treeLeaf for a tree the set does not have):
// one call (cleafScan2) for the first block of both leaves.
func (t *Table) cvecScan(f *rule.Fields, cur *[maxTrees]uint64, misc uint64) int32 {
	tr := t.tr
	n0, n1 := cur[0], cur[1]
	key := cblockKey(f, misc)
	lanes := leafLanes(n0) | leafLanes(n1)<<vecBlock
	if tr.tight {
		t0, t1 := &tr.tblk[0][uint32(n0)/vecBlock], &tr.tblk[1][uint32(n1)/vecBlock]
		var best, check uint32
		if tr.v6 {
			best, check = tleafScan6(&key, laneFlags(f), t0, t1, tr.tcls, lanes)
		} else {
			best, check = tleafScan2(&key, laneFlags(f), t0, t1, tr.tcls, lanes)
		}
		if (n0|n1)&treeLong != 0 || check != 0 {
			e0, e1 := &tr.tent[0][uint32(n0)/vecBlock], &tr.tent[1][uint32(n1)/vecBlock]
			return tr.vecRule(t.cvecRest(f, misc, tr.tentry(best), check, [2]uint64{n0, n1}, [2]*[vecBlock]uint32{e0, e1}))
		}
		return tr.tRule(best)
	}
	return tr.vecRule(t.cvecBest(f, n0, n1, misc))
}

// cvecBest is cvecScan over compact blocks (not tight ones) up to the
// rule: the best entry of f (treeNoRank where none holds) with leaves n0
// and n1. The one-packet scan is cleafScan2 where bursts take the lane
// walk, else cblockScan2.
func (t *Table) cvecBest(f *rule.Fields, n0, n1 uint64, misc uint64) uint32 {
	tr := t.tr
	key := cblockKey(f, misc)
	lanes := leafLanes(n0) | leafLanes(n1)<<vecBlock
	b0, b1 := &tr.cblk[0][uint32(n0)/vecBlock], &tr.cblk[1][uint32(n1)/vecBlock]
	var best, check uint32
	if lanesWalk {
		best, check = cleafScan2(&key, laneFlags(f), b0, b1, lanes)
	} else {
		best, check = cblockScan2(&key, laneFlags(f), b0, b1, lanes)
	}
	if (n0|n1)&treeLong != 0 || check != 0 {
		best = t.cvecRest(f, misc, best, check, [2]uint64{n0, n1}, [2]*[vecBlock]uint32{&b0.e, &b1.e})
	}
	return best
}

// cgroupMin: where bursts take cvecBurst (cvecGroup), a set of at most
// oneBlockEntries entries gets compact blocks from this many bytes of
// trees (as treeWalkMax counts them) on, not from cblockMin: the sets
// that took the group walk of compact records (treeGroup). Bigger sets
// get them as where the lane walk runs (leaves of one block). Smaller ones
// keep blocks (sblock), scanned two packets at a time (vecEntry2of2): on
// an AMD EPYC without AVX-512 (family 25 model 1, under KVM), fresh
// 5-tuple bursts over compact blocks took 1.27 of their time at 1k
// ClassBench-style rules (188 KiB of trees), 1.15 at 2k (395 KiB), 1.10
// at 2.5k (546 KiB) and 1.03 at 3k (731 KiB); 0.75 at 4k (1036 KiB,
// which took the group walk) and 0.53 at 5k and 0.45 at 7k, whose more
// than oneBlockEntries entries made leaves of 16 records (vecLong). The
// two tables of one set alternated in one process, thread CPU time,
// medians of seven to eleven rounds. A variable, so that tests can give
// small sets compact blocks there.
var cgroupMin = treeWalkMax

// cblockAhead: cvecBurst prefetches the blocks of the packet this many
// ahead of the one it scans (prefetchCBlocks), eight packets to a call.
const cblockAhead = 8

// cvecBurst decides fs into out for sets of compact blocks where bursts
// do not take the lane walk (cvecGroup): a group of packets at a time,
// their walks of both trees level by level (walkQuads where the CPU has
// AVX2, else walkGroup, or walkGroup32 over 4-byte node words where the
// set has them), then each packet's two first blocks
// (cvecBest, with cblockScan2), the blocks of the packets cblockAhead
// ahead prefetched, then the packets' rules. It returns the trees walked,
// as treeBurst counts them. s is its working memory.
func (t *Table) cvecBurst(fs []rule.Fields, out []int32, s *treeScratch) int {
	tr := t.tr
	trs := tr.t
	keys, lk, cur, best := &s.keys, &s.lanes.keys, &s.cur, &s.best
	b0, b1 := &tr.cblk[0][0], &tr.cblk[1][0]
	// stub: the walk of both trees takes the stub (walkLanes2), which
	// reads the keys word by word (lk); the group walks (arm64's, and
	// amd64's without AVX2) read them by packet (keys). Each packet's
	// words are written once, in the form its walk reads, and its misc
	// word to lk[2] either way, whence the scans take it.
	stub := (lanesCPU || quadsCPU) && len(trs) == 2
	probes := 0
	for len(fs) > 0 {
		n := min(len(fs), treeGroup)
		g := fs[:n]
		for i := range g {
			f := &g[i]
			w0, w1, w2 := f.Src.Hi, f.Dst.Hi, miscWord(f)|tr.miscBits(f)
			lk[2][i] = w2
			if stub {
				lk[0][i], lk[1][i] = w0, w1
			} else {
				keys[i] = treeKey{w0, w1, w2}
			}
			probes += len(trs) * int(min(f.Family, 1))
		}
		if stub {
			// A packet that is not IP walks too; its leaves are only
			// prefetched (cvecBest skips it).
			walkLanes2(&trs[0], &trs[1], lk, (*[2][treeGroup]uint64)(cur[:2]), n, nil)
		} else {
			for ti := range trs {
				if trs[ti].nodes32 != nil {
					trs[ti].walkGroup32(g, &cur[ti], keys)
				} else {
					trs[ti].walkGroup(g, &cur[ti], keys)
				}
			}
		}
		if len(trs) < 2 {
			for i := range g {
				cur[1][i] = treeLeaf
			}
		}
		prefetchCBlocks(b0, b1, &cur[0][0], &cur[1][0], min(n, cblockAhead))
		for i := range g {
			if i%cblockAhead == 0 && i+cblockAhead < n {
				prefetchCBlocks(b0, b1, &cur[0][i+cblockAhead], &cur[1][i+cblockAhead], min(cblockAhead, n-i-cblockAhead))
			}
			best[i] = treeNoRank
			if g[i].Family != 0 {
				best[i] = t.cvecBest(&g[i], cur[0][i], cur[1][i], lk[2][i])
			}
		}
		// The rules in a pass of their own: each a load from an array
		// the size of the set, which no longer waits behind the next
		// packet's scan.
		for i := range g {
			out[i] = tr.vecRule(best[i])
		}
		fs, out = fs[n:], out[n:]
	}
	return probes
}

// cleafScan2Go returns the best entry among the lanes of b0 and b1 that
// are the leaves' (lanes: bit 8k+j for lane j of block k, leafLanes)
// and key passes (cblockMask), whose flags meet none of flags
// (laneFlags), and in check the passing lanes whose flags do:
// leafScan2Go over compact blocks.
func cleafScan2Go(key *[4]uint32, flags uint32, b0, b1 *cblock, lanes uint32) (best, check uint32) {
	best = treeNoRank
	for k, b := range [2]*cblock{b0, b1} {
		for m := cblockMask(key, b) & (lanes >> (vecBlock * k) & 0xff); m != 0; m &= m - 1 {
			j := bits.TrailingZeros32(m)
			if b.e[j]&flags != 0 {
				check |= 1 << (vecBlock*k + j)
			} else {
				best = min(best, b.e[j]&laneEnt)
			}
		}
	}
	return best, check
}

// cvecRest finishes a scan over compact blocks that left packet f to Go
// (vecRest's work): the passing lanes with a flag, named by check (bit
// 8k+j for lane j of block k, the first of leaf cur[k], whose entry words
// are es[k]), are checked against best; then a leaf longer than a block
// (treeLong, a leaf cut short by treeMaxDepth) takes cleafBest over its
// records past its first block, whose lanes the scan took (leafLanes).
// Where it took cleafBest over whole leaves (the first blocks scanned
// again, and the other tree's leaf too), the packets the group scans
// left to Go at 100k ClassBench-style rules (164 of 65,536 fresh
// 5-tuples, each with a long leaf) took 56.6 ns each, now 23.9 (their
// calls replayed twenty times, the two alternated 21 times in one
// process, thread CPU time, medians; in the cache, where the scans'
// misses are not).
func (t *Table) cvecRest(f *rule.Fields, misc uint64, best, check uint32, cur [2]uint64, es [2]*[vecBlock]uint32) uint32 {
	best = t.vecChecked(f, misc, best, check, [4]*[vecBlock]uint32{es[0], es[1], &neverCBlock[0].e, &neverCBlock[0].e})
	if (cur[0]|cur[1])&treeLong == 0 {
		return best
	}
	trs := t.tr.t
	key := cblockKey(f, misc)
	for i := range trs {
		n := cur[i]
		first, end := uint32(n), uint32(n)+uint32(n>>32)&0xffffff
		if next := first&^(vecBlock-1) + vecBlock; n&treeLong != 0 && next < end {
			best = t.cleafBest(&trs[i], uint64(next)|uint64(end-next)<<32, &key, f, misc, best)
		}
	}
	return best
}

// cleafMatching appends to dst (through add) the rule of every record of
// leaf n in d (compact or tight blocks) that holds for f: treeMatching's
// scan.
func (t *Table) cleafMatching(d *dtree, n uint64, f *rule.Fields, misc uint64, add func(int32)) {
	key := cblockKey(f, misc)
	first, end := uint32(n), uint32(n)+uint32(n>>32)&0xffffff
	for at := first; at < end; at = at&^(vecBlock-1) + vecBlock {
		blk := d.cblock(at / vecBlock)
		for m := cblockMask(&key, &blk) & spanLanes(at, end); m != 0; m &= m - 1 {
			if e := blk.e[bits.TrailingZeros32(m)]; t.laneRest(e, f, misc) {
				add(t.tr.vecRule(e & laneEnt))
			}
		}
	}
}

// scanLanesC2Go is scanLanes2Go over compact blocks, the stub's
// reference: packet i's lanes are s.sds[i], hiLane(s.keys[2][i]) and the
// low half of s.keys[2][i], and its blocks the first of its leaves
// s.cur[0][i] in b0 and s.cur[1][i] in b1, of which it tests the
// leaves' lanes (leafLanes, cleafScan2Go). Unlike scanLanes2Go it also
// writes the out of a packet it lists: the last entry's rule (-1 in a
// set's vrule), as the stub's loop over the rules is simpler for it.
func scanLanesC2Go(s *laneScratch, b0, b1 []cblock, vrule, out []int32, n int, narrow bool) (rest int) {
	for i := range n {
		rest = s.cscan(i, &b0[uint32(s.cur[0][i])/vecBlock], &b1[uint32(s.cur[1][i])/vecBlock], vrule, out, rest, narrow)
	}
	return rest
}

// cscan is scanLanesC2Go's work for packet i, whose blocks are bl0 and
// bl1; it returns the packets left to Go, rest and i if it is one. It
// writes s.lanes[i] as the stub does (laneWord). With narrow, a packet
// is listed only for lanes to check that can lower its best (useful),
// yet res keeps its whole check, as the stub's group decision does
// (ZLISTN): Go's rest passes over the others.
func (s *laneScratch) cscan(i int, bl0, bl1 *cblock, vrule, out []int32, rest int, narrow bool) int {
	c0, c1 := s.cur[0][i], s.cur[1][i]
	lw := laneWord(c0, c1)
	s.lanes[i] = lw
	key := [4]uint32{uint32(s.sds[i] >> 32), uint32(s.sds[i]), hiLane(s.keys[2][i]), uint32(s.keys[2][i])}
	best, check := cleafScan2Go(&key, s.flags[i], bl0, bl1, lw&0xffff)
	c := check
	if narrow {
		c = useful(check, best, &bl0.e, &bl1.e)
	}
	r := s.decide(i, best, c, lw&laneLong != 0, vrule, out, rest)
	s.res[i] = uint64(best) | uint64(check)<<32
	if r != rest {
		out[i] = vrule[len(vrule)-1]
	}
	return r
}

// treeCBlocks: sets that get leaves of one block where bursts take the
// lane walk (see treeOneBlockMax) and sets past cblockMin get compact
// blocks, within cblockMax. A variable, so that tests can give such sets
// blocks (sblock).
var treeCBlocks = true

// oneBlockEntries: where bursts take the lane walk, sets of more entries
// than this are first cut to leaves of one block (cblockMax,
// treeOneBlockMax). A variable, so that tests can give small sets compact
// blocks.
var oneBlockEntries = treeBigEntries

// cblockMin: where bursts take the lane walk, a set of at most two trees
// of leaves of one block whose trees pass this many bytes (as treeWalkMax
// counts them, before any blocks) and whose entries' checks all fit gets
// compact blocks instead of blocks (sblock): from about 800
// ClassBench-style rules (700 rules make 98 KB, 1k 193 KB).
// Compact blocks first came only to sets whose blocks of one-block leaves
// passed treeOneBlockMax (about 15k rules): at 5k and 10k they then took
// 1.11 and 1.15 of the time of blocks. Since the narrowed check and the
// port ranges of compact lanes, fresh 5-tuple bursts (DecideBurst, medians
// of 21 rounds, the two alternated in one process, thread CPU time) took
// 0.97 of the time of blocks at 1.5k rules, 1.02 at 2k, 0.95 at 3k, 0.90
// at 5k, 0.92 at 10k and 0.90 at 15k; Decide 0.99 at 5k and 0.97 at 10k;
// the Direct Verbs engine at 10k rules (scrubd bench, 64-byte frames,
// 65,536 flows, the builds alternated four times) 51.1-52.2 cpu-ns a
// packet against 55.7-56.9. The lookup's memory at 10k: 2.60 MB against
// 9.32. The 1k set then took 0.97-1.00 of the time on the AMD EPYC of
// those figures; on an Intel Xeon (family 6 model 207), over 262,144
// fresh 5-tuples in bursts of 256, 0.94-0.98 at 1k, 0.99-1.01 at 700,
// 1.00-1.01 at 500, 1.03-1.04 at 400, 1.07-1.23 at 50-300 (the two
// tables of one set alternated 21 times in one process, medians of the
// ratios): hence 128 KiB, where it was 256 KiB, and the 1k set's 0.86 MB
// of blocks are 0.27 MB of compact blocks.
var cblockMin = 128 << 10

// cblockMax is treeOneBlockMax for compact blocks: the most bytes of
// compact records (cRecordBytes a record, as the leaves hold them) for
// which a set is cut to leaves of one block. The 100k set's take 19.6
// MB; a set past the bound keeps the group walk.
var cblockMax = 64 << 20

// neverCBlock is the compact blocks of a tree the set does not have.
var neverCBlock = func() (b [1]cblock) {
	for j := range vecBlock {
		b[0].setLane(j, &neverRec)
	}
	return b
}()

// clanes returns the compact lane of every entry of tr, by index (clane
// of the entry's record), or nil when one does not fit, or when an index
// does not fit a lane's entry bits. The build computes each lane
// once: the leaves' records repeat their entries (4.6 times at 100k
// ClassBench-style rules).
func (tr *trees) clanes() []clane {
	if len(tr.ents) > laneEnt {
		return nil
	}
	lanes := make([]clane, len(tr.ents))
	for i := range tr.ents {
		e := &tr.ents[i]
		r := recOf(e.check(), uint32(i), e.rule)
		var ok bool
		if lanes[i], ok = tr.clane(&r); !ok {
			return nil
		}
	}
	return lanes
}

// addCBlocks lays out tr's trees in compact blocks (tr.cvec), their
// entries' lanes lanes (clanes), and drops their other records.
func (tr *trees) addCBlocks(lanes []clane) {
	tr.cvec = true
	tr.makeVrule()
	for i := range tr.cblk {
		tr.cblk[i] = neverCBlock[:]
		if i >= len(tr.t) {
			continue
		}
		d := &tr.t[i]
		d.layPacked()
		d.cblk = cblocksOf(d.rec, lanes)
		d.rec = nil
		tr.cblk[i] = d.cblk
	}
	if !lanesWalk || !lanesTight || tr.blockBytes() <= tblockMin {
		return
	}
	tb, te, cl, ok := tblocksOf(tr.cblk, tr.tpos())
	if !ok {
		tr.trule, tr.tfirst, tr.tident = nil, nil, false
		return
	}
	tr.tight, tr.tblk, tr.tent, tr.tcls, tr.cblk = true, tb, te, cl, [2][]cblock{}
	for i := range tr.t {
		d := &tr.t[i]
		d.tblk, d.tent, d.tcls, d.cblk = tb[i], te[i], cl, nil
	}
}

// blockBytes returns the bytes of tr's compact blocks.
func (tr *trees) blockBytes() int {
	return (len(tr.cblk[0]) + len(tr.cblk[1])) * vecBlock * cRecordBytes
}
