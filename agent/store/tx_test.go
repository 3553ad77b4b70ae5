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
