//go:build linux

package sys

import (
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// nodeMask is a MaxNodes-bit node mask laid out as the kernel's array of
// unsigned long (linux/mempolicy.h, get_nodes in mm/mempolicy.c).
type nodeMask [MaxNodes / 64]uint64

// maskArg is the maxnode argument: the kernel reads maxnode-1 bits
// (mm/mempolicy.c get_nodes decrements it), so pass the width plus one.
const maskArg = MaxNodes + 1

// Mbind sets the memory policy of the pages of b (mbind(2)). b must start
// on a page boundary (memory from MapAnon does).
func Mbind(b []byte, mode int, nodes []int, flags int) error {
	if len(b) == 0 {
		return os.NewSyscallError("mbind", unix.EINVAL)
	}
	var m nodeMask
	for _, n := range nodes {
		if n < 0 || n >= MaxNodes {
			return os.NewSyscallError("mbind", unix.EINVAL)
		}
		m[n/64] |= 1 << (n % 64)
	}
	_, _, e := unix.Syscall6(unix.SYS_MBIND, uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)),
		uintptr(mode), uintptr(unsafe.Pointer(&m)), maskArg, uintptr(flags))
	if e != 0 {
		return os.NewSyscallError("mbind", e)
	}
	return nil
}

// NodeOfPage returns the node that holds the page at b[0]
// (get_mempolicy with MPOL_F_NODE|MPOL_F_ADDR). The kernel faults the page
// in if it is not present.
func NodeOfPage(b []byte) (int, error) {
	if len(b) == 0 {
		return 0, os.NewSyscallError("get_mempolicy", unix.EINVAL)
	}
	var node int32
	_, _, e := unix.Syscall6(unix.SYS_GET_MEMPOLICY, uintptr(unsafe.Pointer(&node)), 0, 0,
		uintptr(unsafe.Pointer(&b[0])), MPOL_F_NODE|MPOL_F_ADDR, 0)
	if e != 0 {
		return 0, os.NewSyscallError("get_mempolicy", e)
	}
	return int(node), nil
}

// PolicyOf returns the memory policy mode and node set governing the
// address b[0] (get_mempolicy with MPOL_F_ADDR).
func PolicyOf(b []byte) (mode int, nodes []int, err error) {
	if len(b) == 0 {
		return 0, nil, os.NewSyscallError("get_mempolicy", unix.EINVAL)
	}
	var m nodeMask
	var md int32
	_, _, e := unix.Syscall6(unix.SYS_GET_MEMPOLICY, uintptr(unsafe.Pointer(&md)), uintptr(unsafe.Pointer(&m)),
		maskArg, uintptr(unsafe.Pointer(&b[0])), MPOL_F_ADDR, 0)
	if e != 0 {
		return 0, nil, os.NewSyscallError("get_mempolicy", e)
	}
	for n := range MaxNodes {
		if m[n/64]&(1<<(n%64)) != 0 {
			nodes = append(nodes, n)
		}
	}
	return int(md), nodes, nil
}

// Addr returns the address of b[0], for handing memory to a device (DMA
// registration, descriptors). It is only meaningful for memory that does
// not move: mmap'd memory from MapAnon, never the Go heap.
func Addr(b []byte) uintptr {
	if len(b) == 0 {
		return 0
	}
	return uintptr(unsafe.Pointer(&b[0]))
}

// Getcpu returns the CPU and NUMA node the calling thread is running on
// (getcpu(2)); the kernel's own answer, independent of sysfs.
func Getcpu() (cpu, node int, err error) {
	var c, n uint32
	_, _, e := unix.RawSyscall(unix.SYS_GETCPU, uintptr(unsafe.Pointer(&c)), uintptr(unsafe.Pointer(&n)), 0)
	if e != 0 {
		return 0, 0, os.NewSyscallError("getcpu", e)
	}
	return int(c), int(n), nil
}

// Uint32s views b (4-byte aligned, e.g. from MapAnon) as []uint32 of
// len(b)/4 words sharing its memory, so callers can use sync/atomic on
// words of mmap'd memory without unsafe.
func Uint32s(b []byte) []uint32 {
	if len(b) < 4 || uintptr(unsafe.Pointer(&b[0]))%4 != 0 {
		return nil
	}
	return unsafe.Slice((*uint32)(unsafe.Pointer(&b[0])), len(b)/4)
}
