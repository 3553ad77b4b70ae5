package classifier

import (
	"math/bits"

	"github.com/scrubd/scrubd/swpath/rule"
)

// The window scan: the leaf scan of trees of trec records without blocks
// (trees.window), which is where no vector stub is built (the purego tag,
// amd64 without AVX2, other architectures). A leaf's loop over its
// records ends at a length that varies from leaf to leaf (0 to 8 records
// at 1k ClassBench-style rules, spread evenly), and each record's check is
// a branch, so a fresh-5-tuple packet's two leaf scans paid mispredicted
// branches that also held back the loads of the leaves after them. A
// window instead tests a fixed recWindow records from the leaf's first
// (half of them for a leaf that short, winMask's one branch), without a
// branch per record, and masks off the records past the leaf's count,
// which belong to the leaves after it: the records stay where they
// are, and each tree's records end with recWindow never-passing ones so
// that the last leaf's window stays inside them. Leaves longer than the
// window (marked treeLong) keep the loop (recScan).
//
// Bursts of fresh 5-tuples at 1k ClassBench-style rules (purego tag, two
// trees, pairs of packets) took 0.84-0.98 of the time of the loops over
// the same trees in eight runs, and 0.92-0.94 on 1000 flows (the two
// alternated in one process, thread CPU time; Decide, which takes the
// loops in both, read 0.99-1.00 in the same runs), though a window tests
// eight records where a loop stops at the leaf's end or its first pass.
// A window over checks kept apart from the records' entries and rules
// (32 bytes a record) took 1.09-1.12 of the loops' time. Decide, one
// packet at a time, keeps the loops: with windows it took 1.05-1.14 of
// their time. Leaves laid out in blocks of eight records for the Go
// scan, as the stubs' blocks but in 64-bit words, took 0.90-1.05 of the
// loops' time in the same harness, for 2.8 times the memory (0.29 to
// 0.82 MiB).

// portsKeyBit is a bit of a window set's misc word for the trees
// (miscBits): the packet has ports (rule.Fields.HasPorts). addWindows moves
// the ports test of every record whose entry needs nothing more than them
// (chkPortsBit without chkFullBit) into its misc value and mask, as this
// bit, so that the scans decide on such a record without recRest. At 1k
// ClassBench-style rules, fresh 5-tuples, a packet's windows passed 0.49
// records, of which 0.15 went on to recRest for the ports alone and 0.05
// for holds; the bit takes the 0.15 out of the picks' branches (see
// winFirst). The bit is above the family (bits 40-47) and the IPv6 top
// bits (48, 49), so no node cuts it.
const portsKeyBit = uint64(1) << 50

// portsKey returns portsKeyBit for a packet with ports, else 0, without
// a branch (rule.Fields.HasPorts); laneFlags takes it too.
func portsKey(f *rule.Fields) uint64 {
	var l4 uint64
	if f.L4 {
		l4 = 1
	}
	return uint64(portProtos[f.Proto]) & l4 * portsKeyBit
}

// recWindow is how many records a window tests.
const recWindow = 8

// addWindows pads every tree's records for the windows and marks the
// leaves longer than a window.
func (tr *trees) addWindows() {
	tr.window = true
	tr.keyBits |= portsKeyBit
	for i := range tr.t {
		d := &tr.t[i]
		for j := range d.rec {
			r := &d.rec[j]
			if r.miscMask&(chkPortsBit|chkFullBit) == chkPortsBit {
				r.misc |= portsKeyBit
				r.miscMask = r.miscMask&^chkPortsBit | portsKeyBit
			}
		}
		for range recWindow {
			d.rec = append(d.rec, neverRec)
		}
		mark := func(n uint64) uint64 {
			if n&treeLeaf != 0 && n>>32&0xffffff > recWindow {
				n |= treeLong
			}
			return n
		}
		d.root = mark(d.root)
		for j, n := range d.nodes {
			d.nodes[j] = mark(n)
		}
	}
}

