package classifier

import (
	"math/bits"
	"slices"

	"github.com/scrubd/scrubd/swpath/rule"
)

// The decision trees. A packet's walk through the tuple tables hashes it
// into every table (a dozen at 10k ClassBench-style rules), each probe a
// chain of dependent loads. A decision tree instead cuts the key space into
// equal-size parts (HiCuts, "Packet Classification using Hierarchical
// Intelligent Cuttings"): a node takes k bits of one field of the packet,
// (field >> shift) & (1<<k - 1), and names the child for each value, so a
// walk is one dependent 8-byte load per level, and a leaf holds the few
// entries that can match any packet that reaches it, in decision order,
// scanned with the same 32-byte entry checks as a hash bucket.
//
// Entries are value and mask over three words: the high words of the two
// addresses and the misc word (family, protocol, ports); every field's
// mask is a prefix of that field (ranges beyond a few prefixes are
// residual checks, see expand). A cut of k bits of a field below the c bits
// already cut puts an entry whose prefix covers p of those k bits into the
// 2^(k-p) children that agree with its value: a contiguous run, so child
// sizes come from one pass with a difference array.
//
// Short prefixes replicate into many children. As in CutSplit ("CutSplit:
// A Decision-Tree Combining Cutting and Splitting for Scalable Packet
// Classification", INFOCOM 2018) the entries are first split by which
// address is "small" (a long prefix): one tree for entries with a source
// prefix of at least treeSmallBits bits, one for the others with such a
// destination prefix, one each for a source and then a destination prefix
// of at least half that, one for the rest (IPv6 prefixes counted from bit
// 32); empty groups make no tree. The two groups of half-long prefixes
// join the first two (see treeJoin). A packet walks every tree and the
// best-ranked entry that holds wins: entries are numbered in decision order,
// so the lowest number found.
//
// A tree is flat: node words in one []uint64. An internal node word packs
// the field's word (bits 56-57), the shift (48-53), the child index mask
// (32-47) and the first child's index (0-31); a leaf has bit 63 set, its
// record count in bits 32-55 and its first record in bits 0-31.

const (
	// treeBinth: a node of at most this many entries is a leaf.
	treeBinth = 8
	// treeBinthBig is treeBinth for sets of more than treeBigEntries
	// entries, whose bursts take the groups (treeGroup): fewer, longer
	// leaves. At 100k ClassBench-style rules the lookup's memory shrinks
	// from 40.3 to 31.8 MiB (nodes 715k -> 329k, records 619k -> 473k), at
	// 10k from 3.70 to 3.10 MiB, and fresh-5-tuple bursts were 2-5 %
	// faster at 10k and 1-3 % at 100k (in one process, against 8,
	// alternated); the per-packet walk of 1k rules was 12-15 % slower with
	// 16, so small sets keep 8. With the lane walk, sets up to
	// treeOneBlockMax keep 8 too.
	treeBinthBig   = 16
	treeBigEntries = 8192
	// treeMaxDepth bounds a walk; a node that deep is a leaf whatever its size.
	treeMaxDepth = 16
	// treeMaxCut is the most bits one node cuts (65536 children).
	treeMaxCut = 16
	// treeSpace bounds replication at a node: its children hold at most
	// treeSpace times its entries (HiCuts' spfac), plus the child count.
	treeSpace = 4
	// treeSpaceBig is treeSpace for sets of more than treeBigEntries
	// entries (with treeJoin): narrower cuts, deeper trees, fewer copies.
	// Fresh 5-tuple bursts at 10k ClassBench-style rules took 0.84-0.91
	// of the time with 4, at 100k 0.94-1.02, Decide 0.88 and 0.91-1.04
	// (the two tables alternated burst by burst in one process, thread
	// CPU time), for 3.38 -> 2.54 MiB and 42.6 -> 30.7 MiB (records 756k
	// -> 479k at 100k). 3 was 0.91-0.93 and 0.97-0.99; 8 1.08 and
	// 0.99-1.03; 2 with leaves of 12 0.98-1.00 and 0.96-0.99 against 2
	// with 16 (35.3 MiB), with leaves of 24 0.90-0.94 and 0.96 against 4
	// with 16 (26.4 MiB); the progress bound (treeProgress) of 4 or 16
	// changed nothing.
	treeSpaceBig = 2
	// treeSmallBits: an address prefix this long or longer is "small".
	treeSmallBits = 16
	// treeMaxRecords: a set whose trees would hold more leaf records than
	// this many per entry (plus treeRecordSlack) keeps the tuple lookup.
	treeMaxRecords  = 16
	treeRecordSlack = 1 << 16
	// treeProgress: a cut must take at least 1/treeProgress of a node's
	// entries out of its largest child, or the node is a leaf.
	treeProgress = 8
	// treeMaxLeaf: a leaf longer than this (entries no cut separates)
	// makes the set keep the tuple lookup. The compact lane scans take a
	// leaf's count as a byte (ZLANE).
	treeMaxLeaf = 255
)

// treeJoin: the group of source prefixes of treeSmallBits/2 bits or
// more joins the tree of long source prefixes, and that of such
// destination prefixes the tree of long destination prefixes:
// ClassBench-style sets make two trees instead of four (a variable so
// that tests cover the four- and five-tree lookups too). A walk and a
// leaf scan fewer per packet cost less than the longer leaves and the
// copies the joined entries add. At 1k rules (leaves of 8, blocks and
// leafScan2) fresh 5-tuple bursts took 0.81-0.82 of the time of four
// trees with leafScan4 (both two packets at a time), and 0.81-0.83 under
// the purego tag (the records scanned in Go, one packet at a time), for 0.77 -> 0.82 MiB (0.28 -> 0.29 without
// blocks; the two tables alternated in one process, thread CPU time).
// In sets of more than treeBigEntries entries fresh 5-tuple bursts at
// 10k rules took 0.79-0.85 of the time, at 100k
// 0.91-0.98, Decide 0.90 and 0.97-1.01 (old and new table alternated
// burst by burst in one process, thread CPU time), for 3.10 -> 3.38
// MiB and 31.8 -> 42.6 MiB (records 473k -> 756k at 100k; a packet
// scans 9.6 records instead of 11.3 at 10k and 14.1 at 100k). Joining
// only the destination groups was 0.89-0.91 and 0.96-0.97; one tree
// for both half-long groups was 1.05-1.08 and 1.41 (104 MiB at 100k);
// a fifth tree, the source prefixes of 16-23 bits apart from the
// longer ones, 1.09-1.13 and 1.17 (24.4 MiB).
var treeJoin = true

// maxTrees is the most trees a set is split into.
const maxTrees = 5

const (
	treeLeaf   = uint64(1) << 63
	treeNoRank = ^uint32(0)
)

// tfield is a field a node may cut: bits [lo, hi) of key word w.
type tfield struct {
	w, lo, hi uint8
}

var tfields = [...]tfield{
	{0, 0, 64},  // source address, high word
	{1, 0, 64},  // destination address, high word
	{2, 32, 40}, // protocol
	{2, 16, 32}, // source port
	{2, 0, 16},  // destination port
}

const nfields = len(tfields)

