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
