package store

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"testing"
	"time"

	"github.com/scrubd/scrubd/swpath/rule"
)

// Changes made in one Update are one store version and one Changed
// signal; an Update that changes nothing (a guard refusal, a delete of an
// unknown rule, a stale mark already set) is none. Each change has the
// result the Store's own method gives.
func TestUpdateIsOneVersion(t *testing.T) {
	s, c := newStore()
	v0 := s.Version()
	s.Update(func(tx *Tx) {
		for _, y := range []string{
			`{id: u1, action: drop, match: {dst: 203.0.113.1/32}}`,
			`{id: u2, action: drop, match: {dst: 203.0.113.2/32}}`,
			`{id: u3, action: drop, match: {dst: 203.0.113.3/32}}`,
		} {
			if _, err := tx.Put("bgp:x", r(t, y)); err != nil {
				t.Fatal(err)
			}
		}
		if err := tx.Delete("bgp:x", "u2"); err != nil {
			t.Fatal(err)
		}
		if !tx.SetStale("bgp:x", "u3", c.t.Add(time.Hour)) {
			t.Fatal("u3 not found")
		}
	})
	if got := s.Version() - v0; got != 1 {
		t.Fatalf("one Update moved the version by %d, want 1", got)
	}
	select {
	case <-s.Changed():
	default:
		t.Fatal("no Changed signal after the Update")
	}
	if s.Len() != 2 {
		t.Fatalf("%d rules, want u1 and u3", s.Len())
	}
	if e, _ := s.Get("u3"); !e.StaleAt.Equal(c.t.Add(time.Hour)) {
		t.Fatalf("u3 stale at %v", e.StaleAt)
	}
	v1 := s.Version()
	s.Update(func(tx *Tx) {
		if err := tx.Delete("bgp:x", "nope"); !errors.Is(err, ErrNotFound) {
			t.Errorf("delete of an unknown rule: %v", err)
		}
		if _, err := tx.Put("bgp:x", rule.Rule{ID: "wide", Action: rule.Drop}); !errors.Is(err, ErrGuard) {
			t.Errorf("a match-everything drop: %v", err)
		}
		if _, err := tx.Put("api", r(t, `{id: u1, action: drop, match: {dst: 203.0.113.9/32}}`)); !errors.Is(err, ErrIDInUse) {
			t.Errorf("another source's id: %v", err)
		}
		tx.SetStale("bgp:x", "u3", c.t.Add(time.Hour))
	})
	if s.Version() != v1 {
		t.Fatalf("an Update that changed nothing moved the version %d -> %d", v1, s.Version())
	}
	select {
	case <-s.Changed():
		t.Fatal("Changed signalled for an Update that changed nothing")
	default:
	}
}

// Counts, kept as rules come and go, equals a count of a Snapshot's
// entries by source and status after every step of a random mix of puts
// (some refused by protection or already expired, some replacing another
// status), deletes, replaces of a whole source and expiry sweeps.
func TestCountsMatchSnapshot(t *testing.T) {
	s, c := newStore()
	rnd := rand.New(rand.NewPCG(5, 6))
	srcs := []string{"api", "bgp:a", "file:/x"}
	mk := func() rule.Rule {
		id := fmt.Sprintf("r%d", rnd.IntN(40))
		var dst string
		switch rnd.IntN(4) {
		case 0:
			dst = "192.0.2.10/32" // the protected address: refused
		case 1:
			dst = "192.0.2.0/24" // covers it: narrowed
		default:
			dst = fmt.Sprintf("203.0.113.%d/32", rnd.IntN(200))
		}
		x := rule.Rule{ID: id, Action: rule.Drop, Match: rule.Match{Dst: netip.MustParsePrefix(dst)}}
		if rnd.IntN(5) == 0 {
			x.Expires = c.t.Add(time.Duration(rnd.IntN(3)-1) * time.Minute)
		}
		return x
	}
	for step := range 2000 {
		src := srcs[rnd.IntN(len(srcs))]
		switch rnd.IntN(10) {
		case 0:
			var rs []rule.Rule
			seen := map[string]bool{}
			for range rnd.IntN(6) {
				if x := mk(); !seen[x.ID] {
					seen[x.ID] = true
					rs = append(rs, x)
				}
			}
			_, _ = s.Replace(src, rs)
		case 1, 2:
			_ = s.Delete(src, fmt.Sprintf("r%d", rnd.IntN(40)))
		case 3:
			c.t = c.t.Add(30 * time.Second)
			s.Sweep()
		default:
			_, _ = s.Put(src, mk())
		}
		want := map[Count]bool{}
		n := map[sourceStatus]int{}
		for _, e := range s.Snapshot().Entries {
			n[sourceStatus{e.Source, e.Status}]++
		}
		for k, v := range n {
			want[Count{Source: k.src, Status: k.st, N: v}] = true
		}
		got := s.Counts()
		if len(got) != len(want) {
			t.Fatalf("step %d: Counts %v, snapshot %v", step, got, n)
		}
		for _, g := range got {
			if !want[g] {
				t.Fatalf("step %d: Counts %v, snapshot %v", step, got, n)
			}
		}
	}
}

