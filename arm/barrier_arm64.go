package arm

// DMBOSHLD issues DMB OSHLD: loads before it (e.g. the owner byte of a
// completion queue entry) are observed, in the outer-shareable domain that
// includes DMA-capable devices, before loads and stores after it (the rest
// of the entry, the packet bytes). Arm ARM (DDI 0487) C6.2 "DMB", option
// OSHLD (CRm=0b0001); the same barrier as Linux __dma_rmb and rdma-core
// udma_from_device_barrier on aarch64.
func DMBOSHLD()

// DMBOSHST issues DMB OSHST: stores before it (descriptor contents, packet
// bytes) are observed by the outer-shareable domain before stores after it
// (a doorbell record the device polls). It does not order loads. Arm ARM
// C6.2 "DMB", option OSHST (CRm=0b0010); Linux __dma_wmb, rdma-core
// udma_to_device_barrier on aarch64.
func DMBOSHST()

// DMBOSH issues DMB OSH: all loads and stores before it are observed by the
// outer-shareable domain before all loads and stores after it. Needed where
// an earlier load must be ordered against a later store to device-visible
// memory (reposting a buffer just read, then ringing the doorbell), which
// DMB OSHST does not cover. Arm ARM C6.2 "DMB", option OSH (CRm=0b0011).
func DMBOSH()

// DSBST issues DSB ST: execution does not continue until every earlier
// store has completed, which is what a write to write-combining or
// device (MMIO) memory needs before it can be relied on to reach the
// device. Arm ARM C6.2 "DSB", option ST (CRm=0b1110, full system); Linux
// __wmb, rdma-core mmio_flush_writes on aarch64.
func DSBST()

// CNTVCT returns the 64-bit virtual count of the generic timer
// (CNTVCT_EL0, Arm ARM D11 "The Generic Timer"). The read is not
// serialised (no ISB): it may be satisfied early relative to neighbouring
// instructions, which is fine for per-burst cycle accounting.
func CNTVCT() uint64

// CNTFRQ returns the generic timer frequency in Hz as programmed by
// firmware into CNTFRQ_EL0 (Arm ARM D11, D17 CNTFRQ_EL0).
func CNTFRQ() uint64

// MMIOWrite64 stores v at addr with one plain STR Xt: not STLR (Go's
// atomic.StoreUint64 on arm64), not an exclusive or atomic store. Device
// (Device-nGnRE) and write-combining (Normal-NC) mappings of a UAR take
// plain stores; ordering comes from the barriers around it. rdma-core
// util/mmio.h mmio_write64_be on aarch64. The caller puts v in the
// device's byte order.
func MMIOWrite64(addr *uint64, v uint64)

// MMIOWrite32 stores v at addr with one plain STR Wt (rdma-core
// mmio_write32_be, and the doorbell-record store *db = htobe32(v)).
func MMIOWrite32(addr *uint32, v uint32)
