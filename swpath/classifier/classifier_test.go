package classifier

import (
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/scrubd/scrubd/swpath/packet"
	"github.com/scrubd/scrubd/swpath/rule"
	"github.com/scrubd/scrubd/swpath/traffic"
)

func parseAll(frames [][]byte) []rule.Fields {
	fs := make([]rule.Fields, len(frames))
	for i, b := range frames {
		packet.Parse(b, &fs[i])
	}
	return fs
}

// refMatching is the reference AppendMatching: the indexes of the rules
// of set (not its holes) that match f.
func refMatching(set *rule.Set, f *rule.Fields) []int32 {
	var out []int32
	for i := range set.Rules {
		if set.Rules[i].Match.Matches(f) && set.Live(i) {
			out = append(out, int32(i))
		}
	}
	return out
}

// checkAgainstReference compares the classifier with rule.Set.Decide and
// Match.Matches packet by packet.
func checkAgainstReference(t *testing.T, name string, set *rule.Set, fs []rule.Fields) (matched int) {
	t.Helper()
	tab, err := Compile(set)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]int32, len(fs))
	tab.DecideBurst(fs, out)
	// The burst path the set's size did not pick (the per-packet walk or
	// the staged lookup) must decide the same.
	other := *tab
	other.burstWalk = !tab.burstWalk
	out2 := make([]int32, len(fs))
	other.DecideBurst(fs, out2)
	if !slices.Equal(out, out2) {
		for i := range out {
			if out[i] != out2[i] {
				t.Fatalf("%s: packet %d %+v: burst %d with burstWalk %v, %d with the other path", name, i, &fs[i], out[i], tab.burstWalk, out2[i])
			}
		}
	}
	// Both lookups, whichever Compile chose: the hash tables and the
	// decision trees (when they can be built).
	for _, mode := range []int{treesOff, treesForce} {
		alt, err := compile(set, mode)
		if err != nil {
			t.Fatal(err)
		}
		if mode == treesForce && alt.tr == nil {
			continue
		}
		alt.DecideBurst(fs, out2)
		for i := range fs {
			if got := alt.Decide(&fs[i]); got != int(out[i]) || out2[i] != out[i] {
				t.Fatalf("%s: packet %d %+v: Decide %d, burst %d with trees %v, %d with trees %v", name, i, &fs[i], got, out2[i], alt.tr != nil, out[i], tab.tr != nil)
			}
		}
		// AppendMatching of either lookup against the linear reference.
		for i := range fs {
			got := alt.AppendMatching(nil, &fs[i])
			slices.Sort(got)
			if ref := refMatching(set, &fs[i]); !slices.Equal(got, ref) {
				t.Fatalf("%s: packet %d %+v: matching %v with trees %v, reference %v", name, i, &fs[i], got, alt.tr != nil, ref)
			}
		}
		if alt.tr != nil {
			// The burst path the trees' size did not pick (the group
			// walk reads compact records: small trees' are converted).
			alt.tr.walk = !alt.tr.walk
			if !alt.tr.walk && !alt.tr.compact && !alt.tr.vec && !alt.tr.toCompact() {
				t.Fatalf("%s: the trees' records have no compact form", name)
			}
			alt.DecideBurst(fs, out2)
			if !slices.Equal(out, out2) {
				t.Fatalf("%s: trees' burst with walk %v differs from the other path", name, alt.tr.walk)
			}
		}
	}
	var buf []int32
	fails := 0
	for i := range fs {
		f := &fs[i]
		want := set.Decide(f)
		if got := tab.Decide(f); got != want || int(out[i]) != want {
			t.Errorf("%s: packet %d %+v: Decide %d, burst %d, reference %d (%v)", name, i, f, got, out[i], want, ruleStr(set, want))
			fails++
		}
		if want >= 0 {
			matched++
		}
		buf = tab.AppendMatching(buf[:0], f)
		slices.Sort(buf)
		if ref := refMatching(set, f); !slices.Equal(buf, ref) {
			t.Errorf("%s: packet %d %+v: matching %v, reference %v", name, i, f, buf, ref)
			fails++
		}
		if fails > 5 {
			t.FailNow()
		}
	}
	return matched
}

