package classifier

import (
	"math/bits"

	"github.com/scrubd/scrubd/swpath/rule"
)

// Tight blocks. A compact block (cblock) takes 24 bytes a record: three
// cache lines a block, all of which a scan reads whatever the leaf's
// size. At 100k ClassBench-style rules those blocks (19.6 MB) are most of
// what a fresh packet waits for: six lines a packet, two trees, from
// more memory than a core's caches hold. Yet a set's records
// share few combinations of the c word and the source port's range (18
// at 2k, 10k and 100k ClassBench-style IPv4 rules, where a record's
// ranges and prefixes are many): a tight block (tblock) keeps for each
// record its two address words (as cblock's), its destination port's
// range (y: the low end in bits 0-15, the span in bits 16-31), and in x
// its rank (bits 0-19: its rule's place in decision order, tpos), the
// number of its combination (its class, bits 20-24), the two whole-word
// bits (tDstFull, tSrcFull) and the flags (laneFull, lanePorts, where
// cblock's entry word has them). The classes
// (tclasses, at most tClasses for a set's two trees, the last the lane
// that never passes) hold the c words and the source ports' ranges, and
// the scan looks them up eight lanes at a time with one permute of two
// registers each (VPERMI2D, TSCAN in tree_lanes_amd64.s): 16 bytes a
// record, two cache lines a block.
//
// A set whose lanes make more classes, whose IPv6 top bits are not all
// their masks (tTop), or whose ranks do not fit 20 bits, keeps compact
// blocks. Go's rare paths (a passing lane that needs holds,
// a leaf longer than a block, AppendMatching) read a tight block's entry
// words (trees.tent, 32 bytes a block, which the scans never read) and
// the compact block it came from (dtree.cblock).
//
// A lane's rank rather than its entry: a group scan's last loads were
// each decided packet's rule, vrule[best], 4 bytes an entry (708 KB at
// 100k ClassBench-style rules, which make 177,103 entries), one more miss
// a packet. With ranks, the rule of a set whose rules are in decision
// order (ClassBench-style sets, and any set of one priority with no rule
// moved in place) is the scan's best itself (trees.tident, scanLanesT2I),
// and any other set's is in trees.trule, 4 bytes a rank. Fresh 5-tuple
// bursts at 100k took 0.92 of the time with ranks (DecideBurst over
// 262,144 packets, the test binaries before and after alternated ten
// times, the median of the paired ratios; BENCHMARKS.md).
//
// The group scans of the two layouts of one set (keys, two-tree walk and
// scan of 65,536 fresh 5-tuples, alternated 21 times in one process,
// thread CPU time, medians of the ratios): tight blocks took 0.87-0.93 of
// the time at 100k ClassBench-style rules, 0.92-0.95 at 70k, 0.97-0.99
// at 40k, 1.01 at 20k and 1.02-1.04 at 10k (the class lookups, two
// permutes and three word shuffles a block, cost more than they save
// where the blocks stay in the cache): hence tblockMin. aclbench at 100k,
// the builds before and after alternated ten times: DecideBurst 0.915 of
// the time (median; BENCHMARKS.md). Also tried: lines of four lanes (each
// of a block's two lines all four words of lanes 0-3 or 4-7, and leaves
// of up to four records packed within one line, so that half the leaves
// read one line): 0.91-0.94 at 100k and 1.12 at 10k. Perhaps the CPU
// fetches a block's two lines together; the loads of two halves cost
// more than the line saved.

// tblock holds eight records' checks in 32-bit lanes: s and d as in
// cblock, y the destination port's range, x the rank, class and flags.
// 128 bytes: two cache lines where the array starts on one, as Go's
// allocations of more than 32 KiB do and hugeAlloc's arrays (both trees'
// blocks in one, on huge pages from hugeMin on) do.
type tblock struct {
	s, d, y, x [vecBlock]uint32
}

// tclasses is a set's classes: c the c words (cLane bits, without the
// whole-word bits, which are the lanes'), sp the source port's range
// (its low end in the top 16 bits, its span in the bottom 16).
type tclasses struct {
	c, sp [tClasses]uint32
}

const (
	tClasses    = 32           // a set's classes at most, the never lane's included
	tNever      = tClasses - 1 // the class of lanes that never pass
	tClassShift = 20           // x's class bits
	tEnt        = 1<<20 - 1    // x's rank bits; tEnt itself is no rank's
	tDstFull    = 1 << 28      // the destination word is whole
	tSrcFull    = 1 << 29      // the source word is
	tNeverLane  = ^uint32(0)   // x of a lane that never passes
	// tTop: x's bits 25 and 26 are the lane's IPv6 top bits (v6SrcTop,
	// v6DstTop) as its c word's masks, at the same place; a set's lanes
	// have tight blocks only where those bits' values are their masks
	// (the lane needs the set's top, or does not look), and the values
	// come back from the masks (tblock.lane, TSCAN6). So the top bits take
	// no classes: the IPv6 ClassBench-style sets make 54 classes with
	// them in the c word and 18 without, as the IPv4 sets do.
	tTop   = 3 << (cV6Top + cMasks)
	tFlags = laneFull | lanePorts
)

