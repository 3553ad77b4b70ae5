package placement

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/scrubd/scrubd/agent/dataplane"
	"github.com/scrubd/scrubd/agent/protect"
	"github.com/scrubd/scrubd/agent/store"
	"github.com/scrubd/scrubd/swpath/rule"
)

// randomRule is a drop (or, with accepts, sometimes an accept) rule with
// id from a small pool, so that puts often change a rule already there:
// its match (a /24 or /32 out of a few: 203.0.113.0/24 overlaps an
// accept rule of the protect list, 198.51.100.3/32 is all protected and
// refused by the store), its priority, or nothing at all; a packet-length
// match is something the fake hardware cannot express.
func randomRule(rng *rand.Rand, accepts bool) rule.Rule {
	r := rule.Rule{ID: fmt.Sprintf("r%d", rng.IntN(48)), Priority: []uint32{100, 1000}[rng.IntN(2)], Action: rule.Drop}
	switch rng.IntN(4) {
	case 0:
		r.Match.Dst = netip.PrefixFrom(netip.AddrFrom4([4]byte{198, 51, 100, byte(rng.IntN(4))}), 32)
	case 1:
		r.Match.Dst = netip.PrefixFrom(netip.AddrFrom4([4]byte{203, 0, []byte{0, 1, 2, 113}[rng.IntN(4)], 0}), 24)
	case 2:
		r.Match.Src = netip.PrefixFrom(netip.AddrFrom4([4]byte{192, 0, 2, byte(rng.IntN(4))}), 31) // no destination: overlaps both accepts
	default:
		r.Match.Dst = netip.PrefixFrom(netip.AddrFrom4([4]byte{198, 18, byte(rng.IntN(2)), 0}), 24)
		r.Match.Length = rule.Ranges{{Lo: 40, Hi: 60 + uint32(rng.IntN(3))}}
	}
	if accepts && rng.IntN(10) == 0 {
		// An accept rule for one address: the drops it overlaps leave
		// hardware, the others stay.
		r.Action = rule.Accept
		r.Match = rule.Match{Dst: netip.PrefixFrom(netip.AddrFrom4([4]byte{198, 51, 100, byte(rng.IntN(3))}), 32)}
	}
	return r
}

// orderHW is the fake hardware with hwpath's accept semantics: a drop is
// refused only for an accept rule that decides before it (priority, then
// place in the set), so a drop's priority changes its verdict.
type orderHW struct{ *fakeHW }

func (h orderHW) Compile(r *rule.Rule, set *rule.Set) (dataplane.Cost, error) {
	if r.Match.Length != nil {
		return dataplane.Cost{}, &dataplane.HWError{Rule: r.ID, Kind: dataplane.KindUnsupported, Detail: "no packet length key"}
	}
	i := set.Index(r.ID)
	for j := range set.Rules {
		a := &set.Rules[j]
		if a.Action == rule.Accept && set.Live(j) && rule.Before(a, set.Key(j), r, set.Key(i)) && protect.Overlaps(&a.Match, &r.Match) {
			return dataplane.Cost{}, &dataplane.HWError{Rule: r.ID, Kind: dataplane.KindAcceptOverlap, Detail: "overlaps accept rule " + a.ID}
		}
	}
	return dataplane.Cost{Entries: 1}, nil
}

// placed is what a placer has done, for comparison: every rule's view
// (path, reason, moves), the set it holds, what software and hardware hold.
type placed struct {
	Rules []RuleView
	Set   []rule.Rule
	SW    []string
	HW    []string
}

func placedOf(p *Placer, w *world) placed {
	var out placed
	for _, r := range p.View().Rules.All() {
		r.Since = time.Time{}
		out.Rules = append(out.Rules, r)
	}
	out.Set = slices.Clone(p.set.Compact().Rules)
	if w.sw.set != nil {
		// In decision order: a hole is no rule of the engine's, and a
		// rule changed in place decides at its key.
		for _, r := range w.sw.set.Compact().Rules {
			out.SW = append(out.SW, r.ID+" "+r.Match.String())
		}
	}
	for id := range w.hw.installed {
		out.HW = append(out.HW, id)
	}
	slices.Sort(out.HW)
	return out
}

