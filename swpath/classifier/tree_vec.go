package classifier

import (
	"math/bits"

	"github.com/scrubd/scrubd/swpath/rule"
)

// The vector leaf scan. A per-packet walk spent most of its time in the
// leaf scans, not the walk: at 1k ClassBench-style rules a fresh-5-tuple
// packet walked its 4 trees in about 16 ns and then scanned their leaves
// (5.7 records on average) in about 42, each leaf's loop ending at an
// unpredictable length and each record's check a branch, so the leaves
// were scanned one after the other behind mispredicted branches. For sets
// whose bursts take the per-packet walk (treeWalkMax) and that make at
// most four trees, every leaf's records are also laid out in blocks of
// eight (sblock), their scan checks in 32-bit lanes with each record's
// entry and flags, and one call per packet (leafScan4: AVX2 on amd64, NEON
// on arm64) tests the first block of each of the four leaves without a
// branch (leafScan2 the two of a set of two trees, as ClassBench-style
// sets make with treeJoin). It returns the best entry among the passing
// records that need nothing more, and the passing records that need
// holds (or ports the packet lacks); only those are checked in Go
// (vecChecked, about 5 % of a flood's packets at 1k rules), and only a
// packet with a leaf of more than eight records scans its leaves in Go
// (vecResolve). Without the lane walk (tree_lanes.go) blocks are not
// built for bigger sets: at 10k and 100k rules (leaves of 16, the groups
// of treeGroup) blocks more than doubled the lookup's memory (3.1 to 7.3
// MiB, 31.8 to 77.0) and the burst took 1.6 and 2.2 times as long, most
// packets' leaves being longer than a block; with it, sets up to
// treeLanesMax scan two blocks a leaf (vecLong). Where no stub is built
// (other architectures, the purego tag) vecScan is false and the records
// are scanned in Go as before (bursts of two-tree sets as windows,
// tree_window.go): leafScan4Go and leafScan2Go are then the stubs'
// reference in tests, which force either scan (TestTreesVecForced).

// sblock holds the scan checks (see echeck) of eight records of a leaf in
// 32-bit lanes: values v and masks m of the source address word (the
// check's top 32 bits), the destination's, the misc word's top half
// (family, protocol) and its bottom half (ports). A record passes when
// every lane of the packet under its mask equals its value. A leaf takes
// whole blocks; its unused lanes (and block 0 of every tree, the block of
// empty leaves) have mask 0 and a value of 1, so they never pass.
type sblock struct {
	v, m [4][8]uint32
	// e is each lane's entry (its rank in decision order) with the
	// record's flags: bit 31 when its entry needs holds (chkFullBit),
	// bit 30 when it needs the packet to have ports (chkPortsBit alone).
	e [8]uint32
}

const (
	laneFull  = 1 << 31
	lanePorts = 1 << 30
	laneEnt   = lanePorts - 1
)

// vecBlock is the record index alignment of leaves in trees with blocks.
const vecBlock = 8

// treeLong marks, in trees with blocks, a leaf word of more than one
// block (bits 56-62 of a leaf word are free).
const treeLong = uint64(1) << 62

// treeLonger marks, in trees with blocks, a leaf word of more than two
// blocks.
const treeLonger = uint64(1) << 61

// neverBlock is the blocks of a tree the set does not have.
var neverBlock = func() (b [1]sblock) {
	for j := range vecBlock {
		b[0].setLane(j, &neverRec)
	}
	return b
}()

// setLane stores the check of r in lane j of b.
func (b *sblock) setLane(j int, r *trec) {
	mm := r.miscMask &^ (chkPortsBit | chkFullBit)
	b.v[0][j], b.m[0][j] = uint32(r.sd>>32), uint32(r.sdm>>32)
	b.v[1][j], b.m[1][j] = uint32(r.sd), uint32(r.sdm)
	b.v[2][j], b.m[2][j] = uint32(r.misc>>32), uint32(mm>>32)
	b.v[3][j], b.m[3][j] = uint32(r.misc), uint32(mm)
	b.e[j] = laneEntry(r)
}