// dtree is one decision tree.
type dtree struct {
	root  uint64
	nodes []uint64
	rec   []trec             // leaf records (trees not compact)
	crec  []crec             // leaf records (trees.compact)
	blk   []sblock           // rec's checks in blocks (trees.vec only)
	cblk  []cblock           // the leaf records as compact blocks (trees.cvec)
	tblk  []tblock           // or as tight blocks (trees.tight)
	tent  [][vecBlock]uint32 // the tight blocks' entry words (cblock.e)
	tcls  *tclasses          // the tight blocks' classes (the set's)
	ent   []uint32           // leaf records' entries while the tree is built
	// nodes32 and root32: the node words in 4 bytes (node32) for the
	// lane walk of big sets (tree_nodes32.go), or none.
	nodes32 []uint32
	root32  uint32
}

// trec is a leaf record: an entry's scan check (see echeck) with the
// entry's index and rule, so a leaf scan reads one array (40 bytes).
type trec struct {
	sd, sdm, misc, miscMask uint64
	ent                     uint32
	rule                    int32 // the entry's rule
}

func recOf(c echeck, ent uint32, rule int32) trec {
	return trec{sd: c.sd, sdm: c.sdMask, misc: c.misc, miscMask: c.miscMask, ent: ent, rule: rule}
}

// sdMask returns the address mask of r's check.
func (r *trec) sdMask() uint64 { return r.sdm }

// crec is the leaf record of trees that bursts walk in groups (sets of
// more than treeWalkMax bytes): trec in 32 bytes, two records a cache
// line instead of 1.6. The check's address mask is two prefixes, of the
// two 32-bit halves of sd, so key holds their lengths (recCode) in its low
// recCodeBits bits and the entry's index above them: keys order records
// as their entries do, and sdMask takes the mask from sdMasks. Fresh
// 5-tuple bursts at 100k ClassBench-style rules took 0.905-0.918 of the
// time with them (0.989-1.018 old against old), at 10k 0.969-0.990
// (0.987-0.993); Decide 0.993-1.045 at 10k (0.977-0.988) and 0.971-0.977
// at 100k (0.975-0.987): at 10k the table load and the mask of each check
// cost about what the smaller leaves save. At 1k rules (the per-packet walk of the purego build) the compact
// records cost 6 % (1.056-1.068 against 0.994-0.998), so trees that small
// keep trec. Rebuilding the mask with two variable shifts instead of
// sdMasks cost 5-7 % in Decide at 10k and 100k. Records of 24 bytes,
// without miscMask (a set's records have few misc masks, 113 at 100k:
// numbered per set, the number in misc's unused top bits, the mask
// looked up per record), took 1.08-1.12 of the time of these on fresh
// 5-tuple bursts at 100k and 1.08 at 10k (the group walk, as arm64
// walks; test binaries alternated five times): the lookup on each
// record's path to its check's branch cost more than the smaller
// leaves saved.
type crec struct {
	sd, misc, miscMask uint64
	key                uint32 // entry<<recCodeBits | recCode of the mask
	rule               int32  // the entry's rule
}

// recCodeBits: a compact record's key keeps this many bits for the two
// prefix lengths of its address mask (33*33 pairs); the entry's index has
// the other 21, so sets of recMaxEnts entries or more keep the tuple
// lookup when their trees would take the group walk.
const (
	recCodeBits = 11
	recMaxEnts  = 1<<(32-recCodeBits) - 1
	recNoKey    = ^uint32(0) // no record: above every record's key
)

// sdMasks maps a compact record's recCode to its address mask.
var sdMasks = func() (m [1 << recCodeBits]uint64) {
	for s := range 33 {
		for d := range 33 {
			m[s*33+d] = hiMask(uint8(s)) | hiMask(uint8(d))>>32
		}
	}
	return m
}()

// recCode returns the code of address mask m: the lengths of its two
// prefixes. ok is false for a mask that is not two prefixes.
func recCode(m uint64) (uint32, bool) {
	s, d := bits.LeadingZeros64(^m), bits.LeadingZeros32(^uint32(m))
	c := uint32(min(s, 32)*33 + d)
	return c, sdMasks[c] == m
}

// crecOf returns the compact form of r; ok is false when its address
// mask is not two prefixes or its entry is past recMaxEnts.
func crecOf(r *trec) (crec, bool) {
	code, ok := recCode(r.sdm)
	return crec{sd: r.sd, misc: r.misc, miscMask: r.miscMask, key: r.ent<<recCodeBits | code, rule: r.rule}, ok && r.ent < recMaxEnts
}

// sdMask returns the address mask of r's check.
func (r *crec) sdMask() uint64 { return sdMasks[r.key&(1<<recCodeBits-1)] }

// ent returns r's entry.
func (r *crec) ent() uint32 { return r.key >> recCodeBits }

// trees is the decision-tree form of a Table.
type trees struct {
	t    []dtree
	ents []entry // in decision order: the index is the rank
	// walk: bursts take the per-packet lookup (trees of at most
	// treeWalkMax bytes, which stay in the cache).
	walk bool
	// compact: the trees' leaf records are crec (the trees of sets
	// that do not take the per-packet walk), not trec. The group walk
	// (treeGroup) reads only crec.
	compact bool
	// vec: the leaves are laid out in blocks (addBlocks) and lookups
	// test them with leafScan4 or leafScan2 (tree_vec.go); vblk holds each tree's
	// blocks, a never-passing block for trees the set does not have.
	vec bool
	// prefetch: the group walk's scans (treeGroup) prefetch the records
	// of the leaves they scan next (treePrefetchMin, leafPrefetch), where
	// the build has the stub (prefetchStub).
	prefetch bool
	// vec2: the set has at most two trees (vec only), and lookups test
	// their blocks with leafScan2.
	vec2 bool
	// vecLong: the set's leaves hold up to treeBinthBig records (two
	// blocks), and lookups test both blocks of each leaf (scanLanes4,
	// and leafScan4 over the four blocks of two trees in vecEntry).
	vecLong bool
	vblk    [4][]sblock
	// cvec: the leaves are compact blocks (tree_cblock.go), of one
	// block each, and the trees keep no other records; cblk holds each
	// tree's, a never-passing block for a tree the set does not have.
	cvec bool
	cblk [2][]cblock
	// tight: the compact blocks are tight blocks (tree_tblock.go): tblk
	// holds each tree's (cblk none), tcls their classes.
	tight bool
	tblk  [2][]tblock
	tcls  *tclasses
	// tent: the tight blocks' entry words; trule and tfirst each rank's
	// rule (-1 last) and first entry (tpos), tident whether each rank is
	// its rule.
	tent   [2][][vecBlock]uint32
	trule  []int32
	tfirst []uint32
	tident bool
	// window: bursts scan the leaves as windows (tree_window.go): sets
	// of two trees of trec records without blocks (treeLookup2of2).
	window bool
	// vrule: the rule of each entry, and -1 last (vecRule).
	vrule []int32
	// top6: the top 32 bits of IPv6 source and destination prefixes
	// that the scan checks cover (tree_v6.go).
	top6 [2]uint32
	// v6: some entry's check has the bits v6SrcTop or v6DstTop (so
	// some tight lane has them in x, tTop, and tight blocks take
	// scanLanesT6, scanLanesT6I and tleafScan6).
	v6 bool
	// keyBits: the bits of a packet's misc word for the trees that the
	// records test, of v6SrcTop, v6DstTop (v6) and portsKeyBit (window):
	// those miscBits gives. It follows from v6 and window, but as one
	// mask it lets miscBits test the set once and inline (worked out
	// from the two it cost the inliner at least 97, over its budget of 80).
	keyBits uint64
	// padded: the set has two trees that bursts walk in pairs
	// (treeLookup2of2, vecEntry2of2: not the lane walk), whose walks take
	// their first treePad levels without a branch (padDepth).
	padded bool
}

