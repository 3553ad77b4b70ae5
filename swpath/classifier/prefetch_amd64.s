//go:build !purego

#include "textflag.h"

// PF prefetches the cache line of record min(first+j, last) of the leaf:
// first in DX, last in R8, the records at SI (32 bytes each).
#define PF(j) \
	LEAQ	j(DX), R9 \
	CMPQ	R9, R8 \
	CMOVQGT	R8, R9 \
	SHLQ	$5, R9 \
	PREFETCHT0	(SI)(R9*1)

// func prefetchLeaves(rec *crec, leaves *uint64, n int)
TEXT ·prefetchLeaves(SB), NOSPLIT|NOFRAME, $0-24
	MOVQ	rec+0(FP), SI
	MOVQ	leaves+8(FP), DI
	MOVQ	n+16(FP), CX
	TESTQ	CX, CX
	JEQ	done
loop:
	MOVQ	(DI), AX
	MOVL	AX, DX // the first record
	SHRQ	$32, AX
	ANDL	$0xffffff, AX // the record count
	LEAQ	-1(DX)(AX*1), R8 // the last record (the first of an empty leaf)
	TESTL	AX, AX
	CMOVQEQ	DX, R8
	PF(0)
	PF(2)
	PF(4)
	PF(6)
	PF(8)
	PF(10)
	PF(12)
	PF(14)
	ADDQ	$8, DI
	DECQ	CX
	JNE	loop
done:
	RET

// func prefetchCounters(ctr *counter, slot *uint32, ids *int32, n int)
TEXT ·prefetchCounters(SB), NOSPLIT|NOFRAME, $0-32
	MOVQ	ctr+0(FP), SI
	MOVQ	slot+8(FP), DI
	MOVQ	ids+16(FP), DX
	MOVQ	n+24(FP), CX
	TESTQ	CX, CX
	JEQ	cdone
	XORL	BX, BX
cloop:
	MOVLQSX	(DX), AX // the rule
	TESTL	AX, AX
	CMOVLLT	BX, AX // rule 0 for none
	MOVL	(DI)(AX*4), AX // its counter slot
	SHLQ	$4, AX // 16-byte counters
	PREFETCHT0	(SI)(AX*1)
	ADDQ	$4, DX
	DECQ	CX
	JNE	cloop
cdone:
	RET

// CPF prefetches the three cache lines of the compact block of leaf word
// a (its record index over eight) in the blocks at base: 192-byte blocks,
// which start on a line where the array does. Uses a.
#define CPF(a, base) \
	SHRL	$3, a \
	IMUL3Q	$192, a, a \
	ADDQ	base, a \
	PREFETCHT0	(a) \
	PREFETCHT0	64(a) \
	PREFETCHT0	128(a)

// func prefetchCBlocks(b0, b1 *cblock, c0, c1 *uint64, n int)
TEXT ·prefetchCBlocks(SB), NOSPLIT|NOFRAME, $0-40
	MOVQ	b0+0(FP), SI
	MOVQ	b1+8(FP), DI
	MOVQ	c0+16(FP), R8
	MOVQ	c1+24(FP), R9
	MOVQ	n+32(FP), CX
	TESTQ	CX, CX
	JEQ	bdone
bloop:
	MOVQ	(R8), AX
	CPF(AX, SI)
	MOVQ	(R9), BX
	CPF(BX, DI)
	ADDQ	$8, R8
	ADDQ	$8, R9
	DECQ	CX
	JNE	bloop
bdone:
	RET
