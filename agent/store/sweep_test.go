package store

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/scrubd/scrubd/swpath/rule"
)

// TestSweepIdle: an idle agent sweeps every tick. A Sweep before the
// earliest deadline walks no entry (SweepWalks stays), and every change
// that can bring a deadline nearer (a rule put with an expiry, a stale
// deadline set by MarkStale or SetStale) makes the next Sweep walk again,
// so each rule still goes at its deadline, not later.
func TestSweepIdle(t *testing.T) {
	s, c := newStore()
	var rules []rule.Rule
	for i := range 1000 {
		rules = append(rules, rule.Rule{ID: fmt.Sprintf("r%d", i), Action: rule.Drop,
			Match: rule.Match{Dst: netip.PrefixFrom(netip.AddrFrom4([4]byte{198, 18, byte(i >> 8), byte(i)}), 32)}})
	}
	if _, err := s.Replace("file:a", rules); err != nil {
		t.Fatal(err)
	}
	sweep := func(wantGone string, wantWalks uint64) {
		t.Helper()
		var ids []string
		for _, e := range s.Sweep() {
			ids = append(ids, e.Rule.ID)
		}
		if got := fmt.Sprint(ids); got != "["+wantGone+"]" {
			t.Fatalf("at %v swept %s, want [%s]", c.t, got, wantGone)
		}
		if w := s.SweepWalks(); w != wantWalks {
			t.Fatalf("at %v: %d sweeps walked the entries, want %d", c.t, w, wantWalks)
		}
	}
	sweep("", 1) // the first walks: nothing is known yet
	for range 10 {
		c.t = c.t.Add(time.Second)
		sweep("", 1)
	}
	// A rule with an expiry: the next Sweep walks, later ones wait for it.
	if _, err := s.Put("api", r(t, `{id: short, action: drop, expires: 1m, match: {dst: 198.51.100.7/32}}`)); err != nil {
		t.Fatal(err)
	}
	sweep("", 2)
	c.t = time.Date(2026, 1, 1, 0, 0, 59, 0, time.UTC)
	sweep("", 2)
	c.t = c.t.Add(time.Second)
	sweep("short", 3)
	// A stale deadline set on one rule, then on a whole source.
	if !s.SetStale("file:a", "r7", c.t.Add(10*time.Second)) {
		t.Fatal("SetStale: r7 not found")
	}
	sweep("", 4)
	c.t = c.t.Add(9 * time.Second)
	sweep("", 4)
	c.t = c.t.Add(time.Second)
	sweep("r7", 5)
	s.MarkStale("file:a", c.t.Add(time.Second))
	sweep("", 6)
	c.t = c.t.Add(time.Second)
	if g := s.Sweep(); len(g) != 999 || s.Len() != 0 {
		t.Fatalf("stale source: swept %d, %d left; want 999, 0", len(g), s.Len())
	}
	c.t = c.t.Add(time.Hour)
	sweep("", 7) // an empty store walks once, then waits for a change
	sweep("", 7)
}
