//go:build !purego

package classifier

import (
	"golang.org/x/sys/cpu"

	"github.com/scrubd/scrubd/swpath/rule"
)

// lanesStub: the lane walk's stubs are built (walkLanes8, scanLanes2).
const lanesStub = true

// lanesWalk: bursts walk the trees eight packets to an instruction with
// the AVX-512 stubs (walkLanes8 needs AVX-512F; scanLanes2 its masked
// compares on ymm registers, AVX-512VL; scanLanesC2 AVX-512BW's 16-bit
// lanes in zmm registers for the ports, and BMI2's PEXT for a packet's
// hiLane, which every CPU with AVX-512VL has).
var lanesWalk = lanesCPU

// lanesCPU: this CPU runs the lane stubs (lanesWalk's features). Tests
// that turn lanesWalk off keep it; where it is false, walkLanes and
// walkLanes2 take their Go references and the tests call no stub.
var lanesCPU = cpu.X86.HasAVX512F && cpu.X86.HasAVX512VL && cpu.X86.HasAVX512BW && cpu.X86.HasBMI2

// lanesKeys: bursts write their lane words with laneKeys8 where the
// lane walk's stubs run and rule.Fields is laid out as it gathers
// (fieldsAsKeys).
var lanesKeys = lanesWalk && fieldsAsKeys

// portBits is portProtos as bits, laneKeys8's: bit p of word p/64.
var portBits = func() (b [4]uint64) {
	for p, v := range portProtos {
		b[p/64] |= uint64(v&1) << (p % 64)
	}
	return b
}()

// laneKeys is laneKeysGo, with the stub (laneKeys8) for sets without
// IPv6 top bits (trees.v6), which laneKeysGo keeps. laneKeysGo took a
// fifth of a fresh 5-tuple burst at 1k ClassBench-style rules, about
// 60 instructions a packet; with the stub DecideBurst took 0.84 of the
// time at 1k, 0.88 at 10k and 0.90 at 100k (an Intel Xeon, family 6
// model 207, under KVM: the two alternated 21 times in one process,
// medians of the ratios; BENCHMARKS.md).
func (tr *trees) laneKeys(fs []rule.Fields, s *laneScratch) int {
	if !lanesKeys || tr.v6 || len(fs) == 0 {
		return tr.laneKeysGo(fs, s)
	}
	return laneKeys8(&fs[0], min(len(fs), treeGroup), s, &portBits)
}

// laneKeys8 is laneKeysGo for the n packets from fs on (n at most
// treeGroup) in a set without IPv6 top bits, eight to an instruction:
// four gathers (VPGATHERQQ) a chunk of eight, under the mask of the
// lanes below n, whose words only it writes. ports is portBits. It
// orders no memory.
//
//go:noescape
func laneKeys8(fs *rule.Fields, n int, s *laneScratch, ports *[4]uint64) (ip int)

// walkLanes is walkLanesGo, with the stub.
func (d *dtree) walkLanes(keys *[3][treeGroup]uint64, cur *[treeGroup]uint64, n int) {
	if !lanesCPU {
		d.walkLanesGo(keys, cur, n)
		return
	}
	walkLanes8(&d.nodes[0], d.root, keys, cur, n)
}

// walkLanes2 is walkLanes for trees d0 and d1, their leaves to cur[0]
// and cur[1], with the stub that walks both at once (walkQuads where the
// CPU has AVX2 and no AVX-512): walkLanes8x2d over
// their 4-byte node words where they have them (d0's and d1's together,
// addNodes32; with tail, its lanes past nodes32Head levels compacted
// there), else walkLanes8x2.
func walkLanes2(d0, d1 *dtree, keys *[3][treeGroup]uint64, cur *[2][treeGroup]uint64, n int, tail *laneTail) {
	if !lanesCPU {
		if quadsCPU && len(d0.nodes) > 0 && len(d1.nodes) > 0 {
			walkQuads(d0, d1, keys, cur, n)
			return
		}
		walkLanes2Go(d0, d1, keys, cur, n)
		return
	}
	if d0.nodes32 != nil {
		walkLanes8x2d(&d0.nodes32[0], uint64(d0.root32), &d1.nodes32[0], uint64(d1.root32), keys, cur, n, tail)
		return
	}
	walkLanes8x2(&d0.nodes[0], d0.root, &d1.nodes[0], d1.root, keys, cur, n)
}

