package swengine

import (
	"fmt"
	"net/netip"
	"runtime"
	"slices"
	"testing"

	"github.com/scrubd/scrubd/agent/dataplane"
	"github.com/scrubd/scrubd/swpath/classifier"
	"github.com/scrubd/scrubd/swpath/dv/dvsim"
	"github.com/scrubd/scrubd/swpath/rule"
	"github.com/scrubd/scrubd/swpath/traffic"
)

// The simulated NIC's software path read once a second by placement: the
// engine's reads of n rules allocate nothing per rule, idle or with a few
// counters moving (the classifier's counts are read into the two buffers
// returned in turn): the bytes a read allocates at 10k rules are those at 1k, within a margin far
// below one byte a rule. With a per-rule map (about 100 bytes a rule
// built or copied) or a counts slice made every read (16 bytes a rule),
// the difference is 144 KB or more.
func TestEmulatedReadsAllocateNothingPerRule(t *testing.T) {
	idle1k, busy1k := emulatedReadBytes(t, 1000)
	idle10k, busy10k := emulatedReadBytes(t, 10000)
	t.Logf("bytes a read: idle %d at 1k rules, %d at 10k; with traffic %d, %d", idle1k, idle10k, busy1k, busy10k)
	const margin = 2048
	if idle10k > idle1k+margin {
		t.Errorf("an idle read allocates %d bytes at 10k rules, %d at 1k", idle10k, idle1k)
	}
	if busy10k > busy1k+margin {
		t.Errorf("a read after traffic allocates %d bytes at 10k rules, %d at 1k", busy10k, busy1k)
	}
}

// emulatedOver returns an Emulated over a dv engine (one worker, on the
// NIC emulator) holding n /32 drop rules, and the engine, which the
// caller closes.
func emulatedOver(t *testing.T, n int) (*Emulated, *dvsim.Sim) {
	t.Helper()
	set := &rule.Set{}
	for i := range n {
		set.Rules = append(set.Rules, rule.Rule{ID: fmt.Sprintf("r%d", i), Priority: 100, Action: rule.Drop,
			Match: rule.Match{Dst: netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}), 32)}})
	}
	return emulatedFor(t, set)
}

// emulatedFor returns an Emulated engine over set (one worker, no lost
// packets modelled) and its simulation.
func emulatedFor(t *testing.T, set *rule.Set) (*Emulated, *dvsim.Sim) {
	t.Helper()
	cls, err := classifier.New(set)
	if err != nil {
		t.Fatal(err)
	}
	s, err := dvsim.New(dvsim.Config{Classifier: cls, Workers: 1, Host: true})
	if err != nil {
		t.Fatal(err)
	}
	return NewEmulated(EmulatedConfig{DV: s, Scale: 10, Workers: 1, Hz: 2e9, ModelLost: func(int) uint64 { return 0 }}), s
}

// emulatedReadBytes returns the bytes one Stats of an Emulated over n
// rules allocates, idle and after a packet, on average over 10 reads of
// each (after two reads that size the buffers).
func emulatedReadBytes(t *testing.T, n int) (idle, busy uint64) {
	e, s := emulatedOver(t, n)
	defer s.Close()
	frame := traffic.AppendFrame(nil, &traffic.Frame{Family: rule.IPv4, Src: netip.MustParseAddr("198.18.0.1"),
		Dst: netip.MustParseAddr("10.0.0.7"), Proto: rule.ProtoUDP, SrcPort: 1, DstPort: 2, Size: 100})
	e.Stats()
	e.Stats()
	const reads = 10
	var m0, m1 runtime.MemStats
	for range reads {
		runtime.ReadMemStats(&m0)
		e.Stats()
		runtime.ReadMemStats(&m1)
		idle += m1.TotalAlloc - m0.TotalAlloc
	}
	for range reads {
		w := s.Workers[0]
		w.Step()
		s.RX[0].Deliver(frame)
		for w.Step() > 0 {
		}
		runtime.ReadMemStats(&m0)
		e.Stats()
		runtime.ReadMemStats(&m1)
		busy += m1.TotalAlloc - m0.TotalAlloc
	}
	if c, ok := e.Stats().Rule("r7"); !ok || c.Packets != 10*reads {
		t.Fatalf("%d rules: r7 counts %+v after %d packets at scale 10", n, c, reads)
	}
	return idle / reads, busy / reads
}