// laneEntry returns the lane entry word of r: its entry, with laneFull
// when it needs holds and lanePorts when it needs the packet to have
// ports.
func laneEntry(r *trec) uint32 {
	switch {
	case r.ent == treeNoRank:
	case r.miscMask&chkFullBit != 0:
		return r.ent | laneFull
	case r.miscMask&chkPortsBit != 0:
		return r.ent | lanePorts
	}
	return r.ent
}

// neverRec is a record that no packet passes (a block's unused lane).
var neverRec = trec{sd: 1 << 32, ent: treeNoRank, rule: -1}

// addBlocks lays out the leaves of d in blocks: every leaf's records start
// at a multiple of vecBlock (record 0-7 are the empty leaves' block) and
// are followed by never-passing records up to the next multiple, and
// d.blk holds the checks of d.rec in blocks.
func (d *dtree) addBlocks() {
	rec := blockRecords(len(d.rec)*2 + vecBlock)
	d.relay(func(first, cnt uint32) uint64 {
		m := treeLeaf | uint64(cnt)<<32 | uint64(len(rec))
		if cnt > vecBlock {
			m |= treeLong
		}
		if cnt > 2*vecBlock {
			m |= treeLonger
		}
		rec = append(rec, d.rec[first:first+cnt]...)
		for len(rec)%vecBlock != 0 {
			rec = append(rec, neverRec)
		}
		return m
	})
	d.rec = rec
	d.blk = make([]sblock, len(rec)/vecBlock)
	for i := range rec {
		d.blk[i/vecBlock].setLane(i%vecBlock, &rec[i])
	}
}

// blockRecords returns the records of a layout in blocks before its
// leaves: block 0, the empty leaves', of never-passing records, with
// room for n.
func blockRecords(n int) []trec {
	rec := make([]trec, vecBlock, n)
	for i := range rec {
		rec[i] = neverRec
	}
	return rec
}

// relay gives every leaf of d with records the leaf word that place
// returns for its records (first, cnt), once a leaf however many node
// words name it, and every empty leaf block 0's: the new layouts of
// addBlocks and layPacked, whose records place copies.
func (d *dtree) relay(place func(first, cnt uint32) uint64) {
	moved := map[uint64]uint64{}
	word := func(n uint64) uint64 {
		switch {
		case n&treeLeaf == 0:
			return n
		case n>>32&0xffffff == 0:
			return treeLeaf // an empty leaf: block 0
		}
		m, ok := moved[n]
		if !ok {
			m = place(uint32(n), uint32(n>>32)&0xffffff)
			moved[n] = m
		}
		return m
	}
	d.root = word(d.root)
	for i, n := range d.nodes {
		d.nodes[i] = word(n)
	}
}

// blockMask returns the lanes of b that key (the packet's four lanes)
// passes, bit j for lane j: leafScan4's work for one block, in Go.
func blockMask(key *[4]uint32, b *sblock) uint32 {
	var m uint32
	for j := range vecBlock {
		x := (key[0]&b.m[0][j] ^ b.v[0][j]) | (key[1]&b.m[1][j] ^ b.v[1][j]) |
			(key[2]&b.m[2][j] ^ b.v[2][j]) | (key[3]&b.m[3][j] ^ b.v[3][j])
		if x == 0 {
			m |= 1 << j
		}
	}
	return m
}

// laneFlags is the lane flags that keep a passing lane from deciding in
// leafScan4 for packet f: always laneFull, and lanePorts when f has no
// ports.
func laneFlags(f *rule.Fields) uint32 {
	has := uint32(portsKey(f) / portsKeyBit)
	return laneFull | lanePorts*(1-has)
}

// portProtos is 1 for the protocols that carry ports, taken from
// rule.Fields.HasPorts: portsKey tests a flood's mix of protocols
// without a branch (a byte a protocol, so without a shift by a variable
// count either).
var portProtos = func() (m [256]uint8) {
	for p := range m {
		if f := (rule.Fields{L4: true, Proto: uint8(p)}); f.HasPorts() {
			m[p] = 1
		}
	}
	return m
}()

