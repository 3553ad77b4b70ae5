package store

import (
	"errors"
	"strings"
	"testing"

	"github.com/scrubd/scrubd/swpath/rule"
)

// Add, PutInForce and ReplaceInForce store nothing that would not be in
// force, and a batch is applied whole or not at all.
func TestInForceOnly(t *testing.T) {
	s, _ := newStore()
	ok1 := r(t, `{id: ok1, action: drop, match: {dst: 203.0.113.1/32}}`)
	ok2 := r(t, `{id: ok2, action: drop, match: {dst: 203.0.113.2/32}}`)
	prot := r(t, `{id: prot-only, action: drop, match: {dst: 192.0.2.10/32}}`)
	old := r(t, `{id: old, action: drop, match: {dst: 203.0.113.3/32}, expires: "2025-01-01T00:00:00Z"}`)
	if _, err := s.Add("file:f", []rule.Rule{r(t, `{id: owned, action: drop, match: {dst: 198.51.100.0/24}}`)}); err != nil {
		t.Fatal(err)
	}
	v := s.Snapshot().Version
	for _, tc := range []struct {
		name  string
		rules []rule.Rule
		is    error
		want  string
	}{
		{"protected", []rule.Rule{ok1, prot, ok2}, ErrProtected, `rules[1] (id "prot-only"): match: `},
		{"expired", []rule.Rule{ok1, old}, ErrExpired, `rules[1] (id "old"): expires: `},
		{"duplicate", []rule.Rule{ok1, ok1}, nil, `rules[1] (id "ok1"): id: the same id as rules[0]`},
		{"other source", []rule.Rule{ok1, r(t, `{id: owned, action: drop, match: {dst: 198.51.100.0/24}}`)}, ErrIDInUse, `rules[1] (id "owned"): id: `},
	} {
		_, err := s.Add("api", tc.rules)
		if err == nil || !strings.Contains(err.Error(), tc.want) || (tc.is != nil && !errors.Is(err, tc.is)) {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
	if s.Snapshot().Version != v || s.Len() != 1 {
		t.Fatalf("refused batches changed the store: version %d -> %d, %d rules", v, s.Snapshot().Version, s.Len())
	}
	if _, err := s.PutInForce("api", prot); !errors.Is(err, ErrProtected) {
		t.Fatalf("PutInForce of a protected rule: %v", err)
	}
	if _, ok := s.Get("prot-only"); ok {
		t.Fatal("refused rule stored")
	}
	if _, err := s.Add("api", []rule.Rule{ok1, ok2}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Add("api", []rule.Rule{ok1}); !errors.Is(err, ErrExists) {
		t.Fatalf("second add of ok1: %v", err)
	}
	if _, err := s.ReplaceInForce("api", []rule.Rule{ok2, prot}); !errors.Is(err, ErrProtected) {
		t.Fatalf("replace with a protected rule: %v", err)
	}
	if len(s.Source("api")) != 2 {
		t.Fatalf("refused replace changed the source: %v", s.Source("api"))
	}
	es, err := s.ReplaceInForce("api", []rule.Rule{ok2})
	if err != nil || len(es) != 1 || len(s.Source("api")) != 1 {
		t.Fatalf("replace: %v %v", es, err)
	}
}
