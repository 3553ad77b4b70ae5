package x86

// LFENCE executes LFENCE: it does not complete until all earlier
// instructions have completed locally, and no later instruction (so no later
// load) begins until it completes (Intel SDM Vol. 2A "LFENCE"). rdma-core
// uses it as udma_from_device_barrier on x86-64: after the valid/owner byte
// of a completion is seen, before the rest of the entry is read.
func LFENCE()

// SFENCE executes SFENCE: every store before it, including weakly ordered
// write-combining and non-temporal stores, is globally visible before any
// store after it (Intel SDM Vol. 2B "SFENCE"). rdma-core mmio_flush_writes
// and mmio_wc_start on x86-64.
func SFENCE()

// MFENCE executes MFENCE: every load and store before it is globally
// visible before any load or store after it (Intel SDM Vol. 2B "MFENCE").
// Stronger than any rdma-core DMA barrier on x86; it is what the portable
// full DMA barrier maps to, for symmetry with DMB OSH on arm64.
func MFENCE()

// CompilerBarrier is an empty function. Its body is only RET: calling it is
// the whole effect. The Go compiler cannot see into an assembly function, so
// it must assume the call reads and writes any memory: no load or store is
// moved across the call site and every value is stored before it. The CPU
// needs nothing more to keep write-back stores in program order (Intel SDM
// Vol. 3A §9.2.2: stores are not reordered with other stores). This is
// rdma-core's udma_to_device_barrier on x86-64, asm volatile("" ::: "memory").
func CompilerBarrier()

// RDTSC returns the time-stamp counter (EDX:EAX of RDTSC, Intel SDM Vol. 2B
// "RDTSC"). It is not serialising: the read may happen before earlier
// instructions finish, which is fine for per-burst cycle accounting. On
// CPUs with an invariant TSC (CPUID 80000007H:EDX[8]) it ticks at a
// constant rate; TSCHz gives that rate.
func RDTSC() uint64

// MMIOWrite64 stores v at addr with one plain 64-bit MOV: no LOCK prefix,
// no XCHG. Go's atomic.StoreUint64 is an XCHG on amd64, which is locked
// (Intel SDM Vol. 2B "XCHG") and must not be used on a write-combining
// UAR mapping; rdma-core's util/mmio.h mmio_write64_be is this store. The
// caller puts v in the device's byte order and orders it with the
// barriers.
func MMIOWrite64(addr *uint64, v uint64)

// MMIOWrite32 stores v at addr with one plain 32-bit MOV (rdma-core
// mmio_write32_be, and the doorbell-record store *db = htobe32(v)).
func MMIOWrite32(addr *uint32, v uint32)