// walkLanes8x2 is walkLanes8 over two trees at once: every level steps
// the chunks of eight lanes of both trees, so that one tree's gathers
// wait beside the other's, and a group takes as many levels as its
// deeper tree. A level steps only the chunks with a lane not at a leaf,
// which the level before listed in a mask of 32 bits (16 chunks a tree),
// taken lowest bit first: where each chunk of every level had its own
// test and branch, whose outcome fresh 5-tuples made a guess (at 1k
// ClassBench-style rules a quarter of tree 1's chunks are at leaves after
// one level, half of tree 0's after two), the walk of a group mispredicts
// about once a level. Over 65,536 fresh 5-tuples' keys in groups of 128
// (the two walks alternated 21 times in one process, thread CPU time,
// medians of the ratios, three runs; an Intel Xeon, family 6 model 207,
// under KVM), it took 0.63-0.66 of the time at 1k rules and 0.76-0.81 at
// 10k; the same eight groups walked over and over, whose branches the CPU
// learns, took 2.5 ns a packet against 4.5 for distinct groups (1k). It
// orders no memory; the trees' indices are trusted as walkLanes8's are.
//
//go:noescape
func walkLanes8x2(nodes0 *uint64, root0 uint64, nodes1 *uint64, root1 uint64, keys *[3][treeGroup]uint64, cur *[2][treeGroup]uint64, n int)

// walkLanes8x2d is walkLanes8x2 over 4-byte node words (node32, the
// roots too), walkLanes2Go32 with the stub: the same leaf words in cur.
// With tail not nil, the lanes of each tree not at a leaf after
// nodes32Head levels are compacted into tail and walked there, both
// trees' together, and written back (tree_nodes32.go). It orders no
// memory, and trusts the trees' indices as walkLanes8x2 does (node32
// keeps each word's children).
//
//go:noescape
func walkLanes8x2d(nodes0 *uint32, root0 uint64, nodes1 *uint32, root1 uint64, keys *[3][treeGroup]uint64, cur *[2][treeGroup]uint64, n int, tail *laneTail)

// walkLanes8 is walkLanesGo over the node words from nodes on, from
// root: eight lanes to an instruction (AVX-512's 64-bit lanes), a gather
// (VPGATHERQQ) a level for eight walks, under the mask of the lanes not
// yet at a leaf. It orders no memory. The tree's indices are trusted: a
// node word names children inside the tree (as dtree's builder makes
// them), so no gather reads past it.
//
//go:noescape
func walkLanes8(nodes *uint64, root uint64, keys *[3][treeGroup]uint64, cur *[treeGroup]uint64, n int)

// scanLanes2 is scanLanes2Go: AVX-512VL's masked compares on eight
// 32-bit lanes a block, for a group of packets in one call. With pfd
// not 0, the scan of packet i first prefetches (PREFETCHT0) the first
// blocks of packet i+pfd's leaves; pfd changes no result. With narrow,
// a packet's check keeps only the lanes that can lower its best
// (NARROW, useful): fewer packets are left to Go, none decided
// otherwise. It indexes without bounds checks: the leaves' blocks are trusted to be in b0 and
// b1 (as addBlocks lays them out, and inBounds checks), n to be at most
// treeGroup and len(out), and vrule to end with -1 (vecRule's).
//
//go:noescape
func scanLanes2(s *laneScratch, b0, b1 []sblock, vrule, out []int32, n, pfd int, narrow bool) (rest int)

// scanLanes4 is scanLanes4Go with the stub, prefetching as scanLanes2
// does (the first block of each leaf) and trusting what it trusts.
//
//go:noescape
func scanLanes4(s *laneScratch, b0, b1 []sblock, vrule, out []int32, n, pfd int) (rest int)

