package x86

import (
	"sync"
	"time"
)

var tscHz = sync.OnceValue(calibrateTSC)

// TSCHz returns the rate of RDTSC in Hz, measured once (on first call)
// against the monotonic clock: three 10 ms windows, the median kept. The
// first call therefore takes about 30 ms; later calls are a load.
func TSCHz() uint64 { return tscHz() }

func calibrateTSC() uint64 {
	var r [3]float64
	for i := range r {
		t0 := time.Now()
		c0 := RDTSC()
		time.Sleep(10 * time.Millisecond)
		c1 := RDTSC()
		el := time.Since(t0)
		r[i] = float64(c1-c0) / el.Seconds()
	}
	// median of three
	a, b, c := r[0], r[1], r[2]
	if a > b {
		a, b = b, a
	}
	if b > c {
		b = c
	}
	if a > b {
		b = a
	}
	return uint64(b)
}