// tlane returns the tight lane of compact lane l whose class is class.
func tlane(l clane, class uint32) (s, d, y, x uint32) {
	if l.e == treeNoRank {
		return 0, 0, 0, tNeverLane
	}
	x = l.e&laneEnt | l.e&tFlags | class<<tClassShift | l.c&tTop
	if l.c&cDstFull != 0 {
		x |= tDstFull
	}
	if l.c&cSrcFull != 0 {
		x |= tSrcFull
	}
	return l.s, l.d, l.p&0xffff | l.q<<16, x
}

// set stores compact lane l of class class in lane j of b.
func (b *tblock) set(j int, l clane, class uint32) {
	b.s[j], b.d[j], b.y[j], b.x[j] = tlane(l, class)
}

// tclassOf returns the class key of compact lane l: its c word without
// the whole-word bits, and its source port's range as tclasses.sp holds
// it.
func tclassOf(l clane) [2]uint32 {
	return [2]uint32{l.c &^ (cSrcFull | cDstFull | tTop | tTop>>cMasks), l.p&0xffff0000 | l.q>>16}
}

// tTopFits reports whether the IPv6 top bits of c word c are their
// masks (tTop).
func tTopFits(c uint32) bool {
	return c>>cMasks&(tTop>>cMasks) == c&(tTop>>cMasks)
}

// lane returns the compact lane j of b, whose classes are cl.
func (b *tblock) lane(j int, cl *tclasses) clane {
	x := b.x[j]
	if x == tNeverLane {
		return neverCLaneWords
	}
	k := x >> tClassShift & (tClasses - 1)
	c, sp := cl.c[k]|x&tTop|x&tTop>>cMasks, cl.sp[k]
	if x&tDstFull != 0 {
		c |= cDstFull
	}
	if x&tSrcFull != 0 {
		c |= cSrcFull
	}
	y := b.y[j]
	return clane{
		s: b.s[j], d: b.d[j],
		p: sp&0xffff0000 | y&0xffff,
		q: sp<<16 | y>>16,
		c: c,
		e: x&tEnt | x&tFlags,
	}
}

// expand returns b as the compact block it came from, its entry words
// ranks (tpos) where the set's are: what the scan sees of it.
func (b *tblock) expand(cl *tclasses) (c cblock) {
	for j := range vecBlock {
		c.putLane(j, b.lane(j, cl))
	}
	return c
}

// tblocksOf returns the tight blocks of the compact blocks of a set's
// trees, their entry words (te, as the compact blocks have them) and
// their classes, or ok false when they take more than tClasses (the
// never lane's included), a rank does not fit tEnt or a lane's IPv6 top
// bits are not their masks (tTop). A lane's rank is
// pos[e] for its entry e (tpos), or e itself where pos is nil.
func tblocksOf(cblk [2][]cblock, pos []uint32) (tb [2][]tblock, te [2][][vecBlock]uint32, cl *tclasses, ok bool) {
	cl = new(tclasses)
	cl.c[tNever] = neverCLane
	ids := map[[2]uint32]uint32{}
	// Both trees' blocks in one array, which huge pages can back.
	all := hugeAlloc[tblock](len(cblk[0]) + len(cblk[1]))
	tb[0], tb[1] = all[:len(cblk[0]):len(cblk[0])], all[len(cblk[0]):]
	for i, blks := range cblk {
		te[i] = make([][vecBlock]uint32, len(blks))
		for bi := range blks {
			b, t := &blks[bi], &tb[i][bi]
			te[i][bi] = b.e
			for j := range vecBlock {
				l := clane{s: b.s[j], d: b.d[j], p: b.p[j], q: b.q[j], c: b.c[j], e: b.e[j]}
				if l.e == treeNoRank {
					t.set(j, l, tNever)
					continue
				}
				if pos != nil {
					l.e = pos[l.e&laneEnt] | l.e&^laneEnt
				}
				if l.e&laneEnt >= tEnt || !tTopFits(l.c) {
					return tb, te, nil, false
				}
				key := tclassOf(l)
				id, seen := ids[key]
				if !seen {
					if len(ids) == tNever {
						return tb, te, nil, false
					}
					id = uint32(len(ids))
					ids[key] = id
					cl.c[id], cl.sp[id] = key[0], key[1]
				}
				t.set(j, l, id)
			}
		}
	}
	hugeSettle(all)
	return tb, te, cl, true
}

// tblockMask is cblockMask for a tight block, in Go: the stub's
// reference, over b's lanes as expanded (lane).
func tblockMask(key *[4]uint32, b *tblock, cl *tclasses) uint32 {
	c := b.expand(cl)
	return cblockMask(key, &c)
}

// tleafScan2Go is cleafScan2Go over tight blocks.
func tleafScan2Go(key *[4]uint32, flags uint32, b0, b1 *tblock, cl *tclasses, lanes uint32) (best, check uint32) {
	c0, c1 := b0.expand(cl), b1.expand(cl)
	return cleafScan2Go(key, flags, &c0, &c1, lanes)
}

