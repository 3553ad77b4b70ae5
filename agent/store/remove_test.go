package store

import (
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"
)

// A read of the effective set after rules were removed (a Delete, a
// transaction, a Sweep) takes them out of the last set
// handed out, without building the set from the entries again (a walk and
// a sort of every entry: at 100k rules most of such a read's time), and
// hands out the set built afresh would be; sets handed out before read as
// they did, and the entries point at their rules in the new array. Fails
// with a removal dropping the last set (the read builds it again).
func TestEffectiveAfterRemoveClosesHoles(t *testing.T) {
	s, c := newStore()
	if _, err := s.Replace("file:a", shareRules(200)); err != nil {
		t.Fatal(err)
	}
	old := s.Effective()
	held := slices.Clone(old.Set.Rules)
	builds := s.effBuilds
	check := func(what string, want []string) {
		t.Helper()
		cur := s.Effective()
		var got []string
		for _, r := range cur.Set.Rules {
			got = append(got, r.ID)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("after %s: the effective set is %v, want %v", what, got, want)
		}
		if s.effBuilds != builds {
			t.Fatalf("after %s: the read built the set from the entries (%d builds, was %d)", what, s.effBuilds, builds)
		}
		if !reflect.DeepEqual(old.Set.Rules, held) {
			t.Fatalf("after %s: a set handed out before changed", what)
		}
		for i := len(s.ProtectRules()); i < len(cur.Set.Rules); i++ {
			e := s.entries[cur.Set.Rules[i].ID]
			if e == nil || e.r != &cur.Set.Rules[i] || e.seq != cur.Seqs[i] {
				t.Fatalf("after %s: rule %d (%s) is not its entry's", what, i, cur.Set.Rules[i].ID)
			}
		}
	}
	var want []string
	for _, r := range s.ProtectRules() {
		want = append(want, r.ID)
	}
	for i := range 200 {
		want = append(want, fmt.Sprintf("s%d", i))
	}
	drop := func(ids ...string) {
		want = slices.DeleteFunc(want, func(id string) bool { return slices.Contains(ids, id) })
	}
	if err := s.Delete("file:a", "s0"); err != nil {
		t.Fatal(err)
	}
	drop("s0")
	check("the first rule removed", want)
	if err := s.Delete("file:a", "s199"); err != nil {
		t.Fatal(err)
	}
	drop("s199")
	check("the last rule removed", want)
	// Removed and added in one version: the new rules after the holes;
	// one of them removed before the read is never in a set.
	s.Update(func(tx *Tx) {
		for _, id := range []string{"s50", "s7", "s120"} {
			if err := tx.Delete("file:a", id); err != nil {
				t.Fatal(err)
			}
		}
		for i := range 3 {
			r := shareRules(1)[0]
			r.ID = fmt.Sprintf("x%d", i)
			if i == 2 {
				r.Expires = c.t.Add(time.Second)
			}
			if _, err := tx.Put("api", r); err != nil {
				t.Fatal(err)
			}
		}
		if err := tx.Delete("api", "x1"); err != nil {
			t.Fatal(err)
		}
	})
	drop("s50", "s7", "s120")
	want = append(want, "x0", "x2")
	check("a transaction", want)
	c.t = c.t.Add(2 * time.Second)
	if gone := s.Sweep(); len(gone) != 1 || gone[0].Rule.ID != "x2" {
		t.Fatalf("the sweep removed %v, want x2", gone)
	}
	drop("x2")
	check("a sweep", want)
	// A rule replaced in its place still builds the set again.
	r := shareRules(20)[10]
	r.Priority = 7
	if _, err := s.Put("file:a", r); err != nil {
		t.Fatal(err)
	}
	if s.Effective(); s.effBuilds != builds+1 {
		t.Fatalf("a rule replaced in force: %d builds, want %d", s.effBuilds, builds+1)
	}
}

// BenchmarkEffectiveAfterRemove: the read of the effective set of n rules
// after one rule was removed from its middle (the Delete outside the
// timer): what placement's snapshot (Apply) or the simulated NIC's
// reference pays after a withdraw. Per read: ns, bytes, allocations.
//
//	go test -run '^$' -bench EffectiveAfterRemove ./agent/store/
func BenchmarkEffectiveAfterRemove(b *testing.B) {
	for _, n := range []int{1000, 10000, 100000} {
		b.Run(fmt.Sprintf("rules=%d", n), func(b *testing.B) {
			s := New(nil, time.Now)
			if _, err := s.Replace("file:a", shareRules(n)); err != nil {
				b.Fatal(err)
			}
			s.Effective()
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				b.StopTimer()
				if err := s.Delete("file:a", fmt.Sprintf("s%d", n/4+i)); err != nil {
					b.Fatal(err)
				}
				i++
				b.StartTimer()
				if got := len(s.Effective().Set.Rules); got != n-i {
					b.Fatalf("%d rules, want %d", got, n-i)
				}
			}
		})
	}
}
