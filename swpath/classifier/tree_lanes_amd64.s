//go:build !purego

#include "go_asm.h"
#include "textflag.h"
#include "vecmin_amd64.h"

// LEAFKEY broadcasts the lanes of one packet's key (*key+0(FP), four
// words: cleafScan2's) to Y0-Y3 and its flags (flags+8(FP)) to Y8, and
// sets the minimum in Y11 to all ones. Uses AX.
#define LEAFKEY \
	MOVQ	key+0(FP), AX \
	VPBROADCASTD	(AX), Y0 \
	VPBROADCASTD	4(AX), Y1 \
	VPBROADCASTD	8(AX), Y2 \
	VPBROADCASTD	12(AX), Y3 \
	MOVL	flags+8(FP), AX \
	VPBROADCASTD	AX, Y8 \
	VPTERNLOGD	$0xff, Y11, Y11, Y11

// LEAFSCAN2 ends the one-packet scans (cleafScan2, tleafScan2): scan
// (CSCAN or TSCAN) of the blocks at SI and DI under the leaves' lanes in
// K2 and K6, then the best entry to best and the lanes to check to check,
// and returns.
#define LEAFSCAN2(scan, best, check) \
	scan(SI, K2, K4) \
	scan(DI, K6, K5) \
	CCHECK \
	MINIMUM(R10) \
	VZEROUPPER \
	MOVL	R10, best \
	MOVL	AX, check \
	RET

// LEAFBLOCKS sets K2 and K6 to the low and high bytes of the leaves' lanes
// in lanes, SI and DI to the blocks b0+16(FP) and b1+24(FP). Uses AX.
#define LEAFBLOCKS(lanes) \
	MOVL	lanes, AX \
	KMOVW	AX, K2 \
	SHRL	$8, AX \
	KMOVW	AX, K6 \
	MOVQ	b0+16(FP), SI \
	MOVQ	b1+24(FP), DI

// FOLD ends a block's scan: of the passing lanes in K1, those whose entry
// words (in e) have a flag of the packet's (Y8) go to mask k, and the
// entries (e under laneEnt or tEnt, in Y9) of the others are folded into
// the minimum in Y11 (under mask K3). Uses Y5.
#define FOLD(e, k) \
	VPTESTMD	Y8, e, K1, k \
	KANDNW	K1, k, K3 \
	VPANDD	Y9, e, Y5 \
	VPMINUD	Y5, Y11, K3, Y11

// SCAN tests the block at p (sblock) against the packet's lanes in Y0-Y3
// with flags in Y8 and laneEnt in Y9: the passing lanes with a flag go to
// mask k (K1 holds the passing lanes), and the entries of the others are
// folded into the minimum in Y11 (under mask K3).
#define SCAN(p, k) \
	VPANDD	128(p), Y0, Y4 \
	VPCMPEQD	(p), Y4, K1 \
	VPANDD	160(p), Y1, Y5 \
	VPCMPEQD	32(p), Y5, K1, K1 \
	VPANDD	192(p), Y2, Y6 \
	VPCMPEQD	64(p), Y6, K1, K1 \
	VPANDD	224(p), Y3, Y7 \
	VPCMPEQD	96(p), Y7, K1, K1 \
	VMOVDQU32	256(p), Y5 \
	FOLD(Y5, k)

// BLOCK sets a to the first block of the leaf word in a (its record
// index over eight, in the blocks from base on).
#define BLOCK(a, base) \
	SHRL	$3, a \
	IMUL3Q	$288, a, a \
	ADDQ	base, a

// SECOND sets b to the block after a when the leaf word in b holds more
// than eight records, else to base (block 0, which never passes).
#define SECOND(a, base, b) \
	SHRQ	$32, b \
	ANDL	$0xffffff, b \
	CMPL	b, $8 \
	LEAQ	288(a), b \
	CMOVQLS	base, b

// AHEAD prefetches, when the distance d (pfd) is not 0 and packet DX+d
// is one of the n in CX, the first block of each of that packet's two
// leaves: PREFETCHT0 of bytes 0, 64, ..., 256 of the block, its five
// cache lines where the block starts on a 32-byte boundary (288-byte
// blocks in an array that does: Go's allocations of more than 32 KiB,
// which are the arrays of sets big enough to prefetch, are page-aligned).
// A prefetch orders no memory and never faults. It uses AX and BX, and
// jumps to skip when there is nothing to prefetch.
#define AHEAD(skip) \
	MOVQ	pfd+112(FP), BX \
	TESTQ	BX, BX \
	JEQ	skip \
	ADDQ	DX, BX \
	CMPQ	BX, CX \
	JAE	skip \
	MOVQ	laneScratch_cur(R8)(BX*8), AX \
	BLOCK(AX, SI) \
	PREFETCHT0	(AX) \
	PREFETCHT0	64(AX) \
	PREFETCHT0	128(AX) \
	PREFETCHT0	192(AX) \
	PREFETCHT0	256(AX) \
	MOVQ	(laneScratch_cur+const_treeGroup*8)(R8)(BX*8), AX \
	BLOCK(AX, DI) \
	PREFETCHT0	(AX) \
	PREFETCHT0	64(AX) \
	PREFETCHT0	128(AX) \
	PREFETCHT0	192(AX) \
	PREFETCHT0	256(AX)

// LANES broadcasts packet DX's lanes from the scratch at R8: its address
// word (sds) to Y0 and Y1, its misc word (keys[2]) to Y2 and Y3, its flags
// to Y8, and sets the minimum in Y11 to all ones.
#define LANES \
	VPBROADCASTD	(laneScratch_sds+4)(R8)(DX*8), Y0 \
	VPBROADCASTD	laneScratch_sds(R8)(DX*8), Y1 \
	VPBROADCASTD	(laneScratch_keys+2*const_treeGroup*8+4)(R8)(DX*8), Y2 \
	VPBROADCASTD	(laneScratch_keys+2*const_treeGroup*8)(R8)(DX*8), Y3 \
	VPBROADCASTD	laneScratch_flags(R8)(DX*4), Y8 \
	VPTERNLOGD	$0xff, Y11, Y11, Y11

// PROLOGUE loads the lane scans' arguments: the scratch to R8, the
// blocks to SI and DI, out to R9, vrule to R10 and its last index to R11,
// n to CX; laneEnt to Y9 and laneFull to Y13; R12 (the rest's count) and
// DX (the packet) to 0.
#define PROLOGUE \
	MOVQ	s+0(FP), R8 \
	MOVQ	b0_base+8(FP), SI \
	MOVQ	b1_base+32(FP), DI \
	MOVQ	vrule_base+56(FP), R10 \
	MOVQ	vrule_len+64(FP), R11 \
	DECQ	R11 \
	MOVQ	out_base+80(FP), R9 \
	MOVQ	n+104(FP), CX \
	MOVL	$0x3fffffff, AX \
	VPBROADCASTD	AX, Y9 \
	MOVL	$0x80000000, AX \
	VPBROADCASTD	AX, Y13 \
	XORL	R12, R12 \
	XORL	DX, DX

// DECIDE stores res[DX] = best (R14) | check (AX) << 32, then lists the
// packet in rest when R13 (its need of more than the scan) is not zero or
// its flags are (not IP), and else stores out[DX] = vrule[min(best,
// R11)]. Jumps to next.
#define DECIDE(rest, next) \
	MOVQ	AX, BX \
	SHLQ	$32, BX \
	ORQ	R14, BX \
	MOVQ	BX, laneScratch_res(R8)(DX*8) \
	ORL	AX, R13 \
	MOVL	laneScratch_flags(R8)(DX*4), BX \
	TESTL	BX, BX \
	JEQ	rest \
	TESTL	R13, R13 \
	JNE	rest \
	CMPL	R14, R11 \
	CMOVLHI	R11, R14 \
	MOVL	(R10)(R14*4), BX \
	MOVL	BX, (R9)(DX*4) \
	JMP	next

// USEFUL narrows the check mask k of the block at p, whose entry words
// are at off(p), to the lanes that can lower the packet's best (in Y12):
// those whose records need holds (laneFull, in Y13) with an entry below
// it. Any other lane in k needs ports the packet lacks, which fails it,
// or cannot beat the best; vecChecked would pass over it.
#define USEFUL(p, off, k) \
	VMOVDQU32	off(p), Y5 \
	VPTESTMD	Y13, Y5, k, k \
	VPANDD	Y9, Y5, Y5 \
	VPCMPUD	$1, Y12, Y5, k, k

// NARROW applies USEFUL to the check masks K4 and K5 of the blocks at a
// and b, the packet's best in R14, when the argument narrow is true;
// else it jumps to skip.
#define NARROW(a, b, off, skip) \
	CMPB	narrow+120(FP), $0 \
	JEQ	skip \
	VPBROADCASTD	R14, Y12 \
	USEFUL(a, off, K4) \
	USEFUL(b, off, K5)

// STEPCONSTS loads the constants of a walk's steps: leaf (the leaf bit)
// to Z16, 1, 2 and 3 to Z17-Z19 (key words; 3 the mask of the key
// word's two bits), 63 (the shift's mask) to Z20, cut (the child index
// mask's, or its bit count's) to Z21 and child (the first child's mask)
// to Z22. Uses AX.
#define STEPCONSTS(leaf, cut, child) \
	MOVQ	leaf, AX \
	VPBROADCASTQ	AX, Z16 \
	MOVQ	$1, AX \
	VPBROADCASTQ	AX, Z17 \
	MOVQ	$2, AX \
	VPBROADCASTQ	AX, Z18 \
	MOVQ	$3, AX \
	VPBROADCASTQ	AX, Z19 \
	MOVQ	$63, AX \
	VPBROADCASTQ	AX, Z20 \
	MOVQ	cut, AX \
	VPBROADCASTQ	AX, Z21 \
	MOVQ	child, AX \
	VPBROADCASTQ	AX, Z22

// WALKCONSTS loads STEP's constants (STEPCONSTS): bit 63, 0xffff (the
// child index mask's) and 0xffffffff (the first child's).
#define WALKCONSTS STEPCONSTS($0x8000000000000000, $0xffff, $0xffffffff)

