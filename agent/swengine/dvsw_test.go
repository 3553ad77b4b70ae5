package swengine

import (
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/scrubd/scrubd/agent/dataplane"
	"github.com/scrubd/scrubd/swpath/classifier"
	"github.com/scrubd/scrubd/swpath/dv"
	"github.com/scrubd/scrubd/swpath/dv/dvsim"
	"github.com/scrubd/scrubd/swpath/rule"
	"github.com/scrubd/scrubd/swpath/traffic"
)

// The Direct Verbs engine as the agent's software path, run here over the
// NIC emulator: per-rule counts from the shared classifier, per-worker
// counts from the engine, cycles converted from counter ticks to the
// worker clock, the pool's buffers, the lookup's memory, an atomic rule
// swap, and counters kept after close.
func TestDVSW(t *testing.T) {
	set, err := rule.Parse("t", []byte("rules:\n  - {id: drop-udp, action: drop, match: {dst: 203.0.113.0/24, proto: udp}}\n"), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	cls, err := classifier.New(set)
	if err != nil {
		t.Fatal(err)
	}
	s, err := dvsim.New(dvsim.Config{Classifier: cls, Workers: 2, Host: true})
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	defer func() {
		if !closed {
			s.Close()
		}
	}()
	sw := newDVSW(cls, s.Pool, 2, 2e9, s.Engine)
	sw.tickHz = 1e9 // a 1 GHz counter: cycles at 2 GHz are twice the ticks
	frame := func(proto uint8) []byte {
		return traffic.AppendFrame(nil, &traffic.Frame{Family: rule.IPv4, Src: netip.MustParseAddr("198.18.0.1"),
			Dst: netip.MustParseAddr("203.0.113.5"), Proto: proto, SrcPort: 1000, DstPort: 53, Size: 100})
	}
	send := func(q int, n int, proto uint8) {
		w := s.Workers[q]
		w.Step() // post receive buffers
		for i := 0; i < n; i++ {
			s.RX[q].Deliver(frame(proto))
		}
		for w.Step() > 0 {
		}
	}
	send(0, 10, rule.ProtoUDP)
	send(1, 5, rule.ProtoTCP)
	st := sw.Stats()
	tot := st.Totals()
	if c, _ := st.Rule("drop-udp"); st.Set != set || c.Packets != 10 || tot.RxPackets != 15 || tot.Dropped != 10 || tot.Passed != 5 || len(st.Workers) != 2 {
		t.Fatalf("stats %+v totals %+v", st, tot)
	}
	raw := dv.Total(s.Engine.Snapshot())
	if raw.Cycles == 0 || tot.Cycles != 2*raw.Cycles {
		t.Fatalf("cycles %d, engine ticks %d", tot.Cycles, raw.Cycles)
	}
	if tot.PoolSize == 0 || tot.PoolFree <= 0 || tot.PoolFree > tot.PoolSize {
		t.Fatalf("pool %d free of %d", tot.PoolFree, tot.PoolSize)
	}
	if ts := cls.Table().Stats(); st.LookupBytes != int64(ts.Bytes) || st.LookupBuild != ts.Build || st.LookupBytes <= 0 {
		t.Fatalf("lookup %d bytes built in %v; the classifier's table %d bytes built in %v", st.LookupBytes, st.LookupBuild, ts.Bytes, ts.Build)
	}
	if w, hz := sw.Capacity(); w != 2 || hz != 2e9 {
		t.Fatalf("capacity %d %v", w, hz)
	}
	// A change given as a patch: a TCP drop added after the UDP one. The
	// UDP rule keeps its count; TCP is dropped from now on.
	var p dataplane.SWPatcher = sw
	cur := cls.Table().Set()
	next := &rule.Set{Rules: append(slices.Clip(cur.Rules), rule.Rule{ID: "drop-tcp", Action: rule.Drop,
		Match: rule.Match{Dst: netip.MustParsePrefix("203.0.113.0/24"), Proto: []uint8{rule.ProtoTCP}}})}
	if err := p.PatchRules(cur, next, nil, []int{1}); err != nil {
		t.Fatal(err)
	}
	if cls.Table().Set() != next {
		t.Fatal("the patched set is not the classifier's")
	}
	send(1, 3, rule.ProtoTCP)
	st = sw.Stats()
	udp, _ := st.Rule("drop-udp")
	tcp, _ := st.Rule("drop-tcp")
	if tot := st.Totals(); st.Set != next || st.Counts[0] != udp || st.Counts[1] != tcp || udp.Packets != 10 || tcp.Packets != 3 || tot.Dropped != 13 || tot.Passed != 5 {
		t.Fatalf("after the patch: %+v, %+v", st.Counts, tot)
	}
	if err := sw.SetRules(&rule.Set{}); err != nil {
		t.Fatal(err)
	}
	send(0, 4, rule.ProtoUDP)
	st = sw.Stats()
	if tot := st.Totals(); tot.Dropped != 13 || tot.Passed != 9 {
		t.Fatalf("after the swap to no rules: %+v", tot)
	}
	sw.freeze()
	closed = true
	if err := s.Close(); err != nil || s.Leaked != 0 {
		t.Fatalf("close: %v, %d leaked", err, s.Leaked)
	}
	st = sw.Stats()
	if tot := st.Totals(); tot.RxPackets != 22 {
		t.Fatalf("after close: %+v", tot)
	}
}
