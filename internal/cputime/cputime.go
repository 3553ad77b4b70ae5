// Package cputime reads the CPU time a process has used, for benchmarks
// that report CPU per operation beside wall time (other jobs on a shared
// machine inflate wall time much more than CPU time).
package cputime

import (
	"syscall"
	"time"
)

// Process returns the CPU time, user and system, of every thread of this
// process so far (the garbage collector's work included); 0 if the kernel
// does not say (getrusage(2) fails only for a bad argument).
func Process() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
