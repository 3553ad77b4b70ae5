//go:build !purego

#include "textflag.h"

// The walks of two trees four lanes to an instruction with AVX2's 64-bit
// lanes (walkQuads2, walkQuads2d; tree_quads_amd64.go). A level steps,
// in each tree, the chunks of four lanes that have a lane not yet at a
// leaf, listed in a mask of one bit a chunk (32 chunks of a group of
// 128), taken lowest bit first (TZCNT, BLSR): a chunk's step loads its
// node words, picks each lane's key word from the three (two compares,
// two blends), shifts it right (VPSRLVQ), masks it, adds the first
// child, and gathers the children under the mask of the lanes whose word
// is not a leaf (its sign bit clear), so that a leaf lane keeps its word.

// quadConsts holds, as 64-bit words, 1, 2 and 3 (key word numbers), 63
// (a shift's bits), then per node word size the mask that its step
// takes and the first child's: for 8-byte words 0xffff and 0xffffffff,
// for 4-byte words 15 (the cut's bits less one) and 0x7ffff.
DATA quadConsts<>+0(SB)/8, $1
DATA quadConsts<>+8(SB)/8, $2
DATA quadConsts<>+16(SB)/8, $3
DATA quadConsts<>+24(SB)/8, $63
DATA quadConsts<>+32(SB)/8, $0xffff
DATA quadConsts<>+40(SB)/8, $0xffffffff
DATA quadConsts<>+48(SB)/8, $15
DATA quadConsts<>+56(SB)/8, $0x7ffff
GLOBL quadConsts<>(SB), RODATA|NOPTR, $64

// QCONSTS loads 1, 2, 3 and 63 into Y8-Y11, the step's masks (at off in
// quadConsts) into Y12 and Y13, and all ones into Y14.
#define QCONSTS(off) \
	VPBROADCASTQ	quadConsts<>+0(SB), Y8 \
	VPBROADCASTQ	quadConsts<>+8(SB), Y9 \
	VPBROADCASTQ	quadConsts<>+16(SB), Y10 \
	VPBROADCASTQ	quadConsts<>+24(SB), Y11 \
	VPBROADCASTQ	quadConsts<>+off(SB), Y12 \
	VPBROADCASTQ	quadConsts<>+off+8(SB), Y13 \
	VPCMPEQQ	Y14, Y14, Y14

// QKEY sets Y3 to the key words of lanes AX to AX+3 (keys at DX: word 0
// at 0, 1 at 1024, 2 at 2048) that the key word numbers in Y2 name.
// Uses Y4 and Y6.
#define QKEY \
	VMOVDQU	(DX)(AX*8), Y3 \
	VMOVDQU	1024(DX)(AX*8), Y4 \
	VPCMPEQQ	Y8, Y2, Y6 \
	VPBLENDVB	Y6, Y4, Y3, Y3 \
	VMOVDQU	2048(DX)(AX*8), Y4 \
	VPCMPEQQ	Y9, Y2, Y6 \
	VPBLENDVB	Y6, Y4, Y3, Y3

// QSTEP steps lanes AX to AX+3 of the tree whose 8-byte node words are
// at nodes and whose lanes' words are at off(R8): key word bits 56-57,
// shift 48-53, child mask 32-47, first child 0-31, leaf bit 63. It sets
// R9 to the lanes at a leaf after the step (bit j for lane AX+j).
#define QSTEP(nodes, off) \
	VMOVDQU	off(R8)(AX*8), Y0 \
	VPSRLQ	$56, Y0, Y2 \
	VPAND	Y10, Y2, Y2 \
	QKEY \
	VPSRLQ	$48, Y0, Y2 \
	VPAND	Y11, Y2, Y2 \
	VPSRLVQ	Y2, Y3, Y3 \
	VPSRLQ	$32, Y0, Y2 \
	VPAND	Y12, Y2, Y2 \
	VPAND	Y2, Y3, Y3 \
	VPAND	Y13, Y0, Y2 \
	VPADDQ	Y2, Y3, Y3 \
	VPXOR	Y14, Y0, Y6 \
	VPGATHERQQ	Y6, (nodes)(Y3*8), Y0 \
	VMOVDQU	Y0, off(R8)(AX*8) \
	VMOVMSKPD	Y0, R9

// QSTEPD is QSTEP over 4-byte node words (node32): the lanes' words at
// off(R10), key word bits 29-30, shift 23-28, the cut's bits less one
// 19-22 (mask (2 << k) - 1), first child 0-18, leaf bit 31.
#define QSTEPD(nodes, off) \
	VMOVDQU	off(R10)(AX*4), X0 \
	VPMOVZXDQ	X0, Y1 \
	VPSRLQ	$29, Y1, Y2 \
	VPAND	Y10, Y2, Y2 \
	QKEY \
	VPSRLQ	$23, Y1, Y2 \
	VPAND	Y11, Y2, Y2 \
	VPSRLVQ	Y2, Y3, Y3 \
	VPSRLQ	$19, Y1, Y2 \
	VPAND	Y12, Y2, Y2 \
	VPSLLVQ	Y2, Y9, Y2 \
	VPSUBQ	Y8, Y2, Y2 \
	VPAND	Y2, Y3, Y3 \
	VPAND	Y13, Y1, Y2 \
	VPADDQ	Y2, Y3, Y3 \
	VPXOR	X14, X0, X6 \
	VPGATHERQD	X6, (nodes)(Y3*4), X0 \
	VMOVDQU	X0, off(R10)(AX*4) \
	VMOVMSKPS	X0, R9