// SourceVersions moves for the source a change touches and no other, not
// for a stale mark, and drops a source that holds no rules; Source lists
// one source's rules in store order.
func TestSourceVersions(t *testing.T) {
	s, c := newStore()
	put := func(src, id, dst string) {
		t.Helper()
		if _, err := s.Put(src, r(t, `{id: `+id+`, action: drop, match: {dst: `+dst+`}}`)); err != nil {
			t.Fatal(err)
		}
	}
	put("api", "a1", "203.0.113.1/32")
	put("bgp:x", "b1", "203.0.113.2/32")
	put("api", "a2", "203.0.113.3/32")
	v0 := s.SourceVersions()
	if len(v0) != 2 || v0["api"] == 0 || v0["bgp:x"] == 0 {
		t.Fatalf("versions %v", v0)
	}
	put("bgp:x", "b2", "203.0.113.4/32")
	v1 := s.SourceVersions()
	if v1["api"] != v0["api"] || v1["bgp:x"] == v0["bgp:x"] {
		t.Fatalf("a bgp put: versions %v -> %v", v0, v1)
	}
	s.SetStale("api", "a1", c.t.Add(time.Hour))
	if v2 := s.SourceVersions(); v2["api"] != v1["api"] {
		t.Fatalf("a stale mark moved api's version: %v -> %v", v1, v2)
	}
	if err := s.Delete("api", "a1"); err != nil {
		t.Fatal(err)
	}
	v3 := s.SourceVersions()
	if v3["api"] == v1["api"] || v3["bgp:x"] != v1["bgp:x"] {
		t.Fatalf("an api delete: versions %v -> %v", v1, v3)
	}
	if _, err := s.Replace("bgp:x", nil); err != nil {
		t.Fatal(err)
	}
	if v4 := s.SourceVersions(); len(v4) != 1 || v4["api"] != v3["api"] {
		t.Fatalf("bgp:x emptied: versions %v", v4)
	}
	put("api", "a3", "203.0.113.5/32")
	var ids []string
	for _, e := range s.Source("api") {
		ids = append(ids, e.Rule.ID)
	}
	if fmt.Sprint(ids) != "[a2 a3]" {
		t.Fatalf("Source(api) = %v, want [a2 a3]", ids)
	}
}

// Effective is Snapshot's Version and Set, List its Entries.
func TestEffectiveAndListAreSnapshotParts(t *testing.T) {
	s, _ := newStore()
	if _, err := s.Replace("file:a", []rule.Rule{r(t, `{id: a1, action: drop, match: {dst: 203.0.113.0/24}}`), r(t, `{id: a2, action: drop, match: {dst: 192.0.2.10/32}}`)}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Put("api", r(t, `{id: b1, action: drop, match: {dst: 198.51.100.0/24}}`)); err != nil {
		t.Fatal(err)
	}
	snap, eff, list := s.Snapshot(), s.Effective(), s.List()
	if eff.Version != snap.Version || eff.Entries != nil || fmt.Sprint(eff.Set) != fmt.Sprint(snap.Set) {
		t.Fatalf("Effective %+v, Snapshot %+v", eff, snap)
	}
	if fmt.Sprint(list) != fmt.Sprint(snap.Entries) || len(list) != 3 {
		t.Fatalf("List %v, Snapshot's entries %v", list, snap.Entries)
	}
	if len(snap.Set.Rules) != 3 { // the protect rule, a1, b1 (a2 refused)
		t.Fatalf("set %v", snap.Set.Rules)
	}
}

// SourceRules lists a source's rules in force, in store order, and no
// refused one.
func TestSourceRules(t *testing.T) {
	s, _ := newStore()
	for _, y := range []string{
		`{id: s1, action: drop, match: {dst: 203.0.113.1/32}}`,
		`{id: s2, action: drop, match: {dst: 192.0.2.10/32}}`, // the protected address: refused
		`{id: s3, action: drop, match: {dst: 203.0.113.3/32}}`,
	} {
		_, _ = s.Put("api", r(t, y))
	}
	_, _ = s.Put("bgp:x", r(t, `{id: x1, action: drop, match: {dst: 203.0.113.9/32}}`))
	var ids []string
	for _, x := range s.SourceRules("api") {
		ids = append(ids, x.ID)
	}
	if fmt.Sprint(ids) != "[s1 s3]" {
		t.Fatalf("SourceRules(api) = %v, want [s1 s3]", ids)
	}
}
