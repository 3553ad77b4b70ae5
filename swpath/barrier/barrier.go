//go:build amd64 || arm64

// Package barrier is the one place the software packet path gets its
// memory barriers for talking to a DMA device, and its cycle counter. The
// names follow rdma-core's util/udma_barrier.h so a reader can check each
// call site against the C driver it mirrors:
//
//	Go             rdma-core                      arm64        amd64
//	FromDevice     udma_from_device_barrier       DMB OSHLD    LFENCE
//	ToDevice       udma_to_device_barrier         DMB OSHST    compiler barrier
//	OrderingWrite  udma_ordering_write_barrier    DMB OSHST    compiler barrier
//	FlushWC        mmio_flush_writes              DSB ST       SFENCE
//	WCStart        mmio_wc_start                  DSB ST       SFENCE
//	Full           (none; load->store case)       DMB OSH      MFENCE
//	Cycles/CycleHz (none)                         CNTVCT_EL0   RDTSC
//	MMIOWrite64    mmio_write64_be (util/mmio.h)  STR Xt       MOV (no LOCK)
//	MMIOWrite32    mmio_write32_be, *db = v       STR Wt       MOV (no LOCK)
//
// The instructions live in the arm and x86 packages as assembly stubs;
// this package calls one or the other from barrier_arm64.go /
// barrier_amd64.go and nothing else imports them. It builds only for amd64
// and arm64: on any other architecture the build fails (unsupported.go)
// rather than running a DMA ring without barriers.
//
// # sync/atomic is not enough
//
// Go's atomics give sequentially consistent ordering between goroutines,
// i.e. between CPUs. On arm64 they compile to LDAR/STLR, whose ordering
// applies in the shareability domain of the address accessed; user memory
// is mapped inner shareable, while the architectural contract that Linux
// (dma_rmb/dma_wmb), DPDK (rte_io_rmb/wmb) and rdma-core use for a device
// is the outer-shareable domain. On amd64 an atomic store is XCHG, which
// does not order write-combining stores the way SFENCE does. Use atomics
// for the Go memory model (and the race detector) on words the device
// shares, and these barriers, in addition, for ordering against the device.
//
// # Cost
//
// Assembly is never inlined: each call is a real CALL/RET and spills live
// registers. Issue one FromDevice per run of ready completions and one
// ToDevice per doorbell, never one per packet.
package barrier

// FromDevice orders loads: every load before it (the owner/valid byte of a
// completion the device wrote) is complete before any load or store after
// it (the rest of the completion, the packet bytes). Call it after seeing
// that an entry changed hands to software and before reading its contents.
// arm64: DMB OSHLD (Arm ARM DDI 0487 C6.2 DMB, outer shareable, loads).
// amd64: LFENCE (Intel SDM Vol. 2A), as rdma-core uses on x86-64.
func FromDevice() { fromDevice() }

// ToDevice orders stores: every store before it (descriptor contents,
// buffer addresses) is visible to the device before any store after it (the
// doorbell record the device reads, which lets it start DMA). It does not
// order an earlier load against a later store; use Full for that.
// arm64: DMB OSHST (Arm ARM C6.2). amd64: compiler barrier only, because
// x86 does not reorder stores with older stores to write-back memory (Intel
// SDM Vol. 3A §9.2.2).
func ToDevice() { toDevice() }

// OrderingWrite is rdma-core's udma_ordering_write_barrier: between writing
// a descriptor's data and its valid bit. It is the same barrier as
// ToDevice on both architectures.
func OrderingWrite() { toDevice() }

// FlushWC is rdma-core's mmio_flush_writes: after a store to a
// write-combining or MMIO doorbell (UAR/BlueFlame), wait until earlier
// stores have completed so the write leaves the CPU and is not combined
// with later ones. arm64: DSB ST (Arm ARM C6.2 DSB). amd64: SFENCE (Intel
// SDM Vol. 2B).
func FlushWC() { flushWC() }

// WCStart is rdma-core's mmio_wc_start: before a sequence of
// write-combining stores, so earlier stores are not merged into it. The
// same instruction as FlushWC.
func WCStart() { flushWC() }

// Full orders every load and store before it against every load and store
// after it, as seen by the device. Use it where an earlier load must not be
// passed by a later device-visible store, e.g. a buffer read in this poll
// pass and reposted before the receive doorbell; ToDevice only orders
// stores. arm64: DMB OSH (Arm ARM C6.2). amd64: MFENCE (Intel SDM Vol. 2B).
func Full() { full() }

// Cycles returns a free-running cycle count for accounting: the generic
// timer's virtual count (CNTVCT_EL0) on arm64, the time-stamp counter on
// amd64. The read is not serialising. Divide differences by CycleHz.
func Cycles() uint64 { return cycles() }

// CycleHz returns the rate of Cycles in Hz: CNTFRQ_EL0 on arm64; on amd64
// the TSC rate calibrated once against the monotonic clock (the first call
// takes about 30 ms).
func CycleHz() uint64 { return cycleHz() }

// MMIOWrite64 stores v at addr as one plain 64-bit store: STR on arm64, MOV
// on amd64, never a locked instruction (atomic.StoreUint64 is XCHG on
// amd64, locked, and STLR on arm64). It is rdma-core's util/mmio.h
// mmio_write64_be, for the BlueFlame doorbell on a write-combining UAR
// page; v is already in the device's byte order. Order it with WCStart
// before and FlushWC after, as post_send_db does.
func MMIOWrite64(addr *uint64, v uint64) { mmioWrite64(addr, v) }

// MMIOWrite32 stores v at addr as one plain 32-bit store (rdma-core
// mmio_write32_be, and the doorbell-record store *db = htobe32(ci)). v is
// already in the device's byte order; ToDevice orders what comes before.
func MMIOWrite32(addr *uint32, v uint32) { mmioWrite32(addr, v) }