func ruleStr(set *rule.Set, i int) string {
	if i < 0 {
		return "pass"
	}
	return set.Rules[i].ID + ": " + set.Rules[i].Match.String()
}

func TestDifferentialRandom(t *testing.T) {
	seeds, pkts := 40, 2000
	if testing.Short() {
		seeds, pkts = 6, 1000
	}
	total, matched := 0, 0
	for seed := range uint64(seeds) {
		n := []int{1, 3, 10, 40, 200, 800}[seed%6]
		set := traffic.RandomRules(seed, n)
		g := traffic.NewGenerator(traffic.Config{Seed: seed, Rules: set, RuleFraction: 0.8, Odd: true, Sizes: traffic.Sizes{Min: 64, Max: 1518}})
		fs := parseAll(g.Frames(pkts))
		matched += checkAgainstReference(t, fmt.Sprintf("seed %d, %d rules", seed, n), set, fs)
		total += len(fs)
	}
	// The traffic must exercise both outcomes, or the test proves little.
	if matched < total/10 || matched > total*9/10 {
		t.Fatalf("%d of %d packets matched a rule: traffic does not probe the rules", matched, total)
	}
}

// TestDifferentialSingleTable covers the burst path for sets that compile
// to one hash table (decideSingle): the source workload and random sets
// of that shape, on edge-case traffic.
func TestDifferentialSingleTable(t *testing.T) {
	// Shapes: 0 keyed on misc only and plain (decideMiscPlain), 1 misc only
	// with residual checks (decideMiscOnly), 2 with address bits.
	sets := []*rule.Set{traffic.SourceWorkload()}
	shapes := [3]int{1, 0, 0} // the source workload is misc-only and plain
	for seed := uint64(0); seed < 5000 && min(shapes[0], shapes[1], shapes[2]) < 10; seed++ {
		set := traffic.RandomRules(seed, 1+int(seed%4))
		tab, err := Compile(set)
		if err != nil {
			t.Fatal(err)
		}
		if tab.Stats().Tuples != 1 {
			continue
		}
		m := tab.tables[0].mask
		k := 2
		if m.srcHi|m.srcLo|m.dstHi|m.dstLo == 0 {
			k = 1
			if tab.plain {
				k = 0
			}
		}
		if shapes[k] < 10 {
			shapes[k]++
			sets = append(sets, set)
		}
	}
	if min(shapes[0], shapes[1], shapes[2]) < 10 {
		t.Fatalf("single-table sets by shape %v, want 10 of each", shapes)
	}
	total, matched := 0, 0
	for i, set := range sets {
		g := traffic.NewGenerator(traffic.Config{Seed: uint64(i), Rules: set, RuleFraction: 0.8, Odd: true, Sizes: traffic.Sizes{Min: 64, Max: 1518}})
		frames := g.Frames(1000)
		fs := parseAll(frames)
		name := fmt.Sprintf("single-table set %d", i)
		matched += checkAgainstReference(t, name, set, fs)
		total += len(fs)
		checkBurstCounts(t, name, set, fs, frames)
	}
	if matched < total/10 || matched > total*9/10 {
		t.Fatalf("%d of %d packets matched a rule: traffic does not probe the rules", matched, total)
	}
}

// checkBurstCounts classifies fs in bursts with a Worker and compares the
// results and the per-rule and pass counters with rule.Set.Decide.
func checkBurstCounts(t *testing.T, name string, set *rule.Set, fs []rule.Fields, frames [][]byte) {
	t.Helper()
	c, err := New(set)
	if err != nil {
		t.Fatal(err)
	}
	w := c.NewWorker()
	defer w.Close()
	lens := make([]uint32, len(fs))
	want := make([]counterVal, len(set.Rules))
	var pass counterVal
	for i := range fs {
		lens[i] = uint32(len(frames[i]))
		if d := set.Decide(&fs[i]); d >= 0 {
			want[d].packets++
			want[d].bytes += uint64(lens[i])
		} else {
			pass.packets++
			pass.bytes += uint64(lens[i])
		}
	}
	out := make([]Result, 100)
	for i := 0; i < len(fs); i += 100 {
		j := min(i+100, len(fs))
		w.ClassifyBurst(fs[i:j], lens[i:j], out)
		for k := i; k < j; k++ {
			d := set.Decide(&fs[k])
			if out[k-i].Rule != int32(d) || out[k-i].Verdict != c.Table().Verdict(d) {
				t.Fatalf("%s: packet %d: %+v, want rule %d", name, k, out[k-i], d)
			}
		}
	}
	snap := c.Snapshot()
	for i, rc := range snap.Rules {
		if rc.Packets != want[i].packets || rc.Bytes != want[i].bytes {
			t.Errorf("%s: rule %s: %d packets %d bytes, want %d %d", name, rc.ID, rc.Packets, rc.Bytes, want[i].packets, want[i].bytes)
		}
	}
	if snap.PassPackets != pass.packets || snap.PassBytes != pass.bytes || snap.Packets != uint64(len(fs)) {
		t.Errorf("%s: pass %d/%d packets %d, want %d/%d %d", name, snap.PassPackets, snap.PassBytes, snap.Packets, pass.packets, pass.bytes, len(fs))
	}
}