// STEPKEY starts STEP and DSTEPK for the chunk at off(DI)(R8*1): its
// words to Z3, its lanes not at a leaf to K1 (jumping to skip where there
// is none, else setting R11), and each lane's key word to Z5, the word's
// number at bit at of its node word (the chunk's keys[0] at koff(DX),
// replaced under masks by keys[1] or keys[2]), shifted right by the
// node word's six bits at bit shift.
#define STEPKEY(off, koff, skip, at, shift) \
	VMOVDQU64	off(DI)(R8*1), Z3 \
	VPTESTNMQ	Z16, Z3, K1 \
	KORTESTW	K1, K1 \
	JEQ	skip \
	MOVL	$1, R11 \
	STEPSEL(koff, at, shift)

// STEPSEL is STEPKEY's key words: for the chunk's node words in Z3, each
// lane's key word to Z5 (see STEPKEY).
#define STEPSEL(koff, at, shift) \
	VPSRLQ	$at, Z3, Z4 \
	VPANDQ	Z19, Z4, Z4 \
	VMOVDQU64	koff(DX)(R8*1), Z5 \
	VPCMPEQQ	Z17, Z4, K2 \
	VMOVDQU64	(koff+const_treeGroup*8)(DX)(R8*1), K2, Z5 \
	VPCMPEQQ	Z18, Z4, K3 \
	VMOVDQU64	(koff+const_treeGroup*16)(DX)(R8*1), K3, Z5 \
	VPSRLQ	$shift, Z3, Z6 \
	VPANDQ	Z20, Z6, Z6 \
	VPSRLVQ	Z6, Z5, Z5

// STEP takes one level of the chunk of eight walks at off(DI)(R8*1),
// whose node words are at nodes, when one of its lanes is not at a leaf
// (and sets R11), else jumps to skip: a chunk's step of walkLanes8, the
// constants in Z16-Z22 (WALKCONSTS). walkLanes8x2 takes its parts
// (STEPSEL, STEPNODE) without the test.
#define STEP(nodes, off, skip) \
	STEPKEY(off, 0, skip, 56, 48) \
	STEPNODE(nodes, off)

// STEPNODE is STEP's end: each lane's child index (the key word in Z5
// under the node word's mask, plus its first child) and the gather of
// the lanes in K1 to the chunk at off(DI)(R8*1).
#define STEPNODE(nodes, off) \
	VPSRLQ	$32, Z3, Z7 \
	VPANDQ	Z21, Z7, Z7 \
	VPANDQ	Z7, Z5, Z5 \
	VPANDQ	Z22, Z3, Z8 \
	VPADDQ	Z8, Z5, Z5 \
	VPGATHERQQ	(nodes)(Z5*8), K1, Z3 \
	VMOVDQU64	Z3, off(DI)(R8*1)

// WALK2 is the walk of walkLanes8x2d: every lane of both trees starts
// at its root, then each level steps (step: DSTEP) every chunk of tree 0
// and the same chunk of tree 1 before the next chunk, and the levels go on until a pass steps no chunk of
// either (then it jumps to walked), or for at most levels levels (then
// it goes on after itself). consts loads step's constants; the labels
// are the stub's. CX holds the chunks; with none it jumps to done.
#define WALK2(consts, step, levels, start, level, chunk, tree1, next, done, walked) \
	MOVQ	nodes0+0(FP), SI \
	MOVQ	nodes1+16(FP), R12 \
	MOVQ	keys+32(FP), DX \
	MOVQ	cur+40(FP), DI \
	MOVQ	n+48(FP), CX \
	ADDQ	$7, CX \
	SHRQ	$3, CX \
	JEQ	done \
	VPBROADCASTQ	root0+8(FP), Z3 \
	VPBROADCASTQ	root1+24(FP), Z4 \
	XORL	R8, R8 \
	MOVQ	CX, R9 \
start: \
	VMOVDQU64	Z3, (DI)(R8*1) \
	VMOVDQU64	Z4, (const_treeGroup*8)(DI)(R8*1) \
	ADDQ	$64, R8 \
	DECQ	R9 \
	JNE	start \
	consts \
	MOVQ	levels, R13 \
level: \
	XORL	R11, R11 \
	XORL	R8, R8 \
	MOVQ	CX, R9 \
chunk: \
	step(SI, 0, tree1) \
tree1: \
	step(R12, const_treeGroup*8, next) \
next: \
	ADDQ	$64, R8 \
	DECQ	R9 \
	JNE	chunk \
	TESTL	R11, R11 \
	JEQ	walked \
	DECQ	R13 \
	JNE	level

// func walkLanes8(nodes *uint64, root uint64, keys *[3][treeGroup]uint64, cur *[treeGroup]uint64, n int)
//
// Eight walks to a zmm register, a level at a time: every lane starts at
// root, then every chunk of eight lanes not yet all at leaves takes one
// step, its node words gathered
// (VPGATHERQQ) under the mask of its lanes that are not leaves, so that
// a leaf lane keeps its word; the levels go on until a pass steps no
// chunk. A lane's key word (bits 56-57 of its node word: 0, 1 or 2) is
// its chunk of keys[0], replaced under masks by keys[1] or keys[2].
TEXT ·walkLanes8(SB), NOSPLIT, $0-40
	MOVQ	nodes+0(FP), SI
	MOVQ	keys+16(FP), DX
	MOVQ	cur+24(FP), DI
	MOVQ	n+32(FP), CX
	ADDQ	$7, CX
	SHRQ	$3, CX
	JEQ	done
	VPBROADCASTQ	root+8(FP), Z3
	XORL	R8, R8
	MOVQ	CX, R9

start:
	VMOVDQU64	Z3, (DI)(R8*1)
	ADDQ	$64, R8
	DECQ	R9
	JNE	start
	MOVQ	root+8(FP), AX
	BTQ	$63, AX
	JCS	done
	WALKCONSTS

level:
	XORL	R11, R11
	XORL	R8, R8
	MOVQ	CX, R9

chunk:
	STEP(SI, 0, next)

next:
	ADDQ	$64, R8
	DECQ	R9
	JNE	chunk
	TESTL	R11, R11
	JNE	level

done:
	VZEROUPPER
	RET

// func walkLanes8x2(nodes0 *uint64, root0 uint64, nodes1 *uint64, root1 uint64, keys *[3][treeGroup]uint64, cur *[2][treeGroup]uint64, n int)
//
// walkLanes8 for two trees at once: one tree's gathers wait beside the
// other's, and a group's walks take as many levels as its deeper tree,
// not the two trees' depths added. Each level steps the chunks listed in
// R10 (TZCNT, lowest first; BLSR) and lists in R11 those of its chunks
// with a lane not yet at a leaf (SETNE) for the next: WALK2's test and
// branch a chunk a level, replaced by one loop a level. The levels'
// bound, 64, is past any tree's depth (treeMaxDepth).
TEXT ·walkLanes8x2(SB), NOSPLIT, $0-56
	MOVQ	nodes0+0(FP), SI
	MOVQ	nodes1+16(FP), R12
	MOVQ	keys+32(FP), R9
	MOVQ	cur+40(FP), DI
	MOVQ	n+48(FP), CX
	ADDQ	$7, CX
	SHRQ	$3, CX
	JEQ	done2x
	VPBROADCASTQ	root0+8(FP), Z3
	VPBROADCASTQ	root1+24(FP), Z4
	XORL	R8, R8
	MOVQ	CX, R10

start2x:
	VMOVDQU64	Z3, (DI)(R8*1)
	VMOVDQU64	Z4, (const_treeGroup*8)(DI)(R8*1)
	ADDQ	$64, R8
	DECQ	R10
	JNE	start2x
	WALKCONSTS
	// R10: the chunks to step, tree 0's in bits 0-15 and tree 1's in
	// bits 16-31, whose rows of cur follow each other: chunk b is at
	// b*64 of cur, its keys at b*64 of R9 (tree 0) or CX (tree 1).
	MOVL	$1, R10
	SHLXL	CX, R10, R10
	DECL	R10
	MOVL	R10, AX
	SHLL	$16, AX
	ORL	AX, R10
	LEAQ	-(const_treeGroup*8)(R9), CX
	MOVQ	$64, R13

level2x:
	XORL	R11, R11

chunk2x:
	TZCNTL	R10, BX
	MOVL	BX, R8
	SHLL	$6, R8
	MOVQ	R9, DX
	MOVQ	SI, AX
	CMPL	BX, $16
	CMOVQCC	CX, DX
	CMOVQCC	R12, AX
	VMOVDQU64	(DI)(R8*1), Z3
	VPTESTNMQ	Z16, Z3, K1
	STEPSEL(0, 56, 48)
	STEPNODE(AX, 0)
	VPTESTNMQ	Z16, Z3, K2
	XORL	R14, R14
	KORTESTW	K2, K2
	SETNE	R14
	SHLXL	BX, R14, R14
	ORL	R14, R11
	BLSRL	R10, R10
	JNE	chunk2x
	MOVL	R11, R10
	TESTL	R10, R10
	JEQ	done2x
	DECQ	R13
	JNE	level2x

done2x:
	VZEROUPPER
	RET

// DCONSTS loads DSTEP's constants: STEPCONSTS with bit 31 (a leaf's),
// 15 (the cut's bits less one, bits 19-22) and 0x7ffff (the first
// child's, bits 0-18), and ^1 (the child index mask's complement, before
// its shift) to Z23. Uses AX.
#define DCONSTS \
	STEPCONSTS($0x80000000, $15, $0x7ffff) \
	MOVQ	$-2, AX \
	VPBROADCASTQ	AX, Z23

// DSTEPK is STEP over 4-byte node words (node32), each lane's word
// zero-extended in its 64-bit lane of cur, its keys at koff(DX): the
// child index is the first child plus the key word's bits under the mask
// of the cut's k bits (^(^1 << (k-1))), and the gather (VPGATHERQD) loads
// the children's 4-byte words into the chunk's narrowed words (VPMOVQD),
// so that a leaf lane keeps its word, before they are widened back
// (VPMOVZXDQ). DSTEP is DSTEPK for the keys at DX.
#define DSTEP(nodes, off, skip) DSTEPK(nodes, off, 0, skip)

#define DSTEPK(nodes, off, koff, skip) \
	STEPKEY(off, koff, skip, 29, 23) \
	VPSRLQ	$19, Z3, Z7 \
	VPANDQ	Z21, Z7, Z7 \
	VPSLLVQ	Z7, Z23, Z7 \
	VPANDNQ	Z5, Z7, Z5 \
	VPANDQ	Z22, Z3, Z8 \
	VPADDQ	Z8, Z5, Z5 \
	VPMOVQD	Z3, Y3 \
	VPGATHERQD	(nodes)(Z5*4), K1, Y3 \
	VPMOVZXDQ	Y3, Z3 \
	VMOVDQU64	Z3, off(DI)(R8*1)