// The counts a read returns are the set's, by position, scaled; counts
// follow a rule's id across a patch and a swap; the counts one read
// returned hold while the next read is taken (two buffers in turn).
func TestEmulatedCountsByPosition(t *testing.T) {
	const n = 50
	set := &rule.Set{}
	for i := range n {
		set.Rules = append(set.Rules, rule.Rule{ID: fmt.Sprintf("r%d", i), Priority: 100, Action: rule.Drop,
			Match: rule.Match{Dst: netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 0, 0, byte(i)}), 32)}})
	}
	e, s := emulatedFor(t, set)
	defer s.Close()
	first := e.Stats()
	if first.Set != set || len(first.Counts) != n {
		t.Fatalf("first read: set %p (want %p), %d counts, want %d", first.Set, set, len(first.Counts), n)
	}
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
	if c := got.Counts[7]; c.Packets != 10 || c.Bytes != 10*100 {
		t.Fatalf("r7 counts %+v after one 100-byte packet at scale 10", c)
	}
	send("10.0.0.9")
	next := e.Stats()
	if next.Counts[7].Packets != 10 || next.Counts[9].Packets != 10 || got.Counts[9].Packets != 0 || got.Counts[7].Packets != 10 {
		t.Fatalf("after a packet to r9: r7 %+v, r9 %+v (the read before: r7 %+v r9 %+v)", next.Counts[7], next.Counts[9], got.Counts[7], got.Counts[9])
	}
	// A patch removes r0..r4 and adds "new" at the end: r7 is now at 2.
	to := &rule.Set{Rules: append(slices.Clone(set.Rules[5:]), rule.Rule{ID: "new", Priority: 100, Action: rule.Drop,
		Match: rule.Match{Dst: netip.MustParsePrefix("10.0.1.1/32")}})}
	if err := e.PatchRules(set, to, []int{0, 1, 2, 3, 4}, []int{n - 5}); err != nil {
		t.Fatal(err)
	}
	send("10.0.0.7")
	send("10.0.1.1")
	st := e.Stats()
	if st.Set != to || len(st.Counts) != n-4 || st.Set.Rules[2].ID != "r7" {
		t.Fatalf("after the patch: set %p (want %p), %d counts", st.Set, to, len(st.Counts))
	}
	if st.Counts[2].Packets != 20 || st.Counts[4].Packets != 10 || st.Counts[n-5].Packets != 10 {
		t.Fatalf("after the patch: r7 %+v r9 %+v new %+v, want 20, 10, 10 packets", st.Counts[2], st.Counts[4], st.Counts[n-5])
	}
	// A swap to the set reversed: the counts follow the ids.
	rev := &rule.Set{Rules: slices.Clone(to.Rules)}
	slices.Reverse(rev.Rules)
	if err := e.SetRules(rev); err != nil {
		t.Fatal(err)
	}
	send("10.0.0.9")
	st = e.Stats()
	for id, want := range map[string]uint64{"r7": 20, "r9": 20, "new": 10, "r8": 0} {
		if c, ok := st.Rule(id); !ok || c.Packets != want {
			t.Errorf("after the swap: %s %+v (found %v), want %d packets", id, c, ok, want)
		}
	}
}