func TestDifferentialClassBench(t *testing.T) {
	sizes, pkts := []int{100, 3000}, 5000
	if testing.Short() {
		sizes, pkts = []int{100, 1000}, 1500
	}
	for _, n := range sizes {
		set := traffic.ClassBenchRules(uint64(n), n)
		g := traffic.NewGenerator(traffic.Config{Seed: 7, Rules: set, RuleFraction: 0.9, Odd: true})
		fs := parseAll(g.Frames(pkts))
		m := checkAgainstReference(t, fmt.Sprintf("classbench %d", n), set, fs)
		if m < len(fs)/5 {
			t.Errorf("classbench %d: only %d of %d packets matched", n, m, len(fs))
		}
	}
}

func TestEdgeRules(t *testing.T) {
	// Hand-written rules at the edges: whole ranges, /0 and /128 prefixes,
	// ports 0 and 65535, ties and accept over drop.
	y := `rules:
  - {id: all-udp-ports, action: drop, match: {proto: udp, dst_port: "0-65535"}}
  - {id: port0, priority: 10, action: accept, match: {port: "0"}}
  - {id: top, priority: 10, action: drop, match: {dst_port: "65535", proto: [tcp, udp, sctp]}}
  - {id: v6host, priority: 5, action: drop, match: {dst: "2001:db8::1/128"}}
  - {id: v4any, action: accept, match: {src: 0.0.0.0/0}}
  - {id: v6any, priority: 2000, action: drop, match: {src: "::/0"}}
  - {id: frag, priority: 1, action: drop, match: {fragment: [is-fragment], length: "1000-1500"}}
  - {id: icmp, priority: 1, action: drop, match: {proto: [icmp, icmpv6], icmp_type: "8", icmp_code: "0"}}
  - {id: dscp, priority: 999, action: drop, match: {dscp: [46], tcp_flags: {value: [syn], mask: [syn, ack]}}}
`
	set, err := rule.Parse("edge.yaml", []byte(y), traffic.Epoch)
	if err != nil {
		t.Fatal(err)
	}
	g := traffic.NewGenerator(traffic.Config{Seed: 3, Rules: set, RuleFraction: 0.9, Odd: true})
	fs := parseAll(g.Frames(5000))
	fs = append(fs, rule.Fields{}, rule.Fields{Family: rule.IPv6, Proto: rule.ProtoUDP, L4: true, Frag: rule.NotFragment,
		Dst: rule.AddrFrom(netip.MustParseAddr("2001:db8::1"))})
	checkAgainstReference(t, "edge", set, fs)
}

func TestRangePrefixes(t *testing.T) {
	for _, r := range []rule.Range{{Lo: 0, Hi: 65535}, {Lo: 0, Hi: 0}, {Lo: 65535, Hi: 65535}, {Lo: 1, Hi: 65534}, {Lo: 1024, Hi: 65535}, {Lo: 1000, Hi: 2000}, {Lo: 53, Hi: 53}} {
		ps, ok := rangePrefixes(rule.Ranges{r}, 1000)
		if !ok {
			t.Fatalf("%v: too many prefixes", r)
		}
		covered := 0
		for v := uint32(0); v <= 65535; v++ {
			in := false
			for _, p := range ps {
				if uint16(v)&portMask(p.len) == p.val {
					in = true
				}
			}
			if in != r.Contains(v) {
				t.Fatalf("%v: prefixes %v disagree at %d", r, ps, v)
			}
			if in {
				covered++
			}
		}
		if covered != int(r.Hi-r.Lo+1) {
			t.Fatalf("%v covered %d", r, covered)
		}
	}
}