// The delta path places what a store change touches and nothing else; it
// must end where a placement from a snapshot ends. Thousands of random
// puts, changes, deletes, transactions and whole-source replaces go into a
// store; after each, the placer under test reads the store's delta
// (ApplyStore) and is compared with two references: a twin placer that
// went through the same versions reading full snapshots (Apply, the
// linear path), and, while the accept rules stay those of the protect
// list, a placer that places the whole set from scratch. Hardware has
// room for every rule, so where a rule goes does not depend on history.
// With accept rules coming and going ("accepts"), the delta path must
// hand those rounds to Apply and still agree with its twin.
//
// A removal leaves a hole in the placer's arrays (the engines may be
// reading them), closed once holes pass max(holesMax, an eighth of the
// slots): the cases with holesMax 2 compact every few removals.
func TestDeltaPlacementEqualsFullPlacement(t *testing.T) {
	defer func(m int) { holesMax = m }(holesMax)
	for _, tc := range []struct {
		name       string
		accepts    bool
		noBackstop bool
		holesMax   int
	}{{"drops", false, false, 64}, {"drops-nobackstop", false, true, 64}, {"accepts", true, false, 64},
		{"drops-compacting", false, false, 2}, {"drops-nobackstop-compacting", false, true, 2}} {
		t.Run(tc.name, func(t *testing.T) {
			holesMax = tc.holesMax
			rng := rand.New(rand.NewPCG(7, uint64(len(tc.name))))
			pl := &protect.List{}
			for i, a := range []string{"203.0.113.7/32", "198.51.100.3/32"} {
				pl.Entries = append(pl.Entries, protect.Entry{Rule: rule.Rule{ID: "protect-" + fmt.Sprint(i), Priority: 1,
					Action: rule.Accept, Match: rule.Match{Dst: netip.MustParsePrefix(a)}}})
			}
			wi, wt := newWorld(t, 1000), newWorld(t, 1000)
			st := store.New(pl, func() time.Time { return wi.clock })
			c := cfg()
			c.NoBackstop = tc.noBackstop
			c.CounterMemory = 5 * time.Second
			inc := New(c, orderHW{wi.hw}, wi.sw, quiet(), wi.now)
			twin := New(c, orderHW{wt.hw}, wt.sw, quiet(), wt.now)
			ctx := context.Background()
			apply := func() {
				eff := st.Effective()
				wi.want(eff.Set.Rules...)
				wt.want(eff.Set.Rules...)
				inc.ApplyStore(ctx, st)
				twin.Apply(ctx, eff)
			}
			apply()
			steps, maxHoles := 3000, 0
			if testing.Short() {
				steps = 600
			}
			for step := range steps {
				wi.clock = wi.clock.Add(time.Second)
				wt.clock = wi.clock
				var op string
				switch k := rng.IntN(20); {
				case k < 9:
					r := randomRule(rng, tc.accepts)
					op = "put " + r.ID + " " + r.Match.String()
					_, _ = st.Put("api", r)
				case k < 14:
					id := fmt.Sprintf("r%d", rng.IntN(48))
					op = "delete " + id
					_ = st.Delete("api", id)
				case k < 18:
					op = "tx"
					st.Update(func(tx *store.Tx) {
						for range 1 + rng.IntN(6) {
							if rng.IntN(3) == 0 {
								_ = tx.Delete("api", fmt.Sprintf("r%d", rng.IntN(48)))
								continue
							}
							_, _ = tx.Put("api", randomRule(rng, tc.accepts))
						}
					})
				default:
					op = "replace file"
					var rs []rule.Rule
					seen := map[string]bool{}
					for range rng.IntN(8) {
						r := randomRule(rng, tc.accepts)
						r.ID = "f" + r.ID
						if !seen[r.ID] {
							seen[r.ID] = true
							rs = append(rs, r)
						}
					}
					_, _ = st.Replace("file:a", rs)
				}
				apply()
				if step%5 == 4 {
					// Traffic on some rules, read by a tick of each placer
					// (the same counters: the twins stay equal).
					for range 4 {
						id := fmt.Sprintf("r%d", rng.IntN(48))
						c := wi.sw.rules[id]
						c.Packets += uint64(1 + rng.IntN(1000))
						c.Bytes += 64 * c.Packets
						wi.sw.rules[id] = c
						wt.sw.rules[id] = c
					}
					inc.Tick(ctx)
					twin.Tick(ctx)
				}
				checkList(t, inc, fmt.Sprintf("step %d (%s)", step, op))
				checkFind(t, inc, st, fmt.Sprintf("step %d (%s)", step, op))
				checkFind(t, twin, st, fmt.Sprintf("step %d (%s), the snapshot twin", step, op))
				for _, q := range []*Placer{inc, twin} {
					none := 0
					for _, rs := range q.states {
						if rs != nil && rs.r.Action == rule.Drop && rs.path == pNone {
							none++
						}
					}
					if q.noneDrops != none {
						t.Fatalf("step %d (%s): %d drop rules placed nowhere counted, %d in the set", step, op, q.noneDrops, none)
					}
				}
				got, want := placedOf(inc, wi), placedOf(twin, wt)
				if !reflect.DeepEqual(got, want) {
					t.Fatalf("step %d (%s): delta placement differs from the snapshot twin's\n got %+v\nwant %+v", step, op, got, want)
				}
				eff := st.Effective()
				var seqs []uint64
				for i, rs := range inc.states {
					if (rs == nil) != !inc.set.Live(i) {
						t.Fatalf("step %d (%s): slot %d: state %v, hole %v", step, op, i, rs != nil, !inc.set.Live(i))
					}
					if rs != nil && (rs.r != &inc.set.Rules[i] || inc.rules[rs.r.ID] != rs) {
						t.Fatalf("step %d (%s): rule state %d (%s) out of place", step, op, i, inc.set.Rules[i].ID)
					}
				}
				inc.set.Ordered(func(i int) { // a rule changed in place at its key
					if inc.states[i] != nil {
						seqs = append(seqs, inc.seqOf(i))
					}
				})
				if !reflect.DeepEqual(inc.set.Compact().Rules, eff.Set.Rules) || !slices.Equal(seqs, eff.Seqs) {
					t.Fatalf("step %d (%s): placement's set is not the store's", step, op)
				}
				if h := inc.set.Holes.Count(); h > max(holesMax, len(inc.states)/8) {
					t.Fatalf("step %d (%s): %d holes in %d slots", step, op, h, len(inc.states))
				}
				maxHoles = max(maxHoles, inc.set.Holes.Count())
				if !tc.accepts {
					wf := newWorld(t, 1000)
					wf.clock = wi.clock
					wf.want(eff.Set.Rules...)
					scratch := New(c, orderHW{wf.hw}, wf.sw, quiet(), wf.now)
					scratch.Apply(ctx, eff)
					f := placedOf(scratch, wf)
					if !slices.Equal(got.SW, f.SW) || !slices.Equal(got.HW, f.HW) || !samePaths(got.Rules, f.Rules) {
						t.Fatalf("step %d (%s): delta placement differs from a placement from scratch\n got %+v\nwant %+v", step, op, got, f)
					}
				}
			}
			if inc.deltas < uint64(steps)*2/3 {
				t.Errorf("%d of %d rounds read a delta; the rest read snapshots", inc.deltas, steps)
			}
			if maxHoles == 0 || (tc.holesMax == 2 && inc.compactions == 0) || (!tc.noBackstop && inc.movedInPlace == 0) {
				t.Errorf("at most %d holes, %d compactions, %d rules changed in place appended: the removals did not leave holes, none were closed, or (with the backstop: the engine holds the array) no change in place was appended", maxHoles, inc.compactions, inc.movedInPlace)
			}
			t.Logf("at most %d holes, %d compactions, %d rules changed in place appended", maxHoles, inc.compactions, inc.movedInPlace)
			t.Logf("%d of %d rounds from a delta; in hardware at the end: %v", inc.deltas, steps, placedOf(inc, wi).HW)
		})
	}
}

