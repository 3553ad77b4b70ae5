package store

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/scrubd/scrubd/agent/protect"
	"github.com/scrubd/scrubd/swpath/rule"
)

type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func r(t *testing.T, y string) rule.Rule {
	t.Helper()
	x, err := rule.ParseRule("t", []byte(y), time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	return x
}

func newStore() (*Store, *clock) {
	c := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	pl := &protect.List{Entries: []protect.Entry{{Rule: rule.Rule{ID: "prot", Action: rule.Accept, Match: rule.Match{Dst: netip.MustParsePrefix("192.0.2.10/32")}}, Note: "mgmt"}}}
	return New(pl, c.now), c
}

func TestSourcesAndOrder(t *testing.T) {
	s, _ := newStore()
	if _, err := s.Replace("file:a", []rule.Rule{r(t, `{id: a1, action: drop, match: {dst: 203.0.113.0/24}}`), r(t, `{id: a2, action: drop, match: {dst: 198.51.100.0/24, proto: gre}}`)}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Put("api", r(t, `{id: b1, action: drop, match: {dst: 192.0.2.0/24}}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Put("api", r(t, `{id: a1, action: drop, match: {dst: 198.51.100.7/32}}`)); !errors.Is(err, ErrIDInUse) {
		t.Fatalf("clash: %v", err)
	}
	if _, err := s.Replace("api", []rule.Rule{r(t, `{id: a2, action: drop, match: {dst: 198.51.100.7/32}}`)}); !errors.Is(err, ErrIDInUse) {
		t.Fatalf("replace clash: %v", err)
	}
	snap := s.Snapshot()
	ids := []string{}
	for _, x := range snap.Set.Rules {
		ids = append(ids, x.ID)
	}
	if want := "prot a1 a2 b1"; joined(ids) != want {
		t.Fatalf("order %q want %q", joined(ids), want)
	}
	if e, _ := s.Get("b1"); e.Status != Narrowed {
		t.Fatalf("b1 %+v", e)
	}
	// Replacing the file source keeps a1's place and drops a2.
	if _, err := s.Replace("file:a", []rule.Rule{r(t, `{id: a3, action: drop, match: {dst: 198.51.100.7/32}}`), r(t, `{id: a1, action: drop, match: {dst: 198.51.100.0/24, proto: udp}}`)}); err != nil {
		t.Fatal(err)
	}
	ids = ids[:0]
	for _, x := range s.Snapshot().Set.Rules {
		ids = append(ids, x.ID)
	}
	if want := "prot a1 b1 a3"; joined(ids) != want {
		t.Fatalf("order %q want %q", joined(ids), want)
	}
}

func joined(s []string) string {
	out := ""
	for i, x := range s {
		if i > 0 {
			out += " "
		}
		out += x
	}
	return out
}

func TestProtectionRefuses(t *testing.T) {
	s, _ := newStore()
	e, err := s.Put("api", r(t, `{id: kill-mgmt, action: drop, match: {dst: 192.0.2.10/32}}`))
	if !errors.Is(err, ErrProtected) || e.Status != Refused {
		t.Fatalf("%v %+v", err, e)
	}
	if n := len(s.Snapshot().Set.Rules); n != 1 {
		t.Fatalf("refused rule in force: %d rules", n)
	}
}

func TestExpiryAndStale(t *testing.T) {
	s, c := newStore()
	var removed []string
	s.OnRemove(func(e Entry, why string) { removed = append(removed, e.Rule.ID) })
	if _, err := s.Put("api", r(t, `{id: short, action: drop, expires: 1m, match: {dst: 198.51.100.7/32}}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Replace("bgp:192.0.2.1", []rule.Rule{r(t, `{id: fs1, action: drop, match: {dst: 198.51.100.7/32}}`)}); err != nil {
		t.Fatal(err)
	}
	if d := s.NextDeadline(); !d.Equal(c.t.Add(time.Minute)) {
		t.Fatalf("deadline %v", d)
	}
	s.MarkStale("bgp:192.0.2.1", c.t.Add(30*time.Second))
	c.t = c.t.Add(29 * time.Second)
	if g := s.Sweep(); len(g) != 0 {
		t.Fatalf("early sweep %v", g)
	}
	c.t = c.t.Add(time.Second)
	if g := s.Sweep(); len(g) != 1 || g[0].Rule.ID != "fs1" {
		t.Fatalf("stale sweep %+v", g)
	}
	c.t = c.t.Add(30 * time.Second)
	if g := s.Sweep(); len(g) != 1 || g[0].Rule.ID != "short" {
		t.Fatalf("expiry sweep %+v", g)
	}
	if joined(removed) != "fs1 short" || s.Len() != 0 {
		t.Fatalf("removed %v, len %d", removed, s.Len())
	}
	// An already expired rule is refused.
	x := r(t, `{id: old, action: drop, expires: 2020-01-01T00:00:00Z, match: {dst: 198.51.100.7/32}}`)
	if _, err := s.Put("api", x); !errors.Is(err, ErrExpired) {
		t.Fatalf("expired: %v", err)
	}
}

func TestChangedAndDelete(t *testing.T) {
	s, _ := newStore()
	select {
	case <-s.Changed():
		t.Fatal("changed before any change")
	default:
	}
	s.Put("api", r(t, `{id: x, action: drop, match: {dst: 198.51.100.7/32}}`))
	s.Put("api", r(t, `{id: y, action: drop, match: {dst: 198.51.100.7/32}}`))
	<-s.Changed()
	select {
	case <-s.Changed():
		t.Fatal("changes not coalesced")
	default:
	}
	if err := s.Delete("file:z", "x"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("delete other source: %v", err)
	}
	if err := s.Delete("api", "x"); err != nil {
		t.Fatal(err)
	}
	if _, ok := s.Get("x"); ok {
		t.Fatal("still there")
	}
}

func TestSetStaleOneRule(t *testing.T) {
	s, c := newStore()
	if _, err := s.Replace("bgp", []rule.Rule{r(t, `{id: a, action: drop, match: {dst: 203.0.113.1/32}}`), r(t, `{id: b, action: drop, match: {dst: 203.0.113.2/32}}`)}); err != nil {
		t.Fatal(err)
	}
	if s.SetStale("api", "a", c.t.Add(time.Second)) {
		t.Fatal("SetStale marked a rule of another source")
	}
	if !s.SetStale("bgp", "a", c.t.Add(10*time.Second)) || s.SetStale("bgp", "zz", c.t) {
		t.Fatal("SetStale found the wrong rules")
	}
	c.t = c.t.Add(10 * time.Second)
	if g := s.Sweep(); len(g) != 1 || g[0].Rule.ID != "a" {
		t.Fatalf("sweep %+v", g)
	}
	// Cleared: b has no deadline and stays.
	s.SetStale("bgp", "b", c.t.Add(time.Second))
	s.SetStale("bgp", "b", time.Time{})
	c.t = c.t.Add(time.Hour)
	if g := s.Sweep(); len(g) != 0 || s.Len() != 1 {
		t.Fatalf("cleared deadline swept: %+v", g)
	}
}

func TestGuard(t *testing.T) {
	s, _ := newStore()
	if _, err := s.Replace("file:a", []rule.Rule{r(t, `{id: a1, action: drop, match: {dst: 203.0.113.0/24}}`)}); err != nil {
		t.Fatal(err)
	}
	// Too broad: refused, not stored, and a file with one such rule
	// changes nothing.
	if _, err := s.Put("api", r(t, `{id: all, action: drop, match: {dst: 0.0.0.0/0, proto: udp}}`)); !errors.Is(err, ErrGuard) || !strings.Contains(err.Error(), "0.0.0.0/0") {
		t.Fatalf("Put too broad: %v", err)
	}
	if _, ok := s.Get("all"); ok {
		t.Fatal("refused rule stored")
	}
	if _, err := s.Replace("file:a", []rule.Rule{r(t, `{id: a2, action: drop, match: {src: 198.51.100.0/24}}`), r(t, `{id: a3, action: drop, match: {proto: gre}}`)}); !errors.Is(err, ErrGuard) || !strings.Contains(err.Error(), `"a3"`) {
		t.Fatalf("Replace with a too broad rule: %v", err)
	}
	if _, ok := s.Get("a1"); !ok || s.Len() != 1 {
		t.Fatalf("refused replace changed the store (%d rules)", s.Len())
	}
	// The operator may allow broader rules.
	s.SetGuard(rule.Guard{MinPrefixV4: 0, MinPrefixV6: 0})
	if _, err := s.Put("api", r(t, `{id: all, action: drop, match: {dst: 0.0.0.0/0, proto: udp}}`)); err != nil {
		t.Fatal(err)
	}
	// But never a rule that an engine would read otherwise (made in code:
	// the parsers refuse it), whatever the guard allows.
	wide := r(t, `{id: ports, action: drop, match: {dst: 203.0.113.0/24, proto: udp}}`)
	wide.Match.DstPort = rule.Ranges{{Lo: 100, Hi: 70000}}
	for _, put := range []func() error{
		func() error { _, err := s.Put("api", wide); return err },
		func() error { _, err := s.Replace("file:a", []rule.Rule{wide}); return err },
	} {
		if err := put(); !errors.Is(err, ErrGuard) || !strings.Contains(err.Error(), `match.dst_port "100-70000"`) {
			t.Fatalf("rule with a port range past 65535: %v", err)
		}
	}
	if _, ok := s.Get("ports"); ok || s.Len() != 2 {
		t.Fatalf("refused rule changed the store (%d rules)", s.Len())
	}
}