// TestPortRangesOutOfBounds: a rule built in Go (no parser refused it)
// with a port range past 65535 matches the ports it names and no others,
// as the linear reference says: neither cut into exact 16-bit ports nor
// held as an entry's 16-bit span, either of which would wrap round to
// ports 0, 1, ...
func TestPortRangesOutOfBounds(t *testing.T) {
	udp := []uint8{rule.ProtoUDP}
	set := &rule.Set{Rules: []rule.Rule{
		// Three values: exact ports, were it cut.
		{ID: "exact", Priority: 1, Action: rule.Drop, Match: rule.Match{Proto: udp, DstPort: rule.Ranges{{Lo: 65535, Hi: 65537}}}},
		// Past maxPortPrefixes prefixes: an entry's span, were it held so.
		{ID: "span", Priority: 2, Action: rule.Drop, Match: rule.Match{Proto: udp, SrcPort: rule.Ranges{{Lo: 65001, Hi: 70000}}}},
	}}
	var fs []rule.Fields
	for _, p := range []uint16{0, 1, 2, 3, 100, 4463, 4464, 65000, 65001, 65534, 65535} {
		for _, q := range []uint16{7, p} {
			fs = append(fs, rule.Fields{Family: rule.IPv4, Proto: rule.ProtoUDP, L4: true, Frag: rule.NotFragment,
				SrcPort: p, DstPort: q,
				Src: rule.AddrFrom(netip.MustParseAddr("192.0.2.1")), Dst: rule.AddrFrom(netip.MustParseAddr("198.51.100.1"))})
		}
	}
	if matched := checkAgainstReference(t, "out of bounds", set, fs); matched == 0 {
		t.Fatal("no packet matched: the check proves nothing")
	}
	tab, err := Compile(set)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fs {
		if f.SrcPort < 65001 && f.DstPort != 65535 {
			if r := tab.Decide(&f); r >= 0 {
				t.Errorf("ports %d -> %d: rule %q matched", f.SrcPort, f.DstPort, set.Rules[r].ID)
			}
		}
	}
}

func burstFields(t *testing.T, set *rule.Set, seed uint64, n int) ([]rule.Fields, []uint32) {
	t.Helper()
	frames := traffic.NewGenerator(traffic.Config{Seed: seed, Rules: set, RuleFraction: 0.8, Sizes: traffic.Sizes{Min: 64, Max: 1518}}).Frames(n)
	lens := make([]uint32, n)
	for i := range frames {
		lens[i] = uint32(len(frames[i]))
	}
	return parseAll(frames), lens
}

// TestCountersAndSwap runs with a set small enough for countSmall and with
// one above smallSet (counted packet by packet).
func TestCountersAndSwap(t *testing.T) {
	for _, n := range []int{60, 3 * smallSet} {
		t.Run(fmt.Sprint(n), func(t *testing.T) { testCountersAndSwap(t, n) })
	}
}