// DWIDEN turns the chunk of 4-byte leaf words at off(DI)(R8*1) into the
// leaf words of dtree.nodes (node64): bits 0-21 the first record, 22-29
// the count to bits 32-39, 30 (treeLong) to 62, and the leaf bit 63.
// Constants in Z17 (1), Z24 (0x3fffff), Z25 (0xff) and Z26 (bit 63).
#define DWIDEN(off) \
	VMOVDQU64	off(DI)(R8*1), Z3 \
	VPANDQ	Z24, Z3, Z4 \
	VPSRLQ	$22, Z3, Z5 \
	VPANDQ	Z25, Z5, Z5 \
	VPSLLQ	$32, Z5, Z5 \
	VPSRLQ	$30, Z3, Z6 \
	VPANDQ	Z17, Z6, Z6 \
	VPSLLQ	$62, Z6, Z6 \
	VPTERNLOGQ	$0xfe, Z5, Z6, Z4 \
	VPORQ	Z26, Z4, Z4 \
	VMOVDQU64	Z4, off(DI)(R8*1)

// DTAIL compacts the lanes of cur row off(DI) that are not at a leaf
// into the tail at BX (laneTail, its tree's rows at tc, tk and ti), their
// count to R10: each chunk's words, keys and lane numbers (Z9, from Z28
// up by Z29) compressed (VPCOMPRESSQ) under the chunk's mask of such
// lanes and stored whole from entry R10 on (no row runs into the next:
// after k chunks R10 is at most 8k); the words' row, which has eight
// entries past the group, takes leaf words (Z16) in the eight past the
// last. Uses AX, R8 and R9.
#define DTAIL(off, tc, tk, ti, loop) \
	XORL	R10, R10 \
	XORL	R8, R8 \
	MOVQ	CX, R9 \
	VMOVDQU64	Z28, Z9 \
loop: \
	VMOVDQU64	off(DI)(R8*1), Z3 \
	VPTESTNMQ	Z16, Z3, K1 \
	KMOVB	K1, AX \
	POPCNTL	AX, AX \
	VPCOMPRESSQ	Z3, K1, Z4 \
	VMOVDQU64	Z4, tc(BX)(R10*8) \
	VMOVDQU64	(DX)(R8*1), Z5 \
	VPCOMPRESSQ	Z5, K1, Z5 \
	VMOVDQU64	Z5, tk(BX)(R10*8) \
	VMOVDQU64	(const_treeGroup*8)(DX)(R8*1), Z5 \
	VPCOMPRESSQ	Z5, K1, Z5 \
	VMOVDQU64	Z5, (tk+const_treeGroup*8)(BX)(R10*8) \
	VMOVDQU64	(const_treeGroup*16)(DX)(R8*1), Z5 \
	VPCOMPRESSQ	Z5, K1, Z5 \
	VMOVDQU64	Z5, (tk+const_treeGroup*16)(BX)(R10*8) \
	VPCOMPRESSQ	Z9, K1, Z6 \
	VMOVDQU64	Z6, ti(BX)(R10*8) \
	ADDQ	AX, R10 \
	VPADDQ	Z29, Z9, Z9 \
	ADDQ	$64, R8 \
	DECQ	R9 \
	JNE	loop \
	VMOVDQU64	Z16, tc(BX)(R10*8)

// DFILL gives the tail's words at tc leaf words (Z16) from chunk
// ceil(R10/8) to chunk R13, so that a walk of R13 chunks steps only its
// lanes. Uses AX and R10.
#define DFILL(tc, loop, done) \
	ADDQ	$7, R10 \
	SHRQ	$3, R10 \
loop: \
	CMPQ	R10, R13 \
	JAE	done \
	MOVQ	R10, AX \
	SHLQ	$6, AX \
	VMOVDQU64	Z16, tc(BX)(AX*1) \
	INCQ	R10 \
	JMP	loop \
done:

// DBACK writes the first R10 words of the tail's row at tc to cur row
// off(DI), each to the lane its number at ti names. Uses AX, R8 and R9.
#define DBACK(off, tc, ti, loop, done) \
	TESTQ	R10, R10 \
	JEQ	done \
	XORL	R8, R8 \
loop: \
	MOVQ	ti(BX)(R8*8), AX \
	MOVQ	tc(BX)(R8*8), R9 \
	MOVQ	R9, off(DI)(AX*8) \
	INCQ	R8 \
	CMPQ	R8, R10 \
	JNE	loop \
done:

// The rows of a laneTail: tree 1's words, keys and lane numbers past
// tree 0's.
#define DT1CUR (laneTail_cur+(const_treeGroup+8)*8)
#define DT1KEYS (const_treeGroup*24)
#define DT1IDX (laneTail_idx+const_treeGroup*8)

// func walkLanes8x2d(nodes0 *uint32, root0 uint64, nodes1 *uint32, root1 uint64, keys *[3][treeGroup]uint64, cur *[2][treeGroup]uint64, n int, tail *laneTail)
//
// walkLanes8x2 over 4-byte node words (dtree.nodes32, node32; roots as
// node32 gives them): WALK2 with DSTEP. With a tail, WALK2 takes
// nodes32Head levels; then the lanes of each tree not yet at a leaf are
// compacted into the tail (DTAIL), where both trees' walks go on a level
// at a time over their chunks together (DSTEPK), and go back to their
// lanes (DBACK). Last, every chunk's leaf words are widened (DWIDEN), so
// that cur holds what walkLanes8x2 gives.
TEXT ·walkLanes8x2d(SB), NOSPLIT, $8-64
	MOVQ	tail+56(FP), BX
	MOVL	$64, R10
	MOVL	$const_nodes32Head, AX
	TESTQ	BX, BX
	CMOVQNE	AX, R10
	WALK2(DCONSTS, DSTEP, R10, start2d, level2d, chunk2d, tree1d, next2d, done2d, walked2d)
	TESTQ	BX, BX
	JEQ	level2d
	MOVQ	$0x0706050403020100, AX
	VMOVQ	AX, X28
	VPMOVZXBQ	X28, Z28
	MOVQ	$8, AX
	VPBROADCASTQ	AX, Z29
	DTAIL(0, laneTail_cur, laneTail_keys, laneTail_idx, tail0d)
	MOVQ	R10, R14
	DTAIL(const_treeGroup*8, DT1CUR, (laneTail_keys+DT1KEYS), DT1IDX, tail1d)
	MOVQ	R10, m1-8(SP)
	LEAQ	7(R14), R13
	LEAQ	7(R10), AX
	CMPQ	AX, R13
	CMOVQHI	AX, R13
	SHRQ	$3, R13
	TESTQ	R13, R13
	JEQ	walked2d
	MOVQ	R14, R10
	DFILL(laneTail_cur, fill0d, filled0d)
	MOVQ	m1-8(SP), R10
	DFILL(DT1CUR, fill1d, filled1d)
	LEAQ	laneTail_cur(BX), DI
	LEAQ	laneTail_keys(BX), DX

tlevel2d:
	XORL	R11, R11
	XORL	R8, R8
	MOVQ	R13, R9

tchunk2d:
	DSTEPK(SI, 0, 0, ttree1d)

ttree1d:
	DSTEPK(R12, (DT1CUR-laneTail_cur), DT1KEYS, tnext2d)

tnext2d:
	ADDQ	$64, R8
	DECQ	R9
	JNE	tchunk2d
	TESTL	R11, R11
	JNE	tlevel2d
	MOVQ	keys+32(FP), DX
	MOVQ	cur+40(FP), DI
	MOVQ	R14, R10
	DBACK(0, laneTail_cur, laneTail_idx, back0d, backed0d)
	MOVQ	m1-8(SP), R10
	DBACK(const_treeGroup*8, DT1CUR, DT1IDX, back1d, backed1d)

walked2d:
	MOVQ	$0x3fffff, AX
	VPBROADCASTQ	AX, Z24
	MOVQ	$0xff, AX
	VPBROADCASTQ	AX, Z25
	MOVQ	$0x8000000000000000, AX
	VPBROADCASTQ	AX, Z26
	XORL	R8, R8
	MOVQ	CX, R9

widen2d:
	DWIDEN(0)
	DWIDEN(const_treeGroup*8)
	ADDQ	$64, R8
	DECQ	R9
	JNE	widen2d

done2d:
	VZEROUPPER
	RET

// func scanLanes2(s *laneScratch, b0, b1 []sblock, vrule, out []int32, n, pfd int) (rest int)
//
// leafScan2 for the first n packets of s, one after the other, without a
// call or the constants' setup between them: packet i's blocks are the
// first of its leaves s.cur[0][i] in b0 and s.cur[1][i] in b1 (leaf words:
// the block index is the record index over eight). res[i] = best |
// check<<32, the check narrowed to the lanes that can lower best where
// narrow is true (NARROW, useful); out[i] is vrule[best] for a packet
// whose flags are not zero (IP), whose leaves are of one block (no
// treeLong) and whose check is zero; the others are listed in s.rest.
// Eight 32-bit lanes (AVX-512VL's masked compares on ymm registers) a
// block: the masks fold the four lanes' checks, two instructions a lane
// word. With pfd not 0 it first prefetches packet i+pfd's first blocks
// (AHEAD). It orders no memory.
TEXT ·scanLanes2(SB), NOSPLIT, $0-136
	PROLOGUE
	TESTQ	CX, CX
	JEQ	done2

loop2:
	AHEAD(ahead2)

ahead2:
	LANES
	MOVQ	laneScratch_cur(R8)(DX*8), AX
	MOVQ	(laneScratch_cur+const_treeGroup*8)(R8)(DX*8), BX
	MOVQ	AX, R13
	ORQ	BX, R13
	SHRQ	$62, R13
	ANDL	$1, R13
	BLOCK(AX, SI)
	BLOCK(BX, DI)
	SCAN(AX, K4)
	SCAN(BX, K5)
	MINIMUM(R14)
	NARROW(AX, BX, 256, narrow2)

narrow2:
	KMOVW	K4, AX
	KMOVW	K5, BX
	SHLL	$8, BX
	ORL	BX, AX
	DECIDE(rest2, next2)

rest2:
	MOVB	DX, laneScratch_rest(R8)(R12*1)
	INCQ	R12

next2:
	INCQ	DX
	CMPQ	DX, CX
	JNE	loop2