// treeWalkMax: trees (node words and leaf records) of at most this many
// bytes decide bursts packet by packet, every tree's walk a level at a
// time; bigger ones in groups (treeGroup). On ClassBench-style sets of 1k
// rules (about 160 KB of trees) the per-packet lookup was 10-15 % faster
// than the groups (4 interleaved rounds, pinned, 83-102 against 94-107
// cpu-ns/pkt); at 10k (about 2.4 MB) the groups were faster (155-319
// against 205-352).
const treeWalkMax = 1 << 20

// treeLanesMax: where bursts take the lane walk (lanesWalk), trees of at
// most this many bytes (as treeWalkMax counts them) are laid out in blocks
// too, and bursts scan the first two blocks of every leaf with one call
// a group (scanLanes4) instead of the group walk's Go scans of compact
// records. At 10k ClassBench-style rules (leaves of 16, 64 % of a fresh
// flood's packets reaching a leaf of more than eight records) fresh
// 5-tuple bursts took 0.71 of the time, at 20k 0.86, at 30k 1.01-1.10, at
// 50k 0.88-1.05 and at 100k 1.58 (alternated in one process, thread CPU
// time), for 2.29 -> 5.58 MiB at 10k and 4.85 -> 12.00 at 20k: the scans
// read every record of two blocks a leaf, which the cache holds for the
// smaller sets only (sets of leaves of one block, treeOneBlockMax, came
// later). A variable, so that tests can give sets of any size the group
// walk.
var treeLanesMax = 6 << 20

// treeOneBlockMax: where bursts take the lane walk (lanesWalk), a set of
// more than treeBigEntries entries in at most two trees is first cut down
// to leaves of treeBinth records (with treeSpaceBig), whose scans test one
// block a leaf (scanLanes2, scanLanesC2) instead of two (scanLanes4): to
// leaves of one compact block (tree_cblock.go) within cblockMax where
// every entry's check fits a compact lane (clanes); else to leaves of one
// block (sblock), kept where their leaf records come to at most this many
// bytes (as treeBytes counts them, before the blocks); else down again to
// leaves of treeBinthBig, the first builds stopped early by their record
// budgets. The one-block leaves replicate more: at 10k ClassBench-style
// rules the lookup's memory grows from 5.54 to 8.89 MiB (records 58k to
// 103k in blocks), at 5k from 2.75 to 4.05, at 15k from 8.4 to 13.7. Fresh
// 5-tuple bursts (DecideBurst, test binaries before and after alternated,
// thread CPU time, medians of 20 rounds) took 0.87-0.91 of the time at 5k
// rules, 0.84-0.89 at 10k and 0.81-0.85 at 15k, and Decide, a packet at a
// time over deeper trees, 1.03-1.05, 1.02-1.09 and 1.02-1.04; the Direct
// Verbs engine at 10k rules (scrubd bench, 64-byte frames, 65,536 flows,
// binaries alternated six times, two runs) 0.89-0.98 and 0.83-0.95 of the
// cpu-ns a packet, medians 0.96 and 0.92. At 20k (4.9 MiB before the
// blocks, 20.1 MiB after) bursts took 0.88-1.05 and Decide 1.05-1.23,
// hence the bound. In one process, leaves of 8 at 10k took 0.92-0.95 of
// the time of 16, of 7 or 6 records 0.98 and 1.04, of 8 with a bound of 3
// 0.96 and with treeSpace 1.03. The first build's cost where it fails: 20k
// rules took 54 ms to build instead of 34, 30k 79 instead of 48, 100k 238
// instead of 208. A variable, so that tests can give big sets leaves of
// two blocks.
var treeOneBlockMax = 4 << 20

// treePrefetchMin: the group walk of trees bigger than this (node words
// and leaf records, as treeWalkMax counts them) prefetches the records of
// the leaves it scans (prefetchLeaves), so that the scans' loads find
// them in the cache rather than wait one by one behind the scans'
// mispredicted branches. A pass over every leaf of a group after each
// tree's walk took 0.67-0.88 of the time of no prefetch on fresh 5-tuple
// groups at 100k ClassBench-style rules (27 MiB); at 30k (7.2 MiB)
// 0.83-1.03, at 20k (4.9 MiB) 1.04 and at 10k (2.3 MiB, which mostly
// stays in the caches) 1.03-1.07; prefetching only records 2-6, 0.80-0.83
// at 100k (prefetch on and off alternated on one table in one process,
// thread CPU time, other jobs running for some). The scans now prefetch
// as they go instead (leafPrefetch).
const treePrefetchMin = 16 << 20

// leafPrefetch: where the group walk prefetches (trees.prefetch), the
// scan of a tree's leaves prefetches the records of the leaves of the
// packets this many ahead of the one it scans, as many packets' leaves a
// call, instead of a pass over all of a group's leaves after the tree's
// walk. That pass asked for up to seven lines a leaf for 128 leaves at
// once, far more misses than a core keeps in flight, so its prefetches
// waited on each other with nothing else to do (12 % of the lookup's CPU
// profile at 100k rules); the scans themselves then first read every
// leaf's first record in a pass of their own (the leaves' first keys,
// firstEnt), which the prefetch ahead makes unnecessary. Fresh 5-tuple bursts at 100k ClassBench-style rules took
// 0.83-0.92 of the time of the pass (medians of 30 rounds, the two
// alternated in one process, thread CPU time, the pass there also
// prefetching record 0; the same with the lane walk and without it, as
// arm64 walks); test binaries of the trees before and after, alternated
// six times: 0.73-0.86 (median 0.83) with the lane walk, 0.72-0.94
// (0.80) without. Distances of 4 to 16 read the same; keeping the
// first-key pass beside the prefetch ahead, 0.86-0.94. Against no
// prefetch at all (and the first-key pass), on the group walk at every
// size (the lane scans' blocks off): 1.04-1.05 of the time at 10k rules
// (2.3 MiB), 0.98 at 30k (7.2 MiB), 0.88-0.89 at 100k (medians of 40
// rounds, alternated, with the lane walk and without), so the threshold
// stays. Without the stub (prefetchStub) the scans keep the first-key
// pass.
const leafPrefetch = 8

// tbEnt is an entry while trees are built.
type tbEnt struct {
	val, mask [3]uint64
	plen      [nfields]uint8
}

