package packet_test

import "golang.org/x/sys/unix"

// threadCPU returns the calling thread's CPU time in nanoseconds (the
// caller locks its OS thread). On a shared machine this excludes the time
// the benchmark was not running, which wall-clock ns/pkt includes.
func threadCPU() int64 {
	var ts unix.Timespec
	if unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts) != nil {
		return 0
	}
	return ts.Nano()
}
