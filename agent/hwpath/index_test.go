package hwpath

import (
	"net/netip"
	"slices"
	"testing"

	"github.com/scrubd/scrubd/offload"
	"github.com/scrubd/scrubd/swpath/rule"
)

// A rule's place in the set, which decides which accept rules of its
// priority are in front of it: from its address when it points into the
// set's array, from the first rule of its id when it is a copy, -1 when
// the set has none; a set grown in place (rules appended to the same
// array) indexes the accept rules appended, and another array is indexed
// anew.
func TestPositionAndAcceptIndex(t *testing.T) {
	p, _, _ := newPath(offload.MLX5(64), 0)
	mk := func(id string, a rule.Action, dst string) rule.Rule {
		return rule.Rule{ID: id, Priority: 5, Action: a, Match: rule.Match{Dst: netip.MustParsePrefix(dst)}}
	}
	arr := make([]rule.Rule, 0, 8)
	arr = append(arr, mk("d0", rule.Drop, "10.0.0.0/8"), mk("a1", rule.Accept, "10.1.0.0/16"), mk("d2", rule.Drop, "10.0.0.0/8"))
	set := &rule.Set{Rules: arr}
	for i := range set.Rules {
		if got := p.position(&set.Rules[i], set); got != i {
			t.Fatalf("rule %d in the array: position %d", i, got)
		}
	}
	cp := set.Rules[2]
	if got := p.position(&cp, set); got != 2 {
		t.Fatalf("a copy of d2: position %d, want 2 (by id)", got)
	}
	other := mk("zz", rule.Drop, "10.0.0.0/8")
	if got := p.position(&other, set); got != -1 {
		t.Fatalf("a rule not in the set: position %d, want -1", got)
	}
	// The drop after the accept rule of its priority is shielded by it;
	// the one before is not.
	if sh := p.shields(&set.Rules[0], set); len(sh) != 0 {
		t.Fatalf("d0 shielded by %v", sh)
	}
	if sh := p.shields(&set.Rules[2], set); len(sh) != 1 || sh[0].ID != "a1" {
		t.Fatalf("d2 shielded by %v, want a1", sh)
	}
	// Grown in place: an accept rule and a drop after it appended.
	set.Rules = append(set.Rules, mk("a3", rule.Accept, "10.2.0.0/16"), mk("d4", rule.Drop, "10.0.0.0/8"))
	if &set.Rules[0] != &arr[0] {
		t.Fatal("setup: the array grew elsewhere")
	}
	if sh := p.shields(&set.Rules[4], set); len(sh) != 2 || sh[0].ID != "a1" || sh[1].ID != "a3" {
		t.Fatalf("d4 shielded by %v, want a1 and a3", sh)
	}
	if x := p.index(set); !slices.Equal(x.accepts, []int{1, 3}) {
		t.Fatalf("accept positions %v, want [1 3]", x.accepts)
	}
	// Another array, the accept rules moved: indexed anew.
	moved := &rule.Set{Rules: []rule.Rule{mk("a3", rule.Accept, "10.2.0.0/16"), mk("d4", rule.Drop, "10.0.0.0/8"), mk("a1", rule.Accept, "10.1.0.0/16")}}
	if sh := p.shields(&moved.Rules[1], moved); len(sh) != 1 || sh[0].ID != "a3" {
		t.Fatalf("d4 in the new array shielded by %v, want a3", sh)
	}
	if x := p.index(moved); !slices.Equal(x.accepts, []int{0, 2}) {
		t.Fatalf("accept positions %v, want [0 2]", x.accepts)
	}
	// A drop changed in place (rule.Order): d0's new copy appended, its
	// slot a hole, deciding at d0's key, in front of a1 and a3 still.
	grown := &rule.Set{Rules: append(moved.Rules[:3:3], mk("d0", rule.Drop, "10.0.0.0/9")), Holes: (*rule.Holes)(nil).With(1), Order: (*rule.Order)(nil).With(3, 1)}
	if got := p.position(&grown.Rules[3], grown); got != 3 {
		t.Fatalf("d0 appended: position %d, want 3", got)
	}
	if sh := p.shields(&grown.Rules[3], grown); len(sh) != 1 || sh[0].ID != "a3" {
		t.Fatalf("d0 changed in place (key 1) shielded by %v, want a3 only (a1 at 2 decides after it)", sh)
	}
}
