package placement

import (
	"math/rand/v2"
	"net/netip"
	"reflect"
	"testing"
	"time"

	"github.com/scrubd/scrubd/swpath/rule"
	"github.com/scrubd/scrubd/swpath/traffic"
)

// sameMatch compares every field of rule.Match: the field count is pinned
// here, so a new field fails this test until sameMatch compares it.
func TestSameMatchCoversEveryField(t *testing.T) {
	if n := reflect.TypeFor[rule.Match]().NumField(); n != 14 {
		t.Fatalf("rule.Match has %d fields; sameMatch compares 14: compare the new one and update this count", n)
	}
}

// sameRule compares every field of rule.Rule (the count pinned as above)
// and each one tells: a copy is the same rule, a copy with any one field
// changed is not.
func TestSameRuleCoversEveryField(t *testing.T) {
	if n := reflect.TypeFor[rule.Rule]().NumField(); n != 5 {
		t.Fatalf("rule.Rule has %d fields; sameRule compares 5: compare the new one and update this count", n)
	}
	a := rule.Rule{ID: "a", Priority: 10, Action: rule.Drop, Expires: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC),
		Match: rule.Match{Dst: netip.MustParsePrefix("203.0.113.0/24")}}
	if b := a; !sameRule(&a, &b) {
		t.Fatal("a copy differs")
	}
	for i, change := range []func(r *rule.Rule){
		func(r *rule.Rule) { r.ID = "b" },
		func(r *rule.Rule) { r.Priority = 11 },
		func(r *rule.Rule) { r.Action = rule.Accept },
		func(r *rule.Rule) { r.Expires = r.Expires.Add(time.Second) },
		func(r *rule.Rule) { r.Match.Dst = netip.MustParsePrefix("203.0.113.0/25") },
	} {
		b := a
		change(&b)
		if sameRule(&a, &b) || sameRules([]rule.Rule{a}, []rule.Rule{b}) {
			t.Errorf("change %d: still the same rule", i)
		}
	}
	if sameRules([]rule.Rule{a}, []rule.Rule{a, a}) {
		t.Error("sets of 1 and 2 rules the same")
	}
}

// On ClassBench-style matches and copies changed in one field each,
// sameMatch is true exactly where the printed matches are equal (the key
// Apply used for every rule), and false for each change.
func TestSameMatchAgreesWithString(t *testing.T) {
	rs := traffic.ClassBenchRules(3, 2000).Rules
	r := rand.New(rand.NewPCG(7, 8))
	changes := []func(m *rule.Match){
		func(m *rule.Match) { m.Src = netip.MustParsePrefix("198.51.100.0/24") },
		func(m *rule.Match) { m.Dst = netip.MustParsePrefix("203.0.113.7/32") },
		func(m *rule.Match) { m.Proto = append(m.Proto[:len(m.Proto):len(m.Proto)], 47) },
		func(m *rule.Match) {
			m.SrcPort = append(m.SrcPort[:len(m.SrcPort):len(m.SrcPort)], rule.Range{Lo: 7, Hi: 9})
		},
		func(m *rule.Match) { m.DstPort = rule.Ranges{{Lo: 1, Hi: 2}} },
		func(m *rule.Match) { m.Port = rule.Ranges{{Lo: 3, Hi: 3}} },
		func(m *rule.Match) { m.ICMPType = rule.Ranges{{Lo: 8, Hi: 8}} },
		func(m *rule.Match) { m.ICMPCode = rule.Ranges{{Lo: 0, Hi: 0}} },
		func(m *rule.Match) { m.TCPFlags, m.HasTCPFlags = rule.TCPFlags{Value: 2, Mask: 18}, true },
		func(m *rule.Match) { m.Fragment = rule.IsFragment },
		func(m *rule.Match) { m.Length = rule.Ranges{{Lo: 0, Hi: 100}} },
		func(m *rule.Match) { m.DSCP = 1 << 46 },
	}
	for i := range rs {
		a := rs[i].Match
		b := a // shares the lists, as the store's copies do
		if !sameMatch(&a, &b) || a.String() != b.String() {
			t.Fatalf("rule %d: a copy differs", i)
		}
		c := a
		changes[r.IntN(len(changes))](&c)
		if sameMatch(&a, &c) != (a.String() == c.String()) {
			t.Fatalf("rule %d: sameMatch %v, printed %q and %q", i, sameMatch(&a, &c), a.String(), c.String())
		}
		o := rs[r.IntN(len(rs))].Match
		if sameMatch(&a, &o) != (a.String() == o.String()) {
			t.Fatalf("rule %d: sameMatch %v against another, printed %q and %q", i, sameMatch(&a, &o), a.String(), o.String())
		}
	}
}