// buildTrees builds the trees over all (sorted by rank), or returns nil
// when they would be too big or their leaves too long.
func (t *Table) buildTrees(all []bentry) *trees {
	tr := &trees{ents: make([]entry, len(all))}
	es := make([]tbEnt, len(all))
	var parts [maxTrees][]int32
	tr.top6 = v6Tops(all)
	join := treeJoin
	for i := range all {
		b := &all[i]
		e := b.compact()
		e.flags &^= chkKeyAddr | chkKeyMisc | chkKeyLo
		fam := rule.Family(b.val.misc >> 40 & 0xff)
		if isV6Prefixed(b) {
			if m, ok := v6Bits(b, tr.top6); ok {
				e.misc, e.miscMask = e.misc|m, e.miscMask|m
				tr.v6 = tr.v6 || m != 0
				if m != 0 {
					tr.keyBits |= v6SrcTop | v6DstTop
				}
			} else {
				e.flags |= chkKeyAddr // the scan check holds bits 32-63 only
			}
		}
		if b.mask.srcLo|b.mask.dstLo != 0 {
			e.flags |= chkKeyLo // the residual holds the low halves
		}
		tr.ents[i] = e
		te := &es[i]
		te.val = [3]uint64{b.val.srcHi, b.val.dstHi, b.val.misc}
		te.mask = [3]uint64{b.mask.srcHi, b.mask.dstHi, b.mask.misc}
		for fi, fd := range tfields {
			w := te.mask[fd.w] << (64 - fd.hi)
			te.plen[fi] = uint8(min(bits.LeadingZeros64(^w), int(fd.hi-fd.lo)))
		}
		// IPv6 prefixes count from bit 32: their top 32 bits are often
		// one shared prefix (such as 2001:db8::/32) that separates nothing.
		sp, dp := int(te.plen[0]), int(te.plen[1])
		if fam == rule.IPv6 {
			sp, dp = sp-32, dp-32
		}
		k := 4
		switch {
		case sp >= treeSmallBits:
			k = 0
		case dp >= treeSmallBits:
			k = 1
		case sp >= treeSmallBits/2:
			k = 2
		case dp >= treeSmallBits/2:
			k = 3
		}
		if join && k < 4 {
			k &= 1 // 2 joins 0, 3 joins 1
		}
		parts[k] = append(parts[k], int32(i))
	}
	budget := treeMaxRecords*len(all) + treeRecordSlack
	binth, space := treeBinth, treeSpace
	if len(all) > treeBigEntries {
		binth, space = treeBinthBig, treeSpaceBig
	}
	ntrees := 0 // a tree for each group with entries
	for _, p := range parts {
		ntrees += min(len(p), 1)
	}
	size, ok := 0, false
	// lanes: the lane scans would take the set (two trees at most).
	// cgroup: without them, the group walk and cblockScan2 would
	// (cvecGroup, cvecBurst). cl: the entries' compact lanes, where every
	// entry's check fits one (clanes). cblocks: the set gets compact
	// blocks (tree_cblock.go).
	lanes := lanesWalk && ntrees <= 2
	cgroup := !lanesWalk && cvecGroup && ntrees <= 2
	var cl []clane
	if (lanes || cgroup) && treeCBlocks {
		cl = tr.clanes()
	}
	cblocks := false
	if (lanes || cgroup) && len(all) > oneBlockEntries {
		// Leaves of one block first, the build stopped by its record
		// budget where the set is too big for them: compact blocks
		// (cblockMax) where the checks fit, else blocks
		// (treeOneBlockMax).
		if cl != nil {
			size, cblocks = tr.build(es, &parts, treeBinth, space, min(budget, cblockMax/cRecordBytes))
			ok = cblocks
		}
		oneBudget := min(budget, treeOneBlockMax/treeBytes(0, 1))
		if !ok && vecScan && lanes {
			size, ok = tr.build(es, &parts, treeBinth, space, oneBudget)
		}
		if ok {
			binth = treeBinth
		}
	}
	if !ok {
		if size, ok = tr.build(es, &parts, binth, space, budget); !ok {
			return nil
		}
	}
	// Smaller sets past the cache take compact blocks too (cblockMin).
	least := cblockMin
	if cgroup {
		least = max(least, cgroupMin)
	}
	cblocks = cblocks || cl != nil && binth == treeBinth && size > least
	tr.walk = size <= treeWalkMax
	// Blocks and the lane scans for sets of at most two trees only (vec2):
	// bigger sets of more trees keep the group walk, as without lanes.
	tr.compact = !tr.walk && !((lanesWalk && (vecScan && size <= treeLanesMax) || cblocks) && len(tr.t) <= 2)
	tr.prefetch = prefetchStub && size > treePrefetchMin
	for i := range tr.t {
		d := &tr.t[i]
		if !tr.compact {
			d.rec = make([]trec, len(d.ent))
			for j, e := range d.ent {
				d.rec[j] = recOf(tr.ents[e].check(), e, tr.ents[e].rule)
			}
		} else {
			d.crec = make([]crec, len(d.ent), max(len(d.ent), 1))
			for j, e := range d.ent {
				r := recOf(tr.ents[e].check(), e, tr.ents[e].rule)
				c, ok := crecOf(&r)
				if !ok {
					return nil
				}
				d.crec[j] = c
			}
			d.crec = d.crec[:cap(d.crec)] // read for an empty leaf (see treeGroup)
		}
		d.ent = nil
		if !tr.compact && len(d.rec) == 0 {
			d.rec = make([]trec, 1)
		}
		if len(d.nodes) == 0 {
			d.nodes = []uint64{treeLeaf}
		}
	}
	if cblocks && !tr.compact {
		tr.addCBlocks(cl)
	} else if !tr.compact && vecScan && len(tr.t) > 0 && len(tr.t) <= len(tr.vblk) && len(tr.ents) <= laneEnt {
		tr.vec, tr.vec2 = true, len(tr.t) <= 2
		tr.vecLong = tr.vec2 && binth > vecBlock
		tr.makeVrule()
		for i := range tr.vblk {
			if i < len(tr.t) {
				tr.t[i].addBlocks()
				tr.vblk[i] = tr.t[i].blk
			} else {
				tr.vblk[i] = neverBlock[:]
			}
		}
	}
	if !tr.compact && !tr.vec && !tr.cvec && len(tr.t) == 2 {
		tr.addWindows() // for treeLookup2of2
	}
	if treePadWalks && !tr.compact && !tr.cvec && len(tr.t) == 2 && !(lanesWalk && tr.vec2) {
		tr.padded = true
		for i := range tr.t {
			tr.t[i].padDepth(treePad)
		}
	}
	for i := range tr.t {
		if !tr.t[i].inBounds(tr.window) {
			return nil // the builder's bug, never seen: keep the tuple lookup
		}
	}
	tr.addNodes32(nodes32Min)
	return tr
}

