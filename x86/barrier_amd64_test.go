package x86

import (
	"testing"
	"time"
)

// TestBarriersReturn runs every stub: callable, correct frame, returns.
// Ordering itself is argued from the Intel SDM, not tested.
func TestBarriersReturn(t *testing.T) {
	x := 0
	for _, f := range []func(){LFENCE, SFENCE, MFENCE, CompilerBarrier} {
		f()
		x++
	}
	if x != 4 {
		t.Fatalf("ran %d stubs, want 4", x)
	}
}

func TestTSCAgreesWithCalibration(t *testing.T) {
	hz := TSCHz()
	if hz < 1e6 {
		t.Fatalf("TSCHz = %d, implausibly low", hz)
	}
	if again := TSCHz(); again != hz {
		t.Fatalf("TSCHz changed between calls: %d then %d (must be computed once)", hz, again)
	}
	// Independent window: counter interval inside the clock interval, so
	// the implied rate can only fall below hz (preemption), not rise much.
	t0 := time.Now()
	c0 := RDTSC()
	time.Sleep(50 * time.Millisecond)
	c1 := RDTSC()
	el := time.Since(t0)
	if c1 <= c0 {
		t.Fatalf("TSC did not advance over %v: %d then %d", el, c0, c1)
	}
	ratio := float64(c1-c0) / el.Seconds() / float64(hz)
	t.Logf("TSCHz=%d, window ratio %.3f", hz, ratio)
	if ratio > 1.05 || ratio < 0.2 {
		t.Fatalf("TSC rate over %v is %.3f x the calibrated %d Hz", el, ratio, hz)
	}
}

func TestNoAllocs(t *testing.T) {
	TSCHz()
	n := testing.AllocsPerRun(100, func() {
		LFENCE()
		SFENCE()
		MFENCE()
		CompilerBarrier()
		_ = RDTSC()
		_ = TSCHz()
	})
	if n != 0 {
		t.Fatalf("allocs per run = %v, want 0", n)
	}
}

// TestMMIOWrite stores through both stubs and reads the words back: the
// value lands whole, at the address given, and nothing next to it moves.
// The encodings (plain MOV, no LOCK, no XCHG) are TestDisassembly's.
func TestMMIOWrite(t *testing.T) {
	var w [3]uint64
	MMIOWrite64(&w[1], 0x0102030405060708)
	if w != [3]uint64{0, 0x0102030405060708, 0} {
		t.Fatalf("MMIOWrite64: %#x", w)
	}
	var h [3]uint32
	MMIOWrite32(&h[1], 0xa1b2c3d4)
	if h != [3]uint32{0, 0xa1b2c3d4, 0} {
		t.Fatalf("MMIOWrite32: %#x", h)
	}
}
