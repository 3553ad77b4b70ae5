#include "textflag.h"

// Go's arm64 assembler takes the DMB/DSB option only as the numeric CRm
// immediate. Encodings: DMB = 0xd50330bf | CRm<<8, DSB = 0xd503309f | CRm<<8
// (Arm ARM DDI 0487, C6.2 DMB / DSB).

// func DMBOSHLD()
// Orders earlier loads against later loads and stores, outer shareable.
TEXT ·DMBOSHLD(SB), NOSPLIT|NOFRAME, $0-0
	DMB	$1	// dmb oshld = d50331bf
	RET

// func DMBOSHST()
// Orders earlier stores against later stores, outer shareable.
TEXT ·DMBOSHST(SB), NOSPLIT|NOFRAME, $0-0
	DMB	$2	// dmb oshst = d50332bf
	RET

// func DMBOSH()
// Orders all earlier loads and stores against all later ones, outer shareable.
TEXT ·DMBOSH(SB), NOSPLIT|NOFRAME, $0-0
	DMB	$3	// dmb osh = d50333bf
	RET

// func DSBST()
// Waits until all earlier stores have completed (full system).
TEXT ·DSBST(SB), NOSPLIT|NOFRAME, $0-0
	DSB	$14	// dsb st = d5033e9f
	RET

// func CNTVCT() uint64
// No ordering: a plain system-register read of the virtual counter.
TEXT ·CNTVCT(SB), NOSPLIT|NOFRAME, $0-8
	MRS	CNTVCT_EL0, R0
	MOVD	R0, ret+0(FP)
	RET

// func CNTFRQ() uint64
// No ordering: a plain system-register read of the counter frequency.
TEXT ·CNTFRQ(SB), NOSPLIT|NOFRAME, $0-8
	MRS	CNTFRQ_EL0, R0
	MOVD	R0, ret+0(FP)
	RET

// func MMIOWrite64(addr *uint64, v uint64)
// One plain 64-bit store, STR Xt (not STLR, not an exclusive or atomic
// store): rdma-core util/mmio.h mmio_write64_be on aarch64.
TEXT ·MMIOWrite64(SB), NOSPLIT|NOFRAME, $0-16
	MOVD	addr+0(FP), R0	// ldr x0, [sp,#8]  = f94007e0
	MOVD	v+8(FP), R1	// ldr x1, [sp,#16] = f9400be1
	MOVD	R1, (R0)	// str x1, [x0]     = f9000001
	RET

// func MMIOWrite32(addr *uint32, v uint32)
// One plain 32-bit store, STR Wt (rdma-core mmio_write32_be).
TEXT ·MMIOWrite32(SB), NOSPLIT|NOFRAME, $0-12
	MOVD	addr+0(FP), R0	// ldr x0, [sp,#8]  = f94007e0
	MOVWU	v+8(FP), R1	// ldr w1, [sp,#16] = b94013e1
	MOVW	R1, (R0)	// str w1, [x0]     = b9000001
	RET