// inBounds reports whether every node word of d names children inside
// d.nodes and every leaf records inside its records (and blocks, and with
// window its window): the stubs (walkLanes8, scanLanes2) index without
// Go's bounds checks, and a window past the records would panic in
// winMask, so the tree is checked once when it is built.
func (d *dtree) inBounds(window bool) bool {
	nrec := uint64(max(len(d.rec), len(d.crec), vecBlock*len(d.cblk), vecBlock*len(d.tblk)))
	ok := func(n uint64) bool {
		first := n & 0xffffffff
		if n&treeLeaf != 0 {
			// An empty leaf's first record (or block) is read too, and
			// a window's recWindow records (the Go slice expression
			// would panic: a tree that fails keeps the tuple lookup).
			read := max(n>>32&0xffffff, 1)
			if window && n&treeLong == 0 {
				read = recWindow
			}
			return first+read <= nrec && (d.blk == nil || first/vecBlock < uint64(len(d.blk)))
		}
		return n>>56&3 < 3 && first+n>>32&0xffff < uint64(len(d.nodes))
	}
	if !ok(d.root) {
		return false
	}
	for _, n := range d.nodes {
		if !ok(n) {
			return false
		}
	}
	return true
}

// build builds tr's trees, one for each group of parts that has entries,
// with leaves of at most binth entries, cuts within space and at most
// budget leaf records, and returns their size as treeWalkMax counts it;
// ok is false when a leaf would be too long or the budget is spent.
func (tr *trees) build(es []tbEnt, parts *[maxTrees][]int32, binth, space, budget int) (size int, ok bool) {
	tr.t = tr.t[:0]
	b := &treeBuilder{es: es, tr: tr, budget: budget, binth: binth, space: space}
	for _, p := range parts {
		if len(p) == 0 {
			continue
		}
		d := dtree{}
		b.d = &d
		var cut [nfields]uint8
		d.root = b.node(p, cut, 0)
		if b.failed {
			return 0, false
		}
		tr.t = append(tr.t, d)
		size += treeBytes(len(d.nodes), len(d.ent))
	}
	return size, true
}

type treeBuilder struct {
	es     []tbEnt
	tr     *trees
	d      *dtree
	budget int  // leaf records left to place
	binth  int  // a node of at most this many entries is a leaf
	space  int  // replication bound (treeSpace)
	failed bool // a leaf too long, or the budget spent: the build stops
	diff   []int32
}

// span returns the first child and the number of children of entry e
// under a cut of k bits of field fi below c bits already cut.
func (b *treeBuilder) span(e *tbEnt, fi int, c, k uint8) (uint32, uint32) {
	fd := tfields[fi]
	p := min(max(int(e.plen[fi])-int(c), 0), int(k))
	sh := fd.hi - c - k
	v := uint32(e.val[fd.w]>>sh) & (1<<k - 1)
	free := uint(k) - uint(p)
	return v >> free << free, 1 << free
}

// node builds the subtree of the entries ids (ascending) with cut[f] top
// bits of each field already decided, and returns its node word.
func (b *treeBuilder) node(ids []int32, cut [nfields]uint8, depth int) uint64 {
	d := b.d
	if b.failed {
		return treeLeaf
	}
	if len(ids) <= b.binth || depth >= treeMaxDepth {
		return b.leaf(ids)
	}
	// Bits every entry keys with the same value decide nothing: skip them.
	// Entries whose prefix ends above them (at cut[fi] or shorter) go to
	// every child of any cut below, so only the others must agree (see
	// skipFrom).
	for fi, fd := range tfields {
		width := fd.hi - fd.lo
		for cut[fi] < width {
			minP, v0, m := b.skipFrom(ids, fi, cut[fi])
			if minP <= cut[fi] {
				break
			}
			diff := uint64(0)
			for _, id := range ids {
				if b.es[id].plen[fi] > cut[fi] {
					diff |= b.es[id].val[fd.w]&m ^ v0
				}
			}
			same := minP - cut[fi]
			if diff != 0 {
				same = uint8(bits.LeadingZeros64(diff<<(64-fd.hi))) - cut[fi]
			}
			cut[fi] += same
			break
		}
	}
	// Choose the cut: for each field, the most bits whose children hold
	// at most treeSpace times the entries; then the field whose largest
	// child is smallest (ties: fewest copies).
	bestF, bestK, bestMax, bestSum := -1, uint8(0), len(ids), 0
	limit := b.space*len(ids) + 16
	kmax := uint8(min(treeMaxCut, bits.Len(uint(2*len(ids)))))
	for fi, fd := range tfields {
		rem := fd.hi - fd.lo - cut[fi]
		if rem == 0 {
			continue
		}
		k := min(kmax, rem)
		sum := 0
		for ; k > 0; k-- {
			sum = 1 << k
			for _, id := range ids {
				p := min(max(int(b.es[id].plen[fi])-int(cut[fi]), 0), int(k))
				sum += 1 << (int(k) - p)
			}
			if sum <= limit {
				break
			}
		}
		if k == 0 {
			continue
		}
		n := 1 << k
		if cap(b.diff) < n+1 {
			b.diff = make([]int32, n+1)
		}
		diff := b.diff[:n+1]
		clear(diff)
		for _, id := range ids {
			s, c := b.span(&b.es[id], fi, cut[fi], k)
			diff[s]++
			diff[s+c]--
		}
		mx, run := 0, int32(0)
		for _, x := range diff[:n] {
			run += x
			mx = max(mx, int(run))
		}
		if mx < bestMax || (mx == bestMax && bestF >= 0 && sum < bestSum) {
			bestF, bestK, bestMax, bestSum = fi, k, mx, sum
		}
	}
	if bestF < 0 || bestMax > len(ids)-len(ids)/treeProgress {
		return b.leaf(ids)
	}
	// Children's entry lists, each in ascending order.
	fi, k := bestF, bestK
	n := 1 << k
	counts := make([]int32, n+1)
	for _, id := range ids {
		s, c := b.span(&b.es[id], fi, cut[fi], k)
		counts[s]++
		counts[s+c]--
	}
	start := make([]int32, n+1)
	run, total := int32(0), int32(0)
	for i := range n {
		run += counts[i]
		start[i] = total
		total += run
	}
	start[n] = total
	lists := make([]int32, total)
	fill := make([]int32, n)
	copy(fill, start[:n])
	for _, id := range ids {
		s, c := b.span(&b.es[id], fi, cut[fi], k)
		for ch := s; ch < s+c; ch++ {
			lists[fill[ch]] = id
			fill[ch]++
		}
	}
	base := len(d.nodes)
	d.nodes = append(d.nodes, make([]uint64, n)...)
	sub := cut
	sub[fi] += k
	fd := tfields[fi]
	// Children with the same entries as the previous child share its
	// subtree.
	prev := -1
	for ch := range n {
		l := lists[start[ch]:start[ch+1]]
		if prev >= 0 && slices.Equal(l, lists[start[prev]:start[prev+1]]) {
			d.nodes[base+ch] = d.nodes[base+prev]
			continue
		}
		d.nodes[base+ch] = b.node(l, sub, depth+1)
		prev = ch
	}
	shift := fd.hi - cut[fi] - k
	return uint64(fd.w)<<56 | uint64(shift)<<48 | uint64(n-1)<<32 | uint64(base)
}

