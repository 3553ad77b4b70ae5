//go:build !purego

#include "textflag.h"
#include "go_asm.h"
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
	SCANCONSTS

// SCANCONSTS loads laneEnt into Y9, all ones into Y10, and the minimum's
// start (all ones) into Y11: BLOCK's and CBLK's constants. Uses AX.
#define SCANCONSTS \
	MOVL	$0x3fffffff, AX \
	VMOVQ	AX, X9 \
	VPBROADCASTD	X9, Y9 \
	VPCMPEQD	Y10, Y10, Y10 \
	VMOVDQU	Y10, Y11

// SCANEND2 ends the scans of two blocks (leafScan2, cblockScan2), whose
// passing lanes with a flag are in AX and BX and whose minimum is in Y11:
// the best entry to best+40(FP), the lanes to check to check+44(FP).
#define SCANEND2 \
	MINIMUM(R10) \
	VZEROUPPER \
	SHLL	$8, BX \
	ORL	BX, AX \
	MOVL	R10, best+40(FP) \
	MOVL	AX, check+44(FP) \
	RET

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
	SCANEND2

// CBLK tests the compact block at p (cblock: source words at 0,
// destination words at 32, ports' low ends at 64, c words at 96, entries
// at 128, ports' spans at 160) against the packet's lanes in Y0-Y3
// (cblockKey), under the leaf's lanes in Y12 (all ones where a lane is
// the leaf's), with the flags in Y8, laneEnt in Y9, all ones in Y10 and
// zero in Y15: CSCAN of tree_lanes_amd64.s in AVX2, which has no mask
// registers and no unsigned compare. An address word passes where the
// packet's word XOR it is at most its bound (the marker bit and the bits
// below, zero for a whole word), which is where the unsigned minimum of
// the two is the XOR; the c word under its masks (the word shifted right
// by cMasks) where the XOR with hiLane is zero; each port where its
// difference with the low end, in 16-bit arithmetic, is at most the span
// (VPMINUW). It folds the entries of passing lanes without a flag into
// the minimum in Y11 and sets r to the passing lanes with a flag. Uses
// Y4-Y7, Y13 and Y14.
#define CBLK(p, r) \
	VMOVDQU	96(p), Y4 \
	VPSRAD	$31, Y4, Y7 \
	VMOVDQU	(p), Y5 \
	VPADDD	Y10, Y5, Y6 \
	VPXOR	Y5, Y6, Y6 \
	VPANDN	Y6, Y7, Y6 \
	VPXOR	Y0, Y5, Y5 \
	VPMINUD	Y6, Y5, Y13 \
	VPCMPEQD	Y13, Y5, Y13 \
	VPAND	Y12, Y13, Y13 \
	VPSLLD	$1, Y4, Y7 \
	VPSRAD	$31, Y7, Y7 \
	VMOVDQU	32(p), Y5 \
	VPADDD	Y10, Y5, Y6 \
	VPXOR	Y5, Y6, Y6 \
	VPANDN	Y6, Y7, Y6 \
	VPXOR	Y1, Y5, Y5 \
	VPMINUD	Y6, Y5, Y14 \
	VPCMPEQD	Y14, Y5, Y14 \
	VPAND	Y14, Y13, Y13 \
	VPSRLD	$const_cMasks, Y4, Y6 \
	VPXOR	Y2, Y4, Y5 \
	VPAND	Y6, Y5, Y5 \
	VPCMPEQD	Y15, Y5, Y5 \
	VPAND	Y5, Y13, Y13 \
	VMOVDQU	64(p), Y5 \
	VPSUBW	Y5, Y3, Y5 \
	VPMINUW	160(p), Y5, Y6 \
	VPCMPEQD	Y6, Y5, Y6 \
	VPAND	Y6, Y13, Y13 \
	VMOVDQU	128(p), Y5 \
	VPAND	Y8, Y5, Y6 \
	VPCMPEQD	Y15, Y6, Y6 \
	VPANDN	Y13, Y6, Y7 \
	VMOVMSKPS	Y7, r \
	VPAND	Y6, Y13, Y13 \
	VPAND	Y9, Y5, Y5 \
	VPXOR	Y10, Y13, Y13 \
	VPOR	Y13, Y5, Y5 \
	VPMINUD	Y5, Y11, Y11

// CLEAF sets Y12 to all ones in the lanes whose bits are set in the low
// byte of the register a (bit j for lane j), from the lane bits in Y14.
#define CLEAF(a) \
	VMOVD	a, X12 \
	VPBROADCASTD	X12, Y12 \
	VPAND	Y14, Y12, Y12 \
	VPCMPEQD	Y14, Y12, Y12

// cblockBits holds bit j in 32-bit lane j: CLEAF's lane bits.
DATA cblockBits<>+0(SB)/4, $1
DATA cblockBits<>+4(SB)/4, $2
DATA cblockBits<>+8(SB)/4, $4
DATA cblockBits<>+12(SB)/4, $8
DATA cblockBits<>+16(SB)/4, $16
DATA cblockBits<>+20(SB)/4, $32
DATA cblockBits<>+24(SB)/4, $64
DATA cblockBits<>+28(SB)/4, $128
GLOBL cblockBits<>(SB), RODATA|NOPTR, $32

// func cblockScan2(key *[4]uint32, flags uint32, b0, b1 *cblock, lanes uint32) (best, check uint32)
TEXT ·cblockScan2(SB), NOSPLIT|NOFRAME, $0-48
	MOVQ	key+0(FP), AX
	VPBROADCASTD	(AX), Y0
	VPBROADCASTD	4(AX), Y1
	VPBROADCASTD	8(AX), Y2
	VPBROADCASTD	12(AX), Y3
	MOVL	flags+8(FP), AX
	VMOVD	AX, X8
	VPBROADCASTD	X8, Y8
	SCANCONSTS
	VPXOR	Y15, Y15, Y15
	MOVQ	b0+16(FP), SI
	MOVQ	b1+24(FP), DI
	MOVL	lanes+32(FP), DX
	VMOVDQU	cblockBits<>(SB), Y14
	CLEAF(DX)
	CBLK(SI, AX)
	SHRL	$8, DX
	VMOVDQU	cblockBits<>(SB), Y14
	CLEAF(DX)
	CBLK(DI, BX)
	SCANEND2
