// Package x86 holds the amd64 CPU primitives the software packet path
// needs and Go cannot express: LFENCE, SFENCE and MFENCE, an opaque call
// that serves as a compiler barrier, and RDTSC with a frequency calibrated
// against the monotonic clock.
//
// Each primitive is a tiny assembly stub in barrier_amd64.s beside its Go
// declaration in barrier_amd64.go, NOSPLIT|NOFRAME, one instruction before
// RET (RDTSC also combines and stores its result).
// testdata/objdump_amd64.golden lists the bytes each must assemble to, and
// TestDisassembly checks the built object against it. Encodings are from
// the Intel SDM Vol. 2 (LFENCE 0F AE E8, SFENCE 0F AE F8, MFENCE 0F AE F0,
// RDTSC 0F 31, RET C3).
//
// x86-64 memory is strongly ordered for ordinary write-back memory (Intel
// SDM Vol. 3A §9.2 "Memory Ordering"): loads are not reordered with other
// loads, stores not with other stores. That is why rdma-core's
// udma_to_device_barrier is only a compiler barrier on x86 and only
// write-combining (WC) stores need SFENCE.
//
// On any other GOARCH this package is empty. Nothing but swpath/barrier
// imports it.
package x86
