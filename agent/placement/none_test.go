package placement

import (
	"context"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/scrubd/scrubd/agent/store"
	"github.com/scrubd/scrubd/swpath/rule"
)

// noneDropsIn counts the drop rules of p's set placed nowhere (path None).
func noneDropsIn(p *Placer) int {
	n := 0
	for _, rs := range p.states {
		if rs != nil && rs.r.Action == rule.Drop && rs.path == pNone {
			n++
		}
	}
	return n
}

// The count of drop rules placed nowhere (which lets swSet hand out the
// whole array without a walk) follows rules left unplaced by a cancelled
// round (the agent's shutdown), then removed, changed, or placed by the
// next rounds; the set pushed to software with the backstop is every rule
// placed somewhere (swSet's walk leaves out a rule placed nowhere, which
// a count too low would let in), and, once every rule is placed, the
// whole set in order. Fails with a removal or a change of an unplaced
// rule left uncounted.
func TestNoneDropsFollowUnplacedRules(t *testing.T) {
	w := newWorld(t, 1000)
	st := store.New(nil, w.now)
	c := cfg()
	c.NoBackstop = false
	p := New(c, w.hw, w.sw, quiet(), w.now)
	one := func(i int, third byte) rule.Rule {
		return rule.Rule{ID: fmt.Sprintf("u%d", i), Priority: 100, Action: rule.Drop,
			Match: rule.Match{Dst: netip.PrefixFrom(netip.AddrFrom4([4]byte{198, 18, third, byte(i)}), 32)}}
	}
	check := func(what string) {
		t.Helper()
		if got, want := p.noneDrops, noneDropsIn(p); got != want {
			t.Fatalf("%s: %d drop rules placed nowhere counted, %d in the set", what, got, want)
		}
		if what == "a cancelled round" {
			return // software holds the rules it was to place (the push before placement)
		}
		if got, want := w.sw.set.Len(), p.set.Len()-noneDropsIn(p); got != want {
			t.Fatalf("%s: software holds %d rules, want the %d placed", what, got, want)
		}
	}
	apply := func(ctx context.Context, what string) {
		t.Helper()
		w.want(st.Effective().Set.Rules...)
		if p.noneDrops > 0 {
			w.want() // rules placed nowhere are out of software: not checked
		}
		p.ApplyStore(ctx, st)
		check(what)
	}
	apply(context.Background(), "empty")
	if _, err := st.Put("api", one(255, 9)); err != nil {
		t.Fatal(err)
	}
	apply(context.Background(), "one rule")
	// 300 rules in one version, placed by a round whose context is
	// cancelled: it stops after 255 of them, the rest in software (the
	// push before placement) and placed nowhere.
	st.Update(func(tx *store.Tx) {
		for i := range 300 {
			if _, err := tx.Put("api", one(i, byte(i>>8))); err != nil {
				t.Fatal(err)
			}
		}
	})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	apply(ctx, "a cancelled round")
	if p.noneDrops == 0 {
		t.Fatal("the cancelled round placed every rule: nothing left unplaced to test")
	}
	t.Logf("%d rules left unplaced", p.noneDrops)
	// Unplaced rules removed and changed (a new match: a new state).
	w.clock = w.clock.Add(time.Second)
	st.Update(func(tx *store.Tx) {
		for i := 290; i < 295; i++ {
			if err := tx.Delete("api", fmt.Sprintf("u%d", i)); err != nil {
				t.Fatal(err)
			}
		}
		for i := 295; i < 300; i++ {
			if _, err := tx.Put("api", one(i, 7)); err != nil {
				t.Fatal(err)
			}
		}
	})
	apply(context.Background(), "unplaced rules removed and changed")
	if p.noneDrops == 0 {
		t.Fatal("no rule left unplaced")
	}
	// A snapshot round places them.
	w.want(st.Effective().Set.Rules...)
	p.Apply(context.Background(), st.Effective())
	check("a snapshot round")
	if p.noneDrops != 0 {
		t.Fatalf("%d rules placed nowhere after a snapshot round", p.noneDrops)
	}
	// Placed rules removed: the set pushed is every rule, in order.
	for i := range 5 {
		if err := st.Delete("api", fmt.Sprintf("u%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	apply(context.Background(), "placed rules removed")
	eff := st.Effective().Set.Rules
	got := w.sw.set.Compact().Rules // the removals left holes
	if len(got) != len(eff) {
		t.Fatalf("software holds %d rules, the set %d", len(got), len(eff))
	}
	for i := range eff {
		if got[i].ID != eff[i].ID {
			t.Fatalf("software's rule %d is %s, the set's %s", i, got[i].ID, eff[i].ID)
		}
	}
}