// leaf stores ids as a leaf's records.
func (b *treeBuilder) leaf(ids []int32) uint64 {
	b.budget -= len(ids)
	if len(ids) > treeMaxLeaf || b.budget < 0 {
		b.failed = true
	}
	if len(ids) == 0 {
		return treeLeaf
	}
	d := b.d
	first := len(d.ent)
	for _, id := range ids {
		d.ent = append(d.ent, uint32(id))
	}
	return treeLeaf | uint64(len(ids))<<32 | uint64(first)
}

// treeKey is a packet's key words for a walk; word 3 is never cut.
type treeKey [4]uint64

// child returns the index of the child of inner node word n that key
// word w (the word n names, k[n>>56&3]) takes: n's first child plus w's
// bits under n's shift and mask.
func child(n, w uint64) uint32 {
	return uint32(n) + uint32(w>>(n>>48&63))&uint32(n>>32&0xffff)
}

// walk returns the leaf of k in d.
func (d *dtree) walk(k *treeKey) uint64 {
	n := d.root
	nodes := d.nodes
	for n&treeLeaf == 0 {
		w := k[n>>56&3]
		n = nodes[child(n, w)]
	}
	return n
}

// recRest reports whether the rest of entry ent holds for f (misc its
// tree misc word) once the scan check of its record, whose misc mask is
// mm, passed: holds for an entry that needs it (chkFullBit), the packet's
// ports for one that needs only those (chkPortsBit), nothing more for the
// others. Callers test mm >= chkPortsBit first, inline: most records need
// nothing more, and recRest is too big to inline.
func (t *Table) recRest(mm uint64, ent uint32, f *rule.Fields, misc uint64) bool {
	if mm < chkPortsBit {
		return true
	}
	if mm&chkFullBit != 0 {
		return t.holds(&t.tr.ents[ent], f, misc)
	}
	return f.HasPorts()
}

// treeLookup is lookup with the trees (without blocks: see
// treeLookupVec). The rule comes from the deciding record, not from its
// entry in ents: no caller needs the entry's rank, and that load waited
// on the scan and missed the cache in big sets (ents of 10k and 100k
// entries). Old and new alternated on fresh 5-tuples in one process,
// 32768 packets each in turn (thread CPU time, pinned): 0.86-0.88 of the
// time at 10k ClassBench-style rules and 0.92 at 100k, where old against
// old gave 1.04 and 1.005-1.05; 1k no change. (Alternated every 2048
// packets it looked better, 0.76 and 0.89: the old lookup paid for
// cache lines of ents the new one had let go.)
func (t *Table) treeLookup(f *rule.Fields) (int32, int) {
	if f.Family == 0 {
		return -1, 0
	}
	k := treeKey{f.Src.Hi, f.Dst.Hi, miscWord(f) | t.tr.miscBits(f)}
	sd := scanSD(f)
	best := treeNoRank
	// The trees' walks a level at a time, so that their loads overlap.
	trs := t.tr.t
	var cur [maxTrees]uint64
	if len(trs) <= 4 {
		// Up to four walks in registers (ClassBench-style sets make
		// four trees): with the node words in cur, every level's load
		// waited on a store and a reload of the word before it. Bursts
		// on 1k rules were 5-7 % faster (old and new walk alternated in
		// one process, thread CPU time).
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
		cur = [maxTrees]uint64{n0, n1, n2, n3}
	} else {
		active := uint64(0)
		for i := range trs {
			cur[i] = trs[i].root
			active |= ^cur[i]
		}
		for active&treeLeaf != 0 {
			active = 0
			for i := range trs {
				n := cur[i]
				if n&treeLeaf == 0 {
					w := k[n>>56&3]
					n = trs[i].nodes[child(n, w)]
					cur[i] = n
					active |= ^n
				}
			}
		}
	}
	misc := k[2]
	bestRule := int32(-1)
	if t.tr.compact {
		return t.crecScan(f, &cur, sd, misc), len(trs)
	}
	if t.tr.cvec {
		return t.cvecScan(f, &cur, misc), len(trs)
	}
	for i := range trs {
		n := cur[i]
		first := uint32(n)
		recs := trs[i].rec[first : first+uint32(n>>32)&0xffffff]
		for j := range recs {
			r := &recs[j]
			// The check first, as one branch, and the rank only for a
			// record that passes (most do not): on fresh 5-tuples at 1k
			// rules 0.95 of the time of the rank first.
			if (sd&r.sdMask()^r.sd)|(misc&r.miscMask^r.misc) != 0 {
				continue
			}
			if r.ent >= best {
				break
			}
			if r.miscMask >= chkPortsBit && !t.recRest(r.miscMask, r.ent, f, misc) {
				continue
			}
			best, bestRule = r.ent, r.rule
			break
		}
	}
	return bestRule, len(t.tr.t)
}