// scanLanesT2Go is scanLanesC2Go over tight blocks, the stub's
// reference: each packet's two blocks as the compact blocks they came
// from (expand).
func scanLanesT2Go(s *laneScratch, b0, b1 []tblock, vrule, out []int32, n int, narrow bool, cl *tclasses) (rest int) {
	for i := range n {
		bl0, bl1 := b0[uint32(s.cur[0][i])/vecBlock].expand(cl), b1[uint32(s.cur[1][i])/vecBlock].expand(cl)
		rest = s.cscan(i, &bl0, &bl1, vrule, out, rest, narrow)
	}
	return rest
}

// tleafBest is cleafBest for a tree of tight blocks: each block of the
// leaf is scanned by the one-packet stub (tleafScan2, or tleafScan6 for
// trees.v6) under the leaf's lanes of it, its best rank taken as that
// rank's first entry (tentry, whose rule is the rank's), and only its
// passing lanes with a flag checked in Go. cleafBest expanded every
// block to its compact form and tested it in Go (cblockMask): at 100k
// ClassBench-style rules the packets with a long leaf, one in 400 of the
// fresh 5-tuples (all that the group scans left to Go), took about 750
// ns each, so that vecLanes' loop over them came to 1.88 ns a packet of
// all the packets; with the stub 0.42 (the loop timed with and without
// it, 15 rounds in one process, the median). The leaf's records are in
// entry order, so the scan stops at a block whose first record cannot
// beat best. The best it returns may be an earlier entry of the same
// rule than cleafBest's.
func (t *Table) tleafBest(d *dtree, n uint64, key *[4]uint32, f *rule.Fields, misc uint64, best uint32) uint32 {
	tr := t.tr
	flags := laneFlags(f)
	first, end := uint32(n), uint32(n)+uint32(n>>32)&0xffffff
	for at := first; at < end; at = at&^(vecBlock-1) + vecBlock {
		b, es := &d.tblk[at/vecBlock], &d.tent[at/vecBlock]
		if es[at%vecBlock]&laneEnt >= best {
			break
		}
		var rank, check uint32
		if tr.v6 {
			rank, check = tleafScan6(key, flags, b, b, d.tcls, spanLanes(at, end))
		} else {
			rank, check = tleafScan2(key, flags, b, b, d.tcls, spanLanes(at, end))
		}
		best = min(best, tr.tentry(rank))
		for m := check; m != 0; m &= m - 1 {
			if e := es[bits.TrailingZeros32(m)]; e&laneEnt < best && t.laneRest(e, f, misc) {
				best = e & laneEnt
			}
		}
	}
	return best
}

// cblock returns block b of d's leaves as a compact block: its own, or
// its tight block expanded, with its entry words.
func (d *dtree) cblock(b uint32) cblock {
	if d.tblk != nil {
		c := d.tblk[b].expand(d.tcls)
		c.e = d.tent[b]
		return c
	}
	return d.cblk[b]
}

// tblockMin: sets whose compact blocks pass this many bytes (about 30k
// ClassBench-style rules) get tight blocks where their lanes fit
// (tblocksOf); smaller ones keep compact blocks, which cost the scan
// less where they stay in the cache. A variable, so that tests can give
// small sets tight blocks.
var tblockMin = 6 << 20

// tpos returns each of tr's entries' rank, the position of its run
// among the runs of entries of one rule in decision order, and sets
// tr.trule (each rank's rule, -1 last, as vrule) and tr.tfirst (each
// rank's first entry). Ranks order lanes as their entries do, and two
// entries of one rank decide the same rule: a tight lane holds its rank,
// so that a scan's best names its rule in an array of 4 bytes a rule,
// not an entry (the 100k ClassBench-style set: 100,000 ranks for 177,103
// entries), or in none where the set's rules are in decision order and
// each rank is its rule (tr.tident).
func (tr *trees) tpos() []uint32 {
	pos := make([]uint32, len(tr.ents))
	tr.trule, tr.tfirst = tr.trule[:0], tr.tfirst[:0]
	for e := range tr.ents {
		if r := tr.ents[e].rule; e == 0 || r != tr.ents[e-1].rule {
			tr.trule = append(tr.trule, r)
			tr.tfirst = append(tr.tfirst, uint32(e))
		}
		pos[e] = uint32(len(tr.trule) - 1)
	}
	tr.tident = true
	for k, r := range tr.trule {
		tr.tident = tr.tident && r == int32(k)
	}
	tr.trule = append(tr.trule, -1)
	return pos
}

// tentry returns the first entry of rank k (treeNoRank for a rank past
// the last, as the scans' best when nothing passes): in Go's rest of a
// tight scan, an entry that no other entry of k's rule beats.
func (tr *trees) tentry(k uint32) uint32 {
	if k >= uint32(len(tr.tfirst)) {
		return treeNoRank
	}
	return tr.tfirst[k]
}

// tRule returns the rule of rank k, -1 past the last: vecRule for tight
// blocks.
func (tr *trees) tRule(k uint32) int32 {
	return tr.trule[min(k, uint32(len(tr.trule)-1))]
}
