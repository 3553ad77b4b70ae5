package swengine

import (
	"fmt"
	"net/netip"
	"runtime"
	"testing"

	"github.com/scrubd/scrubd/swpath/classifier"
	"github.com/scrubd/scrubd/swpath/dv/dvsim"
	"github.com/scrubd/scrubd/swpath/rule"
	"github.com/scrubd/scrubd/swpath/traffic"
)

// The simulated NIC's software path read once a second by placement: an
// idle engine's reads of n rules allocate nothing per rule (the per-rule
// map of the last read is returned again, the classifier's counters are
// read into the same buffers); once a rule counts a packet the next read
// returns a new map with the count (scaled) and every other rule's, and
// the map returned before is left as it was.
func TestEmulatedIdleReadsAllocateNothingPerRule(t *testing.T) {
	const n = 5000
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
	first := e.Stats()
	if len(first.Rules) != n {
		t.Fatalf("%d rules counted, want %d", len(first.Rules), n)
	}
	e.Stats()
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	const reads = 10
	for range reads {
		e.Stats()
	}
	runtime.ReadMemStats(&m1)
	// A map of n counters is about 100 bytes a rule; a read of the
	// workers' and the pool's counters a few hundred bytes.
	if per := (m1.TotalAlloc - m0.TotalAlloc) / reads; per > 4096 {
		t.Errorf("an idle read of %d rules allocates %d bytes", n, per)
	}
	// Traffic: one packet to r7, then one to r9.
	send := func(dst string) {
		w := s.Workers[0]
		w.Step()
		s.RX[0].Deliver(traffic.AppendFrame(nil, &traffic.Frame{Family: rule.IPv4, Src: netip.MustParseAddr("198.18.0.1"),
			Dst: netip.MustParseAddr(dst), Proto: rule.ProtoUDP, SrcPort: 1, DstPort: 2, Size: 100}))
		for w.Step() > 0 {
		}
	}
	send("10.0.0.7")
	got := e.Stats()
	if c := got.Rules["r7"]; c.Packets != 10 || c.Bytes != 10*100 {
		t.Fatalf("r7 counts %+v after one 100-byte packet at scale 10", c)
	}
	if c := first.Rules["r7"]; c.Packets != 0 {
		t.Fatalf("the map an earlier read returned changed: r7 %+v", c)
	}
	if len(got.Rules) != n {
		t.Fatalf("%d rules counted, want %d", len(got.Rules), n)
	}
	send("10.0.0.9")
	next := e.Stats()
	if len(next.Rules) != n || next.Rules["r7"].Packets != 10 || next.Rules["r9"].Packets != 10 || got.Rules["r9"].Packets != 0 {
		t.Fatalf("after a packet to r9: %d rules, r7 %+v, r9 %+v (the read before: r9 %+v)", len(next.Rules), next.Rules["r7"], next.Rules["r9"], got.Rules["r9"])
	}
}