done2:
	MOVQ	R12, rest+128(FP)
	VZEROUPPER
	RET

// func scanLanes4(s *laneScratch, b0, b1 []sblock, vrule, out []int32, n, pfd int) (rest int)
//
// scanLanes2 over the first two blocks of each leaf, with leafScan4's
// check (not narrowed by USEFUL): check bit 8k+j for lane j of block k,
// the blocks in the order first and second of s.cur[0][i]'s leaf, then
// of s.cur[1][i]'s; a leaf of eight records or fewer has block 0 for its
// second, and the packets listed in s.rest are those not IP, with a
// passing lane to check, or with a leaf of more than two blocks
// (treeLonger).
TEXT ·scanLanes4(SB), NOSPLIT, $0-128
	PROLOGUE
	TESTQ	CX, CX
	JEQ	done4

loop4:
	AHEAD(ahead4)

ahead4:
	LANES
	MOVQ	laneScratch_cur(R8)(DX*8), R14
	MOVQ	R14, AX
	MOVQ	R14, R13
	BLOCK(R14, SI)
	SECOND(R14, SI, AX)
	SCAN(R14, K4)
	SCAN(AX, K5)
	MOVQ	(laneScratch_cur+const_treeGroup*8)(R8)(DX*8), R14
	MOVQ	R14, AX
	ORQ	R14, R13
	SHRQ	$61, R13
	ANDL	$1, R13
	BLOCK(R14, DI)
	SECOND(R14, DI, AX)
	SCAN(R14, K6)
	SCAN(AX, K7)
	KMOVW	K4, AX
	KMOVW	K5, R14
	SHLL	$8, R14
	ORL	R14, AX
	KMOVW	K6, R14
	SHLL	$16, R14
	ORL	R14, AX
	KMOVW	K7, R14
	SHLL	$24, R14
	ORL	R14, AX
	MINIMUM(R14)
	DECIDE(rest4, next4)

rest4:
	MOVB	DX, laneScratch_rest(R8)(R12*1)
	INCQ	R12

next4:
	INCQ	DX
	CMPQ	DX, CX
	JNE	loop4

done4:
	MOVQ	R12, rest+120(FP)
	VZEROUPPER
	RET

// CSCAN is SCAN for the compact block at p (cblock: source words at 0,
// destination words at 32, the ports' low ends at 64, c words at 96,
// entries at 128, the ports' spans at 160): it tests each address word
// against the bound its marker makes (ADDRESS; cblockMask's masks in
// Go), where the c word's bit 31 (cSrcFull) or 30 (cDstFull), spread by
// arithmetic shifts, says it is whole, and the c word under its own
// mask, the word shifted right by cMasks. The ports pass where both
// 16-bit halves of the packet's ports less the low ends (VPSUBW, which
// borrows nothing across halves) are at most the spans: the unsigned
// minimum of the two (VPMINUW) is then that difference, in both halves.
// The packet's lanes are in Y0 (source), Y1 (destination), Y2 (hiLane)
// and Y3 (ports); all ones in Y22 (CONSTS). Only the lanes in mask m (the
// leaf's, leafLanes) can pass. Uses Y4-Y7.
#define CSCAN(p, m, k) \
	VMOVDQU32	96(p), Y4 \
	VPSRAD	$31, Y4, Y7 \
	ADDRESS(p, 0, Y7, Y0, m) \
	VPSLLD	$1, Y4, Y7 \
	VPSRAD	$31, Y7, Y7 \
	ADDRESS(p, 32, Y7, Y1, K1) \
	VPSRLD	$const_cMasks, Y4, Y6 \
	VPXORD	Y2, Y4, Y5 \
	VPTESTNMD	Y6, Y5, K1, K1 \
	VPSUBW	64(p), Y3, Y5 \
	VPMINUW	160(p), Y5, Y6 \
	VPCMPEQD	Y6, Y5, K1, K1 \
	VMOVDQU32	128(p), Y5 \
	FOLD(Y5, k)

// ADDRESS sets K1 to the lanes of mask m whose address words v (at
// off(p)) the packet's word in key passes. Below v's prefix is a marker
// bit then zeros, so v ^ (v-1) is the marker and the bits below it, and
// the packet passes where its word XOR v is at most that: its bits above
// the marker are the prefix's. A whole word has no marker, and there the
// bound is zero, so that only v itself passes: whole holds all ones in
// such lanes (cSrcFull or cDstFull, spread) and zero in the others. Y22
// holds all ones; uses Y5 and Y6.
#define ADDRESS(p, off, whole, key, m) \
	VMOVDQU32	off(p), Y5 \
	VPADDD	Y22, Y5, Y6 \
	VPTERNLOGD	$0x14, whole, Y5, Y6 \
	VPXORD	key, Y5, Y5 \
	VPCMPUD	$2, Y6, Y5, m, K1

// CBLOCK sets a to the compact block of the leaf word in a (its record
// index over eight, in the blocks from base on).
#define CBLOCK(a, base) \
	SHRL	$3, a \
	IMUL3Q	$192, a, a \
	ADDQ	base, a

// CFETCH prefetches the first compact block of each of packet i's two
// leaves: PREFETCHT0 of bytes 0, 64 and 128 of each block, its three
// cache lines (192-byte blocks in a page-aligned array start on a line).
// A prefetch orders no memory and never faults. Uses AX.
#define CFETCH(i) \
	MOVQ	laneScratch_cur(R8)(i*8), AX \
	CBLOCK(AX, SI) \
	PREFETCHT0	(AX) \
	PREFETCHT0	64(AX) \
	PREFETCHT0	128(AX) \
	MOVQ	(laneScratch_cur+const_treeGroup*8)(R8)(i*8), AX \
	CBLOCK(AX, DI) \
	PREFETCHT0	(AX) \
	PREFETCHT0	64(AX) \
	PREFETCHT0	128(AX)

// CAHEAD is AHEAD for compact or tight blocks: fetch (CFETCH or TFETCH)
// of packet DX+pfd, where pfd is not 0 and that packet one of the n in
// CX. Uses AX and BX (and what fetch uses), and jumps to skip when there
// is nothing to prefetch.
#define CAHEAD(fetch, skip) \
	MOVQ	pfd+112(FP), BX \
	TESTQ	BX, BX \
	JEQ	skip \
	ADDQ	DX, BX \
	CMPQ	BX, CX \
	JAE	skip \
	fetch(BX)

// ZLEAVES is the group scans' start of packet DX: its lanes (CLANES, on
// zmm registers: Z0-Z3 and Z8), its leaves' words in AX (tree 0) and BX
// (tree 1), their lanes in one mask of 16 in K2, tree 0's lanes in its
// low byte and tree 1's in its high byte, from the packet's word that
// ZLANES wrote.
#define ZLEAVES \
	CLANES(Z0, Z1, Z2, Z3, Z8) \
	MOVQ	laneScratch_cur(R8)(DX*8), AX \
	MOVQ	(laneScratch_cur+const_treeGroup*8)(R8)(DX*8), BX \
	KMOVW	laneScratch_lanes(R8)(DX*4), K2

// ZLANES writes, for the n packets in CX rounded up to a multiple of
// eight, each packet's leaves' lanes (leafLanes: tree 0's in bits 0-7,
// tree 1's in bits 8-15) and bit 31 where either leaf is longer than a
// block (treeLong) to the scratch's lanes, eight packets to an
// instruction (ZLANE), before the scan's loop: each packet's two leaves'
// lanes (BZHI, SHLX) and its long-leaf test took 22 instructions in the
// loop. Uses AX, R13 and Z4-Z7, Z10, Z23-Z27.
#define ZLANES(skip, chunk) \
	MOVQ	CX, AX \
	ADDQ	$7, AX \
	SHRQ	$3, AX \
	JEQ	skip \
	MOVQ	$0xff, R13 \
	VPBROADCASTQ	R13, Z23 \
	MOVQ	$8, R13 \
	VPBROADCASTQ	R13, Z24 \
	MOVQ	$1, R13 \
	VPBROADCASTQ	R13, Z25 \
	MOVQ	$7, R13 \
	VPBROADCASTQ	R13, Z26 \
	MOVQ	$0x80000000, R13 \
	VPBROADCASTQ	R13, Z27 \
	XORL	R13, R13 \
chunk: \
	VMOVDQU64	laneScratch_cur(R8)(R13*8), Z4 \
	VMOVDQU64	(laneScratch_cur+const_treeGroup*8)(R8)(R13*8), Z5 \
	ZLANE(Z4, Z6) \
	ZLANE(Z5, Z7) \
	VPSLLQ	$8, Z7, Z7 \
	VPORQ	Z7, Z6, Z6 \
	VPORQ	Z5, Z4, Z10 \
	VPSRLQ	$31, Z10, Z10 \
	VPTERNLOGQ	$0xf8, Z27, Z10, Z6 \
	VPMOVQD	Z6, laneScratch_lanes(R8)(R13*4) \
	ADDQ	$8, R13 \
	DECQ	AX \
	JNE	chunk \
skip:

// ZLANE sets l to leafLanes of the eight leaf words in w: (1 << min(count,
// 8)) - 1, the count the word's bits 32-39 (Z23: 0xff; Z24: 8; Z25: 1),
// shifted left by the first record's lane (Z26: 7). Uses Z10.
#define ZLANE(w, l) \
	VPSRLQ	$32, w, Z10 \
	VPANDQ	Z23, Z10, Z10 \
	VPMINUQ	Z24, Z10, Z10 \
	VPSLLVQ	Z10, Z25, l \
	VPSUBQ	Z25, l, l \
	VPANDQ	Z26, w, Z10 \
	VPSLLVQ	Z10, l, l

// CCHECK sets AX to the two blocks' lanes to check, K4's and K5's
// (bit 8k+j for lane j of block k). Uses BX.
#define CCHECK \
	KMOVW	K4, AX \
	KMOVW	K5, BX \
	SHLL	$8, BX \
	ORL	BX, AX

