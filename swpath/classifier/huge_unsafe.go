package classifier

import (
	"unsafe"

	"github.com/scrubd/scrubd/swpath/internal/sys"
)

// hugeMin: arrays of a lookup's blocks of at least this many bytes take
// memory that transparent huge pages can back (hugeAlloc). A variable,
// so that tests can give small arrays such memory.
var hugeMin = 4 << 20

// hugeAlloc returns n zeroed Ts whose memory starts on a huge page
// (sys.HugePageSize) and is advised for transparent huge pages
// (MADV_HUGEPAGE, sys.AdviseHuge) where they take at least hugeMin
// bytes, else make's. A fresh 5-tuple's two blocks are each in a page of
// their own: at 100k ClassBench-style rules the tight blocks (12.9 MiB)
// span 3,300 pages of 4 KiB, more than the second-level TLB holds beside
// the trees' nodes. With 2 MiB pages the group scan took 0.78-0.95 of
// its time, keys, walk and scan 0.87-0.98, DecideBurst 0.86-0.99 (two
// tables of one set, one with huge pages, alternated 21 times in one
// process, thread CPU time, medians, four runs).
// T must hold no pointers: the memory is a []byte to the garbage
// collector, which keeps it alive through the slice's pointer into it.
// The advice is best effort (transparent huge pages may be off, or
// never: the kernel then keeps small pages); hugeSettle asks again once
// the memory is written.
func hugeAlloc[T any](n int) []T {
	size := n * int(unsafe.Sizeof(*new(T)))
	if size < hugeMin {
		return make([]T, n)
	}
	buf := make([]byte, size+sys.HugePageSize)
	off := int(-uintptr(unsafe.Pointer(unsafe.SliceData(buf))) & (sys.HugePageSize - 1))
	_ = sys.AdviseHuge(buf[off : off+size&^(sys.HugePageSize-1)])
	return unsafe.Slice((*T)(unsafe.Pointer(&buf[off])), n)
}

// hugeSettle asks that s's whole huge pages be backed by huge pages now
// (MADV_COLLAPSE, sys.CollapseHuge), where hugeAlloc gave it memory that
// small pages already backed (Go's heap reuses memory): MADV_HUGEPAGE
// only shapes faults to come. Best effort, as hugeAlloc's advice (Linux
// 6.1 and later).
func hugeSettle[T any](s []T) {
	size := len(s) * int(unsafe.Sizeof(*new(T)))
	if size < hugeMin {
		return
	}
	b := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), size)
	_ = sys.CollapseHuge(b[:size&^(sys.HugePageSize-1)])
}
