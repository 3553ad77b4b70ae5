#include "textflag.h"

// func LFENCE()
// Later instructions (loads) do not start until earlier ones completed.
TEXT ·LFENCE(SB), NOSPLIT|NOFRAME, $0-0
	LFENCE	// 0f ae e8
	RET

// func SFENCE()
// Earlier stores (incl. write-combining) globally visible before later ones.
TEXT ·SFENCE(SB), NOSPLIT|NOFRAME, $0-0
	SFENCE	// 0f ae f8
	RET

// func MFENCE()
// Earlier loads and stores globally visible before later loads and stores.
TEXT ·MFENCE(SB), NOSPLIT|NOFRAME, $0-0
	MFENCE	// 0f ae f0
	RET

// func CompilerBarrier()
// Deliberately empty: the opaque call is the compiler barrier; x86 TSO
// already keeps write-back stores in order.
TEXT ·CompilerBarrier(SB), NOSPLIT|NOFRAME, $0-0
	RET

// func RDTSC() uint64
// No ordering: not serialising.
TEXT ·RDTSC(SB), NOSPLIT|NOFRAME, $0-8
	RDTSC	// 0f 31: EDX:EAX = TSC
	SHLQ	$32, DX
	ORQ	DX, AX
	MOVQ	AX, ret+0(FP)
	RET

// func MMIOWrite64(addr *uint64, v uint64)
// One plain 64-bit store, no LOCK prefix and no XCHG (an XCHG with memory
// is locked, Intel SDM Vol. 2B "XCHG"): rdma-core util/mmio.h
// mmio_write64_be is a volatile 64-bit store on x86-64.
TEXT ·MMIOWrite64(SB), NOSPLIT|NOFRAME, $0-16
	MOVQ	addr+0(FP), AX	// 48 8b 44 24 08
	MOVQ	v+8(FP), CX	// 48 8b 4c 24 10
	MOVQ	CX, (AX)	// 48 89 08
	RET

// func MMIOWrite32(addr *uint32, v uint32)
// One plain 32-bit store (rdma-core mmio_write32_be; a doorbell record is
// written the same way, *db = htobe32(v)).
TEXT ·MMIOWrite32(SB), NOSPLIT|NOFRAME, $0-12
	MOVQ	addr+0(FP), AX	// 48 8b 44 24 08
	MOVL	v+8(FP), CX	// 8b 4c 24 10
	MOVL	CX, (AX)	// 89 08
	RET
