package placement_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/scrubd/scrubd/agent/dataplane"
	"github.com/scrubd/scrubd/agent/hwpath"
	"github.com/scrubd/scrubd/agent/placement"
	"github.com/scrubd/scrubd/agent/protect"
	"github.com/scrubd/scrubd/agent/store"
	"github.com/scrubd/scrubd/internal/cputime"
	"github.com/scrubd/scrubd/offload"
	"github.com/scrubd/scrubd/offload/compile"
	"github.com/scrubd/scrubd/offload/sim"
	"github.com/scrubd/scrubd/swpath/classifier"
	"github.com/scrubd/scrubd/swpath/rule"
	"github.com/scrubd/scrubd/swpath/traffic"
)

// countSW is a software path that keeps the last set it was given.
type countSW struct{ set *rule.Set }

func (s *countSW) Name() string                        { return "count" }
func (s *countSW) SetRules(set *rule.Set) error        { s.set = set; return nil }
func (s *countSW) Stats() dataplane.SWStats            { return dataplane.SWStats{} }
func (s *countSW) Capacity() (workers int, hz float64) { return 4, 2e9 }

// simPath is the agent's hardware path over the simulated mlx5 table of
// entries entries (15 large flow groups per table, as mlx5's default).
func simPath(entries int) *hwpath.Path {
	caps := offload.MLX5(entries)
	nic := sim.New(sim.Config{Caps: caps, Clock: sim.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))})
	return hwpath.New(hwpath.Config{Name: "sim", Compile: compile.Config{Caps: caps, PrioV4: 10, PrioV6: 11, PassPrioV4: 8, PassPrioV6: 9},
		Owner: offload.Owner{Chain: 0, PrioLo: 8, PrioHi: 11}}, nic)
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// classBenchStore holds n ClassBench-style rules from one source, behind a
// protect list of two /32s (accept rules in front of every drop).
func classBenchStore(t testing.TB, n int) *store.Store {
	t.Helper()
	pl := &protect.List{}
	for i, a := range []string{"192.0.2.1/32", "192.0.2.2/32"} {
		pl.Entries = append(pl.Entries, protect.Entry{Rule: rule.Rule{ID: "protect-" + strconv.Itoa(i), Priority: 1,
			Action: rule.Accept, Match: rule.Match{Src: netip.MustParsePrefix(a)}}})
	}
	st := store.New(pl, time.Now)
	if _, err := st.Replace("file:bench", traffic.ClassBenchRules(1, n).Rules); err != nil {
		t.Fatal(err)
	}
	return st
}

// BenchmarkPlacementApply places n ClassBench-style rules in one Apply on
// the simulated 4096-entry table: the first placement round of a rule file
// of n rules. Reported: ns and bytes allocated per rule.
func BenchmarkPlacementApply(b *testing.B) {
	for _, n := range []int{1000, 10000, 100000} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			snap := classBenchStore(b, n).Snapshot()
			b.ReportAllocs()
			var ms0, ms1 runtime.MemStats
			var total time.Duration
			var bytes uint64
			for b.Loop() {
				b.StopTimer()
				p := placement.New(placement.Config{MinDwell: time.Second}, simPath(4096), &countSW{}, quiet(), time.Now)
				runtime.ReadMemStats(&ms0)
				b.StartTimer()
				t0 := time.Now()
				p.Apply(context.Background(), snap)
				total += time.Since(t0)
				b.StopTimer()
				runtime.ReadMemStats(&ms1)
				bytes += ms1.TotalAlloc - ms0.TotalAlloc
				b.StartTimer()
			}
			b.ReportMetric(float64(total.Nanoseconds())/float64(b.N)/float64(n), "ns/rule")
			b.ReportMetric(float64(bytes)/float64(b.N)/float64(n), "B/rule")
		})
	}
}

var _ = fmt.Sprint

// BenchmarkPlacementApplyOne: with n ClassBench-style rules placed, one
// rule is added to the store and the next Apply places it, as an API add
// or a FlowSpec route does at that scale (ms per round, bytes allocated
// per round). The software path here only records the set it is given.
func BenchmarkPlacementApplyOne(b *testing.B) {
	for _, n := range []int{10000, 100000} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			st := classBenchStore(b, n)
			p := placement.New(placement.Config{MinDwell: time.Second}, simPath(4096), &countSW{}, quiet(), time.Now)
			ctx := context.Background()
			p.Apply(ctx, st.Effective())
			b.ReportAllocs()
			i := 0
			var total time.Duration
			for b.Loop() {
				r := rule.Rule{ID: fmt.Sprintf("one%d", i), Priority: 100, Action: rule.Drop,
					Match: rule.Match{Dst: netip.PrefixFrom(netip.AddrFrom4([4]byte{198, 18, byte(i >> 8), byte(i)}), 32), Proto: []uint8{rule.ProtoUDP}}}
				i++
				if _, err := st.Put("api", r); err != nil {
					b.Fatal(err)
				}
				t0 := time.Now()
				p.Apply(ctx, st.Effective())
				total += time.Since(t0)
			}
			b.ReportMetric(float64(total.Microseconds())/float64(b.N)/1000, "ms/round")
		})
	}
}

// compileSW is a software path that compiles every set it is given with
// the Go classifier, as the agent's engines do: what one change costs
// when the software set must be compiled again.
type compileSW struct{ countSW }

func (s *compileSW) SetRules(set *rule.Set) error {
	if _, err := classifier.Compile(set); err != nil {
		return err
	}
	s.set = set
	return nil
}

