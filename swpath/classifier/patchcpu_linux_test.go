package classifier

import "golang.org/x/sys/unix"

// processCPU returns the CPU time of the whole process (every thread, so
// a fold's goroutine too) in nanoseconds.
func processCPU() int64 {
	var ru unix.Rusage
	if unix.Getrusage(unix.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
