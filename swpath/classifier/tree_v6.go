package classifier

import "github.com/scrubd/scrubd/swpath/rule"

// IPv6 in the trees. A scan check holds 32 bits of each address (see
// echeck): for IPv6, bits 32-63 of the high words, since the top 32 are
// often one shared prefix (such as 2001:db8::/32) that separates nothing.
// The walk does not check them either (a node skips the bits all its
// entries share), so every IPv6 record with an address prefix needed
// Table.holds, a read of its entry, whenever its check passed: at 100k
// ClassBench-style rules written as IPv6, 1.54 holds per fresh-5-tuple
// packet against 0.15 for the same rules as IPv4, each a cache miss in an
// entry array of 5 MiB.
//
// So the trees take the most common top 32 bits of the IPv6 source
// prefixes of at least 32 bits, and of the destination ones, and a
// packet's misc word for the trees (trees.topBits) carries two bits that
// say whether its addresses' top 32 bits are those. An IPv6 entry whose
// prefixes are each empty or at least 32 bits long with those top bits
// has the bits of its prefixes in its misc value and mask, so its scan
// check covers the whole high words and it needs no holds for them; any
// other IPv6 entry with a prefix keeps the full check (chkKeyAddr). The
// bits are above the fields a node cuts (the family ends at bit 48) and
// below chkPortsBit, and in the vector scan's family-and-protocol lane.

const (
	v6SrcTop = uint64(1) << 48 // the source's top 32 bits are trees.top6[0]
	v6DstTop = uint64(1) << 49 // the destination's are trees.top6[1]
)

// v6Tops returns the most common top 32 bits of the IPv6 source prefixes
// of at least 32 bits in all, and of the destination ones.
func v6Tops(all []bentry) [2]uint32 {
	var cnt [2]map[uint32]int
	var top [2]uint32
	var best [2]int
	for i := range all {
		b := &all[i]
		if !isV6Prefixed(b) {
			continue
		}
		for s, w := range [2][2]uint64{{b.val.srcHi, b.mask.srcHi}, {b.val.dstHi, b.mask.dstHi}} {
			if uint32(w[1]>>32) != ^uint32(0) {
				continue
			}
			if cnt[s] == nil {
				cnt[s] = map[uint32]int{}
			}
			v := uint32(w[0] >> 32)
			cnt[s][v]++
			if c := cnt[s][v]; c > best[s] {
				top[s], best[s] = v, c
			}
		}
	}
	return top
}

// isV6Prefixed reports whether b is an IPv6 entry with an address prefix.
func isV6Prefixed(b *bentry) bool {
	return b.mask.misc>>40&0xff != 0 && rule.Family(b.val.misc>>40) == rule.IPv6 && b.mask.srcHi|b.mask.dstHi != 0
}

// v6Bits returns the misc bits that make the scan check of b (an IPv6
// entry with an address prefix) cover its whole high words, and false
// when a prefix is shorter than 32 bits or has other top bits than top.
func v6Bits(b *bentry, top [2]uint32) (uint64, bool) {
	var m uint64
	for s, w := range [2][2]uint64{{b.val.srcHi, b.mask.srcHi}, {b.val.dstHi, b.mask.dstHi}} {
		switch {
		case w[1] == 0:
		case uint32(w[1]>>32) == ^uint32(0) && uint32(w[0]>>32) == top[s]:
			m |= v6SrcTop << s
		default:
			return 0, false
		}
	}
	return m, true
}

// topBits returns a packet's bits v6SrcTop and v6DstTop for its misc word
// for the trees (miscWord(f) | topBits(f)), without a branch but one on
// the set: where no entry tests them (every IPv4 set), none. Skipping them
// there took 0.97-0.98 of the time of 1k ClassBench-style bursts under
// the purego tag (fresh 5-tuples, the two alternated in one process,
// thread CPU time), and lets the callers inline it. The lookups that a
// window set takes use miscBits, which adds portsKeyBit.
func (tr *trees) topBits(f *rule.Fields) uint64 {
	if !tr.v6 {
		return 0
	}
	s := f.Src.Hi>>32 ^ uint64(tr.top6[0]) // 0 where the top 32 bits are top6[0]
	d := f.Dst.Hi>>32 ^ uint64(tr.top6[1])
	return (s-1)>>63<<48 | (d-1)>>63<<49
}

// miscBits is topBits for the lookups that scan trec or crec records, a
// window set's among them (treeLookup, treeLookup2of2, treeMatching,
// treeGroup): the bits of a packet's misc word for the trees that the
// set's records test (trees.keyBits), v6SrcTop and v6DstTop and, in a
// window set, portsKeyBit. The vector scans' lookups take topBits, which
// does not work out the ports bit that they have no use for.
func (tr *trees) miscBits(f *rule.Fields) uint64 {
	if tr.keyBits == 0 {
		return 0
	}
	s := f.Src.Hi>>32 ^ uint64(tr.top6[0])
	d := f.Dst.Hi>>32 ^ uint64(tr.top6[1])
	return ((s-1)>>63<<48 | (d-1)>>63<<49 | portsKey(f)) & tr.keyBits
}

// skipFrom returns, for the entries ids whose prefix of field fi is
// longer than c bits, the shortest such prefix, the first one's value
// under m and m: the bits from c to that prefix's end (minP <= c when
// there is none). A node may skip the bits they all share there even when
// other entries' prefixes end above them, since those go to every child
// of a cut below, and a record's check tests every bit of its prefix (the
// top 32 bits of IPv6 ones with the misc word's bits or holds): a packet
// that differs in a skipped bit reaches a leaf whose records of the
// longer prefixes fail their checks. With the shared 2001:db8::/32 of an
// IPv6 set, a node with one source wildcard among its entries could not
// cut the source at all before.
func (b *treeBuilder) skipFrom(ids []int32, fi int, c uint8) (minP uint8, v0, m uint64) {
	fd := tfields[fi]
	minP = fd.hi - fd.lo
	first := int32(-1)
	for _, id := range ids {
		if p := b.es[id].plen[fi]; p > c {
			minP = min(minP, p)
			if first < 0 {
				first = id
			}
		}
	}
	if first < 0 {
		return 0, 0, 0
	}
	m = (uint64(1)<<(minP-c) - 1) << (fd.hi - minP)
	return minP, b.es[first].val[fd.w] & m, m
}
