//go:build !purego

#include "go_asm.h"
#include "textflag.h"

// LANEBITS sets r to the lanes of lo (0-3) and hi (4-7) that are all
// ones (bit j for lane j; each lane all ones or zero): the low byte of
// each lane's halfword, then the top bit of each byte gathered into the
// top byte by one multiply (R13 and R14, LANES). t may be lo.
#define LANEBITS(lo, hi, t, r) \
	VUZP1	hi.H8, lo.H8, t.H8 \
	VUZP1	t.B16, t.B16, t.B16 \
	VMOV	t.D[0], r \
	AND	R13, r, r \
	MUL	R14, r, r \
	LSR	$56, r, r

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
	LANEBITS(V20, V21, V22, r)

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

// CHALF tests one half (lanes 4h to 4h+3) of a compact block, whose
// words are in registers (cblock: s source words, d destination words,
// p ports' low ends, c the c words, e entries, q ports' spans; each is
// overwritten), against the packet's lanes in V0-V3 (cblockKey), under
// the leaf's lanes of this half in lm (all ones where a lane is the
// leaf's), with the flags in V8, laneEnt in V9, all ones in V10, zero
// in V12 and cSrcFull and cDstFull in V13 and V14: the AVX2 CBLK of
// tree_vec_amd64.s in NEON's four lanes. An address word passes where
// the packet's word XOR it is at most its bound (the marker bit and the
// bits below, (s-1)^s; zero for a whole word, VBIT), which is where the
// unsigned minimum of the two is the XOR; the c word under its masks
// (the word shifted right by cMasks) where the XOR with hiLane is zero;
// each port where its difference with the low end, in 16-bit
// arithmetic, is at most the span. It folds the entries of passing lanes
// without a flag into the minimum in V11 and leaves in chk the passing
// lanes with a flag (all ones). Uses V28-V31.
#define CHALF(s, d, p, c, e, q, lm, chk) \
	VADD	V10.S4, s.S4, V28.S4 \
	VEOR	s.B16, V28.B16, V28.B16 \
	VCMTST	V13.S4, c.S4, V29.S4 \
	VBIT	V29.B16, V12.B16, V28.B16 \
	VEOR	V0.B16, s.B16, s.B16 \
	VUMIN	V28.S4, s.S4, V28.S4 \
	VCMEQ	V28.S4, s.S4, s.S4 \
	VAND	lm.B16, s.B16, s.B16 \
	VADD	V10.S4, d.S4, V30.S4 \
	VEOR	d.B16, V30.B16, V30.B16 \
	VCMTST	V14.S4, c.S4, V31.S4 \
	VBIT	V31.B16, V12.B16, V30.B16 \
	VEOR	V1.B16, d.B16, d.B16 \
	VUMIN	V30.S4, d.S4, V30.S4 \
	VCMEQ	V30.S4, d.S4, d.S4 \
	VAND	d.B16, s.B16, s.B16 \
	VUSHR	$const_cMasks, c.S4, V28.S4 \
	VEOR	V2.B16, c.B16, c.B16 \
	VAND	V28.B16, c.B16, c.B16 \
	VCMEQ	V12.S4, c.S4, c.S4 \
	VAND	c.B16, s.B16, s.B16 \
	VSUB	p.H8, V3.H8, p.H8 \
	VUMIN	q.H8, p.H8, q.H8 \
	VCMEQ	q.S4, p.S4, p.S4 \
	VAND	p.B16, s.B16, s.B16 \
	VCMTST	V8.S4, e.S4, V29.S4 \
	VAND	V29.B16, s.B16, chk.B16 \
	VEOR	V10.B16, s.B16, s.B16 \
	VORR	V29.B16, s.B16, s.B16 \
	VAND	V9.B16, e.B16, e.B16 \
	VORR	s.B16, e.B16, e.B16 \
	VUMIN	e.S4, V11.S4, V11.S4

// CBLK tests the compact block at p (192 bytes: source words at 0,
// destination words at 32, ports' low ends at 64, c words at 96, entries
// at 128, ports' spans at 160) under the leaf's lanes in the low byte of
// l (bit j for lane j), and sets r to its passing lanes with a flag (bit
// j for lane j), as BLOCK does. Besides CHALF's registers it takes the
// lane bits in V6 and V7 (1-8 and 16-128), and uses V4, V5 and V16-V27.
#define CBLK(p, l, r) \
	VLD1.P	64(p), [V16.S4, V17.S4, V18.S4, V19.S4] \
	VLD1.P	64(p), [V20.S4, V21.S4, V22.S4, V23.S4] \
	VLD1	(p), [V24.S4, V25.S4, V26.S4, V27.S4] \
	VDUP	l, V5.S4 \
	VCMTST	V6.S4, V5.S4, V4.S4 \
	VCMTST	V7.S4, V5.S4, V5.S4 \
	CHALF(V16, V18, V20, V22, V24, V26, V4, V4) \
	CHALF(V17, V19, V21, V23, V25, V27, V5, V5) \
	LANEBITS(V4, V5, V4, r)

// cblockBits holds bit j in 32-bit lane j: CBLK's lane bits.
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
	MOVD	key+0(FP), R0
	VLD1R.P	4(R0), [V0.S4]
	VLD1R.P	4(R0), [V1.S4]
	VLD1R.P	4(R0), [V2.S4]
	VLD1R	(R0), [V3.S4]
	MOVWU	flags+8(FP), R2
	VDUP	R2, V8.S4
	MOVW	$0x3fffffff, R3
	VDUP	R3, V9.S4
	VCMEQ	V10.S4, V10.S4, V10.S4
	VCMEQ	V11.S4, V11.S4, V11.S4
	VEOR	V12.B16, V12.B16, V12.B16
	MOVW	$const_cSrcFull, R3
	VDUP	R3, V13.S4
	MOVW	$const_cDstFull, R3
	VDUP	R3, V14.S4
	MOVD	$cblockBits<>(SB), R3
	VLD1	(R3), [V6.S4, V7.S4]
	MOVD	$0x8080808080808080, R13
	MOVD	$0x0002040810204081, R14
	MOVD	b0+16(FP), R4
	MOVD	b1+24(FP), R5
	MOVWU	lanes+32(FP), R6
	CBLK(R4, R6, R8)
	LSR	$8, R6, R6
	CBLK(R5, R6, R9)
	ORR	R9<<8, R8, R8
	MOVW	R8, check+44(FP)
	MINIMUM
	MOVW	R0, best+40(FP)
	RET
