package placement

import (
	"context"
	"fmt"
	"testing"

	"github.com/scrubd/scrubd/agent/protect"
	"github.com/scrubd/scrubd/agent/store"
	"github.com/scrubd/scrubd/swpath/rule"
)

// Rules added after the last take the store's arrays as the store
// extends them, the places in its order as well as the rules: the placer
// holds no copy of either (at 100k rules 29 MB of rules and 0.8 MB of
// places). A removal then closes the places in a copy of its own, not in
// the store's array.
func TestAddsShareTheStoresArrays(t *testing.T) {
	w := newWorld(t, 1000)
	st := store.New(&protect.List{}, w.now)
	var rs []rule.Rule
	for i := range 100 {
		rs = append(rs, drop(fmt.Sprintf("r%d", i), fmt.Sprintf("198.18.%d.0/24", i)))
	}
	if _, err := st.Replace("file:a", rs); err != nil {
		t.Fatal(err)
	}
	w.want(rs...)
	p := New(cfg(), w.hw, w.sw, quiet(), w.now)
	ctx := context.Background()
	p.ApplyStore(ctx, st)
	for i := range 3 {
		r := drop(fmt.Sprintf("add%d", i), fmt.Sprintf("198.19.%d.0/24", i))
		if _, err := st.Put("api", r); err != nil {
			t.Fatal(err)
		}
		p.ApplyStore(ctx, st)
		eff := st.Effective()
		w.want(eff.Set.Rules...)
		w.check(fmt.Sprintf("add %d", i))
		if len(p.seqs) != len(eff.Seqs) || &p.seqs[0] != &eff.Seqs[0] || &p.set.Rules[0] != &eff.Set.Rules[0] {
			t.Fatalf("add %d: the placer's places (%d) or rules are not the store's (%d)", i, len(p.seqs), len(eff.Seqs))
		}
		if p.seqsOwn {
			t.Fatalf("add %d: the store's places marked as the placer's own", i)
		}
	}
	before := st.Effective().Seqs
	want := append([]uint64(nil), before...)
	if err := st.Delete("file:a", "r5"); err != nil {
		t.Fatal(err)
	}
	w.want(st.Effective().Set.Rules...)
	p.ApplyStore(ctx, st)
	for i := range want {
		if before[i] != want[i] {
			t.Fatalf("a removal wrote the store's places at %d: %d, was %d", i, before[i], want[i])
		}
	}
	eff := st.Effective()
	// The removal left a hole: the places and rules less the holes are
	// the store's.
	var seqs []uint64
	var ids []string
	for i := range p.seqs {
		if p.set.Live(i) {
			seqs, ids = append(seqs, p.seqs[i]), append(ids, p.set.Rules[i].ID)
		}
	}
	if len(seqs) != len(eff.Seqs) || p.set.Holes.Count() != 1 {
		t.Fatalf("after the removal, %d places and %d holes, the store's %d places", len(seqs), p.set.Holes.Count(), len(eff.Seqs))
	}
	for i := range eff.Seqs {
		if seqs[i] != eff.Seqs[i] || ids[i] != eff.Set.Rules[i].ID {
			t.Fatalf("after the removal, place %d: %d %s, the store's %d %s", i, seqs[i], ids[i], eff.Seqs[i], eff.Set.Rules[i].ID)
		}
	}
	w.check("after adds and a removal")
}
