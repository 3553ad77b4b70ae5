package swengine

import (
	"runtime"
	"testing"
)

// An engine's reads keep the two buffers of counts they return in turn,
// which the classifier writes, and no third: after three reads of 10k
// rules the engine retains at most 40 bytes a rule more than before them
// (two counters are 32; with the classifier's counts in a buffer of their
// own, 48).
func TestEmulatedReadsRetainTwoBuffers(t *testing.T) {
	const n = 10000
	e, s := emulatedOver(t, n)
	defer s.Close()
	var m0, m1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m0)
	for range 3 {
		if st := e.Stats(); len(st.Counts) != n {
			t.Fatalf("a read of %d counts, want %d", len(st.Counts), n)
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&m1)
	per := float64(int64(m1.HeapAlloc)-int64(m0.HeapAlloc)) / n
	t.Logf("%.1f bytes retained a rule by the reads", per)
	if per > 40 {
		t.Fatalf("the reads retain %.1f bytes a rule, want at most 40 (two buffers of counts)", per)
	}
	runtime.KeepAlive(e)
}
