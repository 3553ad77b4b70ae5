package sys

import (
	"errors"
	"os"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

// ErrNotSupported is returned on systems without these calls.
var ErrNotSupported = errors.New("sys: not supported on this OS")

// Memory policy modes and flags (linux/mempolicy.h).
const (
	MPOL_DEFAULT    = unix.MPOL_DEFAULT
	MPOL_BIND       = unix.MPOL_BIND
	MPOL_INTERLEAVE = unix.MPOL_INTERLEAVE
	MPOL_MF_STRICT  = unix.MPOL_MF_STRICT
	MPOL_MF_MOVE    = unix.MPOL_MF_MOVE
	MPOL_F_NODE     = unix.MPOL_F_NODE
	MPOL_F_ADDR     = unix.MPOL_F_ADDR
)

// MaxNodes is the node-mask width this package passes to the kernel.
const MaxNodes = 1024

// HugePageSize is the huge page size MapAnon asks for.
const HugePageSize = 2 << 20

// MapAnon maps length bytes of private anonymous read/write memory. With
// huge set it asks for 2 MiB hugetlb pages (MAP_HUGETLB|MAP_HUGE_2MB),
// which fails with ENOMEM when none are reserved; length must then be a
// multiple of HugePageSize. Memory is not populated: the caller may mbind
// it before the first touch.
func MapAnon(length int, huge bool) ([]byte, error) {
	flags := unix.MAP_PRIVATE | unix.MAP_ANONYMOUS
	if huge {
		flags |= unix.MAP_HUGETLB | unix.MAP_HUGE_2MB
	}
	b, err := unix.Mmap(-1, 0, length, unix.PROT_READ|unix.PROT_WRITE, flags)
	if err != nil {
		return nil, os.NewSyscallError("mmap", err)
	}
	return b, nil
}

// Unmap releases memory from MapAnon.
func Unmap(b []byte) error {
	return os.NewSyscallError("munmap", unix.Munmap(b))
}

// AdviseHuge asks for transparent huge pages on b (MADV_HUGEPAGE).
func AdviseHuge(b []byte) error {
	return os.NewSyscallError("madvise", unix.Madvise(b, unix.MADV_HUGEPAGE))
}

// CollapseHuge asks the kernel to back b with transparent huge pages now
// (MADV_COLLAPSE, Linux 6.1 and later), where small pages back it
// already: MADV_HUGEPAGE only shapes the faults to come.
func CollapseHuge(b []byte) error {
	return os.NewSyscallError("madvise", unix.Madvise(b, unix.MADV_COLLAPSE))
}

// SetAffinity restricts the calling thread to cpus (sched_setaffinity with
// pid 0, which is the calling thread). The caller must have called
// runtime.LockOSThread, or the goroutine may move to another thread.
func SetAffinity(cpus []int) error {
	set, err := cpuSet(cpus)
	if err != nil {
		return err
	}
	return os.NewSyscallError("sched_setaffinity", unix.SchedSetaffinity(0, &set))
}

// SetProcessAffinity restricts every thread of the process to cpus: those
// running now (each task of /proc/self/task), and those started later,
// which inherit their creator's mask, as child processes do.
func SetProcessAffinity(cpus []int) error {
	set, err := cpuSet(cpus)
	if err != nil {
		return err
	}
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return err
	}
	for _, e := range tasks {
		tid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		// A thread that has exited since the listing is no error.
		if err := unix.SchedSetaffinity(tid, &set); err != nil && err != unix.ESRCH {
			return os.NewSyscallError("sched_setaffinity", err)
		}
	}
	return nil
}

// cpuSet returns the set of cpus, or EINVAL for a CPU it cannot hold.
func cpuSet(cpus []int) (unix.CPUSet, error) {
	var set unix.CPUSet
	for _, c := range cpus {
		if c < 0 || c >= len(set)*64 {
			return set, os.NewSyscallError("sched_setaffinity", unix.EINVAL)
		}
		set.Set(c)
	}
	return set, nil
}

// Affinity returns the CPUs the calling thread may run on.
func Affinity() ([]int, error) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return nil, os.NewSyscallError("sched_getaffinity", err)
	}
	var cpus []int
	for c := 0; c < len(set)*64; c++ {
		if set.IsSet(c) {
			cpus = append(cpus, c)
		}
	}
	return cpus, nil
}

// Gettid returns the calling thread's id.
func Gettid() int { return unix.Gettid() }

// ThreadCPUTime returns the CPU time consumed by the calling thread
// (CLOCK_THREAD_CPUTIME_ID), for benchmarks on shared machines.
func ThreadCPUTime() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		return 0
	}
	return time.Duration(ts.Nano())
}

// HugePages returns the kernel's pool of huge pages of HugePageSize
// (/proc/meminfo).
func HugePages() (HugePool, error) {
	raw, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return HugePool{}, err
	}
	return parseHugePool(string(raw))
}
