//go:build !purego

#include "textflag.h"

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
	MOVQ	$0x8000000000000000, AX
	VPBROADCASTQ	AX, Z16
	MOVQ	$1, AX
	VPBROADCASTQ	AX, Z17
	MOVQ	$2, AX
	VPBROADCASTQ	AX, Z18
	MOVQ	$3, AX
	VPBROADCASTQ	AX, Z19
	MOVQ	$63, AX
	VPBROADCASTQ	AX, Z20
	MOVQ	$0xffff, AX
	VPBROADCASTQ	AX, Z21
	MOVQ	$0xffffffff, AX
	VPBROADCASTQ	AX, Z22

level:
	XORL	R11, R11
	XORL	R8, R8
	MOVQ	CX, R9

chunk:
	VMOVDQU64	(DI)(R8*1), Z3
	VPTESTNMQ	Z16, Z3, K1
	KORTESTW	K1, K1
	JEQ	next
	MOVL	$1, R11
	VPSRLQ	$56, Z3, Z4
	VPANDQ	Z19, Z4, Z4
	VMOVDQU64	(DX)(R8*1), Z5
	VPCMPEQQ	Z17, Z4, K2
	VMOVDQU64	1024(DX)(R8*1), K2, Z5
	VPCMPEQQ	Z18, Z4, K3
	VMOVDQU64	2048(DX)(R8*1), K3, Z5
	VPSRLQ	$48, Z3, Z6
	VPANDQ	Z20, Z6, Z6
	VPSRLVQ	Z6, Z5, Z5
	VPSRLQ	$32, Z3, Z7
	VPANDQ	Z21, Z7, Z7
	VPANDQ	Z7, Z5, Z5
	VPANDQ	Z22, Z3, Z8
	VPADDQ	Z8, Z5, Z5
	VPGATHERQQ	(SI)(Z5*8), K1, Z3
	VMOVDQU64	Z3, (DI)(R8*1)

next:
	ADDQ	$64, R8
	DECQ	R9
	JNE	chunk
	TESTL	R11, R11
	JNE	level

done:
	VZEROUPPER
	RET

// SCAN tests the block at p (sblock) against the packet's lanes in Y0-Y3
// with flags in Y8 and laneEnt in Y9: K1 gets the passing lanes, the
// passing lanes with a flag go to r, and the entries of the others are
// folded into the minimum in Y11 (under mask K3).
#define SCAN(p, r) \
	VPANDD	128(p), Y0, Y4 \
	VPCMPEQD	(p), Y4, K1 \
	VPANDD	160(p), Y1, Y5 \
	VPCMPEQD	32(p), Y5, K1, K1 \
	VPANDD	192(p), Y2, Y6 \
	VPCMPEQD	64(p), Y6, K1, K1 \
	VPANDD	224(p), Y3, Y7 \
	VPCMPEQD	96(p), Y7, K1, K1 \
	VMOVDQU32	256(p), Y5 \
	VPTESTMD	Y8, Y5, K1, K2 \
	KANDNW	K1, K2, K3 \
	VPANDD	Y9, Y5, Y5 \
	VPMINUD	Y5, Y11, K3, Y11 \
	KMOVW	K2, r

// func scanLanes2(b0, b1 []sblock, cur0, cur1, sds, misc *[treeGroup]uint64, flags *[treeGroup]uint32, res *[treeGroup]uint64, n int)
//
// leafScan2 for n packets, one after the other, without a call or the
// constants' setup between them, res[i] = best | check<<32: packet i's blocks are the first of its
// leaves cur0[i] and cur1[i] (leaf words: the block index is the record
// index over eight) in the blocks from b0 and b1 on. Eight 32-bit lanes
// (AVX-512VL's masked compares on ymm registers) a block; the masks fold
// the four lanes' checks, so a block costs two instructions a lane word
// and four more. It orders no memory.
TEXT ·scanLanes2(SB), NOSPLIT, $0-104
	MOVQ	b0_base+0(FP), SI
	MOVQ	b1_base+24(FP), DI
	MOVQ	cur0+48(FP), R8
	MOVQ	cur1+56(FP), R9
	MOVQ	sds+64(FP), R10
	MOVQ	misc+72(FP), R11
	MOVQ	flags+80(FP), R12
	MOVQ	res+88(FP), R13
	MOVQ	n+96(FP), CX
	TESTQ	CX, CX
	JEQ	done
	MOVL	$0x3fffffff, AX
	VPBROADCASTD	AX, Y9
	XORL	DX, DX

