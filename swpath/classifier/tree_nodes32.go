package classifier

import (
	"math/bits"

	"github.com/scrubd/scrubd/swpath/rule"
)

// Node words of 4 bytes. At 100k ClassBench-style rules the lane walk
// (walkLanes8x2) was about as long as the block scans after it, and most
// of it waited on tree 0's gathers: that tree's node words take 2.9 MB
// (369,360 of 8 bytes), more than a core's second-level cache, and a
// packet's walk reads one at each of its three or more levels. Yet a node
// word needs fewer than 32 bits: the key word (2 bits), the shift (6),
// the cut's bit count (4, for a mask of 1 to 16 bits), the first child
// (19 bits, for trees of up to 2^19 node words) and the leaf bit; a leaf
// word its first record (22 bits), count (8) and treeLong. Sets whose two
// trees' node words pass nodes32Min bytes get a copy of each tree's words
// in 4 bytes (dtree.nodes32), which the lane walk gathers instead
// (walkLanes8x2d), widening each leaf word at the end to what the scans
// read. In one process, over 262,144 fresh 5-tuples (keys, the two-tree
// walk and the tight scan of each group of 128, alternated six times,
// the time-stamp counter), the walk took 0.76-0.82 of its cycles at 100k
// and the walk and scan 0.84-0.89; at 70k 0.93 and 0.95, at 50k (1.4 MiB
// of node words) 0.99 and 1.02, and at 1k and 10k, whose trees stay in
// the cache, 1.09 and 1.03 of the walk (the words' extra decoding). With
// the tail below, the two tables of one set alternated 15 times in one
// process, over the same packets: DecideBurst in bursts of 256 took 1.06
// of the time with 4-byte words at 1.5k rules, 1.02 at 3k (173 KiB of
// 8-byte node words), 0.99 at 5k and 7k (131 and 181 KiB), 0.97-1.00 at
// 10k (288 KiB), 0.98 at 20k (614 KiB), 0.94 at 30k, 0.93 at 50k and
// 0.875 at 100k; in bursts of 32 and 64, 1.00-1.01 at 10k and 20k and
// 0.90-0.91 at 100k; a worker's bursts (ClassifyBurst, no flow cache) at
// 10k 1.01 in bursts of 32, 1.00 of 64 and 0.97 of 256: hence nodes32Min,
// which leaves 10k sets (and the Direct Verbs engine's bursts over them)
// their 8-byte words. aclbench at 100k, the builds before and after the
// 4-byte words (without the tail) alternated three times: DecideBurst
// 37.9, 38.1 and 40.8 ns a packet against 41.3, 44.4 and 46.0. The
// 8-byte words stay for every other walk (Decide, the
// group walk, Go's), and for trees of more than 2^19 words (tree 0 has
// 369,360 at 100k rules, 598,334 at 150k), whose sets walk those.
//
// The walk's last levels. A group's walk takes as many levels as its
// deepest lane, and every level gathers for each chunk of eight lanes
// with one lane not at a leaf. At 100k rules, over 65,536 fresh
// 5-tuples, tree 0's walks took levels 0-2 over nearly every lane (128,
// 102 and 87 a group of 128), then 41 lanes in 15 of the 16 chunks at
// level 3, 15 in 10 at level 4, 4 in 4 at level 5, and one group in
// five went to level 8 or more: the levels that miss the cache gathered
// one to three lanes each, so few of their loads waited together. So
// after nodes32Head levels walkLanes8x2d compacts each tree's lanes not
// yet at a leaf (VPCOMPRESSQ of their words, keys and lane numbers) into
// a laneTail, walks both trees' tails on, a level at a time over their
// chunks together, and writes their leaves back. In one process (keys,
// walk and tight scan of each group, the time-stamp counter, six runs),
// the walk took 0.87-0.91 of its cycles with a tail after three levels
// (both trees' tails together, or one after the other) and the walk and
// scan 0.92-0.96; after two levels 0.91-1.04, after four 0.94-0.98
// (0.96-1.01 of walk and scan); DecideBurst 0.95-0.96. Groups sorted by
// their depth in tree 0, which no lookup can do, bound what compaction
// can give: 0.76-0.82 of the walk. A DecideBurst without a worker clears a
// laneTail (10 KiB) on its stack only for sets of 4-byte words and
// bursts of at least a group (treeGroup), whose smaller bursts walk
// without a tail; a worker keeps one.

// nodes32Min: sets whose two trees' node words take more than this many
// bytes get 4-byte words for the lane walk (trees.addNodes32); tests
// raise it.
var nodes32Min = 512 << 10

// The fields of a 4-byte node word (node32): a leaf's first record, count
// and treeLong; an inner node's first child, the cut's bits less one, the
// shift and the key word.
const (
	n32Leaf      = 1 << 31
	n32LongBit   = 30
	n32CountBit  = 22
	n32RecBits   = 22
	n32KeyBit    = 29
	n32ShiftBit  = 23
	n32CutBit    = 19
	n32ChildBits = 19
)

