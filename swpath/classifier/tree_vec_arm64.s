//go:build !purego

#include "textflag.h"

// BLOCK tests the block at p (sblock: values at 0-127, masks at 128-255,
// lane entries and flags at 256; eight lanes a row, each row two halves
// of four) against the packet's lanes in V0-V3 (source, destination, misc
// high and low words), with the flags in V8, laneEnt in V9 and all ones
// in V10. It folds the entries of passing lanes without a flag into the
// minimum in V11 and sets r to the passing lanes with a flag (bit j for
// lane j). p is advanced past the block.
#define BLOCK(p, r) \
	VLD1.P	64(p), [V16.S4, V17.S4, V18.S4, V19.S4] \
	VLD1.P	64(p), [V20.S4, V21.S4, V22.S4, V23.S4] \
	VLD1.P	64(p), [V24.S4, V25.S4, V26.S4, V27.S4] \
	VLD1.P	64(p), [V28.S4, V29.S4, V30.S4, V31.S4] \
	VAND	V0.B16, V24.B16, V24.B16 \
	VAND	V0.B16, V25.B16, V25.B16 \
	VAND	V1.B16, V26.B16, V26.B16 \
	VAND	V1.B16, V27.B16, V27.B16 \
	VAND	V2.B16, V28.B16, V28.B16 \
	VAND	V2.B16, V29.B16, V29.B16 \
	VAND	V3.B16, V30.B16, V30.B16 \
	VAND	V3.B16, V31.B16, V31.B16 \
	VCMEQ	V16.S4, V24.S4, V24.S4 \
	VCMEQ	V17.S4, V25.S4, V25.S4 \
	VCMEQ	V18.S4, V26.S4, V26.S4 \
	VCMEQ	V19.S4, V27.S4, V27.S4 \
	VCMEQ	V20.S4, V28.S4, V28.S4 \
	VCMEQ	V21.S4, V29.S4, V29.S4 \
	VCMEQ	V22.S4, V30.S4, V30.S4 \
	VCMEQ	V23.S4, V31.S4, V31.S4 \
	VAND	V26.B16, V24.B16, V24.B16 \
	VAND	V27.B16, V25.B16, V25.B16 \
	VAND	V30.B16, V28.B16, V28.B16 \
	VAND	V31.B16, V29.B16, V29.B16 \
	VAND	V28.B16, V24.B16, V24.B16 \
	VAND	V29.B16, V25.B16, V25.B16 \
	VLD1	(p), [V16.S4, V17.S4] \
	VCMTST	V8.S4, V16.S4, V18.S4 \
	VCMTST	V8.S4, V17.S4, V19.S4 \
	VAND	V18.B16, V24.B16, V20.B16 \
	VAND	V19.B16, V25.B16, V21.B16 \
	VEOR	V10.B16, V24.B16, V24.B16 \
	VEOR	V10.B16, V25.B16, V25.B16 \
	VORR	V18.B16, V24.B16, V24.B16 \
	VORR	V19.B16, V25.B16, V25.B16 \
	VAND	V9.B16, V16.B16, V16.B16 \
	VAND	V9.B16, V17.B16, V17.B16 \
	VORR	V24.B16, V16.B16, V16.B16 \
	VORR	V25.B16, V17.B16, V17.B16 \
	VUMIN	V16.S4, V11.S4, V11.S4 \
	VUMIN	V17.S4, V11.S4, V11.S4 \
	VUZP1	V21.H8, V20.H8, V22.H8 \
	VUZP1	V22.B16, V22.B16, V22.B16 \
	VMOV	V22.D[0], r \
	AND	R13, r, r \
	MUL	R14, r, r \
	LSR	$56, r, r

// LANES loads the packet's lanes from the arguments sd, misc and flags
// (leafScan4's and leafScan2's first three) into V0-V3 and V8, laneEnt
// into V9, all ones into V10, the minimum's start (all ones) into V11,
// and into R13 and R14 the constants that turn the lanes' 0xff bytes to
// bits in BLOCK (the top bit of each byte, gathered into the top byte by
// one multiply). Uses R0-R3.
#define LANES \
	MOVD	sd+0(FP), R0 \
	MOVD	misc+8(FP), R1 \
	MOVWU	flags+16(FP), R2 \
	LSR	$32, R0, R3 \
	VDUP	R3, V0.S4 \
	VDUP	R0, V1.S4 \
	LSR	$32, R1, R3 \
	VDUP	R3, V2.S4 \
	VDUP	R1, V3.S4 \
	VDUP	R2, V8.S4 \
	MOVW	$0x3fffffff, R3 \
	VDUP	R3, V9.S4 \
	VCMEQ	V10.S4, V10.S4, V10.S4 \
	VCMEQ	V11.S4, V11.S4, V11.S4 \
	MOVD	$0x8080808080808080, R13 \
	MOVD	$0x0002040810204081, R14

// MINIMUM leaves the minimum of V11's four lanes in R0.
#define MINIMUM \
	VEXT	$8, V11.B16, V11.B16, V12.B16 \
	VUMIN	V12.S4, V11.S4, V11.S4 \
	VEXT	$4, V11.B16, V11.B16, V12.B16 \
	VUMIN	V12.S4, V11.S4, V11.S4 \
	VMOV	V11.S[0], R0

// func leafScan4(sd, misc uint64, flags uint32, b0, b1, b2, b3 *sblock) (best, check uint32)
TEXT ·leafScan4(SB), NOSPLIT|NOFRAME, $0-64
	LANES
	MOVD	b0+24(FP), R4
	MOVD	b1+32(FP), R5
	MOVD	b2+40(FP), R6
	MOVD	b3+48(FP), R7
	BLOCK(R4, R8)
	BLOCK(R5, R9)
	BLOCK(R6, R10)
	BLOCK(R7, R11)
	ORR	R9<<8, R8, R8
	ORR	R10<<16, R8, R8
	ORR	R11<<24, R8, R8
	MOVW	R8, check+60(FP)
	MINIMUM
	MOVW	R0, best+56(FP)
	RET

// func leafScan2(sd, misc uint64, flags uint32, b0, b1 *sblock) (best, check uint32)
TEXT ·leafScan2(SB), NOSPLIT|NOFRAME, $0-48
	LANES
	MOVD	b0+24(FP), R4
	MOVD	b1+32(FP), R5
	BLOCK(R4, R8)
	BLOCK(R5, R9)
	ORR	R9<<8, R8, R8
	MOVW	R8, check+44(FP)
	MINIMUM
	MOVW	R0, best+40(FP)
	RET
