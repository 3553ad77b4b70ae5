package prm

import (
	"math/bits"
	"sync/atomic"
	"unsafe"
)

// The words the CPU and the device both write, or that one writes while
// the other polls, are accessed with sync/atomic so that the Go memory
// model (and the race detector, when the device is the emulator) orders
// the plain accesses around them. These helpers cast a []byte offset to a
// *uint32 / *uint64; the offsets are 4- or 8-byte aligned by layout (CQE
// 0x3c, doorbell records at 0 and 4, UAR at 0 and BFDefaultSize) and the
// buffers come from Alloc or from rdma-core / mmap (page aligned). A
// misaligned or out-of-range offset panics before it reaches an atomic.

func word32(b []byte, off int) *uint32 {
	// A length check, not "_ = b[off+3]": the race detector would count
	// that as a plain read of a byte the other side writes atomically.
	if off < 0 || off > len(b)-4 {
		panic("prm: device word outside its buffer")
	}
	p := unsafe.Add(unsafe.Pointer(unsafe.SliceData(b)), off)
	if uintptr(p)&3 != 0 {
		panic("prm: misaligned 32-bit device word")
	}
	return (*uint32)(p)
}

func word64(b []byte, off int) *uint64 {
	if off < 0 || off > len(b)-8 {
		panic("prm: device word outside its buffer")
	}
	p := unsafe.Add(unsafe.Pointer(unsafe.SliceData(b)), off)
	if uintptr(p)&7 != 0 {
		panic("prm: misaligned 64-bit device word")
	}
	return (*uint64)(p)
}

// LoadWord atomically loads the host-order uint32 at off (the CQE word at
// 0x3c: wqe_counter, signature, op_own). Split it with OwnerWord.
func LoadWord(b []byte, off int) uint32 { return atomic.LoadUint32(word32(b, off)) }

// StoreWord atomically stores a host-order uint32 at off (publishing a CQE
// owner word, or invalidating a slot).
func StoreWord(b []byte, off int, w uint32) { atomic.StoreUint32(word32(b, off), w) }

// LoadDBR atomically loads a big-endian 32-bit doorbell-record word and
// returns it in host order.
func LoadDBR(b []byte, off int) uint32 {
	return bits.ReverseBytes32(atomic.LoadUint32(word32(b, off)))
}

// LoadDBRRaw atomically loads a doorbell-record word without byte
// swapping (for an emulator checking the byte order).
func LoadDBRRaw(b []byte, off int) uint32 { return atomic.LoadUint32(word32(b, off)) }

// StoreDBR stores v into a doorbell-record word, big-endian (rdma-core:
// *db = htobe32(v)), with one plain store (store32: barrier.MMIOWrite32,
// or an atomic store under the race detector).
func StoreDBR(b []byte, off int, v uint32) {
	store32(word32(b, off), bits.ReverseBytes32(v))
}

// StoreDBRHost stores v in host byte order: the bug VPP fixed in
// 3214ba59e30. Only tests use it, to check the emulator flags it.
func StoreDBRHost(b []byte, off int, v uint32) { atomic.StoreUint32(word32(b, off), v) }

// Copy64 stores the 8 bytes at src[soff:] into dst[doff:] unchanged, with
// one plain 64-bit store (store64): a 64-bit MMIO doorbell write of the
// first 8 bytes of a control segment (rdma-core mmio_write64_be(bf->reg,
// *(__be64 *)ctrl)). Never a locked instruction on the UAR page.
func Copy64(dst []byte, doff int, src []byte, soff int) {
	store64(word64(dst, doff), *word64(src, soff))
}

// Load64 atomically loads the 8 bytes at off and returns them as a
// big-endian number (the emulator's side of a 64-bit doorbell).
func Load64(b []byte, off int) uint64 {
	return bits.ReverseBytes64(atomic.LoadUint64(word64(b, off)))
}

// Alloc returns n zeroed bytes aligned to 64 (a cache line, the CQE size),
// for rings and doorbell records that tests and the emulator own.
func Alloc(n int) []byte {
	words := make([]uint64, (n+63)/8+8)
	p := unsafe.Pointer(&words[0])
	skip := (64 - uintptr(p)&63) & 63
	return unsafe.Slice((*byte)(unsafe.Add(p, skip)), n)
}

// Addr returns the virtual address of b[0], the address a device is given
// (an MR base, a WQE data-segment address). It is never turned back into
// a pointer: the device side translates addresses into offsets.
func Addr(b []byte) uint64 {
	if len(b) == 0 {
		return 0
	}
	return uint64(uintptr(unsafe.Pointer(&b[0])))
}