// node32 returns node word x (dtree.nodes') in 4 bytes, and false where
// it has no such form: a leaf whose first record or count needs more
// than 22 or 8 bits, an inner node whose first child needs more than 19
// bits or whose mask is not 1 to 16 low bits, or a word with other bits
// set. node64 of the result is x.
func node32(x uint64) (uint32, bool) {
	var w uint32
	if x&treeLeaf != 0 {
		w = n32Leaf | uint32(x>>62&1)<<n32LongBit | uint32(x>>32&0xff)<<n32CountBit | uint32(x)&(1<<n32RecBits-1)
	} else {
		m := x >> 32 & 0xffff
		k := bits.Len64(m)
		if k == 0 {
			return 0, false
		}
		w = uint32(x>>56&3)<<n32KeyBit | uint32(x>>48&63)<<n32ShiftBit | uint32(k-1)<<n32CutBit | uint32(x)&(1<<n32ChildBits-1)
	}
	return w, node64(w) == x
}

// node64 is node32's inverse: the 8-byte word of 4-byte word w. It is the
// reference of walkLanes8x2d's decoding (DSTEP) and widening (DWIDEN).
func node64(w uint32) uint64 {
	if w&n32Leaf != 0 {
		return treeLeaf | uint64(w>>n32LongBit&1)<<62 | uint64(w>>n32CountBit&0xff)<<32 | uint64(w&(1<<n32RecBits-1))
	}
	k := w >> n32CutBit & 15
	return uint64(w>>n32KeyBit&3)<<56 | uint64(w>>n32ShiftBit&63)<<48 | (uint64(2)<<k-1)<<32 | uint64(w&(1<<n32ChildBits-1))
}

// addNodes32 gives the two trees of a set that takes the lane walk their
// 4-byte node words (nodes32, root32), where their 8-byte words take
// more than over bytes and every word has a 4-byte form; else neither
// tree gets them.
func (tr *trees) addNodes32(over int) {
	if !(lanesWalk || tr.cvec && cvecGroup) || len(tr.t) != 2 || !(tr.cvec || tr.vec2) || 8*(len(tr.t[0].nodes)+len(tr.t[1].nodes)) <= over {
		return
	}
	n0, r0, ok0 := tr.t[0].words32()
	n1, r1, ok1 := tr.t[1].words32()
	if ok0 && ok1 {
		tr.t[0].nodes32, tr.t[0].root32 = n0, r0
		tr.t[1].nodes32, tr.t[1].root32 = n1, r1
	}
}

// words32 returns d's node words and root in 4 bytes (node32), and false
// where some word has no such form.
func (d *dtree) words32() ([]uint32, uint32, bool) {
	ns := make([]uint32, len(d.nodes))
	for j, x := range d.nodes {
		w, ok := node32(x)
		if !ok {
			return nil, 0, false
		}
		ns[j] = w
	}
	r, ok := node32(d.root)
	return ns, r, ok
}

// walkLanes2Go32 is walkLanesGo for trees d0 and d1 over their 4-byte
// words (node64 at each step): walkLanes8x2d's reference.
func walkLanes2Go32(d0, d1 *dtree, keys *[3][treeGroup]uint64, cur *[2][treeGroup]uint64, n int) {
	for t, d := range [2]*dtree{d0, d1} {
		for i := range (n + 7) &^ 7 {
			x := node64(d.root32)
			for x&treeLeaf == 0 {
				w := keys[x>>56&3][i]
				x = node64(d.nodes32[child(x, w)])
			}
			cur[t][i] = x
		}
	}
}

// nodes32Head: the levels walkLanes8x2d takes over a whole group before
// it compacts each tree's lanes not yet at a leaf (laneTail).
const nodes32Head = 3

// laneTail is walkLanes8x2d's memory for the walks past nodes32Head
// levels: for each tree, the node words of its lanes not at a leaf
// (eight entries more, which the stub fills with leaf words), their keys
// (treeKey's words, as laneScratch.keys) and their lane numbers.
type laneTail struct {
	cur  [2][treeGroup + 8]uint64
	keys [2][3][treeGroup]uint64
	idx  [2][treeGroup]uint64
}

// walkGroup32 is walkGroup over d's 4-byte node words (nodes32), which
// it decodes as node64 does, the leaf words widened at the end: for
// cvecBurst, whose sets' node words pass nodes32Min bytes, where
// walkQuads does not run (quadsCPU false): on arm64, and where tests
// force cvecBurst on amd64 without AVX2 or under purego. On an AMD EPYC
// without AVX-512 (family 25 model 1, under KVM), fresh 5-tuple bursts
// at 100k ClassBench-style rules took 0.82-0.88 of the time of walkGroup
// over the 8-byte words (three runs, the two tables alternated 21 times
// in one process, thread CPU time, medians), at 30k 1.01-1.04.
func (d *dtree) walkGroup32(fs []rule.Fields, c *[treeGroup]uint64, keys *[treeGroup]treeKey) {
	var act [treeGroup]uint8
	var w [treeGroup]uint32
	nodes := d.nodes32
	root := d.root32
	na := 0
	for i := range fs {
		w[i] = root
		if fs[i].Family == 0 {
			w[i] = n32Leaf // an empty leaf
		}
		act[na] = uint8(i)
		na += int(^w[i] >> 31)
	}
	for na > 0 {
		k := 0
		for _, i := range act[:na] {
			x := w[i]
			key := keys[i][x>>n32KeyBit&3]
			m := nodes[x&(1<<n32ChildBits-1)+uint32(key>>(x>>n32ShiftBit&63))&(2<<(x>>n32CutBit&15)-1)]
			w[i] = m
			act[k] = i
			k += int(^m >> 31)
		}
		na = k
	}
	for i := range fs {
		c[i] = node64(w[i])
	}
}