// CLANES is LANES for compact and tight blocks, to the registers named:
// packet DX's source word to src, its destination word to dst, its hiLane
// to hi (the bits of its misc word that hiLane takes: the protocol, bits
// 32-39; bit 41 of the family; the IPv6 top bits 48 and 49, gathered in
// their order by BMI2's PEXT), its ports to ports and its flags to fl.
// Uses AX and BX.
#define CLANES(src, dst, hi, ports, fl) \
	VPBROADCASTD	(laneScratch_sds+4)(R8)(DX*8), src \
	VPBROADCASTD	laneScratch_sds(R8)(DX*8), dst \
	MOVQ	(laneScratch_keys+2*const_treeGroup*8)(R8)(DX*8), AX \
	MOVQ	$0x302ff00000000, BX \
	PEXTQ	BX, AX, AX \
	VPBROADCASTD	AX, hi \
	VPBROADCASTD	(laneScratch_keys+2*const_treeGroup*8)(R8)(DX*8), ports \
	VPBROADCASTD	laneScratch_flags(R8)(DX*4), fl

// CONSTS loads CSCAN's constant: all ones to Y22.
#define CONSTS \
	VPTERNLOGD	$0xff, Y22, Y22, Y22

// ZLOAD loads the 32 bytes at off of two compact blocks into z, tree 0's
// block (at AX) into its low half y and tree 1's (at BX) into its high
// half: ZSCAN's sixteen lanes, lane 8k+j lane j of block k.
#define ZLOAD(off, z, y) \
	VMOVDQU32	off(AX), y \
	VINSERTI64X4	$1, off(BX), z, z

// ZADDR is ADDRESS for ZSCAN: t is zero in the lanes whose address words
// (at off of both blocks, ZLOAD) the packet's word in key passes, the
// bits of key XOR the word above ADDRESS's bound elsewhere, so that one
// compare tests every field. Uses Z5.
#define ZADDR(off, whole, key, t) \
	ZLOAD(off, Z5, Y5) \
	VPADDD	Z22, Z5, t \
	VPTERNLOGD	$0x14, whole, Z5, t \
	VPTERNLOGD	$0x06, key, Z5, t

// ZSCAN is CSCAN over both of a packet's compact blocks at once, tree 0's
// at AX and tree 1's at BX, on sixteen lanes of zmm registers (ZLOAD):
// the packet's lanes in Z0-Z3 and its flags in Z8 (ZLEAVES), its leaves'
// lanes in K2, laneEnt in Z9, all ones in Z22 (ZCONSTS). Each field's test
// leaves zero where it passes (ZADDR; the c word under its mask; the
// ports' difference XOR its minimum with the span, which is zero where
// the difference is at most the span), the four are ORed (VPTERNLOGD),
// and one compare takes the passing lanes to K1; CSCAN took four
// compares a block, each on the one port that writes masks. The passing
// lanes with a flag of the packet's go to K4, the others' entries to Z11
// (all ones elsewhere), whose two halves' minimum ends in Y11. Uses
// Z4-Z7, Z10, Z12, Z16-Z18, K1 and K3.
#define ZSCAN \
	ZLOAD(96, Z4, Y4) \
	VPSRAD	$31, Z4, Z7 \
	ZADDR(0, Z7, Z0, Z6) \
	ZDST(1) \
	VPSRLD	$const_cMasks, Z4, Z16 \
	VPTERNLOGD	$0x60, Z2, Z4, Z16 \
	ZLOAD(64, Z17, Y17) \
	VPSUBW	Z17, Z3, Z17 \
	ZLOAD(160, Z18, Y18) \
	VPMINUW	Z18, Z17, Z18 \
	VPTERNLOGD	$0xfe, Z16, Z10, Z6 \
	VPTERNLOGD	$0xf6, Z18, Z17, Z6 \
	VPTESTNMD	Z6, Z6, K2, K1 \
	ZLOAD(128, Z5, Y5) \
	ZFOLD(Z5)

// ZDST is the test of the destination address words (ZADDR at 32) of
// the blocks whose c or x words are in Z4, where the whole-word bit is
// bit 31-shift of those words: zero to Z10 where a lane passes.
#define ZDST(shift) \
	VPSLLD	$shift, Z4, Z7 \
	VPSRAD	$31, Z7, Z7 \
	ZADDR(32, Z7, Z1, Z10)

// ZFOLD is FOLD for the two-block scans: of the passing lanes in K1,
// those whose entry words (in e) have a flag of the packet's (Z8) go to
// K4, and the others' entries (under Z9) to Z11 (all ones elsewhere),
// whose two halves' minimum ends in Y11. Uses Y12 and K3.
#define ZFOLD(e) \
	VPTESTMD	Z8, e, K1, K4 \
	KANDNW	K1, K4, K3 \
	VMOVDQA32	Z22, Z11 \
	VPANDD	Z9, e, K3, Z11 \
	VEXTRACTI64X4	$1, Z11, Y12 \
	VPMINUD	Y12, Y11, Y11

// ZCONSTS widens PROLOGUE's laneEnt (Z9) and laneFull (Z13) to zmm
// registers and sets all ones in Z22.
#define ZCONSTS \
	VPBROADCASTD	X9, Z9 \
	VPBROADCASTD	X13, Z13 \
	VPTERNLOGD	$0xff, Z22, Z22, Z22

// zdecide is ZDECIDE's permutes' indices: the even lanes of two
// registers, their odd lanes, the first eight lanes of two registers
// interleaved and their last eight (32-bit lanes, the second register's
// numbered from 16), then 0 to 15.
DATA	zdecide<>+0(SB)/4, $0
DATA	zdecide<>+4(SB)/4, $2
DATA	zdecide<>+8(SB)/4, $4
DATA	zdecide<>+12(SB)/4, $6
DATA	zdecide<>+16(SB)/4, $8
DATA	zdecide<>+20(SB)/4, $10
DATA	zdecide<>+24(SB)/4, $12
DATA	zdecide<>+28(SB)/4, $14
DATA	zdecide<>+32(SB)/4, $16
DATA	zdecide<>+36(SB)/4, $18
DATA	zdecide<>+40(SB)/4, $20
DATA	zdecide<>+44(SB)/4, $22
DATA	zdecide<>+48(SB)/4, $24
DATA	zdecide<>+52(SB)/4, $26
DATA	zdecide<>+56(SB)/4, $28
DATA	zdecide<>+60(SB)/4, $30
DATA	zdecide<>+64(SB)/4, $1
DATA	zdecide<>+68(SB)/4, $3
DATA	zdecide<>+72(SB)/4, $5
DATA	zdecide<>+76(SB)/4, $7
DATA	zdecide<>+80(SB)/4, $9
DATA	zdecide<>+84(SB)/4, $11
DATA	zdecide<>+88(SB)/4, $13
DATA	zdecide<>+92(SB)/4, $15
DATA	zdecide<>+96(SB)/4, $17
DATA	zdecide<>+100(SB)/4, $19
DATA	zdecide<>+104(SB)/4, $21
DATA	zdecide<>+108(SB)/4, $23
DATA	zdecide<>+112(SB)/4, $25
DATA	zdecide<>+116(SB)/4, $27
DATA	zdecide<>+120(SB)/4, $29
DATA	zdecide<>+124(SB)/4, $31
DATA	zdecide<>+128(SB)/4, $0
DATA	zdecide<>+132(SB)/4, $16
DATA	zdecide<>+136(SB)/4, $1
DATA	zdecide<>+140(SB)/4, $17
DATA	zdecide<>+144(SB)/4, $2
DATA	zdecide<>+148(SB)/4, $18
DATA	zdecide<>+152(SB)/4, $3
DATA	zdecide<>+156(SB)/4, $19
DATA	zdecide<>+160(SB)/4, $4
DATA	zdecide<>+164(SB)/4, $20
DATA	zdecide<>+168(SB)/4, $5
DATA	zdecide<>+172(SB)/4, $21
DATA	zdecide<>+176(SB)/4, $6
DATA	zdecide<>+180(SB)/4, $22
DATA	zdecide<>+184(SB)/4, $7
DATA	zdecide<>+188(SB)/4, $23
DATA	zdecide<>+192(SB)/4, $8
DATA	zdecide<>+196(SB)/4, $24
DATA	zdecide<>+200(SB)/4, $9
DATA	zdecide<>+204(SB)/4, $25
DATA	zdecide<>+208(SB)/4, $10
DATA	zdecide<>+212(SB)/4, $26
DATA	zdecide<>+216(SB)/4, $11
DATA	zdecide<>+220(SB)/4, $27
DATA	zdecide<>+224(SB)/4, $12
DATA	zdecide<>+228(SB)/4, $28
DATA	zdecide<>+232(SB)/4, $13
DATA	zdecide<>+236(SB)/4, $29
DATA	zdecide<>+240(SB)/4, $14
DATA	zdecide<>+244(SB)/4, $30
DATA	zdecide<>+248(SB)/4, $15
DATA	zdecide<>+252(SB)/4, $31
DATA	zdecide<>+256(SB)/4, $0
DATA	zdecide<>+260(SB)/4, $1
DATA	zdecide<>+264(SB)/4, $2
DATA	zdecide<>+268(SB)/4, $3
DATA	zdecide<>+272(SB)/4, $4
DATA	zdecide<>+276(SB)/4, $5
DATA	zdecide<>+280(SB)/4, $6
DATA	zdecide<>+284(SB)/4, $7
DATA	zdecide<>+288(SB)/4, $8
DATA	zdecide<>+292(SB)/4, $9
DATA	zdecide<>+296(SB)/4, $10
DATA	zdecide<>+300(SB)/4, $11
DATA	zdecide<>+304(SB)/4, $12
DATA	zdecide<>+308(SB)/4, $13
DATA	zdecide<>+312(SB)/4, $14
DATA	zdecide<>+316(SB)/4, $15
GLOBL	zdecide<>(SB), RODATA|NOPTR, $320

// ZPAIR sets d to the minimum of each two neighbouring lanes of a and b,
// a's sixteen lanes then b's: a packet's run of lanes halves, in order.
// The even lanes' indices are in Z23, the odd lanes' in Z24. Uses Z10
// and Z12.
#define ZPAIR(a, b, d) \
	VMOVDQA32	Z23, Z10 \
	VPERMI2D	b, a, Z10 \
	VMOVDQA32	Z24, Z12 \
	VPERMI2D	b, a, Z12 \
	VPMINUD	Z12, Z10, d