// BenchmarkPlacementChange: with n ClassBench-style rules placed (on the
// simulated 4096-entry table, behind a protect list of two accept rules),
// one drop rule is added to the store, or one is removed (op=remove: the
// one added last, at the end of the order; op=removemid: one from the
// middle, see removeMid), and placement takes the change the way its
// goroutine does (ApplyStore). Reported per
// change: ns, bytes and allocations of the placement round alone (the
// store's Put or Delete is outside the timer). With sw=count the software
// path only keeps the set; with sw=compile it compiles it with the Go
// classifier, which the agent's engines do on every new set. cpu-ns/change
// is the process's CPU time over the round (other threads' garbage
// collection included), steadier than ns/op on a shared machine.
func BenchmarkPlacementChange(b *testing.B) {
	for _, sw := range []string{"count", "compile"} {
		for _, op := range []string{"add", "remove", "removemid", "changemid"} {
			for _, n := range []int{1000, 10000, 100000} {
				b.Run(fmt.Sprintf("sw=%s/op=%s/rules=%d", sw, op, n), func(b *testing.B) {
					st := classBenchStore(b, n)
					var s dataplane.SW = &countSW{}
					if sw == "compile" {
						s = &compileSW{}
					}
					p := placement.New(placement.Config{MinDwell: time.Second}, simPath(4096), s, quiet(), time.Now)
					ctx := context.Background()
					p.ApplyStore(ctx, st)
					b.ReportAllocs()
					var ch change
					var cpu time.Duration
					for b.Loop() {
						b.StopTimer()
						ch.make(ctx, b, op, st, p)
						b.StartTimer()
						c0 := cputime.Process()
						p.ApplyStore(ctx, st)
						cpu += cputime.Process() - c0
					}
					b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/change")
					if v := p.View(); v.StoreVersion != st.Version() {
						b.Fatalf("placement at version %d, store at %d", v.StoreVersion, st.Version())
					}
				})
			}
		}
	}
}

// BenchmarkRuleFind: with 100k ClassBench-style rules placed from a
// store, the published placement of one rule, as the API reads it for
// GET /v1/rules/{id} and after an add: by its place in the store's order
// (RuleList.Find, a binary search) and, for comparison, by a walk of the
// list comparing ids (how the API found it before). ns per rule read.
//
//	go test -run '^$' -bench RuleFind ./agent/placement/
func BenchmarkRuleFind(b *testing.B) {
	st := classBenchStore(b, 100000)
	p := placement.New(placement.Config{MinDwell: time.Second}, simPath(4096), &countSW{}, quiet(), time.Now)
	p.ApplyStore(context.Background(), st)
	es := st.List()
	l := p.View().Rules
	for _, how := range []string{"find", "walk"} {
		b.Run(how, func(b *testing.B) {
			i := 0
			for b.Loop() {
				e := &es[(i*7919)%len(es)]
				i++
				var ok bool
				if how == "find" {
					_, ok = l.Find(e.Rule.ID, e.Seq())
				} else {
					for k := range l.Len() {
						if l.ID(k) == e.Rule.ID {
							ok = true
							break
						}
					}
				}
				if !ok && e.InForce() {
					b.Fatalf("rule %s not found", e.Rule.ID)
				}
			}
		})
	}
}

// removeMid prepares a removal from the middle of the store's order for
// the benchmarks' op=removemid: the rule deleted last (*back, unless its
// ID is empty) is put back, at the end, and placed; then the rule now at
// the middle of the effective set is deleted (and kept in *back), for the
// caller's timed round to take out. The op=remove rounds take out the
// rule added last, the set's last: a case that need not move any rule
// (from the middle every rule after it moves, or a hole is left).
// change makes, in the store, the change a round of BenchmarkPlacementChange
// or BenchmarkPlacementChangeSW then places (op): add, one drop rule added
// through the API; remove, one added (and placed) and then deleted, the
// set's last; removemid, the rule in the middle deleted (removeMid);
// changemid, the rule in the middle changed in its place (its priority).
type change struct {
	i    int       // rules added so far
	back rule.Rule // removemid: the rule to put back
}

func (c *change) make(ctx context.Context, b *testing.B, op string, st *store.Store, p *placement.Placer) {
	b.Helper()
	switch op {
	case "removemid":
		removeMid(ctx, b, st, p, &c.back)
		return
	case "changemid":
		// The rule in the middle changed in its place (the same id: the
		// store keeps its place in the order): its priority, up and down.
		rs := st.Effective().Set.Rules
		r := rs[len(rs)/2]
		r.Priority ^= 1
		if _, err := st.Put("file:bench", r); err != nil {
			b.Fatal(err)
		}
		return
	}
	r := rule.Rule{ID: fmt.Sprintf("one%d", c.i), Priority: 100, Action: rule.Drop,
		Match: rule.Match{Dst: netip.PrefixFrom(netip.AddrFrom4([4]byte{198, 18, byte(c.i >> 8), byte(c.i)}), 32), Proto: []uint8{rule.ProtoUDP}}}
	c.i++
	if _, err := st.Put("api", r); err != nil {
		b.Fatal(err)
	}
	if op == "remove" {
		p.ApplyStore(ctx, st)
		if err := st.Delete("api", r.ID); err != nil {
			b.Fatal(err)
		}
	}
}

func removeMid(ctx context.Context, b *testing.B, st *store.Store, p *placement.Placer, back *rule.Rule) {
	b.Helper()
	if back.ID != "" {
		if _, err := st.Put("file:bench", *back); err != nil {
			b.Fatal(err)
		}
		p.ApplyStore(ctx, st)
	}
	rs := st.Effective().Set.Rules
	r := rs[len(rs)/2]
	if r.Action != rule.Drop {
		b.Fatalf("the middle rule %s is not a drop", r.ID)
	}
	if err := st.Delete("file:bench", r.ID); err != nil {
		b.Fatal(err)
	}
	*back = r
}