// winMask returns the records of recs[:recWindow] that a packet passes
// (address word sd, misc word misc), bit j for record j, of the first cnt
// (at most recWindow). Written out record by record, each record's bit is
// a conditional move (CMOV on amd64, CSEL on arm64), not a branch.
//
// A leaf of at most half a window ends the window after its first half.
// At 1k ClassBench-style rules, three in four of the leaves that fresh
// 5-tuples reach are that short (counts 0 to 8, mean 2.8), so the one
// branch goes the other way about one time in four, and it spares four
// records' checks (eleven instructions each), which the scan's throughput
// waits on. Table.DecideBurst there (purego tag) took 0.90-0.91 of the
// time of the whole window on fresh 5-tuples in three runs, and 0.90 on
// 1000 flows (medians of 30 blocks, the two alternated in one process,
// thread CPU time). With a second branch after two records it took 0.95,
// with the one branch after three records 0.92, after five 0.94. Checks
// written as independent bits OR-ed in a tree, without the chain of
// conditional moves, take more instructions: a median of 1.06 of the
// time in six alternated benchmark runs.
func winMask(r *[recWindow]trec, sd, misc, cnt uint64) uint32 {
	var m uint32
	if (sd&r[0].sdm^r[0].sd)|(misc&r[0].miscMask^r[0].misc) == 0 {
		m |= 1
	}
	if (sd&r[1].sdm^r[1].sd)|(misc&r[1].miscMask^r[1].misc) == 0 {
		m |= 2
	}
	if (sd&r[2].sdm^r[2].sd)|(misc&r[2].miscMask^r[2].misc) == 0 {
		m |= 4
	}
	if (sd&r[3].sdm^r[3].sd)|(misc&r[3].miscMask^r[3].misc) == 0 {
		m |= 8
	}
	if cnt <= recWindow/2 {
		return m & (1<<cnt - 1)
	}
	if (sd&r[4].sdm^r[4].sd)|(misc&r[4].miscMask^r[4].misc) == 0 {
		m |= 16
	}
	if (sd&r[5].sdm^r[5].sd)|(misc&r[5].miscMask^r[5].misc) == 0 {
		m |= 32
	}
	if (sd&r[6].sdm^r[6].sd)|(misc&r[6].miscMask^r[6].misc) == 0 {
		m |= 64
	}
	if (sd&r[7].sdm^r[7].sd)|(misc&r[7].miscMask^r[7].misc) == 0 {
		m |= 128
	}
	return m & (1<<cnt - 1)
}

// winPick is recScan over the passing records m of a window (winMask's):
// the entry and rule of the first that holds for f and beats best, else
// best and bestRule: treeLookup2of2's picks where winFirst's record needs
// holds. A leaf's records are in entry order, so the first passing record
// that needs nothing more decides.
func (t *Table) winPick(m uint32, recs *[recWindow]trec, f *rule.Fields, misc uint64, best uint32, bestRule int32) (uint32, int32) {
	for m != 0 {
		r := &recs[bits.TrailingZeros32(m)&(recWindow-1)]
		m &= m - 1
		if r.ent >= best {
			break
		}
		if r.miscMask >= chkPortsBit && !t.recRest(r.miscMask, r.ent, f, misc) {
			continue
		}
		return r.ent, r.rule
	}
	return best, bestRule
}