// leafScan4Go is leafScan4 in Go.
func leafScan4Go(sd, misc uint64, flags uint32, b0, b1, b2, b3 *sblock) (best, check uint32) {
	key := [4]uint32{uint32(sd >> 32), uint32(sd), uint32(misc >> 32), uint32(misc)}
	best = treeNoRank
	for i, b := range [4]*sblock{b0, b1, b2, b3} {
		m := blockMask(&key, b)
		for j := range vecBlock {
			if m>>j&1 == 0 {
				continue
			}
			if b.e[j]&flags != 0 {
				check |= 1 << (8*i + j)
			} else {
				best = min(best, b.e[j]&laneEnt)
			}
		}
	}
	return best, check
}

// leafScan2Go is leafScan2 in Go: leafScan4Go with two never-passing
// blocks.
func leafScan2Go(sd, misc uint64, flags uint32, b0, b1 *sblock) (best, check uint32) {
	return leafScan4Go(sd, misc, flags, b0, b1, &neverBlock[0], &neverBlock[0])
}

// leafScan is leafScan2 over b0 and b1 in sets of at most two trees
// (vec2), else leafScan4: a packet of a two-tree set tests two blocks,
// not four.
func (tr *trees) leafScan(sd, misc uint64, flags uint32, b0, b1, b2, b3 *sblock) (best, check uint32) {
	if tr.vec2 {
		return leafScan2(sd, misc, flags, b0, b1)
	}
	return leafScan4(sd, misc, flags, b0, b1, b2, b3)
}

// treeLookupVec is treeLookup for trees with blocks (at most four).
func (t *Table) treeLookupVec(f *rule.Fields) (int32, int) {
	best, n := t.vecEntry(f)
	return t.tr.vecRule(best), n
}

// makeVrule fills vrule from ents.
func (tr *trees) makeVrule() {
	tr.vrule = make([]int32, len(tr.ents)+1)
	for i := range tr.ents {
		tr.vrule[i] = tr.ents[i].rule
	}
	tr.vrule[len(tr.ents)] = -1
}

// vecRule returns the rule of entry best (vecEntry's), -1 for
// treeNoRank, from vrule (4 bytes an entry, so it stays in the cache)
// without a branch.
func (tr *trees) vecRule(best uint32) int32 {
	return tr.vrule[min(best, uint32(len(tr.vrule)-1))]
}

// vecEntry returns the deciding entry of f (treeNoRank when none) and the
// trees walked: the walk of treeLookup, then leafScan4 over the first
// block of each leaf.
func (t *Table) vecEntry(f *rule.Fields) (uint32, int) {
	if f.Family == 0 {
		return treeNoRank, 0
	}
	tr := t.tr
	k := treeKey{f.Src.Hi, f.Dst.Hi, miscWord(f) | tr.topBits(f)}
	sd := scanSD(f)
	trs := tr.t
	// treeLookup's walk, written out again: as a function of its own (too
	// big to inline) it cost the 1k lookup 3-5 % (test binaries
	// alternated four times, pinned, 64-66 against 67-70 cpu-ns/pkt).
	n0, n1, n2, n3 := treeLeaf, treeLeaf, treeLeaf, treeLeaf
	switch len(trs) {
	case 4:
		n3 = trs[3].root
		fallthrough
	case 3:
		n2 = trs[2].root
		fallthrough
	case 2:
		n1 = trs[1].root
		fallthrough
	case 1:
		n0 = trs[0].root
	}
	for n0&n1&n2&n3&treeLeaf == 0 {
		if n0&treeLeaf == 0 {
			n0 = trs[0].nodes[uint32(n0)+uint32(k[n0>>56&3]>>(n0>>48&63))&uint32(n0>>32&0xffff)]
		}
		if n1&treeLeaf == 0 {
			n1 = trs[1].nodes[uint32(n1)+uint32(k[n1>>56&3]>>(n1>>48&63))&uint32(n1>>32&0xffff)]
		}
		if n2&treeLeaf == 0 {
			n2 = trs[2].nodes[uint32(n2)+uint32(k[n2>>56&3]>>(n2>>48&63))&uint32(n2>>32&0xffff)]
		}
		if n3&treeLeaf == 0 {
			n3 = trs[3].nodes[uint32(n3)+uint32(k[n3>>56&3]>>(n3>>48&63))&uint32(n3>>32&0xffff)]
		}
	}
	misc := k[2]
	vb := &tr.vblk
	if tr.vecLong {
		// Both blocks of each of two leaves, as scanLanes4.
		a0, c0 := leafBlocks(vb[0], n0)
		a1, c1 := leafBlocks(vb[1], n1)
		best, check := leafScan4(sd, misc, laneFlags(f), a0, c0, a1, c1)
		if (n0|n1)&treeLonger != 0 || check != 0 {
			best = t.vecRest(f, sd, misc, best, check, [4]uint64{n0, n1, treeLeaf, treeLeaf}, [4]*sblock{a0, c0, a1, c1}, treeLonger)
		}
		return best, len(trs)
	}
	b0, b1, b2, b3 := &vb[0][uint32(n0)/vecBlock], &vb[1][uint32(n1)/vecBlock], &vb[2][uint32(n2)/vecBlock], &vb[3][uint32(n3)/vecBlock]
	best, check := tr.leafScan(sd, misc, laneFlags(f), b0, b1, b2, b3)
	if (n0|n1|n2|n3)&treeLong != 0 || check != 0 {
		best = t.vecRest(f, sd, misc, best, check, [4]uint64{n0, n1, n2, n3}, [4]*sblock{b0, b1, b2, b3}, treeLong)
	}
	return best, len(trs)
}