// samePaths compares where each rule is and why, not since when or after
// how many moves (a placement from scratch has no history).
func samePaths(a, b []RuleView) bool {
	return slices.EqualFunc(a, b, func(x, y RuleView) bool {
		return x.ID == y.ID && x.Path == y.Path && x.Action == y.Action && strings.HasPrefix(x.Reason, "software") == strings.HasPrefix(y.Reason, "software")
	})
}

// A round read from a delta logs one line at INFO with its counts: a
// burst of 50 routes added in one store transaction, then 10 removed, is
// two rounds and two lines, with the rules added to each path, moved,
// removed and refused counted (the per-rule lines are DEBUG). The 10 that
// find the table full are not "refused": placement knows the budget and
// does not ask the hardware.
func TestDeltaRoundLogsOneLine(t *testing.T) {
	w := newWorld(t, 40)
	var buf strings.Builder
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}))
	st := store.New(&protect.List{}, w.now)
	p := New(cfg(), w.hw, w.sw, log, w.now)
	ctx := context.Background()
	p.ApplyStore(ctx, st)
	buf.Reset()
	var rs []rule.Rule
	st.Update(func(tx *store.Tx) {
		for i := range 50 {
			r := drop(fmt.Sprintf("route%d", i), fmt.Sprintf("198.18.%d.0/24", i))
			rs = append(rs, r)
			if _, err := tx.Put("bgp:peer", r); err != nil {
				t.Fatal(err)
			}
		}
	})
	w.want(rs...)
	p.ApplyStore(ctx, st)
	st.Update(func(tx *store.Tx) {
		for i := range 10 {
			_ = tx.Delete("bgp:peer", fmt.Sprintf("route%d", i))
		}
	})
	w.want(rs[10:]...)
	p.ApplyStore(ctx, st)
	if p.deltas != 2 {
		t.Fatalf("%d rounds from a delta, want 2", p.deltas)
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("%d log lines for two rounds, want 2:\n%s", len(lines), buf.String())
	}
	for i, want := range []string{
		"round=delta rules=50 store_version=1 added_hw=40 added_sw=10 moved=0 removed=0 hw_refused=0 in_hw=40 in_sw=10",
		"round=delta rules=40 store_version=2 added_hw=0 added_sw=0 moved=0 removed=10 hw_refused=0 in_hw=30 in_sw=10",
	} {
		if !strings.Contains(lines[i], "msg=\"placement round\" "+want) {
			t.Errorf("round %d logged\n%s\nwant %s", i+1, lines[i], want)
		}
	}
}