// winFirst returns the entry, rule and misc mask of the first of window
// w's passing records m (winMask's), or treeNoRank, -1 and 0 where none
// passes, without a branch. That record decides its tree unless its misc
// mask asks for more (chkFullBit: holds): a leaf's records are in entry
// order, and a window set's records test the ports in their misc word
// (portsKeyBit).
//
// A pair of packets (treeLookup2of2) takes the better of each packet's
// two trees' first records with a conditional move, and goes to winPick
// only when one of the two needs holds. Before, every window with a
// passing record took winPick, whose branches (a window passes for a
// third of fresh 5-tuples in the first tree, an eighth in the second;
// three picks in ten went on to recRest for the ports) were mispredicted
// about as often as they went one way or the other. With portsKeyBit,
// bursts of fresh 5-tuples at 1k ClassBench-style rules (purego tag) took
// 0.885-0.901 of the time of the picks before in three runs, and 0.897 on
// 1000 flows (old and new alternated in one process, thread CPU time,
// medians of 31 rounds; Intel Xeon, family 6 model 207). A form that
// took both trees' masks, too big to inline, took 1.02 of the time of
// this one, which inlines; without portsKeyBit, 0.96 of the picks'. The
// bit alone, on the set as aclbench -ipv6 writes it: 0.89.
func winFirst(m uint32, w *[recWindow]trec) (uint32, int32, uint64) {
	r := &w[bits.TrailingZeros32(m)&(recWindow-1)]
	e, x, mm := r.ent, r.rule, r.miscMask
	if m == 0 {
		e, x, mm = treeNoRank, -1, 0
	}
	return e, x, mm
}

// leafWindow is the records of leaf n's window.
func (d *dtree) leafWindow(n uint64) *[recWindow]trec {
	return (*[recWindow]trec)(d.rec[uint32(n):])
}

// treePad is how many levels of each of a two-tree set's trees the pair
// walks (treeLookup2of2, vecEntry2of2) take without a branch. A walk's
// loop over levels ends at a depth that varies from packet to packet and
// tree to tree: at 1k ClassBench-style rules a fresh 5-tuple's walk of
// the first tree ends after one load for 24 % of packets, two for 70 %,
// three or four for the rest, and of the second after one for 84 %, two
// for 13 %, so the loops of a pair's four walks took mispredicted exits
// and skips about once a pair. With every leaf at least two loads from
// its root (padDepth), the first two levels take no branch, and the loop
// after them runs for about one pair in five.
//
// Fresh 5-tuple bursts at 1k rules took 0.95-0.96 of the time under the
// purego tag (windows; 0.97-0.98 in a first form that kept a depth per
// tree in the loop), 0.95 with the AVX2 blocks and no lanes
// (the pair walk arm64 takes too), 0.96 at 500 rules and 0.97 at 2000
// (padded and unpadded tables alternated in one process, thread CPU time,
// medians of 150 blocks), for 0.33 MiB of trees instead of 0.29 at 1k.
// Padding to three levels took 1.06-1.07 of the time, the first tree to
// two and the second to one 1.01-1.02. The lane walk (AVX-512) walks a
// group level by level until its last packet is at a leaf, which padding
// does not spare: with it, 1.014 at 1k, so sets the lanes walk are not
// padded.
const treePad = 2

// treePadWalks: sets of two trees pad their trees to treePad. A variable,
// so that tests can walk unpadded trees too.
var treePadWalks = true

// padDepth makes every leaf of d that a walk reaches after fewer than
// depth loads from the root (the root itself too) reachable after exactly
// depth: the slot that held the leaf holds a chain of pass-through nodes
// (key word 0, no shift, one child), the last of which names a slot that
// holds the leaf. Siblings share words (treeBuilder.node), never nodes of
// different depths, so every slot has one depth; a shared child is padded
// once. The walks stay correct unpadded: every walk loops on to a leaf.
func (d *dtree) padDepth(depth int) {
	chain := func(leaf uint64, n int) uint64 {
		w := leaf
		for range n {
			d.nodes = append(d.nodes, w)
			w = uint64(len(d.nodes) - 1)
		}
		return w
	}
	if d.root&treeLeaf != 0 {
		d.root = chain(d.root, depth)
		return
	}
	seen := map[uint32]bool{}
	var visit func(n uint64, at int)
	visit = func(n uint64, at int) {
		base := uint32(n)
		if seen[base] {
			return
		}
		seen[base] = true
		for j := base; j <= base+uint32(n>>32&0xffff); j++ {
			switch c := d.nodes[j]; {
			case c&treeLeaf == 0:
				visit(c, at+1)
			case at+1 < depth:
				w := chain(c, depth-(at+1)) // before the index: chain may move d.nodes
				d.nodes[j] = w
			}
		}
	}
	visit(d.root, 0)
}