// recScan is treeLookup's scan of one leaf's records recs (trec), for
// the leaves of treeLookup2of2 longer than a window and its trees without
// windows (recScan2of2): the entry and rule of the first record that holds for f
// and beats best, else best and bestRule. treeLookup keeps the loop
// written out: with this call (not inlined) a packet took 1.03-1.05 of
// the time.
func (t *Table) recScan(recs []trec, f *rule.Fields, sd, misc uint64, best uint32, bestRule int32) (uint32, int32) {
	for j := range recs {
		r := &recs[j]
		if (sd&r.sdMask()^r.sd)|(misc&r.miscMask^r.misc) != 0 {
			continue
		}
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

// crecScan is treeLookup's scan of the leaves cur in trees of compact
// records (crec): the best record's key instead of its entry.
func (t *Table) crecScan(f *rule.Fields, cur *[maxTrees]uint64, sd, misc uint64) int32 {
	best, bestRule := recNoKey, int32(-1)
	trs := t.tr.t
	for i := range trs {
		n := cur[i]
		first := uint32(n)
		recs := trs[i].crec[first : first+uint32(n>>32)&0xffffff]
		for j := range recs {
			r := &recs[j]
			if (sd&r.sdMask()^r.sd)|(misc&r.miscMask^r.misc) != 0 {
				continue
			}
			if r.key >= best {
				break
			}
			if r.miscMask >= chkPortsBit && !t.recRest(r.miscMask, r.key>>recCodeBits, f, misc) {
				continue
			}
			best, bestRule = r.key, r.rule
			break
		}
	}
	return bestRule
}

// treeMatching is AppendMatching with the trees: it walks every tree to
// the leaf of f and appends the rule of every record there whose entry
// holds (the checks of treeLookup, without stopping at the first), each
// rule once. A leaf holds every entry that can match a packet reaching it,
// so every matching rule is found.
func (t *Table) treeMatching(dst []int32, f *rule.Fields) []int32 {
	start := len(dst)
	k := treeKey{f.Src.Hi, f.Dst.Hi, miscWord(f) | t.tr.miscBits(f)}
	sd, misc := scanSD(f), k[2]
	add := func(r int32) {
		for _, x := range dst[start:] {
			if x == r {
				return
			}
		}
		dst = append(dst, r)
	}
	for i := range t.tr.t {
		d := &t.tr.t[i]
		n := d.walk(&k)
		first, end := uint32(n), uint32(n)+uint32(n>>32)&0xffffff
		if t.tr.cvec {
			t.cleafMatching(d, n, f, misc, add)
			continue
		}
		if t.tr.compact {
			for _, r := range d.crec[first:end] {
				if sd&r.sdMask() == r.sd && misc&r.miscMask == r.misc &&
					(r.miscMask < chkPortsBit || t.recRest(r.miscMask, r.ent(), f, misc)) {
					add(r.rule)
				}
			}
			continue
		}
		for _, r := range d.rec[first:end] {
			if sd&r.sdMask() == r.sd && misc&r.miscMask == r.misc &&
				(r.miscMask < chkPortsBit || t.recRest(r.miscMask, r.ent, f, misc)) {
				add(r.rule)
			}
		}
	}
	return dst
}

// treeGroup is how many packets treeBurst walks level by level at once.
// 128 rather than 64: more independent loads in flight (fresh 5-tuples,
// old and new alternated burst by burst in one process, thread CPU time:
// 2-6 % faster at 10k ClassBench-style rules, 1-3 % at 100k; 32 was 3-9 %
// slower, 256 as 128).
const treeGroup = 128

// treeStackMin: a burst of fewer packets without a worker's scratch
// (DecideBurst) takes the single-packet walk, as clearing a treeScratch
// on the stack costs more than the group walk saves there.
// BenchmarkSmallBursts with the group walk for every burst size (10k and
// 100k ClassBench-style rules, two runs): DecideBurst took 1.67-1.76 and
// 1.17-1.33 times Decide's time in bursts of one, 1.20-1.27 and
// 0.92-0.99 in bursts of 2, 0.97-1.04 and 0.78-0.81 in bursts of 4. With
// the worker's scratch the group walk was the faster at every size (the
// worker over Decide in bursts of one 1.40-1.46 against 1.59-1.60 with
// the single-packet walk at 10k, 1.26-1.42 against 1.37-1.44 at 100k).
const treeStackMin = 4

// treeScratch is treeGroup's working memory. A Worker keeps one, so that
// its bursts do not clear it on the stack: 35 KiB with the lane walk's
// scratch and tail (13 KiB when it was measured), which a burst of one
// packet paid as much as one of 128 (with the stack arrays a single
// packet's DecideBurst cost twice its Decide at 10k rules).
type treeScratch struct {
	keys     [treeGroup]treeKey
	cur      [maxTrees][treeGroup]uint64
	best     [treeGroup]uint32 // the best record's key (crec), or entry (cvecBurst)
	bestRule [treeGroup]int32
	firstEnt [maxTrees][treeGroup]uint32 // the key of each leaf's first record
	sds      [treeGroup]uint64
	held     heldList
	lanes    laneScratch
	tail     laneTail
}

// treeBurst decides fs into out with the trees, a group of packets at a
// time: every packet's node of one level is loaded before any of the next
// level, so the loads of a level overlap, then the leaves are scanned.
// s is treeGroup's scratch; nil: one on the stack.
func (t *Table) treeBurst(fs []rule.Fields, out []int32, s *treeScratch) int {
	out = out[:len(fs)]
	probes := 0
	if tr := t.tr; tr.vec || tr.cvec {
		// With AVX-512, a group at a time (vecLanes): fresh 5-tuple bursts
		// of 64 packets at 1k ClassBench-style rules took 0.74-0.77 of the
		// time of the pairs below with a worker's scratch and 0.75-0.78
		// without (DecideBurst, which clears a laneScratch on its stack;
		// alternated in one process, thread CPU time). Without a scratch a
		// burst of fewer than treeStackMin packets keeps the pairs.
		if lanesWalk && (tr.vec2 || tr.cvec) && (s != nil || len(fs) >= treeStackMin) {
			var ls *laneScratch
			var tail *laneTail
			if s != nil {
				ls, tail = &s.lanes, &s.tail
			} else {
				ls = new(laneScratch)
				if tr.t[0].nodes32 != nil && len(fs) >= treeGroup {
					// Cleared (10 KiB) only for sets that walk 4-byte
					// words, and bursts of a whole group or more:
					// bursts of 32 at 20k rules took 1.12 of the time
					// with it, of 64 1.05.
					tail = new(laneTail)
				}
			}
			for len(fs) > 0 {
				n := min(len(fs), treeGroup)
				probes += t.vecLanes(fs[:n], out[:n], ls, tail)
				fs, out = fs[n:], out[n:]
			}
			return probes
		}
		if tr.cvec && !lanesWalk && (s != nil || len(fs) >= treeStackMin) {
			if s == nil {
				s = new(treeScratch)
			}
			return t.cvecBurst(fs, out, s)
		}
		if tr.cvec {
			for i := range fs {
				r, n := t.treeLookup(&fs[i])
				out[i] = r
				probes += n
			}
			return probes
		}
		// Two packets at a time (vecEntry2, vecEntry2of2), then the last
		// one alone.
		i := 0
		for ; i+1 < len(fs); i += 2 {
			var b0, b1 uint32
			if tr.vec2 {
				b0, b1 = t.vecEntry2of2(&fs[i], &fs[i+1])
			} else {
				b0, b1 = t.vecEntry2(&fs[i], &fs[i+1])
			}
			out[i], out[i+1] = tr.vecRule(b0), tr.vecRule(b1)
			probes += len(tr.t) * (int(min(fs[i].Family, 1)) + int(min(fs[i+1].Family, 1)))
		}
		for ; i < len(fs); i++ {
			best, n := t.vecEntry(&fs[i])
			out[i] = tr.vecRule(best)
			probes += n
		}
		return probes
	}
	if tr := t.tr; !tr.compact && len(tr.t) == 2 {
		// Two packets at a time (treeLookup2of2), then the last one alone.
		i := 0
		for ; i+1 < len(fs); i += 2 {
			out[i], out[i+1] = t.treeLookup2of2(&fs[i], &fs[i+1])
			probes += 2 * (int(min(fs[i].Family, 1)) + int(min(fs[i+1].Family, 1)))
		}
		if i < len(fs) {
			r, n := t.treeLookup(&fs[i])
			out[i] = r
			probes += n
		}
		return probes
	}
	if t.tr.walk || !t.tr.compact || s == nil && len(fs) < treeStackMin {
		for i := range fs {
			r, n := t.treeLookup(&fs[i])
			out[i] = r
			probes += n
		}
		return probes
	}
	if s == nil {
		s = new(treeScratch)
	}
	for len(fs) > 0 {
		n := min(len(fs), treeGroup)
		probes += t.treeGroup(fs[:n], out[:n], s)
		fs, out = fs[n:], out[n:]
	}
	return probes
}

func (t *Table) treeGroup(fs []rule.Fields, out []int32, s *treeScratch) int {
	keys, cur, best, bestRule := &s.keys, &s.cur, &s.best, &s.bestRule
	out = out[:len(fs)]
	probes := 0
	trs := t.tr.t
	ks, lanes := &s.lanes.keys, lanesWalk
	notIP := 0
	for i := range fs {
		f := &fs[i]
		k := treeKey{f.Src.Hi, f.Dst.Hi, miscWord(f) | t.tr.miscBits(f)}
		keys[i] = k
		if lanes {
			ks[0][i], ks[1][i], ks[2][i] = k[0], k[1], k[2]
		}
		best[i], bestRule[i] = recNoKey, -1
		if f.Family != 0 {
			probes += len(trs)
		} else {
			notIP++
		}
	}
	// Level by level, every packet's walk of one tree, tree by tree
	// (walkGroup). Tree by tree, the tree's nodes stay in a register; the
	// list of every tree's walks at once (tree<<8 | packet) reloaded them
	// for each step and was 2-3 % slower at 10k rules.
	pf := t.tr.prefetch
	for ti := range trs {
		if lanes {
			// Eight walks to an instruction (walkLanes): 0.90-0.92 of
			// the time of walkGroup's at 10k ClassBench-style rules and
			// 0.87-0.89 at 100k (fresh 5-tuple bursts, alternated in one
			// process, thread CPU time). A packet that is not IP walked
			// with whatever its key holds, and takes the empty leaf.
			trs[ti].walkLanes(ks, &cur[ti], len(fs))
			for i := 0; notIP > 0 && i < len(fs); i++ {
				if fs[i].Family == 0 {
					cur[ti][i] = treeLeaf
				}
			}
		} else {
			trs[ti].walkGroup(fs, &cur[ti], keys)
		}
	}
	// Without the prefetch, read the first record of every leaf before
	// any scan: these loads do not depend on each other, and the scans'
	// branches then wait on the cache, not on memory. With it, the scans
	// read it (leafPrefetch). A leaf whose first entry cannot beat the
	// packet's best so far is not scanned.
	firstEnt := &s.firstEnt
	for ti := 0; !pf && ti < len(trs); ti++ {
		rec := trs[ti].crec
		c, fe := &cur[ti], &firstEnt[ti]
		for i := range fs {
			fe[i] = rec[uint32(c[i])].key
		}
	}
	sds := &s.sds
	for i := range fs {
		sds[i] = scanSD(&fs[i])
	}
	// A record whose entry needs Table.holds (chkFullBit) is listed and
	// the scan goes on as if it did not hold; the listed ones are checked
	// after every scan, each against the packet's best then (see
	// holdsListed). Checked in the scan, each waited on its entry and
	// residual, dependent loads from arrays the size of the rule set.
	held := &s.held
	held.n = 0
	for ti := range trs {
		d := &trs[ti]
		rec := d.crec
		c := &cur[ti]
		if pf {
			prefetchLeaves(&rec[0], &c[0], min(len(fs), leafPrefetch))
		}
		for i := range fs {
			n := c[i]
			var fe uint32
			if pf {
				if i%leafPrefetch == 0 && i+leafPrefetch < len(fs) {
					prefetchLeaves(&rec[0], &c[i+leafPrefetch], min(leafPrefetch, len(fs)-i-leafPrefetch))
				}
				fe = rec[uint32(n)].key
			} else {
				fe = firstEnt[ti][i]
			}
			if fe >= best[i] {
				continue // or an empty leaf: its record 0 is another leaf's
			}
			first := uint32(n)
			recs := rec[first : first+uint32(n>>32)&0xffffff]
			sd, misc, b := sds[i], keys[i][2], best[i]
			for j := range recs {
				r := &recs[j]
				// The check first, as in treeLookup.
				if (sd&r.sdMask()^r.sd)|(misc&r.miscMask^r.misc) != 0 {
					continue
				}
				if r.key >= b {
					break
				}
				if r.miscMask >= chkPortsBit {
					if r.miscMask&chkFullBit != 0 {
						if held.n < len(held.key) {
							held.key[held.n], held.pkt[held.n] = r.key, uint8(i)
							held.n++
							continue
						}
						if !t.holds(&t.tr.ents[r.key>>recCodeBits], &fs[i], misc) {
							continue
						}
					} else if !fs[i].HasPorts() {
						continue
					}
				}
				b, bestRule[i] = r.key, r.rule
				break
			}
			best[i] = b
		}
	}
	if held.n > 0 {
		t.holdsListed(fs, held, keys, best, bestRule)
	}
	copy(out, bestRule[:len(fs)])
	return probes
}

// walkGroup walks d for every packet of fs (a group), level by level,
// leaving each packet's leaf in c. The walks not yet at a leaf are listed
// and the list is compacted without a branch after each level. A function
// of its own, so that its loop keeps its values in registers: inside
// treeGroup the compiler kept the list's length on the stack, a store and
// a reload on every step (fresh 5-tuples, old and new alternated burst by
// burst in one process, thread CPU time: 0.955-0.976 of the time at 10k
// ClassBench-style rules, 0.954-0.964 at 100k). The leaf scans as a
// function of their own too were 0.98-1.01 and 0.96-0.98.
func (d *dtree) walkGroup(fs []rule.Fields, c *[treeGroup]uint64, keys *[treeGroup]treeKey) {
	var act [treeGroup]uint8
	nodes := d.nodes
	root := d.root
	na := 0
	for i := range fs {
		c[i] = root
		if fs[i].Family == 0 {
			c[i] = treeLeaf // an empty leaf
		}
		act[na] = uint8(i)
		na += int(^c[i] >> 63)
	}
	for na > 0 {
		k := 0
		for _, i := range act[:na] {
			n := c[i]
			w := keys[i][n>>56&3]
			m := nodes[child(n, w)]
			c[i] = m
			act[k] = i
			k += int(^m >> 63)
		}
		na = k
	}
}

// heldList is treeGroup's list of records whose entries need Table.holds:
// the record's key and the packet's index in the group.
type heldList struct {
	key [treeGroup]uint32
	pkt [treeGroup]uint8
	n   int
}

// holdsListed checks the listed records after the scans: an entry below
// the packet's best that holds becomes its best. The scans kept the best
// entry without them (a leaf's scan went on past a listed record), so the
// best is the lowest of the two, in whatever order the list is checked.
// The entries are read in one loop before any check, so that their cache
// misses overlap.
func (t *Table) holdsListed(fs []rule.Fields, held *heldList, keys *[treeGroup]treeKey, best *[treeGroup]uint32, bestRule *[treeGroup]int32) {
	ents := t.tr.ents
	var flags [treeGroup]uint16
	for j, k := range held.key[:held.n] {
		flags[j] = ents[k>>recCodeBits].flags
	}
	for j, k := range held.key[:held.n] {
		p := held.pkt[j]
		if k >= best[p] {
			continue
		}
		en := &ents[k>>recCodeBits]
		if flags[j] == 0 || t.holds(en, &fs[p], keys[p][2]) {
			best[p], bestRule[p] = k, en.rule
		}
	}
}

// useTrees reports whether a set whose entries make ntables hash tables
// decides with its trees (when they could be built) rather than with the
// hash tables: a set of one hash table keeps its own lookup (one probe, see
// decideSingle).
func useTrees(ntables int) bool {
	return ntables > 1
}

// treeStats is for tests and benchmarks: trees, node words, leaf records
// and the deepest walk.
func (tr *trees) stats() (n, nodes, records int) {
	for i := range tr.t {
		nodes += len(tr.t[i].nodes)
		records += len(tr.t[i].rec) + len(tr.t[i].crec) + vecBlock*(len(tr.t[i].cblk)+len(tr.t[i].tblk))
	}
	return len(tr.t), nodes, records
}