func testCountersAndSwap(t *testing.T, n int) {
	setA := traffic.RandomRules(11, n)
	c, err := New(setA)
	if err != nil {
		t.Fatal(err)
	}
	fs, lens := burstFields(t, setA, 5, 3000)
	want := map[string][2]uint64{}
	var passP, passB uint64
	for i := range fs {
		if d := setA.Decide(&fs[i]); d >= 0 {
			x := want[setA.Rules[d].ID]
			want[setA.Rules[d].ID] = [2]uint64{x[0] + 1, x[1] + uint64(lens[i])}
		} else {
			passP++
			passB += uint64(lens[i])
		}
	}
	w1, w2 := c.NewWorker(), c.NewWorker()
	out := make([]Result, 64)
	for i := 0; i < len(fs); i += 64 {
		j := min(i+64, len(fs))
		w := w1
		if i/64%2 == 1 {
			w = w2
		}
		w.ClassifyBurst(fs[i:j], lens[i:j], out)
		for k := i; k < j; k++ {
			d := setA.Decide(&fs[k])
			if out[k-i].Rule != int32(d) || out[k-i].Verdict != c.Table().Verdict(d) {
				t.Fatalf("packet %d: %+v, want rule %d", k, out[k-i], d)
			}
		}
	}
	w2.Close() // a closed worker's counts stay
	snap := c.Snapshot()
	check := func(snap Snapshot, set *rule.Set, want map[string][2]uint64) {
		t.Helper()
		hits := 0
		for i, rc := range snap.Rules {
			if rc.ID != set.Rules[i].ID {
				t.Fatalf("snapshot rule %d is %s, want %s", i, rc.ID, set.Rules[i].ID)
			}
			if w := want[rc.ID]; rc.Packets != w[0] || rc.Bytes != w[1] {
				t.Errorf("rule %s: %d packets %d bytes, want %v", rc.ID, rc.Packets, rc.Bytes, w)
			}
			hits += int(rc.Packets)
		}
		if hits == 0 {
			t.Fatal("no rule was hit: the test proves nothing")
		}
		// CountsInto: the same counts by the set's index, without ids,
		// into the caller's buffer.
		buf := make([]Count, 0, len(set.Rules)+8)
		cs, counts := c.CountsInto(buf)
		if cs != set || len(counts) != len(set.Rules) || &counts[0] != &buf[:1][0] {
			t.Fatalf("CountsInto: set %p (want %p), %d counts (want %d), in the caller's buffer %v", cs, set, len(counts), len(set.Rules), &counts[0] == &buf[:1][0])
		}
		for i, ct := range counts {
			if w := want[set.Rules[i].ID]; ct != (Count{w[0], w[1]}) {
				t.Errorf("CountsInto rule %s: %+v, want %v", set.Rules[i].ID, ct, w)
			}
		}
	}
	check(snap, setA, want)
	if snap.PassPackets != passP || snap.PassBytes != passB || snap.Packets != uint64(len(fs)) {
		t.Fatalf("pass %d/%d packets %d, want %d/%d %d", snap.PassPackets, snap.PassBytes, snap.Packets, passP, passB, len(fs))
	}
	if snap.TablesProbed == 0 {
		t.Fatal("no tables probed")
	}
	// Swap to a set that keeps every other rule (same id), drops the rest and
	// adds new ones: kept rules keep their counts, new ones start at zero.
	setB := &rule.Set{}
	wantB := map[string][2]uint64{}
	for i, r := range setA.Rules {
		if i%2 == 0 {
			setB.Rules = append(setB.Rules, r)
			wantB[r.ID] = want[r.ID]
		}
	}
	for i, r := range traffic.RandomRules(12, 10).Rules {
		r.ID = fmt.Sprintf("new%d", i)
		setB.Rules = append(setB.Rules, r)
	}
	if err := c.Swap(setB); err != nil {
		t.Fatal(err)
	}
	check(c.Snapshot(), setB, wantB)
	// w1 keeps working after the swap, now against setB.
	for i := range fs[:500] {
		res := w1.Classify(&fs[i], lens[i])
		d := setB.Decide(&fs[i])
		if res.Rule != int32(d) {
			t.Fatalf("after swap packet %d: rule %d, want %d", i, res.Rule, d)
		}
		if d >= 0 {
			x := wantB[setB.Rules[d].ID]
			wantB[setB.Rules[d].ID] = [2]uint64{x[0] + 1, x[1] + uint64(lens[i])}
		}
	}
	check(c.Snapshot(), setB, wantB)
	w1.Close()
	check(c.Snapshot(), setB, wantB)
}

