package swengine

import (
	"fmt"
	"net/netip"
	"runtime"
	"testing"

	"github.com/scrubd/scrubd/swpath/classifier"
	"github.com/scrubd/scrubd/swpath/dv/dvsim"
	"github.com/scrubd/scrubd/swpath/rule"
)

// An engine's reads keep the two buffers of counts they return in turn,
// which the classifier writes, and no third: after three reads of 10k
// rules the engine retains at most 40 bytes a rule more than before them
// (two counters are 32; with the classifier's counts in a buffer of their
// own, 48).
func TestEmulatedReadsRetainTwoBuffers(t *testing.T) {
	const n = 10000
	set := &rule.Set{}
	for i := range n {
		set.Rules = append(set.Rules, rule.Rule{ID: fmt.Sprintf("r%d", i), Priority: 100, Action: rule.Drop,
			Match: rule.Match{Dst: netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}), 32)}})
	}
	cls, err := classifier.New(set)
	if err != nil {
		t.Fatal(err)
	}
	s, err := dvsim.New(dvsim.Config{Classifier: cls, Workers: 1, Host: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	e := NewEmulated(EmulatedConfig{DV: s, Scale: 10, Workers: 1, Hz: 2e9, ModelLost: func(int) uint64 { return 0 }})
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