// ZDECIDE is the end of the group scans (ZGROUP, and scanLanesC2's
// loop for a group in the cache): for the n packets in CX, sixteen at a
// time (R13 the first), each packet's best entry is the minimum of its
// four lanes in mins (ZPAIR twice), its lanes to check are in chk; res
// gets best | check<<32; a packet that is not IP (flags 0), whose leaf is
// longer than a block (laneLong, in Z10) or that listed finds to list
// (ZLISTC, ZLISTN: to K1) is listed in rest (VPCOMPRESSD, R12 the count),
// its out vrule's last; the others' out is the rule that rules finds for
// min(best, R11) (ZRULES, ZRULESI: to Z7, from Z6). Where the scans
// decided a packet at a time, each packet's best took a horizontal
// minimum (MINIMUM) and a branch or two, and its rule a load of its own.
// It writes nothing past the n packets (K7). Uses AX, BX, R13, Z4-Z7,
// Z10, Z12, Z23-Z29, K1-K3, K7, and what listed uses.
#define ZDECIDE(chunk, done, listed, rules) \
	TESTQ	CX, CX \
	JEQ	done \
	MOVQ	$zdecide<>(SB), AX \
	VMOVDQU32	(AX), Z23 \
	VMOVDQU32	64(AX), Z24 \
	VMOVDQU32	128(AX), Z25 \
	VMOVDQU32	192(AX), Z26 \
	VMOVDQU32	256(AX), Z27 \
	VPBROADCASTD	R11, Z28 \
	MOVL	$const_laneLong, AX \
	VPBROADCASTD	AX, Z29 \
	XORL	R13, R13 \
chunk: \
	MOVQ	CX, AX \
	SUBQ	R13, AX \
	MOVL	$0xffff, BX \
	BZHIL	AX, BX, BX \
	KMOVW	BX, K7 \
	MOVQ	R13, AX \
	SHLQ	$4, AX \
	VMOVDQU32	laneScratch_mins(R8)(AX*1), Z4 \
	VMOVDQU32	(laneScratch_mins+64)(R8)(AX*1), Z5 \
	VMOVDQU32	(laneScratch_mins+128)(R8)(AX*1), Z6 \
	VMOVDQU32	(laneScratch_mins+192)(R8)(AX*1), Z7 \
	ZPAIR(Z4, Z5, Z4) \
	ZPAIR(Z6, Z7, Z6) \
	ZPAIR(Z4, Z6, Z4) \
	VPMOVZXWD	laneScratch_chk(R8)(R13*2), Z5 \
	VMOVDQU32	laneScratch_flags(R8)(R13*4), Z6 \
	VPANDD	laneScratch_lanes(R8)(R13*4), Z29, Z10 \
	listed \
	VPTESTNMD	Z6, Z6, K7, K2 \
	KORW	K1, K2, K1 \
	VPMINUD	Z28, Z4, Z6 \
	VMOVDQA32	Z28, K1, Z6 \
	rules \
	VMOVDQU32	Z7, K7, (R9)(R13*4) \
	VMOVDQA32	Z25, Z10 \
	VPERMI2D	Z5, Z4, Z10 \
	VMOVDQA32	Z26, Z12 \
	VPERMI2D	Z5, Z4, Z12 \
	VMOVDQU64	Z10, K7, laneScratch_res(R8)(R13*8) \
	KSHIFTRW	$8, K7, K3 \
	VMOVDQU64	Z12, K3, (laneScratch_res+64)(R8)(R13*8) \
	VPBROADCASTD	R13, Z10 \
	VPADDD	Z27, Z10, Z10 \
	VPCOMPRESSD	Z10, K1, Z10 \
	KMOVW	K1, AX \
	POPCNTL	AX, AX \
	MOVL	$0xffff, BX \
	BZHIL	AX, BX, BX \
	KMOVW	BX, K3 \
	VPMOVDB	Z10, K3, laneScratch_rest(R8)(R12*1) \
	ADDQ	AX, R12 \
	ADDQ	$16, R13 \
	CMPQ	R13, CX \
	JB	chunk \
done:

// ZLISTC is ZDECIDE's listed for a scan that does not narrow: the
// packets with a long leaf (Z10) or lanes to check (Z5) to K1.
#define ZLISTC \
	VPORD	Z5, Z10, Z10 \
	VPTESTMD	Z10, Z10, K7, K1

// ZLISTN is ZDECIDE's listed for ZGROUP: the packets with a long leaf
// (Z10), or with lanes to check (Z5) one of which can lower the packet's
// best (USEFUL's test, where the scan narrows), to K1. Only the packets
// with lanes to check (a sixth of the fresh 5-tuples at 100k
// ClassBench-style rules) are tested, one at a time (cand): its two
// blocks (block: TBLOCK or CBLOCK, from its leaves in cur) reloaded,
// their entry words at off, its lanes to check whose words have a bit of
// Z13 (laneFull where the scan narrows, else all ones) and whose entry
// (under Z9) is below the threshold: the packet's best (in Z4) where the
// scan narrows (Z30 zero), else all ones (Z30), so that any lane to check
// lists it. The thresholds go to the first half of res' rows of the
// sixteen packets (those of the first eight: threshold j at dword j),
// which ZDECIDE writes after, none past the n packets (K4). Each
// packet's scan had kept the least entry of such lanes for the group's
// decision: seven vector instructions a packet, in a loop that keeps
// busy the two ports that take zmm instructions. Without them the scan
// took 0.93 of the time at 100k ClassBench-style rules (tight blocks)
// and 0.86-0.88 at 10k (compact blocks): the old stub and this one
// alternated 21 times in one process over 65,536 fresh 5-tuples after
// their keys and walks, thread CPU time, medians of the ratios, two
// runs. The labels are the expansion's. Uses AX, BX, DX, R14, Z12, Z14,
// Z15 and K3-K6.
#define ZLISTN(block, off, cand, next, skip) \
	VPTESTMD	Z10, Z10, K7, K1 \
	VPTESTMD	Z5, Z5, K7, K3 \
	KMOVW	K3, DX \
	TESTL	DX, DX \
	JEQ	skip \
	VPORD	Z30, Z4, Z14 \
	MOVQ	CX, BX \
	SUBQ	R13, BX \
	SHLQ	$1, BX \
	MOVL	$16, AX \
	CMPQ	BX, AX \
	CMOVQHI	AX, BX \
	MOVL	$0xffff, AX \
	BZHIL	BX, AX, AX \
	KMOVW	AX, K4 \
	VMOVDQU32	Z14, K4, laneScratch_res(R8)(R13*8) \
cand: \
	TZCNTL	DX, R14 \
	LEAQ	(R13)(R14*1), BX \
	MOVQ	laneScratch_cur(R8)(BX*8), AX \
	KMOVW	laneScratch_chk(R8)(BX*2), K5 \
	MOVQ	(laneScratch_cur+const_treeGroup*8)(R8)(BX*8), BX \
	block(AX, SI) \
	block(BX, DI) \
	VMOVDQU32	off(AX), Y12 \
	VINSERTI64X4	$1, off(BX), Z12, Z12 \
	LEAQ	(R14)(R13*2), BX \
	VPBROADCASTD	laneScratch_res(R8)(BX*4), Z15 \
	VPTESTMD	Z13, Z12, K5, K5 \
	VPANDD	Z9, Z12, Z12 \
	VPCMPUD	$1, Z15, Z12, K5, K5 \
	KORTESTW	K5, K5 \
	JEQ	next \
	MOVL	$1, BX \
	SHLXL	R14, BX, BX \
	KMOVW	BX, K6 \
	KORW	K6, K1, K1 \
next: \
	BLSRL	DX, DX \
	JNE	cand \
skip:

// ZRULES is ZDECIDE's rules for a set with a rule array (vrule at R10):
// the rules of the entries in Z6 gathered to Z7 (VPGATHERDD), sixteen
// where the scans loaded them one by one. Uses K2.
#define ZRULES \
	KMOVW	K7, K2 \
	VPGATHERDD	(R10)(Z6*4), K2, Z7

// ZRULESI is ZRULES where each rank is its rule (trees.tident): Z7 is
// Z6, and -1 where that is R11 (Z28), the last. Uses K2, and all ones in
// Z22.
#define ZRULESI \
	VPCMPEQD	Z28, Z6, K7, K2 \
	VMOVDQA32	Z6, Z7 \
	VMOVDQA32	Z22, K2, Z7

// ZKEEP ends a group scan's packet DX: the minimum of its scan (Y11,
// eight lanes) in four lanes to mins, its lanes to check (K4) to chk,
// for ZDECIDE. Sets AX to DX sixteen times. Uses X12.
#define ZKEEP \
	VEXTRACTI128	$1, Y11, X12 \
	VPMINUD	X12, X11, X11 \
	MOVQ	DX, AX \
	SHLQ	$4, AX \
	VMOVDQU	X11, laneScratch_mins(R8)(AX*1) \
	KMOVW	K4, laneScratch_chk(R8)(DX*2)

// ZNARROWS sets ZLISTN's constants for the argument narrow:
// laneFull to Z13 and zero to Z30 where it is true, all ones to both
// where it is false. Uses AX, BX and R13.
#define ZNARROWS \
	MOVL	$-1, BX \
	MOVL	$0x80000000, AX \
	XORL	R13, R13 \
	CMPB	narrow+120(FP), $0 \
	CMOVLEQ	BX, AX \
	CMOVLEQ	BX, R13 \
	VPBROADCASTD	AX, Z13 \
	VPBROADCASTD	R13, Z30

// ZGROUP is the loop of the group scans that prefetch or narrow, over
// the n packets in CX: first the blocks of the packets before the first
// that CAHEAD reaches (fetch: CFETCH or TFETCH), so that their misses
// overlap, then each packet's lanes and leaves (ZLEAVES), its two blocks
// (block: CBLOCK or TBLOCK) scanned (scan: ZSCAN, ZTSCAN or ZTSCAN6),
// and its minimum and lanes to check kept (ZKEEP) for ZDECIDE, which
// decides the group after it (ZLISTN narrowing). Where the scans narrowed and decided a packet at a
// time (NARROW, MINIMUM and a branch a packet), at 100k ClassBench-style
// rules the tight scan took 0.7 of the time (see scanLanesT2). The
// other arguments are the loop's labels.
#define ZGROUP(fetch, block, scan, head, loop, ahead, done) \
	TESTQ	CX, CX \
	JEQ	done \
	MOVQ	pfd+112(FP), R13 \
	CMPQ	R13, CX \
	CMOVQHI	CX, R13 \
	XORL	R14, R14 \
head: \
	CMPQ	R14, R13 \
	JAE	loop \
	fetch(R14) \
	INCQ	R14 \
	JMP	head \
loop: \
	CAHEAD(fetch, ahead) \