// scanLanesC2 is scanLanesC2Go with the stub: scanLanes2 over compact
// blocks, which it prefetches as scanLanes2 does (three lines a block)
// and whose indices it trusts as scanLanes2 trusts its blocks'. It
// first writes every packet's laneWord to s.lanes, eight to an
// instruction, then scans each packet's two blocks at once, one in each
// half of zmm registers (ZSCAN), with one compare for all of a lane's
// fields where the one-block scan (CSCAN, cleafScan2's) takes four.
// Each packet's scan leaves four lane minimums in s.mins and its lanes to
// check in s.chk, and the group is decided sixteen packets to an
// instruction at the end (ZDECIDE): the minimums' reduction, the packets
// listed, the rules gathered; where it narrows, the packets with lanes
// to check are tested there, one at a time (ZLISTN). res then holds a
// listed packet's whole check: the narrowing only decides whether the
// packet is listed (cscan), and Go's rest passes over the lanes that
// cannot lower its best.
//
// Measured on an Intel Xeon, family 6 model 207, under KVM, at 1k
// ClassBench-style rules on fresh 5-tuples (BENCHMARKS.md):
//   - the two-block scan alone, its lane words still worked out a packet
//     at a time (two BZHI and SHLX and the long-leaf test, 22
//     instructions), took 0.84-0.91 of the time of the scan before it;
//   - with the lane words first, the scan took 0.80-0.85 of the time,
//     and DecideBurst in bursts of 256 0.854-0.879 (the old stub and
//     this one alternated 21 times in one process, thread CPU time,
//     medians of the ratios, three runs; 0.983 in a fourth), 1000 flows
//     0.870-0.902, and at 10k rules 0.891-0.935 and 0.892-0.936;
//   - with ZDECIDE, the scan took 0.62-0.66 of the time of the first
//     stub;
//   - at 10k rules, where it prefetches and narrows, the group decision
//     (ZGROUP) took the scan to 0.84 of the time of the stub that
//     decided each packet in turn, and narrowing only the packets with
//     lanes to check, in the decision (ZLISTN), to 0.86-0.88 of that.
//
//go:noescape
func scanLanesC2(s *laneScratch, b0, b1 []cblock, vrule, out []int32, n, pfd int, narrow bool) (rest int)

// cleafScan2 is cleafScan2Go with the stub (CSCAN over both blocks).
//
//go:noescape
func cleafScan2(key *[4]uint32, flags uint32, b0, b1 *cblock, lanes uint32) (best, check uint32)

// lanesTight: sets of compact blocks get tight blocks (tree_tblock.go)
// where their classes fit; TSCAN needs AVX-512BW's VPBLENDMW and
// AVX-512 VBMI2's VPSHLDD besides the lane walk's.
var lanesTight = tightCPU

// tightCPU: this CPU runs the tight blocks' stubs (lanesTight's
// features), which the tests call only where it is true.
var tightCPU = lanesCPU && cpu.X86.HasAVX512BW && cpu.X86.HasAVX512VBMI2

// scanLanesT2 is scanLanesC2 over tight blocks, whose classes are cl
// (scanLanesT2Go): both blocks of a packet in one scan (ZTSCAN, its class
// lookups one permute for sixteen lanes), the leaf lanes worked out for
// the group first and the group decided at its end (ZGROUP, ZDECIDE),
// where each packet's two one-block scans (TSCAN), narrowing and
// decision had followed each other. At 100k ClassBench-style rules, on
// 65,536 fresh 5-tuples (keys and walk, then the old stub or this one,
// alternated 21 times in one process, thread CPU time, medians of the
// ratios), the scan took 0.71 of the time, keys, walk and scan 0.82. It
// orders no memory.
//
//go:noescape
func scanLanesT2(s *laneScratch, b0, b1 []tblock, vrule, out []int32, n, pfd int, narrow bool, cl *tclasses) (rest int)

// scanLanesT2I is scanLanesT2 where each rank is its rule (vrule[k] ==
// k but for the last, trees.tident), which it does not read.
//
//go:noescape
func scanLanesT2I(s *laneScratch, b0, b1 []tblock, vrule, out []int32, n, pfd int, narrow bool, cl *tclasses) (rest int)

// scanLanesT6, scanLanesT6I and tleafScan6 are scanLanesT2, scanLanesT2I
// and tleafScan2 for sets whose lanes have IPv6 top bits (trees.v6),
// which their scans put back into the lanes' c words (TSCAN6).
//
//go:noescape
func scanLanesT6(s *laneScratch, b0, b1 []tblock, vrule, out []int32, n, pfd int, narrow bool, cl *tclasses) (rest int)

//go:noescape
func scanLanesT6I(s *laneScratch, b0, b1 []tblock, vrule, out []int32, n, pfd int, narrow bool, cl *tclasses) (rest int)

//go:noescape
func tleafScan6(key *[4]uint32, flags uint32, b0, b1 *tblock, cl *tclasses, lanes uint32) (best, check uint32)

// tleafScan2 is tleafScan2Go with the stub (TSCAN over both blocks).
//
//go:noescape
func tleafScan2(key *[4]uint32, flags uint32, b0, b1 *tblock, cl *tclasses, lanes uint32) (best, check uint32)