// TestSwapAtomic runs bursts while the set flips between two sets that
// decide differently: every burst must agree entirely with one of them.
func TestSwapAtomic(t *testing.T) {
	setA := traffic.RandomRules(21, 50)
	setB := traffic.RandomRules(22, 50)
	fs, lens := burstFields(t, setA, 9, 256)
	wantA, wantB := make([]int32, len(fs)), make([]int32, len(fs))
	differ := 0
	for i := range fs {
		wantA[i], wantB[i] = int32(setA.Decide(&fs[i])), int32(setB.Decide(&fs[i]))
		if wantA[i] != wantB[i] {
			differ++
		}
	}
	if differ < 20 {
		t.Fatalf("sets differ on only %d packets", differ)
	}
	c, err := New(setA)
	if err != nil {
		t.Fatal(err)
	}
	var stop atomic.Bool
	var wg sync.WaitGroup
	var bursts [2]atomic.Int64
	for g := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w := c.NewWorker()
			defer w.Close()
			out := make([]Result, len(fs))
			for n := 0; !stop.Load() || n < 50; n++ {
				w.ClassifyBurst(fs, lens, out)
				isA, isB := true, true
				for i := range out {
					isA = isA && out[i].Rule == wantA[i]
					isB = isB && out[i].Rule == wantB[i]
				}
				switch {
				case isA:
					bursts[0].Add(1)
				case isB:
					bursts[1].Add(1)
				default:
					t.Errorf("worker %d burst %d saw half a rule set", g, n)
					return
				}
			}
		}()
	}
	for i := range 200 {
		s := setA
		if i%2 == 0 {
			s = setB
		}
		if err := c.Swap(s); err != nil {
			t.Fatal(err)
		}
	}
	stop.Store(true)
	wg.Wait()
	if c.Snapshot().Packets == 0 {
		t.Fatal("nothing classified")
	}
	t.Logf("bursts on A: %d, on B: %d", bursts[0].Load(), bursts[1].Load())
}

// TestZeroAllocs runs on a large set and on the source workload (one
// table, counted by countSmall).
func TestZeroAllocs(t *testing.T) {
	for _, set := range []*rule.Set{traffic.RandomRules(31, 300), traffic.SourceWorkload()} {
		testZeroAllocs(t, set)
	}
}

func testZeroAllocs(t *testing.T, set *rule.Set) {
	c, err := New(set)
	if err != nil {
		t.Fatal(err)
	}
	fs, lens := burstFields(t, set, 1, 256)
	frames := traffic.NewGenerator(traffic.Config{Seed: 2, Rules: set, RuleFraction: 0.8, Odd: true}).Frames(256)
	checkNoAllocs(t, c, fs, lens, frames, false)
}

// checkNoAllocs fails t where a lookup API of c's current table (a
// worker's ClassifyBurst, ClassifyFrames and Classify; the table's
// DecideBurst and AppendMatching; Decide too with decide) allocates on
// fs, lens and frames, after one warming burst sized its counters.
func checkNoAllocs(t *testing.T, c *Classifier, fs []rule.Fields, lens []uint32, frames [][]byte, decide bool) {
	t.Helper()
	w := c.NewWorker()
	defer w.Close()
	out := make([]Result, len(fs))
	ids := make([]int32, len(fs))
	buf := make([]int32, 0, 1024)
	w.ClassifyBurst(fs, lens, out) // warm: counters sized
	w.ClassifyFrames(frames, out)
	tab := c.Table()
	apis := map[string]func(){
		"ClassifyBurst":  func() { w.ClassifyBurst(fs, lens, out) },
		"ClassifyFrames": func() { w.ClassifyFrames(frames, out) },
		"Classify":       func() { w.Classify(&fs[3], lens[3]) },
		"DecideBurst":    func() { tab.DecideBurst(fs, ids) },
		"AppendMatching": func() {
			for i := range fs {
				buf = tab.AppendMatching(buf[:0], &fs[i])
			}
		},
	}
	if decide {
		apis["Decide"] = func() {
			for i := range fs {
				tab.Decide(&fs[i])
			}
		}
	}
	for name, fn := range apis {
		if n := testing.AllocsPerRun(20, fn); n != 0 {
			t.Errorf("%s: %v allocations per run", name, n)
		}
	}
}