loop:
	MOVL	(R8)(DX*8), AX
	SHRL	$3, AX
	IMUL3Q	$288, AX, AX
	ADDQ	SI, AX
	MOVL	(R9)(DX*8), BX
	SHRL	$3, BX
	IMUL3Q	$288, BX, BX
	ADDQ	DI, BX
	VPBROADCASTD	4(R10)(DX*8), Y0
	VPBROADCASTD	(R10)(DX*8), Y1
	VPBROADCASTD	4(R11)(DX*8), Y2
	VPBROADCASTD	(R11)(DX*8), Y3
	VPBROADCASTD	(R12)(DX*4), Y8
	VPTERNLOGD	$0xff, Y11, Y11, Y11
	SCAN(AX, R14)
	SCAN(BX, AX)
	SHLQ	$40, AX
	SHLQ	$32, R14
	ORQ	R14, AX
	VEXTRACTI128	$1, Y11, X12
	VPMINUD	X12, X11, X11
	VPSHUFD	$0x4e, X11, X12
	VPMINUD	X12, X11, X11
	VPSHUFD	$0xb1, X11, X12
	VPMINUD	X12, X11, X11
	VMOVD	X11, BX
	ORQ	BX, AX
	MOVQ	AX, (R13)(DX*8)
	INCQ	DX
	CMPQ	DX, CX
	JNE	loop

done:
	VZEROUPPER
	RET

// SCANK is SCAN that leaves the passing lanes with a flag in mask k.
#define SCANK(p, k) \
	VPANDD	128(p), Y0, Y4 \
	VPCMPEQD	(p), Y4, K1 \
	VPANDD	160(p), Y1, Y5 \
	VPCMPEQD	32(p), Y5, K1, K1 \
	VPANDD	192(p), Y2, Y6 \
	VPCMPEQD	64(p), Y6, K1, K1 \
	VPANDD	224(p), Y3, Y7 \
	VPCMPEQD	96(p), Y7, K1, K1 \
	VMOVDQU32	256(p), Y5 \
	VPTESTMD	Y8, Y5, K1, k \
	KANDNW	K1, k, K3 \
	VPANDD	Y9, Y5, Y5 \
	VPMINUD	Y5, Y11, K3, Y11

// LEAF sets a to the first block of the leaf word at m (its record index
// over eight, in the blocks from base on) and b to the one after it when
// the leaf holds more than eight records, else to base (block 0, which
// never passes).
#define LEAF(m, base, a, b) \
	MOVQ	m, b \
	MOVL	b, a \
	SHRL	$3, a \
	IMUL3Q	$288, a, a \
	ADDQ	base, a \
	SHRQ	$32, b \
	ANDL	$0xffffff, b \
	CMPL	b, $8 \
	LEAQ	288(a), b \
	CMOVQLS	base, b

// func scanLanes4(b0, b1 []sblock, cur0, cur1, sds, misc *[treeGroup]uint64, flags *[treeGroup]uint32, res *[treeGroup]uint64, n int)
//
// scanLanes2 over the first two blocks of each leaf: res[i] = best |
// check<<32, check bit 8k+j for lane j of block k, the blocks in the
// order first and second of cur0[i]'s leaf, then of cur1[i]'s. A leaf of
// eight records or fewer has block 0 for its second.
TEXT ·scanLanes4(SB), NOSPLIT, $0-104
	MOVQ	b0_base+0(FP), SI
	MOVQ	b1_base+24(FP), DI
	MOVQ	cur0+48(FP), R8
	MOVQ	cur1+56(FP), R9
	MOVQ	sds+64(FP), R10
	MOVQ	misc+72(FP), R11
	MOVQ	flags+80(FP), R12
	MOVQ	res+88(FP), R13
	MOVQ	n+96(FP), CX
	TESTQ	CX, CX
	JEQ	done4
	MOVL	$0x3fffffff, AX
	VPBROADCASTD	AX, Y9
	XORL	DX, DX

loop4:
	VPBROADCASTD	4(R10)(DX*8), Y0
	VPBROADCASTD	(R10)(DX*8), Y1
	VPBROADCASTD	4(R11)(DX*8), Y2
	VPBROADCASTD	(R11)(DX*8), Y3
	VPBROADCASTD	(R12)(DX*4), Y8
	VPTERNLOGD	$0xff, Y11, Y11, Y11
	LEAF((R8)(DX*8), SI, R14, AX)
	SCANK(R14, K4)
	SCANK(AX, K5)
	LEAF((R9)(DX*8), DI, R14, AX)
	SCANK(R14, K6)
	SCANK(AX, K7)
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
	SHLQ	$32, AX
	VEXTRACTI128	$1, Y11, X12
	VPMINUD	X12, X11, X11
	VPSHUFD	$0x4e, X11, X12
	VPMINUD	X12, X11, X11
	VPSHUFD	$0xb1, X11, X12
	VPMINUD	X12, X11, X11
	VMOVD	X11, R14
	ORQ	R14, AX
	MOVQ	AX, (R13)(DX*8)
	INCQ	DX
	CMPQ	DX, CX
	JNE	loop4

done4:
	VZEROUPPER
	RET