ahead: \
	ZLEAVES \
	block(AX, SI) \
	block(BX, DI) \
	scan \
	ZKEEP \
	INCQ	DX \
	CMPQ	DX, CX \
	JNE	loop \
done:

// ZEND ends a stub with ZDECIDE (its labels chunk and done) for the
// packets of a group scan: the listed count to rest.
#define ZEND(listed, rules, rest, chunk, done) \
	ZDECIDE(chunk, done, listed, rules) \
	MOVQ	R12, rest \
	VZEROUPPER \
	RET

// func scanLanesC2(s *laneScratch, b0, b1 []cblock, vrule, out []int32, n, pfd int) (rest int)
//
// scanLanes2 over compact blocks (scanLanesC2Go): packet i's lanes are
// s.sds[i], hiLane(s.keys[2][i]) and the low half of s.keys[2][i], its
// blocks the first of its leaves in b0 and b1, and it decides or lists
// packets as scanLanes2 does but for res's check, which narrowing leaves
// whole (cscan), both blocks in one scan (ZSCAN) and the group decided
// at the end (ZDECIDE). With pfd not 0 it first prefetches the blocks of
// packets 0 to pfd-1, then, at packet i, those of packet i+pfd (CAHEAD).
// It orders no memory.
TEXT ·scanLanesC2(SB), NOSPLIT, $0-136
	PROLOGUE
	ZCONSTS
	ZLANES(lanesC, chunkC)
	CMPB	narrow+120(FP), $0
	JNE	loopsC
	CMPQ	pfd+112(FP), $0
	JNE	loopsC
	// A set in the cache (no prefetch, no narrowing): each packet's
	// scan leaves its lanes' minimum, four lanes, in mins and its lanes
	// to check in chk, and ZDECIDE decides the group.
	TESTQ	CX, CX
	JEQ	decideC
cacheC:
	ZLEAVES
	CBLOCK(AX, SI)
	CBLOCK(BX, DI)
	ZSCAN
	ZKEEP
	INCQ	DX
	CMPQ	DX, CX
	JNE	cacheC
decideC:
	ZEND(ZLISTC, ZRULES, rest+128(FP), zchunkC, zdoneC)

loopsC:
	ZNARROWS
	ZGROUP(CFETCH, CBLOCK, ZSCAN, headC, loopC, aheadC, doneC)
	ZEND(ZLISTN(CBLOCK, 128, candC, nextC, skipC), ZRULES, rest+128(FP), nchunkC, ndoneC)

// func cleafScan2(key *[4]uint32, flags uint32, b0, b1 *cblock, lanes uint32) (best, check uint32)
//
// One packet's scan of two compact blocks (cleafScan2Go): CSCAN over b0
// and b1 with the packet's lanes from key, each block's leaf lanes a
// byte of lanes. It orders no memory.
TEXT ·cleafScan2(SB), NOSPLIT|NOFRAME, $0-48
	LEAFKEY
	MOVL	$0x3fffffff, AX
	VPBROADCASTD	AX, Y9
	CONSTS
	LEAFBLOCKS(lanes+32(FP))
	LEAFSCAN2(CSCAN, best+40(FP), check+44(FP))

// TSCAN is CSCAN for tight blocks (tblock), with the set's classes in
// Z24-Z27 (tclasses: the c words, then the source ports' ranges, sixteen
// to a register): a lane's class (x's bits 20-24) picks its c word and
// its source port's range with VPERMI2D over the two registers of each
// (TCLASS). The ports' low ends are then the range's top half beside y's
// bottom half (VPBLENDMW under K7, which holds the odd words), their
// spans the range's bottom half beside y's top half (VPSHLDD; TPORTS).
// The whole-word bits are x's bits 29 and 28, the ranks its bits 0-19
// (tEnt, in Y9). Uses Y4-Y7 and Y10.
#define TSCAN(p, m, k) \
	TCLASS(p, m) \
	TPORTS(p, k)

// TSCAN6 is TSCAN for sets whose lanes have IPv6 top bits in x (tTop, in
// Y14: the masks, which are the values too): TTOP puts them back into
// the lanes' c words at both places. Three instructions a block more,
// which cost the IPv4 sets at 100k ClassBench-style rules about 3 % of
// their time (in one process, alternated), hence two scans.
#define TSCAN6(p, m, k) \
	TCLASS(p, m) \
	TTOP \
	TPORTS(p, k)

// TCLASS is TSCAN's start: the lanes of mask m whose address words pass
// to K1, x to Y4, each lane's class's c word to Y5.
#define TCLASS(p, m) \
	VMOVDQU32	96(p), Y4 \
	VPSLLD	$2, Y4, Y7 \
	VPSRAD	$31, Y7, Y7 \
	ADDRESS(p, 0, Y7, Y0, m) \
	VPSLLD	$3, Y4, Y7 \
	VPSRAD	$31, Y7, Y7 \
	ADDRESS(p, 32, Y7, Y1, K1) \
	VPSRLD	$const_tClassShift, Y4, Y5 \
	VPERMI2D	Z25, Z24, Z5

// TTOP ORs x's top bits (Y4 under Y14) into the c words in Y5, as masks
// and, 16 bits down, as values. Uses Y6 and Y7.
#define TTOP \
	VPANDD	Y14, Y4, Y6 \
	VPSRLD	$const_cMasks, Y6, Y7 \
	VPTERNLOGD	$0xfe, Y6, Y7, Y5

// TPORTS is TSCAN's end: the c words in Y5 under their masks, the ports
// and FOLD into mask k.
#define TPORTS(p, k) \
	VPSRLD	$const_cMasks, Y5, Y6 \
	VPXORD	Y2, Y5, Y5 \
	VPTESTNMD	Y6, Y5, K1, K1 \
	VPSRLD	$const_tClassShift, Y4, Y6 \
	VPERMI2D	Z27, Z26, Z6 \
	VMOVDQU32	64(p), Y7 \
	VPBLENDMW	Y6, Y7, K7, Y10 \
	VPSHLDD	$16, Y7, Y6, Y6 \
	VPSUBW	Y10, Y3, Y5 \
	VPMINUW	Y6, Y5, Y6 \
	VPCMPEQD	Y6, Y5, K1, K1 \
	FOLD(Y4, k)

// ZTSCAN is TSCAN over both of a packet's tight blocks at once, as ZSCAN
// is CSCAN: tree 0's at AX and tree 1's at BX, on sixteen lanes of zmm
// registers (ZLOAD), the packet's lanes and leaves as ZSCAN's (ZLEAVES),
// the classes in Z24-Z27 and the odd words of the ports in K7
// (ZTCONSTS). A lane's class picks its c word and its source port's
// range, sixteen lanes to a permute (VPERMI2D over two registers, whose
// 32 entries are a set's classes); each field's test leaves zero where it
// passes, and one compare takes the passing lanes, as in ZSCAN. The
// minimum of the others' ranks is in Y11 (eight lanes), the passing
// lanes with a flag of the packet's in K4. Uses Z4-Z7, Z10-Z12, Z16-Z18, K1 and K3.
#define ZTSCAN \
	ZTCLASS \
	ZTPORTS

// ZTSCAN6 is ZTSCAN for sets whose lanes have IPv6 top bits (TSCAN6):
// ZTTOP puts them back into the c words. Uses Z14 (tTop) too.
#define ZTSCAN6 \
	ZTCLASS \
	ZTTOP \
	ZTPORTS

// ZTCLASS is ZTSCAN's start: the x words to Z4, the address words'
// tests ORed in Z6 and Z10 (ZADDR, the whole-word bits x's 29 and 28),
// each lane's class (x's bits 20-24, which VPERMI2D takes, ignoring the
// bits above) to Z17 and its c word to Z5.
#define ZTCLASS \
	ZLOAD(96, Z4, Y4) \
	VPSLLD	$2, Z4, Z7 \
	VPSRAD	$31, Z7, Z7 \
	ZADDR(0, Z7, Z0, Z6) \
	ZDST(3) \
	VPSRLD	$const_tClassShift, Z4, Z17 \
	VMOVDQA32	Z17, Z5 \
	VPERMI2D	Z25, Z24, Z5

// ZTTOP is TTOP for ZTSCAN6: x's top bits (Z4 under Z14) ORed into the
// c words in Z5, as masks and, 16 bits down, as values. Uses Z12 and
// Z16.
#define ZTTOP \
	VPANDD	Z14, Z4, Z12 \
	VPSRLD	$const_cMasks, Z12, Z16 \
	VPTERNLOGD	$0xfe, Z12, Z16, Z5

// ZTPORTS is ZTSCAN's end: the c word's test (its bits under its masks,
// XOR the packet's hiLane), the classes' source port ranges (Z26, Z27)
// and the lanes' destination port ranges (y, at 64) as TPORTS takes
// them (the low ends by VPBLENDMW under the odd words, the spans by
// VPSHLDD), their test as ZSCAN's, the four tests ORed, the passing
// lanes to K1, and ZFOLD over the x words.
#define ZTPORTS \
	VPSRLD	$const_cMasks, Z5, Z16 \
	VPTERNLOGD	$0x60, Z2, Z5, Z16 \
	VPERMI2D	Z27, Z26, Z17 \
	ZLOAD(64, Z7, Y7) \
	VPBLENDMW	Z17, Z7, K7, Z18 \
	VPSHLDD	$16, Z7, Z17, Z17 \
	VPSUBW	Z18, Z3, Z18 \
	VPMINUW	Z17, Z18, Z17 \
	VPTERNLOGD	$0xfe, Z16, Z10, Z6 \
	VPTERNLOGD	$0xf6, Z17, Z18, Z6 \
	VPTESTNMD	Z6, Z6, K2, K1 \
	ZFOLD(Z4)

// ZTCONSTS is TCONSTS for ZTSCAN: ZCONSTS after it (tEnt to Z9, all ones
// to Z22), tTop to Z14 and the odd words of a zmm register to K7.
#define ZTCONSTS(cl) \
	TCONSTS(cl) \
	ZCONSTS \
	VPBROADCASTD	X14, Z14 \
	MOVL	$0xaaaaaaaa, AX \
	KMOVD	AX, K7

// TBLOCK sets a to the tight block of the leaf word in a (its record
// index over eight, in the blocks from base on).
#define TBLOCK(a, base) \
	SHRL	$3, a \
	SHLQ	$7, a \
	ADDQ	base, a

