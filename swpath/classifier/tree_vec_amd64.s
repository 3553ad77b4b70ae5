//go:build !purego

#include "textflag.h"
#include "vecmin_amd64.h"

// BLOCK tests the block at p (sblock: values at 0, 32, 64, 96, masks at
// 128-224, lane entries and flags at 256) against the packet's lanes in
// Y0-Y3 (source, destination, misc high and low words), with the flags in
// Y8, laneEnt in Y9 and all ones in Y10. It folds the entries of passing
// lanes without a flag into the minimum in Y11 and sets r to the passing
// lanes with a flag.
#define BLOCK(p, r) \
	VPAND	128(p), Y0, Y4 \
	VPCMPEQD	(p), Y4, Y4 \
	VPAND	160(p), Y1, Y5 \
	VPCMPEQD	32(p), Y5, Y5 \
	VPAND	192(p), Y2, Y6 \
	VPCMPEQD	64(p), Y6, Y6 \
	VPAND	224(p), Y3, Y7 \
	VPCMPEQD	96(p), Y7, Y7 \
	VPAND	Y5, Y4, Y4 \
	VPAND	Y7, Y6, Y6 \
	VPAND	Y6, Y4, Y4 \
	VMOVDQU	256(p), Y5 \
	VPAND	Y8, Y5, Y6 \
	VPXOR	Y7, Y7, Y7 \
	VPCMPEQD	Y7, Y6, Y6 \
	VPANDN	Y4, Y6, Y7 \
	VMOVMSKPS	Y7, r \
	VPAND	Y6, Y4, Y4 \
	VPAND	Y9, Y5, Y5 \
	VPXOR	Y10, Y4, Y4 \
	VPOR	Y4, Y5, Y5 \
	VPMINUD	Y5, Y11, Y11

// LANES loads the packet's lanes from the arguments sd, misc and flags
// (leafScan4's and leafScan2's first three) into Y0-Y3 and Y8, laneEnt
// into Y9, all ones into Y10, and the minimum's start (all ones) into
// Y11. Uses AX and BX. VMOVQ, not MOVQ: a legacy SSE MOVQ after the first
// VPBROADCASTD is an SSE instruction with the upper halves dirty, which
// cost about 200 ns each on an Intel Xeon under KVM (TestStubsVEX).
#define LANES \
	MOVQ	sd+0(FP), AX \
	MOVQ	misc+8(FP), BX \
	VMOVQ	AX, X1 \
	VPBROADCASTD	X1, Y1 \
	SHRQ	$32, AX \
	VMOVQ	AX, X0 \
	VPBROADCASTD	X0, Y0 \
	VMOVQ	BX, X3 \
	VPBROADCASTD	X3, Y3 \
	SHRQ	$32, BX \
	VMOVQ	BX, X2 \
	VPBROADCASTD	X2, Y2 \
	MOVL	flags+16(FP), AX \
	VMOVQ	AX, X8 \
	VPBROADCASTD	X8, Y8 \
	MOVL	$0x3fffffff, AX \
	VMOVQ	AX, X9 \
	VPBROADCASTD	X9, Y9 \
	VPCMPEQD	Y10, Y10, Y10 \
	VMOVDQU	Y10, Y11

// func leafScan4(sd, misc uint64, flags uint32, b0, b1, b2, b3 *sblock) (best, check uint32)
TEXT ·leafScan4(SB), NOSPLIT|NOFRAME, $0-64
	LANES
	MOVQ	b0+24(FP), SI
	MOVQ	b1+32(FP), DI
	MOVQ	b2+40(FP), R8
	MOVQ	b3+48(FP), R9
	BLOCK(SI, AX)
	BLOCK(DI, BX)
	BLOCK(R8, CX)
	BLOCK(R9, DX)
	MINIMUM(R10)
	VZEROUPPER
	SHLL	$8, BX
	SHLL	$16, CX
	SHLL	$24, DX
	ORL	BX, AX
	ORL	DX, CX
	ORL	CX, AX
	MOVL	R10, best+56(FP)
	MOVL	AX, check+60(FP)
	RET

// func leafScan2(sd, misc uint64, flags uint32, b0, b1 *sblock) (best, check uint32)
TEXT ·leafScan2(SB), NOSPLIT|NOFRAME, $0-48
	LANES
	MOVQ	b0+24(FP), SI
	MOVQ	b1+32(FP), DI
	BLOCK(SI, AX)
	BLOCK(DI, BX)
	MINIMUM(R10)
	VZEROUPPER
	SHLL	$8, BX
	ORL	BX, AX
	MOVL	R10, best+40(FP)
	MOVL	AX, check+44(FP)
	RET