func FuzzClassify(f *testing.F) {
	f.Add(uint64(1), uint8(5), uint8(24), uint16(53), traffic.AppendFrame(nil, &traffic.Frame{Family: rule.IPv4,
		Src: netip.MustParseAddr("10.1.2.3"), Dst: netip.MustParseAddr("10.9.9.9"), Proto: rule.ProtoUDP, DstPort: 53}))
	f.Add(uint64(2), uint8(30), uint8(100), uint16(80), traffic.AppendFrame(nil, &traffic.Frame{Family: rule.IPv6,
		Src: netip.MustParseAddr("2001:db8::1"), Dst: netip.MustParseAddr("2001:db8::2"), Proto: rule.ProtoTCP, DstPort: 80, TCPFlags: 2,
		Ext: []traffic.Ext{{Type: 0}, {Type: 44}}}))
	f.Add(uint64(3), uint8(0), uint8(0), uint16(0), []byte{})
	f.Fuzz(func(t *testing.T, seed uint64, n, plen uint8, span uint16, frame []byte) {
		var fl rule.Fields
		packet.Parse(frame, &fl)
		set := traffic.RandomRules(seed, int(n%40))
		// Rules built around the packet itself, so that matches are likely.
		if fl.Family != 0 {
			fam := fl.Family
			a := fl.Src.Netip(fam)
			p, _ := a.Prefix(int(plen) % (a.BitLen() + 1))
			lo := uint32(fl.DstPort) &^ uint32(span&0xff)
			m := rule.Match{Src: p, DstPort: rule.Ranges{{Lo: lo, Hi: min(lo+uint32(span), 65535)}}}
			set.Rules = append(set.Rules,
				rule.Rule{ID: "own-src", Priority: uint32(plen % 20), Match: rule.Match{Src: p}},
				rule.Rule{ID: "own-port", Priority: uint32(span % 20), Action: rule.Accept, Match: m},
				rule.Rule{ID: "own-proto", Priority: 5, Match: rule.Match{Proto: []uint8{fl.Proto}, Length: rule.Ranges{{Lo: fl.Length, Hi: fl.Length + uint32(span)}}}})
		}
		tab, err := Compile(set)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := tab.Decide(&fl), set.Decide(&fl); got != want {
			t.Fatalf("Decide %d, reference %d on %+v (%s)", got, want, fl, ruleStr(set, want))
		}
		got := tab.AppendMatching(nil, &fl)
		slices.Sort(got)
		if ref := refMatching(set, &fl); !slices.Equal(got, ref) {
			t.Fatalf("matching %v, reference %v", got, ref)
		}
	})
}

// TestWorkerCache checks the flow cache against the reference on traffic
// with few flows whose packets differ in length, DSCP-free fields and so on,
// and that it is bypassed on traffic where every packet is new.
func TestWorkerCache(t *testing.T) {
	for seed := uint64(41); seed < 46; seed++ {
		set := traffic.RandomRules(seed, 100)
		c, err := New(set)
		if err != nil {
			t.Fatal(err)
		}
		w := hitRateOnly(c.NewWorker())
		frames := traffic.NewGenerator(traffic.Config{Seed: seed, Rules: set, RuleFraction: 0.8, Odd: true, Flows: 40, Sizes: traffic.Sizes{Min: 64, Max: 1518}}).Frames(4096)
		fs := parseAll(frames)
		lens := make([]uint32, len(fs))
		out := make([]Result, 64)
		for i := 0; i < len(fs); i += 64 {
			w.ClassifyBurst(fs[i:i+64], lens[i:i+64], out)
			for j := range out {
				if want := set.Decide(&fs[i+j]); out[j].Rule != int32(want) {
					t.Fatalf("seed %d packet %d %+v: cached worker says %d, reference %d", seed, i+j, fs[i+j], out[j].Rule, want)
				}
			}
		}
		s := c.Snapshot()
		if s.CacheHits < uint64(len(fs))/2 {
			t.Errorf("seed %d: %d cache hits of %d packets from 40 flows", seed, s.CacheHits, len(fs))
		}
		// Every packet new: the cache must turn itself off.
		fresh := parseAll(traffic.NewGenerator(traffic.Config{Seed: seed + 100, Rules: set, RuleFraction: 0.8}).Frames(64 * 100))
		for i := 0; i < len(fresh); i += 64 {
			w.ClassifyBurst(fresh[i:i+64], lens[:64], out)
			for j := range out {
				if want := set.Decide(&fresh[i+j]); out[j].Rule != int32(want) {
					t.Fatalf("seed %d fresh packet %d: %d, reference %d", seed, i+j, out[j].Rule, want)
				}
			}
		}
		if hits := c.Snapshot().CacheHits - s.CacheHits; hits > uint64(len(fresh))/8 {
			t.Errorf("seed %d: %d cache hits on %d new packets", seed, hits, len(fresh))
		}
		if w.cache.bypass == 0 && w.cache.lookups > s.Packets+64*4 {
			t.Errorf("seed %d: cache not bypassed on high-cardinality traffic (lookups %d)", seed, w.cache.lookups)
		}
		w.Close()
		// One packet at a time (Worker.Classify): the cache must turn
		// itself off on new packets too, after a window of them.
		w1 := c.NewWorker()
		for i := range fresh {
			if got, want := w1.Classify(&fresh[i], 100).Rule, set.Decide(&fresh[i]); got != int32(want) {
				t.Fatalf("seed %d single packet %d: %d, reference %d", seed, i, got, want)
			}
		}
		if w1.cache.lookups > 4*cacheWindow {
			t.Errorf("seed %d: %d of %d new single packets went through the cache", seed, w1.cache.lookups, len(fresh))
		}
		w1.Close()
	}
}

