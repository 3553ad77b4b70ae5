// Package arm holds the arm64 CPU primitives the software packet path
// needs and Go cannot express: the outer-shareable data memory barriers
// used for DMA ordering against a NIC (DMB OSHLD, DMB OSHST, DMB OSH), the
// store completion barrier used before an MMIO doorbell (DSB ST), and the
// generic timer's virtual counter and its frequency (CNTVCT_EL0,
// CNTFRQ_EL0) for cycle accounting.
//
// Each primitive is a tiny assembly stub in barrier_arm64.s beside its Go
// declaration in barrier_arm64.go. The stubs are NOSPLIT|NOFRAME and contain
// exactly one instruction before RET (two for the counter reads, which also
// store the result); testdata/objdump_arm64.golden lists the encodings they
// must assemble to, and TestDisassembly checks the built object against it.
// The DMB/DSB option encodings are those of the Arm Architecture Reference
// Manual (DDI 0487), sections C6.2 "DMB" and "DSB": CRm = 0b0001 OSHLD,
// 0b0010 OSHST, 0b0011 OSH, 0b1110 ST.
//
// On any other GOARCH this package is empty. Nothing but swpath/barrier
// imports it: callers use that portable facade, whose names follow
// rdma-core's util/udma_barrier.h.
package arm
