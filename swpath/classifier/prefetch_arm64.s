//go:build !purego

#include "textflag.h"

// PF prefetches the cache line of record min(first+j, last) of the leaf:
// first in R4, last in R6, the records at R0 (32 bytes each).
#define PF(j) \
	ADD	$j, R4, R7 \
	CMP	R6, R7 \
	CSEL	GT, R6, R7, R7 \
	ADD	R7<<5, R0, R7 \
	PRFM	(R7), PLDL1KEEP

// func prefetchLeaves(rec *crec, leaves *uint64, n int)
TEXT ·prefetchLeaves(SB), NOSPLIT|NOFRAME, $0-24
	MOVD	rec+0(FP), R0
	MOVD	leaves+8(FP), R1
	MOVD	n+16(FP), R2
	CBZ	R2, done
loop:
	MOVD.P	8(R1), R3
	MOVWU	R3, R4 // the first record
	UBFX	$32, R3, $24, R5 // the record count
	ADD	R4, R5, R6
	SUB	$1, R6 // the last record (the first of an empty leaf)
	CMP	$0, R5
	CSEL	EQ, R4, R6, R6
	PF(0)
	PF(2)
	PF(4)
	PF(6)
	PF(8)
	PF(10)
	PF(12)
	PF(14)
	SUBS	$1, R2
	BNE	loop
done:
	RET

// func prefetchCounters(ctr *counter, slot *uint32, ids *int32, n int)
TEXT ·prefetchCounters(SB), NOSPLIT|NOFRAME, $0-32
	MOVD	ctr+0(FP), R0
	MOVD	slot+8(FP), R1
	MOVD	ids+16(FP), R2
	MOVD	n+24(FP), R3
	CBZ	R3, cdone
cloop:
	MOVW.P	4(R2), R4 // the rule (sign-extended)
	CMP	$0, R4
	CSEL	LT, ZR, R4, R4 // rule 0 for none
	MOVWU	(R1)(R4<<2), R5 // its counter slot
	ADD	R5<<4, R0, R5 // 16-byte counters
	PRFM	(R5), PSTL1KEEP
	SUBS	$1, R3
	BNE	cloop
cdone:
	RET

// CPF prefetches the three cache lines of the compact block of leaf word
// r (its record index over eight) in the blocks at base: 192-byte blocks.
// Uses r and R7 (192).
#define CPF(r, base) \
	UBFX	$3, r, $29, r \
	MADD	R7, base, r, r \
	PRFM	(r), PLDL1KEEP \
	PRFM	64(r), PLDL1KEEP \
	PRFM	128(r), PLDL1KEEP

// func prefetchCBlocks(b0, b1 *cblock, c0, c1 *uint64, n int)
TEXT ·prefetchCBlocks(SB), NOSPLIT|NOFRAME, $0-40
	MOVD	b0+0(FP), R0
	MOVD	b1+8(FP), R1
	MOVD	c0+16(FP), R2
	MOVD	c1+24(FP), R3
	MOVD	n+32(FP), R4
	MOVD	$192, R7
	CBZ	R4, bdone
bloop:
	MOVD.P	8(R2), R5
	CPF(R5, R0)
	MOVD.P	8(R3), R6
	CPF(R6, R1)
	SUBS	$1, R4
	BNE	bloop
bdone:
	RET