// A set with holes (rule.Holes), patched in place: a hole's count is zero
// whatever packets its old rule would match, and it is not the rule of
// its ID (Rule skips it); an ID removed in place and appended again later
// starts from zero, at its new position.
func TestEmulatedCountsWithHoles(t *testing.T) {
	const n = 50
	set := &rule.Set{Rules: make([]rule.Rule, 0, n+8)}
	dst := func(b2, b3 int) netip.Prefix {
		return netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 0, byte(b2), byte(b3)}), 32)
	}
	for i := range n {
		set.Rules = append(set.Rules, rule.Rule{ID: fmt.Sprintf("r%d", i), Priority: 100, Action: rule.Drop, Match: rule.Match{Dst: dst(0, i)}})
	}
	e, s := emulatedFor(t, set)
	defer s.Close()
	send := func(d netip.Prefix) {
		w := s.Workers[0]
		w.Step()
		s.RX[0].Deliver(traffic.AppendFrame(nil, &traffic.Frame{Family: rule.IPv4, Src: netip.MustParseAddr("198.18.0.1"),
			Dst: d.Addr(), Proto: rule.ProtoUDP, SrcPort: 1, DstPort: 2, Size: 100}))
		for w.Step() > 0 {
		}
	}
	send(dst(0, 7))
	if c := e.Stats().Counts[7]; c.Packets != 10 {
		t.Fatalf("r7 counts %+v after one packet at scale 10", c)
	}
	// r7 removed in place: its position is a hole.
	to1 := &rule.Set{Rules: set.Rules, Holes: set.Holes.With(7)}
	if err := e.PatchRules(set, to1, []int{7}, nil); err != nil {
		t.Fatal(err)
	}
	send(dst(0, 7))
	st := e.Stats()
	if st.Set != to1 || len(st.Counts) != n || st.Counts[7] != (dataplane.Counter{}) {
		t.Fatalf("after the removal in place: set %p (want %p), %d counts, the hole %+v", st.Set, to1, len(st.Counts), st.Counts[7])
	}
	if c, ok := st.Rule("r7"); ok {
		t.Fatalf("Rule(r7) found %+v at a hole", c)
	}
	// r7 again, appended in place with another match: from zero.
	to2 := &rule.Set{Rules: append(to1.Rules, rule.Rule{ID: "r7", Priority: 100, Action: rule.Drop, Match: rule.Match{Dst: dst(1, 7)}}), Holes: to1.Holes}
	if err := e.PatchRules(to1, to2, nil, []int{n}); err != nil {
		t.Fatal(err)
	}
	send(dst(0, 7))
	send(dst(1, 7))
	send(dst(0, 9))
	st = e.Stats()
	if st.Set != to2 || len(st.Counts) != n+1 || st.Counts[7] != (dataplane.Counter{}) || st.Counts[n].Packets != 10 || st.Counts[9].Packets != 10 {
		t.Fatalf("after the append: %d counts, the hole %+v, r7 %+v, r9 %+v; want the hole zero, 10 packets each", len(st.Counts), st.Counts[7], st.Counts[n], st.Counts[9])
	}
	if c, ok := st.Rule("r7"); !ok || c.Packets != 10 {
		t.Fatalf("Rule(r7) %+v (found %v), want 10 packets", c, ok)
	}
}

// The engine reports its lookup's memory and build time: those of the
// classifier's table in force, which grow with the rules it holds.
func TestEmulatedReportsLookup(t *testing.T) {
	var bytes [2]int64
	for i, n := range []int{1000, 10000} {
		e, s := emulatedOver(t, n)
		st := e.Stats()
		want := s.Class.Table().Stats()
		s.Close()
		if st.LookupBytes != int64(want.Bytes) || st.LookupBuild != want.Build || st.LookupBytes <= 0 || st.LookupBuild <= 0 {
			t.Fatalf("%d rules: lookup %d bytes, built in %v; the classifier's table: %d bytes, %v", n, st.LookupBytes, st.LookupBuild, want.Bytes, want.Build)
		}
		bytes[i] = st.LookupBytes
	}
	if bytes[1] < 5*bytes[0] {
		t.Fatalf("lookup %d bytes at 1k rules, %d at 10k: want it to grow with the rules", bytes[0], bytes[1])
	}
	t.Logf("lookup bytes: %d at 1k /32 rules, %d at 10k", bytes[0], bytes[1])
}