// TestWorkerStatistics: Snapshot's Packets, TablesProbed and CacheHits
// after Classify, ClassifyBurst and ClassifyFrames (one worker each, open
// and then closed) are the packets classified, the tables a lookup of
// each packet probes (Table.Probes; the cache off) and, with the cache,
// the packets repeated within the flows the cache holds.
func TestWorkerStatistics(t *testing.T) {
	set := traffic.RandomRules(7, 3*smallSet)
	g := traffic.NewGenerator(traffic.Config{Seed: 3, Rules: set, RuleFraction: 0.8})
	frames := g.Frames(501)
	fs := parseAll(frames)
	lens := make([]uint32, len(fs))
	for i := range frames {
		lens[i] = uint32(len(frames[i]))
	}
	for _, api := range []string{"Classify", "ClassifyBurst", "ClassifyFrames"} {
		c := cachingSet(t, set)
		tab := c.Table()
		wantProbes := uint64(0)
		for i := range fs {
			wantProbes += uint64(tab.Probes(&fs[i]))
		}
		run := func(w *Worker, fs []rule.Fields, lens []uint32, frames [][]byte) {
			out := make([]Result, 64)
			for i := 0; i < len(fs); i += 64 {
				j := min(i+64, len(fs))
				switch api {
				case "Classify":
					for k := i; k < j; k++ {
						w.Classify(&fs[k], lens[k])
					}
				case "ClassifyBurst":
					w.ClassifyBurst(fs[i:j], lens[i:j], out)
				default:
					w.ClassifyFrames(frames[i:j], out)
				}
			}
		}
		w := c.NewWorker()
		w.SetCachePolicy(CacheNever)
		run(w, fs, lens, frames)
		s := c.Snapshot()
		if s.Packets != uint64(len(fs)) || s.TablesProbed != wantProbes || s.CacheHits != 0 {
			t.Errorf("%s, cache off: packets %d probes %d hits %d, want %d %d 0", api, s.Packets, s.TablesProbed, s.CacheHits, len(fs), wantProbes)
		}
		w.Close()
		// With the cache: the first 21 packets, 24 times over. The cold
		// cache misses only the first pass, or with ClassifyBurst the
		// first burst (misses are inserted after a burst's lookup); no
		// window falls below the hit rate that bypasses the cache.
		wc := hitRateOnly(c.NewWorker())
		var rfs []rule.Fields
		var rlens []uint32
		var rframes [][]byte
		for range 24 {
			rfs = append(rfs, fs[:21]...)
			rlens = append(rlens, lens[:21]...)
			rframes = append(rframes, frames[:21]...)
		}
		run(wc, rfs, rlens, rframes)
		misses := 21
		if api == "ClassifyBurst" {
			misses = 64
		}
		wantHits := uint64(len(rfs) - misses)
		if got := c.Snapshot(); got.Packets != s.Packets+uint64(len(rfs)) || got.CacheHits != wantHits {
			t.Errorf("%s, cache on: packets %d hits %d, want %d %d", api, got.Packets, got.CacheHits, s.Packets+uint64(len(rfs)), wantHits)
		}
		wc.Close()
		if got := c.Snapshot(); got.Packets != s.Packets+uint64(len(rfs)) || got.CacheHits != wantHits {
			t.Errorf("%s, closed: packets %d hits %d", api, got.Packets, got.CacheHits)
		}
	}
}
