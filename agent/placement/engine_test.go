package placement

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/scrubd/scrubd/agent/dataplane"
	"github.com/scrubd/scrubd/agent/protect"
	"github.com/scrubd/scrubd/agent/store"
	"github.com/scrubd/scrubd/swpath/classifier"
	"github.com/scrubd/scrubd/swpath/packet"
	"github.com/scrubd/scrubd/swpath/rule"
	"github.com/scrubd/scrubd/swpath/traffic"
)

// ClassifierSW returns the Go classifier c as the software path: given
// changes (dataplane.SWPatcher) when patch is set, as the agent's dv
// engines are, else whole sets (Swap). For this package's tests and its
// external benchmarks.
func ClassifierSW(c *classifier.Classifier, patch bool) dataplane.SW {
	if patch {
		return classifierPatcher{classifierSW{c}}
	}
	return classifierSW{c}
}

type classifierSW struct{ c *classifier.Classifier }

func (s classifierSW) Name() string                        { return "classifier" }
func (s classifierSW) SetRules(set *rule.Set) error        { return s.c.Swap(set) }
func (s classifierSW) Stats() dataplane.SWStats            { return dataplane.SWStats{} }
func (s classifierSW) Capacity() (workers int, hz float64) { return 4, 2e9 }

type classifierPatcher struct{ classifierSW }

func (s classifierPatcher) PatchRules(from, to *rule.Set, removed, added []int) error {
	return s.c.Patch(from, to, removed, added)
}

// What the software engine enforces follows the store through removals
// in place (holes), their compaction, an id removed and added again (a
// hole and a rule of one id), changes in place, adds, and accept rules
// added (rounds from a snapshot, whose set has no holes): after every
// round the Go classifier, given the changes (Patch) or whole sets (Swap),
// decides every frame of a few hundred as the linear reference does on
// the store's own effective set (not the placer's). Without hardware, so
// that every rule is the engine's.
func TestEngineFollowsTheStore(t *testing.T) {
	defer func(m int) { holesMax = m }(holesMax)
	holesMax = 8
	for _, patch := range []bool{true, false} {
		t.Run(fmt.Sprintf("patch=%v", patch), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(5, 6))
			pl := &protect.List{}
			pl.Entries = append(pl.Entries, protect.Entry{Rule: rule.Rule{ID: "protect-0", Priority: 1,
				Action: rule.Accept, Match: rule.Match{Src: netip.MustParsePrefix("192.0.2.1/32")}}})
			clk := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			st := store.New(pl, func() time.Time { return clk })
			pool := traffic.ClassBenchRules(9, 1200).Rules
			if _, err := st.Replace("file:cb", pool[:600]); err != nil {
				t.Fatal(err)
			}
			cl, err := classifier.New(&rule.Set{})
			if err != nil {
				t.Fatal(err)
			}
			sw := ClassifierSW(cl, patch)
			c := cfg()
			c.NoBackstop = false
			p := New(c, nil, sw, quiet(), func() time.Time { return clk })
			ctx := context.Background()
			p.ApplyStore(ctx, st)
			var removed []rule.Rule
			next := 600
			maxHoles, accepts := 0, 0
			var f rule.Fields
			for step := range 402 {
				clk = clk.Add(time.Second)
				op := ""
				switch k := rng.IntN(10); {
				case step == 400: // the whole file gone in one round
					op = "file emptied"
					if _, err := st.Replace("file:cb", nil); err != nil {
						t.Fatal(err)
					}
				case step == 401: // and back (but the ids the API holds now)
					op = "file back"
					held := map[string]bool{}
					for _, e := range st.List() {
						held[e.Rule.ID] = true
					}
					var back []rule.Rule
					for _, r := range pool[:600] {
						if !held[r.ID] {
							back = append(back, r)
						}
					}
					if _, err := st.Replace("file:cb", back); err != nil {
						t.Fatal(err)
					}
				case k < 5: // a removal, anywhere in the order
					es := st.List()
					e := es[rng.IntN(len(es))]
					if e.Source == "protect" {
						continue
					}
					op = "remove " + e.Rule.ID
					if err := st.Delete(e.Source, e.Rule.ID); err != nil {
						t.Fatal(err)
					}
					removed = append(removed, e.Rule)
				case k < 7 && len(removed) > 0: // an id back, at the end
					r := removed[rng.IntN(len(removed))]
					op = "re-add " + r.ID
					_, _ = st.Put("api", r)
				case k < 8: // a change in place
					es := st.List()
					e := es[rng.IntN(len(es))]
					if e.Source == "protect" {
						continue
					}
					r := e.Rule
					op = "change " + r.ID
					if rng.IntN(2) == 0 {
						r.Priority++
					} else {
						// A wider match at the same priority: it decides
						// before the rules after its place that it now
						// overlaps (its key, not its new slot, says so).
						r.Match.Dst = widen(r.Match.Dst)
						r.Match.Src = widen(r.Match.Src)
						op += " (wider)"
					}
					if _, err := st.Put(e.Source, r); err != nil {
						t.Fatal(err)
					}
				case k < 9 && step >= 300 && rng.IntN(3) == 0: // an accept rule: a round from a snapshot (Apply)
					r := pool[next%len(pool)]
					r.ID, r.Action = fmt.Sprintf("acc%d", next), rule.Accept
					next++
					op = "accept " + r.ID
					_, _ = st.Put("api", r)
					accepts++
				default: // a new rule
					r := pool[next%len(pool)]
					r.ID = fmt.Sprintf("new%d", next)
					next++
					op = "add " + r.ID
					_, _ = st.Put("api", r)
				}
				p.ApplyStore(ctx, st)
				maxHoles = max(maxHoles, p.set.Holes.Count())
				eff := st.Effective()
				tab := cl.Table()
				// Frames steered to the rules in force and to those removed.
				steer := &rule.Set{Rules: append(slices.Clone(eff.Set.Rules), removed...)}
				for i, b := range traffic.NewGenerator(traffic.Config{Seed: uint64(step), Rules: steer, RuleFraction: 0.9}).Frames(300) {
					packet.Parse(b, &f)
					want, got := "", ""
					if k := eff.Set.Decide(&f); k >= 0 {
						want = eff.Set.Rules[k].ID
					}
					if k := tab.Decide(&f); k >= 0 {
						got = tab.Set().Rules[k].ID
					}
					if got != want {
						t.Fatalf("step %d (%s), frame %d: the engine decides %q, the store's set %q (%d holes)", step, op, i, got, want, p.set.Holes.Count())
					}
				}
			}
			if maxHoles == 0 || p.compactions == 0 || accepts == 0 || p.movedInPlace == 0 {
				t.Fatalf("at most %d holes, %d compactions, %d accept rules added, %d rules changed in place appended: nothing to test", maxHoles, p.compactions, accepts, p.movedInPlace)
			}
			ps := cl.PatchStats()
			if patch && (ps.InPlace == 0 || p.swPatches < 300) {
				t.Fatalf("%d changes patched (%d in place) in 400 rounds: the engine was handed whole sets", p.swPatches, ps.InPlace)
			}
			t.Logf("at most %d holes, %d compactions, %d accept rules added; %d changes patched, %d in place", maxHoles, p.compactions, accepts, p.swPatches, ps.InPlace)
		})
	}
}

// widen returns p one bit shorter (p itself if invalid or /0).
func widen(p netip.Prefix) netip.Prefix {
	if !p.IsValid() || p.Bits() == 0 {
		return p
	}
	return netip.PrefixFrom(p.Addr(), p.Bits()-1).Masked()
}