// vecRest finishes a lookup whose leaves cur or leaf scan's lanes check
// need more than the scan (the rare path, tested inline by the callers):
// a leaf longer than the blocks scanned (marked long: treeLong where the
// scan tested a leaf's first block, treeLonger where it tested two)
// sends the packet to vecResolve; a passing lane that needs holds, to
// vecChecked over the blocks scanned, bs.
func (t *Table) vecRest(f *rule.Fields, sd, misc uint64, best, check uint32, cur [4]uint64, bs [4]*sblock, long uint64) uint32 {
	if (cur[0]|cur[1]|cur[2]|cur[3])&long != 0 {
		return t.vecResolve(f, sd, misc, cur)
	}
	return t.vecChecked(f, misc, best, check, [4]*[vecBlock]uint32{&bs[0].e, &bs[1].e, &bs[2].e, &bs[3].e})
}

// vecChecked returns the lower of best and the entries of the lanes named
// by check (leafScan4's: bit 8i+j for lane j of block i, whose entry
// words are es[i]) that hold for f. Such a lane needs holds (laneFull),
// or ports that f lacks (lanePorts): that one never decides.
func (t *Table) vecChecked(f *rule.Fields, misc uint64, best, check uint32, es [4]*[vecBlock]uint32) uint32 {
	for check != 0 {
		l := bits.TrailingZeros32(check)
		check &= check - 1
		e := es[l/vecBlock][l%vecBlock]
		if e&laneEnt >= best || e&laneFull == 0 || !t.holds(&t.tr.ents[e&laneEnt], f, misc) {
			continue
		}
		best = e & laneEnt
	}
	return best
}

// vecResolve returns the best entry whose record passes in the leaves
// cur, block by block, checking holds where a record needs it: the rare
// path of treeLookupVec, in Go.
func (t *Table) vecResolve(f *rule.Fields, sd, misc uint64, cur [4]uint64) uint32 {
	best := treeNoRank
	trs := t.tr.t
	key := [4]uint32{uint32(sd >> 32), uint32(sd), uint32(misc >> 32), uint32(misc)}
	for i := range trs {
		n := cur[i]
		first, cnt := uint32(n), uint32(n>>32)&0xffffff
		d := &trs[i]
	leaf:
		for b := uint32(0); b*vecBlock < cnt; b++ {
			mi := blockMask(&key, &d.blk[first/vecBlock+b])
			for mi != 0 {
				r := &d.rec[first+b*vecBlock+uint32(bits.TrailingZeros32(mi))]
				mi &= mi - 1
				if r.ent >= best {
					break leaf
				}
				if r.miscMask >= chkPortsBit && !t.recRest(r.miscMask, r.ent, f, misc) {
					continue
				}
				best = r.ent
				break leaf
			}
		}
	}
	return best
}
