package store

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/scrubd/scrubd/swpath/rule"
)

func limitRule(id string, i int) rule.Rule {
	return rule.Rule{ID: id, Priority: 100, Action: rule.Drop,
		Match: rule.Match{Dst: netip.PrefixFrom(netip.AddrFrom4([4]byte{203, 0, 113, byte(i)}), 32)}}
}

// rules.max_rules_per_source: a Put, Replace, Add or ReplaceInForce that
// would leave a source with more rules than the bound is refused whole
// (ErrTooMany naming the source, the count and the key) and changes
// nothing; replacing a rule in place, deleting, and other sources are not
// affected; the count follows deletes, replaces and expiry.
func TestMaxRulesPerSource(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s := New(nil, func() time.Time { return now })
	s.SetMaxPerSource(3)
	for i := range 3 {
		if _, err := s.Put("api", limitRule(fmt.Sprint("a", i), i)); err != nil {
			t.Fatal(err)
		}
	}
	v := s.Version()
	_, err := s.Put("api", limitRule("a3", 3))
	if !errors.Is(err, ErrTooMany) || !strings.Contains(err.Error(), "source api would hold 4 rules, more than the 3 of rules.max_rules_per_source") {
		t.Fatalf("4th rule: %v", err)
	}
	if s.Version() != v || s.Len() != 3 {
		t.Fatalf("the refused put changed the store")
	}
	if _, err := s.Put("api", limitRule("a1", 9)); err != nil { // in place
		t.Fatalf("replacing a rule in place: %v", err)
	}
	if _, err := s.Put("bgp", limitRule("b0", 0)); err != nil {
		t.Fatalf("another source: %v", err)
	}
	four := []rule.Rule{limitRule("f0", 0), limitRule("f1", 1), limitRule("f2", 2), limitRule("f3", 3)}
	v = s.Version()
	if _, err := s.Replace("file:x", four); !errors.Is(err, ErrTooMany) {
		t.Fatalf("Replace of 4: %v", err)
	}
	if _, err := s.ReplaceInForce("file:x", four); !errors.Is(err, ErrTooMany) {
		t.Fatalf("ReplaceInForce of 4: %v", err)
	}
	if _, err := s.Add("api", []rule.Rule{limitRule("a9", 9)}); !errors.Is(err, ErrTooMany) {
		t.Fatalf("Add of a 4th: %v", err)
	}
	if s.Version() != v || s.Len() != 4 || len(s.Source("file:x")) != 0 {
		t.Fatalf("a refused change changed the store: version %d→%d, %d rules", v, s.Version(), s.Len())
	}
	if _, err := s.Replace("file:x", four[:3]); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Replace("file:x", []rule.Rule{four[3], four[0], four[1]}); err != nil { // one out, one in: 3
		t.Fatalf("a replace that keeps 3: %v", err)
	}
	if err := s.Delete("api", "a0"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Put("api", limitRule("a3", 3)); err != nil {
		t.Fatalf("after a delete there is room: %v", err)
	}
	exp := limitRule("a4", 4)
	if err := s.Delete("api", "a3"); err != nil {
		t.Fatal(err)
	}
	exp.Expires = now.Add(time.Second)
	if _, err := s.Put("api", exp); err != nil {
		t.Fatal(err)
	}
	now = now.Add(2 * time.Second)
	if gone := s.Sweep(); len(gone) != 1 {
		t.Fatalf("sweep: %v", gone)
	}
	if _, err := s.Put("api", limitRule("a5", 5)); err != nil {
		t.Fatalf("after expiry there is room: %v", err)
	}
	if _, err := s.Put("api", limitRule("a6", 6)); !errors.Is(err, ErrTooMany) {
		t.Fatalf("full again: %v", err)
	}
}