// syncHW is orderHW with pass entries (the acceptSyncer of hwpath),
// counting the rounds that try them again.
type syncHW struct {
	orderHW
	syncs int
}

func (h *syncHW) SyncAccepts(ctx context.Context, set *rule.Set)        { h.syncs++ }
func (h *syncHW) PruneAccepts(ctx context.Context, set *rule.Set) error { return nil }

// With a drop kept out of hardware by an accept rule (its pass entries
// did not go in), a change that takes a rule out of hardware frees room
// for them: that round is Apply's, which tries the pass entries again
// (SyncAccepts). A change that frees no hardware stays a delta round.
func TestDeltaYieldsToApplyWhenPassEntriesMayFit(t *testing.T) {
	w := newWorld(t, 10)
	hw := &syncHW{orderHW: orderHW{w.hw}}
	pl := &protect.List{Entries: []protect.Entry{{Rule: rule.Rule{ID: "keep", Priority: 1, Action: rule.Accept,
		Match: rule.Match{Dst: netip.MustParsePrefix("203.0.113.7/32")}}}}}
	st := store.New(pl, w.now)
	p := New(cfg(), hw, w.sw, quiet(), w.now)
	ctx := context.Background()
	rs := []rule.Rule{drop("held", "203.0.113.0/24"), drop("inhw", "198.51.100.0/24"), drop("insw", "198.18.0.0/24")}
	rs[2].Match.Length = rule.Ranges{{Lo: 40, Hi: 60}}
	w.want(rs...)
	if _, err := st.Replace("api", rs); err != nil {
		t.Fatal(err)
	}
	p.ApplyStore(ctx, st)
	if path, why := pathOf(p.View(), "held"); path != SW || !strings.Contains(why, "overlaps accept rule keep") {
		t.Fatalf("held: %s (%s), want sw for the accept rule", path, why)
	}
	syncs, deltas := hw.syncs, p.deltas
	w.want(rs[:2]...)
	if err := st.Delete("api", "insw"); err != nil {
		t.Fatal(err)
	}
	p.ApplyStore(ctx, st)
	if hw.syncs != syncs || p.deltas != deltas+1 {
		t.Errorf("a software rule removed: %d pass-entry syncs, %d delta rounds; want none and one", hw.syncs-syncs, p.deltas-deltas)
	}
	w.want(rs[0])
	if err := st.Delete("api", "inhw"); err != nil {
		t.Fatal(err)
	}
	p.ApplyStore(ctx, st)
	if hw.syncs != syncs+1 || p.deltas != deltas+1 {
		t.Errorf("a hardware rule removed: %d pass-entry syncs, %d delta rounds; want one and none", hw.syncs-syncs, p.deltas-deltas-1)
	}
}
