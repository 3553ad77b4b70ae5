//go:build !purego

package classifier

import "golang.org/x/sys/cpu"

// quadsCPU: this CPU runs walkQuads2 and walkQuads2d (AVX2's gathers and
// variable shifts, BMI1's TZCNT and BLSR, BMI2's SHLX). Where it has no
// AVX-512 (lanesCPU false), walkLanes2 takes them, and so do the bursts
// over compact blocks (cvecBurst).
//
// On an AMD EPYC without AVX-512 (family 25 model 1, under KVM), over
// 65,536 fresh 5-tuples, DecideBurst in bursts of 256 took 0.89-0.95 of
// the time of the group walks (walkGroup32) at 100k ClassBench-style
// rules and 0.97-0.99 at 10k (walkGroup), 1.01 at 30k by the minimums
// (the two walks alternated 31 times over one table in one process,
// thread CPU time, medians of the ratios, two runs each; the rounds
// ranged from 0.63 to 1.43, this VM's noise). aclbench's side by side
// rounds, the builds before and after one after the other: 100k rules
// against 1k 2.62-2.64 times the cost, was 3.04-3.36; 10k 1.48-1.49, was
// 1.49-1.61 (BENCHMARKS.md).
var quadsCPU = cpu.X86.HasAVX2 && cpu.X86.HasBMI1 && cpu.X86.HasBMI2

// walkQuads2 is walkLanes2Go for trees d0 and d1 over their 8-byte node
// words, from their roots: four lanes to an instruction (AVX2's 64-bit
// lanes, tree_quads_amd64.s), a gather (VPGATHERQQ) for each chunk of
// four lanes with one not yet at a leaf, level by level, both trees in
// each level, so that one tree's gathers wait beside the other's. Lanes
// from n rounded up to a multiple of eight on are left as they are; n is
// trusted to be at most treeGroup. It orders no memory. The trees'
// indices are trusted, as walkLanes8x2 trusts them: a node word names
// children inside its tree, so no gather reads past it.
//
//go:noescape
func walkQuads2(nodes0 *uint64, root0 uint64, nodes1 *uint64, root1 uint64, keys *[3][treeGroup]uint64, cur *[2][treeGroup]uint64, n int)

// walkQuads2d is walkQuads2 over 4-byte node words (node32, the roots
// too), into w: each lane's leaf word in its 4-byte form (VPGATHERQD),
// which walkQuads widens.
//
//go:noescape
func walkQuads2d(nodes0 *uint32, root0 uint32, nodes1 *uint32, root1 uint32, keys *[3][treeGroup]uint64, w *[2][treeGroup]uint32, n int)

// walkQuads is walkLanes2Go with walkQuads2, or walkQuads2d where the
// trees have 4-byte node words, whose leaf words it widens (node64).
func walkQuads(d0, d1 *dtree, keys *[3][treeGroup]uint64, cur *[2][treeGroup]uint64, n int) {
	if d0.nodes32 != nil {
		var w [2][treeGroup]uint32
		walkQuads2d(&d0.nodes32[0], d0.root32, &d1.nodes32[0], d1.root32, keys, &w, n)
		for t := range w {
			for i := range (n + 7) &^ 7 {
				cur[t][i] = node64(w[t][i])
			}
		}
		return
	}
	walkQuads2(&d0.nodes[0], d0.root, &d1.nodes[0], d1.root, keys, cur, n)
}