// QLEVEL steps the chunks of mask m of one tree with step (QSTEP or
// QSTEPD over nodes and off), and leaves in m those with a lane still
// not at a leaf. Uses AX, BX, R9, R13 and R14.
#define QLEVEL(m, step, nodes, off, lbl, done) \
	XORL	R13, R13 \
	MOVQ	m, R14 \
lbl: \
	TESTQ	R14, R14 \
	JEQ	done \
	TZCNTQ	R14, BX \
	BLSRQ	R14, R14 \
	MOVQ	BX, AX \
	SHLQ	$2, AX \
	step(nodes, off) \
	CMPL	R9, $15 \
	JEQ	lbl \
	BTSQ	BX, R13 \
	JMP	lbl \
done: \
	MOVQ	R13, m

// QWALK walks both trees (nodes at SI and DI) with step (QSTEP or
// QSTEPD; tree 1's lanes at off1) until neither has a chunk in its mask
// (R11, R12), and returns.
#define QWALK(step, off1, level, c0, d0, c1, d1, done) \
level: \
	MOVQ	R11, AX \
	ORQ	R12, AX \
	JEQ	done \
	QLEVEL(R11, step, SI, 0, c0, d0) \
	QLEVEL(R12, step, DI, off1, c1, d1) \
	JMP	level \
done: \
	VZEROUPPER \
	RET

// QMASKS sets R11 and R12, the chunk masks of trees 0 and 1, to the
// chunks of the CX lanes (a multiple of eight). A tree whose root is a
// leaf takes one step that gathers nothing. Uses BX.
#define QMASKS \
	MOVQ	CX, BX \
	SHRQ	$2, BX \
	MOVL	$1, R11 \
	SHLXQ	BX, R11, R11 \
	DECQ	R11 \
	MOVQ	R11, R12

// QFILL stores the roots r0 and r1 (four lanes each, elements of sz
// bytes) to the CX lanes of tree 0 at base and of tree 1 at off1(base),
// where the walk starts. Uses AX.
#define QFILL(r0, r1, base, sz, off1, lbl, done) \
	XORL	AX, AX \
lbl: \
	CMPQ	AX, CX \
	JGE	done \
	VMOVDQU	r0, (base)(AX*sz) \
	VMOVDQU	r1, off1(base)(AX*sz) \
	ADDQ	$4, AX \
	JMP	lbl \
done:

// func walkQuads2(nodes0 *uint64, root0 uint64, nodes1 *uint64, root1 uint64, keys *[3][treeGroup]uint64, cur *[2][treeGroup]uint64, n int)
TEXT ·walkQuads2(SB), NOSPLIT|NOFRAME, $0-56
	MOVQ	nodes0+0(FP), SI
	MOVQ	root0+8(FP), R9
	MOVQ	nodes1+16(FP), DI
	MOVQ	root1+24(FP), R10
	MOVQ	keys+32(FP), DX
	MOVQ	cur+40(FP), R8
	MOVQ	n+48(FP), CX
	ADDQ	$7, CX
	ANDQ	$-8, CX
	QCONSTS(32)
	VMOVQ	R9, X0
	VPBROADCASTQ	X0, Y0
	VMOVQ	R10, X1
	VPBROADCASTQ	X1, Y1
	QFILL(Y0, Y1, R8, 8, 1024, init, inited)
	QMASKS
	QWALK(QSTEP, 1024, level, chunk0, done0, chunk1, done1, done)

// func walkQuads2d(nodes0 *uint32, root0 uint32, nodes1 *uint32, root1 uint32, keys *[3][treeGroup]uint64, w *[2][treeGroup]uint32, n int)
TEXT ·walkQuads2d(SB), NOSPLIT|NOFRAME, $0-56
	MOVQ	nodes0+0(FP), SI
	MOVL	root0+8(FP), R9
	MOVQ	nodes1+16(FP), DI
	MOVL	root1+24(FP), R10
	MOVQ	keys+32(FP), DX
	MOVQ	n+48(FP), CX
	ADDQ	$7, CX
	ANDQ	$-8, CX
	QCONSTS(48)
	VMOVD	R9, X0
	VPBROADCASTD	X0, X0
	VMOVD	R10, X1
	VPBROADCASTD	X1, X1
	QMASKS
	MOVQ	w+40(FP), R10
	QFILL(X0, X1, R10, 4, 512, initd, walkd)
	QWALK(QSTEPD, 512, levelD, chunkD0, doneD0, chunkD1, doneD1, doneD)
