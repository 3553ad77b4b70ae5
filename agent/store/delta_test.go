package store

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/scrubd/scrubd/swpath/rule"
)

// applyDelta is the linear reference for a Delta: the old effective set
// with the removed rules taken out, changed rules replaced in place, and
// new ones placed by their Seq.
func applyDelta(old Snapshot, d Delta) (rules []rule.Rule, seqs []uint64) {
	gone := map[string]bool{}
	for _, id := range d.Removed {
		gone[id] = true
	}
	up := map[string]Upsert{}
	for _, u := range d.Upserts {
		up[u.Rule.ID] = u
	}
	type slot struct {
		r   rule.Rule
		seq uint64
	}
	var all []slot
	for i, r := range old.Set.Rules {
		if gone[r.ID] {
			continue
		}
		if _, ok := up[r.ID]; ok && old.Seqs[i] != 0 {
			continue // the upsert stands for it
		}
		all = append(all, slot{r, old.Seqs[i]})
	}
	for _, u := range d.Upserts {
		all = append(all, slot{u.Rule, u.Seq})
	}
	slices.SortStableFunc(all, func(a, b slot) int { return cmp.Compare(a.seq, b.seq) })
	for _, s := range all {
		rules, seqs = append(rules, s.r), append(seqs, s.seq)
	}
	return rules, seqs
}

// A Delta since any recent version, applied to that version's snapshot,
// gives the current snapshot: across thousands of random puts, changes,
// deletes, transactions, replaces, refusals by the protect list and
// expiries. Past maxChanges changes the store says it has no delta.
func TestDeltaReplaysSnapshots(t *testing.T) {
	s, c := newStore()
	rng := rand.New(rand.NewPCG(1, 2))
	rnd := func() rule.Rule {
		x := rule.Rule{ID: fmt.Sprintf("d%d", rng.IntN(40)), Priority: 1000, Action: rule.Drop,
			Match: rule.Match{Dst: netip.PrefixFrom(netip.AddrFrom4([4]byte{192, 0, 2, byte(8 + rng.IntN(4))}), 32)}} // .10 is protected: refused
		if rng.IntN(8) == 0 {
			x.Expires = c.t.Add(time.Duration(1+rng.IntN(3)) * time.Second)
		}
		return x
	}
	var snaps []Snapshot
	for step := range 2000 {
		c.t = c.t.Add(time.Second)
		switch k := rng.IntN(10); {
		case k < 4:
			_, _ = s.Put("api", rnd())
		case k < 6:
			_ = s.Delete("api", fmt.Sprintf("d%d", rng.IntN(40)))
		case k < 8:
			s.Update(func(tx *Tx) {
				for range 1 + rng.IntN(5) {
					if rng.IntN(3) == 0 {
						_ = tx.Delete("api", fmt.Sprintf("d%d", rng.IntN(40)))
					} else {
						_, _ = tx.Put("api", rnd())
					}
				}
			})
		case k < 9:
			var rs []rule.Rule
			for i := range rng.IntN(5) {
				x := rnd()
				x.ID = fmt.Sprintf("f%d", i+rng.IntN(3))
				if !slices.ContainsFunc(rs, func(y rule.Rule) bool { return y.ID == x.ID }) {
					rs = append(rs, x)
				}
			}
			_, _ = s.Replace("file:a", rs)
		default:
			s.Sweep()
		}
		cur := s.Effective()
		snaps = append(snaps, cur)
		for _, back := range []int{1, 2, 7, 50} {
			if back > len(snaps) {
				continue
			}
			old := snaps[len(snaps)-back]
			d, ok := s.Delta(old.Version)
			if !ok {
				t.Fatalf("step %d: no delta from version %d (now %d)", step, old.Version, cur.Version)
			}
			if d.From != old.Version || d.Version != cur.Version {
				t.Fatalf("step %d: delta %d..%d, want %d..%d", step, d.From, d.Version, old.Version, cur.Version)
			}
			rules, seqs := applyDelta(old, d)
			if !reflect.DeepEqual(rules, cur.Set.Rules) || !slices.Equal(seqs, cur.Seqs) {
				t.Fatalf("step %d: snapshot %d + delta != snapshot %d\n got %v\nwant %v", step, old.Version, cur.Version, rules, cur.Set.Rules)
			}
		}
	}
	if _, ok := s.Delta(s.Version() + 1); ok {
		t.Error("a delta from a version the store never had")
	}
	v := s.Version()
	for i := range maxChanges + 1 {
		_, _ = s.Put("api", rule.Rule{ID: fmt.Sprintf("m%d", i), Priority: 1000, Action: rule.Drop,
			Match: rule.Match{Dst: netip.MustParsePrefix("198.51.100.0/24")}})
	}
	if _, ok := s.Delta(v); ok {
		t.Errorf("a delta across %d changes (the log keeps %d)", maxChanges+1, maxChanges)
	}
	if _, ok := s.Delta(s.Version() - 1); !ok {
		t.Error("no delta for the last change")
	}
}