// TFETCH is CFETCH for tight blocks: their two cache lines. Uses AX.
#define TFETCH(i) \
	MOVQ	laneScratch_cur(R8)(i*8), AX \
	TBLOCK(AX, SI) \
	PREFETCHT0	(AX) \
	PREFETCHT0	64(AX) \
	MOVQ	(laneScratch_cur+const_treeGroup*8)(R8)(i*8), AX \
	TBLOCK(AX, DI) \
	PREFETCHT0	(AX) \
	PREFETCHT0	64(AX)

// TCONSTS loads TSCAN's constants: the classes at cl to Z24-Z27, tEnt to
// Y9, the odd words' mask to K7, tTop to Y14, all ones to Y22. Uses AX.
#define TCONSTS(cl) \
	MOVQ	cl, AX \
	VMOVDQU32	(AX), Z24 \
	VMOVDQU32	64(AX), Z25 \
	VMOVDQU32	128(AX), Z26 \
	VMOVDQU32	192(AX), Z27 \
	MOVL	$const_tEnt, AX \
	VPBROADCASTD	AX, Y9 \
	MOVL	$0xaaaa, AX \
	KMOVW	AX, K7 \
	MOVL	$const_tTop, AX \
	VPBROADCASTD	AX, Y14 \
	CONSTS

// func scanLanesT2(s *laneScratch, b0, b1 []tblock, vrule, out []int32, n, pfd int, narrow bool, cl *tclasses) (rest int)
//
// scanLanesC2 over tight blocks (scanLanesT2Go), whose classes are cl.
// It orders no memory.
TEXT ·scanLanesT2(SB), NOSPLIT, $0-144
	PROLOGUE
	ZLANES(lanesT, chunkT)
	ZTCONSTS(cl+128(FP))
	ZNARROWS
	ZGROUP(TFETCH, TBLOCK, ZTSCAN, headT, loopT, aheadT, doneT)
	ZEND(ZLISTN(TBLOCK, 96, candT, nextT, skipT), ZRULES, rest+136(FP), dchunkT, ddoneT)

// func scanLanesT2I(s *laneScratch, b0, b1 []tblock, vrule, out []int32, n, pfd int, narrow bool, cl *tclasses) (rest int)
//
// scanLanesT2 for a set whose ranks are its rules (trees.tident): it
// reads no rule (ZRULESI), only vrule's length. It orders no memory.
TEXT ·scanLanesT2I(SB), NOSPLIT, $0-144
	PROLOGUE
	ZLANES(lanesI, chunkI)
	ZTCONSTS(cl+128(FP))
	ZNARROWS
	ZGROUP(TFETCH, TBLOCK, ZTSCAN, headI, loopI, aheadI, doneI)
	ZEND(ZLISTN(TBLOCK, 96, candI, nextI, skipI), ZRULESI, rest+136(FP), dchunkI, ddoneI)

// func tleafScan2(key *[4]uint32, flags uint32, b0, b1 *tblock, cl *tclasses, lanes uint32) (best, check uint32)
//
// cleafScan2 over tight blocks (tleafScan2Go). It orders no memory.
TEXT ·tleafScan2(SB), NOSPLIT|NOFRAME, $0-56
	LEAFKEY
	TCONSTS(cl+32(FP))
	LEAFBLOCKS(lanes+40(FP))
	LEAFSCAN2(TSCAN, best+48(FP), check+52(FP))

// func scanLanesT6(s *laneScratch, b0, b1 []tblock, vrule, out []int32, n, pfd int, narrow bool, cl *tclasses) (rest int)
//
// scanLanesT2 with TSCAN6 (trees.v6). It orders no memory.
TEXT ·scanLanesT6(SB), NOSPLIT, $0-144
	PROLOGUE
	ZLANES(lanes6, chunk6)
	ZTCONSTS(cl+128(FP))
	ZNARROWS
	ZGROUP(TFETCH, TBLOCK, ZTSCAN6, head6, loop6, ahead6, done6)
	ZEND(ZLISTN(TBLOCK, 96, cand6, next6, skip6), ZRULES, rest+136(FP), dchunk6, ddone6)

// func scanLanesT6I(s *laneScratch, b0, b1 []tblock, vrule, out []int32, n, pfd int, narrow bool, cl *tclasses) (rest int)
//
// scanLanesT2I with TSCAN6 (trees.v6). It orders no memory.
TEXT ·scanLanesT6I(SB), NOSPLIT, $0-144
	PROLOGUE
	ZLANES(lanes6I, chunk6I)
	ZTCONSTS(cl+128(FP))
	ZNARROWS
	ZGROUP(TFETCH, TBLOCK, ZTSCAN6, head6I, loop6I, ahead6I, done6I)
	ZEND(ZLISTN(TBLOCK, 96, cand6I, next6I, skip6I), ZRULESI, rest+136(FP), dchunk6I, ddone6I)

// func tleafScan6(key *[4]uint32, flags uint32, b0, b1 *tblock, cl *tclasses, lanes uint32) (best, check uint32)
//
// tleafScan2 with TSCAN6 (trees.v6). It orders no memory.
TEXT ·tleafScan6(SB), NOSPLIT|NOFRAME, $0-56
	LEAFKEY
	TCONSTS(cl+32(FP))
	LEAFBLOCKS(lanes+40(FP))
	LEAFSCAN2(TSCAN6, best+48(FP), check+52(FP))

// func laneKeys8(fs *rule.Fields, n int, s *laneScratch, ports *[4]uint64) (ip int)
//
// laneKeysGo for sets without IPv6 top bits, eight packets at a time:
// four gathers (VPGATHERQQ) load the packets' first word, ports word and
// the addresses' high words (rule.Fields at const_fieldsSize bytes, as
// fieldsAsKeys checks), and masked stores leave the lanes past n as they
// are. ports holds portProtos as bits (bit p of word p/64). It orders no
// memory.
TEXT ·laneKeys8(SB), NOSPLIT, $0-40
	MOVQ	fs+0(FP), AX
	MOVQ	n+8(FP), CX
	MOVQ	s+16(FP), DI
	MOVQ	ports+24(FP), DX
	XORQ	R8, R8
	XORQ	R9, R9
	TESTQ	CX, CX
	JLE	keysdone
	// Z20: each lane's offset, lane*const_fieldsSize.
	MOVQ	$0x0706050403020100, R10
	VMOVQ	R10, X20
	VPMOVZXBQ	X20, Z20
	MOVQ	$const_fieldsSize, R10
	VPBROADCASTQ	R10, Z21
	VPMULUDQ	Z21, Z20, Z20
	MOVQ	$1, R10
	VPBROADCASTQ	R10, Z22
	MOVQ	$0xffffffff00000000, R10
	VPBROADCASTQ	R10, Z23
	VMOVDQU64	(DX), Y24
	MOVQ	$63, R10
	VPBROADCASTQ	R10, Z25
	MOVQ	$0xff, R10
	VPBROADCASTQ	R10, Z26
	MOVQ	$(const_laneFull|const_lanePorts), R10
	VPBROADCASTQ	R10, Z27
	MOVQ	$0xffff, R10
	VPBROADCASTQ	R10, Z28

keysloop:
	// K7: the chunk's lanes below n.
	MOVQ	CX, R10
	SUBQ	R8, R10
	MOVL	$0xff, R11
	BZHIL	R10, R11, R11
	KMOVW	R11, K7
	KMOVW	K7, K1
	VPGATHERQQ	(AX)(Z20*1), K1, Z0
	KMOVW	K7, K1
	VPGATHERQQ	const_fieldsPorts(AX)(Z20*1), K1, Z1
	KMOVW	K7, K1
	VPGATHERQQ	const_fieldsSrc(AX)(Z20*1), K1, Z2
	KMOVW	K7, K1
	VPGATHERQQ	const_fieldsDst(AX)(Z20*1), K1, Z3

	// miscWord: Family<<40 | Proto<<32 | SrcPort<<16 | DstPort.
	VPANDQ	Z26, Z0, Z4
	VPSLLQ	$40, Z4, Z4
	VPSRLQ	$8, Z0, Z5
	VPANDQ	Z26, Z5, Z5
	VPSLLQ	$32, Z5, Z6
	VPORQ	Z6, Z4, Z4
	VPANDQ	Z28, Z1, Z6
	VPSLLQ	$16, Z6, Z6
	VPORQ	Z6, Z4, Z4
	VPSRLQ	$16, Z1, Z6
	VPANDQ	Z28, Z6, Z6
	VPORQ	Z6, Z4, Z4

	// scanSD: sh is 32 times Family's bit 1.
	VPSRLQ	$1, Z0, Z6
	VPANDQ	Z22, Z6, Z6
	VPSLLQ	$5, Z6, Z6
	VPSLLVQ	Z6, Z2, Z7
	VPANDQ	Z23, Z7, Z7
	VPSLLVQ	Z6, Z3, Z8
	VPSRLQ	$32, Z8, Z8
	VPORQ	Z8, Z7, Z7

	// laneFlags: laneFull, and lanePorts unless portProtos[Proto] and
	// L4; 0 where Family is 0 (K2: the lanes where it is not).
	VPSRLQ	$6, Z5, Z8
	VPERMQ	Z24, Z8, Z8
	VPANDQ	Z25, Z5, Z9
	VPSRLVQ	Z9, Z8, Z8
	VPSRLQ	$16, Z0, Z9
	VPANDQ	Z9, Z8, Z8
	VPANDQ	Z22, Z8, Z8
	VPSLLQ	$30, Z8, Z8
	VPXORQ	Z27, Z8, Z8
	VPTESTMQ	Z26, Z0, K7, K2
	VPXORQ	Z9, Z9, Z9
	VMOVDQA64	Z8, K2, Z9

	VMOVDQU64	Z2, K7, laneScratch_keys(DI)(R8*8)
	VMOVDQU64	Z3, K7, (laneScratch_keys+const_treeGroup*8)(DI)(R8*8)
	VMOVDQU64	Z4, K7, (laneScratch_keys+const_treeGroup*16)(DI)(R8*8)
	VMOVDQU64	Z7, K7, laneScratch_sds(DI)(R8*8)
	VPMOVQD	Z9, K7, laneScratch_flags(DI)(R8*4)
	KMOVW	K2, R11
	POPCNTL	R11, R11
	ADDQ	R11, R9

	ADDQ	$8, R8
	ADDQ	$(8*const_fieldsSize), AX
	CMPQ	R8, CX
	JLT	keysloop
	VZEROUPPER

keysdone:
	MOVQ	R9, ip+32(FP)
	RET
