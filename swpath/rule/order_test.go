package rule

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestOrder checks sets whose rules were changed in place by appending the
// new copy, holing the old and moving it to the old key (Order), against
// the same rules kept in a plain slice edited where they stand: the
// decision order (Ordered, Compact), the reference decision (Decide) of
// random packets, which must pick the rule of the same id, and Len. Adds
// (appends at their own key) and removals (holes) come between the
// changes, and every earlier set must still decide as it did: the keys are
// appended in place, so a later With must not change an earlier Order.
func TestOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	mk := func(i int) Rule {
		// Few priorities, so that ties (broken by key) are common.
		return Rule{ID: fmt.Sprintf("r%d", i), Priority: uint32(rng.IntN(3)), Action: Action(rng.IntN(2)), Match: randomMatch(rng)}
	}
	var plain []Rule
	for i := range 200 {
		plain = append(plain, mk(i))
	}
	set := &Set{Rules: slices.Clone(plain)}
	at := map[string]int{} // id -> position in set
	for i, r := range plain {
		at[r.ID] = i
	}
	type version struct {
		set   *Set
		plain []Rule
	}
	var history []version
	next := len(plain)
	for step := range 400 {
		s := *set
		switch op := rng.IntN(10); {
		case op < 6 && len(plain) > 0: // change in place
			k := rng.IntN(len(plain))
			r := mk(next)
			r.ID = plain[k].ID
			plain[k] = r
			old := at[r.ID]
			s.Rules = append(s.Rules, r)
			j := len(s.Rules) - 1
			s.Holes = s.Holes.With(old)
			s.Order = s.Order.With(j, s.Key(old))
			at[r.ID] = j
		case op < 8: // add after the last
			r := mk(next)
			plain = append(plain, r)
			s.Rules = append(s.Rules, r)
			at[r.ID] = len(s.Rules) - 1
		default: // remove
			if len(plain) == 0 {
				continue
			}
			k := rng.IntN(len(plain))
			id := plain[k].ID
			plain = slices.Delete(plain, k, k+1)
			s.Holes = s.Holes.With(at[id])
			delete(at, id)
		}
		next++
		set = &s
		history = append(history, version{set, slices.Clone(plain)})
		checkOrder(t, step, set, plain, rng)
	}
	for k, v := range history {
		checkOrder(t, 1000+k, v.set, v.plain, rng)
	}
	if set.Order.Moved() == 0 {
		t.Fatal("no rule was moved")
	}
}

func checkOrder(t *testing.T, step int, set *Set, plain []Rule, rng *rand.Rand) {
	t.Helper()
	if set.Len() != len(plain) {
		t.Fatalf("step %d: Len %d, want %d", step, set.Len(), len(plain))
	}
	var ids []string
	set.Ordered(func(i int) { ids = append(ids, set.Rules[i].ID) })
	var want []string
	for _, r := range plain {
		want = append(want, r.ID)
	}
	if !slices.Equal(ids, want) {
		t.Fatalf("step %d: Ordered %v\nwant %v", step, ids, want)
	}
	var moved []int
	set.EachMoved(func(i int) { moved = append(moved, i) })
	var want2 []int
	for i := range set.Rules {
		if set.Live(i) && set.Key(i) != i {
			want2 = append(want2, i)
		}
	}
	if !slices.Equal(moved, want2) {
		t.Fatalf("step %d: EachMoved %v, want %v", step, moved, want2)
	}
	c := set.Compact()
	if !slices.EqualFunc(c.Rules, plain, func(a, b Rule) bool { return a.ID == b.ID && a.Priority == b.Priority }) {
		t.Fatalf("step %d: Compact is not the rules in order", step)
	}
	ref := &Set{Rules: plain}
	for range 200 {
		f := randomFields(rng)
		got, want := set.Decide(&f), ref.Decide(&f)
		if (got < 0) != (want < 0) || (got >= 0 && set.Rules[got].ID != plain[want].ID) {
			t.Fatalf("step %d: Decide %d, the plain rules decide %d", step, got, want)
		}
	}
}

// TestOrderWithMisuse checks that With refuses keys not below the position
// and positions inside the tail it already holds.
func TestOrderWithMisuse(t *testing.T) {
	o := (*Order)(nil).With(10, 3)
	if o.Key(10) != 3 || o.Key(9) != 9 || o.Key(11) != 11 || o.Moved() != 1 {
		t.Fatalf("keys %d %d %d moved %d", o.Key(9), o.Key(10), o.Key(11), o.Moved())
	}
	for _, c := range [][2]int{{12, 12}, {12, 13}, {10, 2}, {9, 1}, {12, -1}} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("With(%d, %d) did not panic", c[0], c[1])
				}
			}()
			o.With(c[0], c[1])
		}()
	}
	o2 := o.With(14, 5)
	if o2.Key(12) != 12 || o2.Key(14) != 5 || o.Key(14) != 14 || o2.Moved() != 2 {
		t.Fatalf("after With(14, 5): %d %d, the older %d, moved %d", o2.Key(12), o2.Key(14), o.Key(14), o2.Moved())
	}
}
