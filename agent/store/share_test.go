package store

import (
	"fmt"
	"net/netip"
	"reflect"
	"runtime"
	"testing"
	"time"

	"github.com/scrubd/scrubd/swpath/rule"
)

func shareRules(n int) []rule.Rule {
	rules := make([]rule.Rule, n)
	for i := range rules {
		rules[i] = rule.Rule{ID: fmt.Sprintf("s%d", i), Priority: 1000, Action: rule.Drop,
			Match: rule.Match{Dst: netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}), 32)}}
	}
	return rules
}

// The store and a snapshot of its effective set hold one copy of each
// rule between them, not two: n rules stored with a snapshot held retain
// less than two copies of the rules (2 x n x the size of rule.Rule, 304
// bytes on 64-bit) in all, entries, index and change log included. With
// the entries holding a copy of their own (an Entry, 408 bytes, besides
// the snapshot's rule) they retain more.
func TestStoreAndSnapshotShareRules(t *testing.T) {
	const n = 20000
	var m0, m1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m0)
	s := New(nil, time.Now)
	if _, err := s.Replace("file:a", shareRules(n)); err != nil {
		t.Fatal(err)
	}
	snap := s.Effective()
	runtime.GC()
	runtime.ReadMemStats(&m1)
	runtime.KeepAlive(s)
	if len(snap.Set.Rules) != n {
		t.Fatalf("snapshot holds %d rules, want %d", len(snap.Set.Rules), n)
	}
	perRule := (int64(m1.HeapAlloc) - int64(m0.HeapAlloc)) / n
	size := int64(reflect.TypeFor[rule.Rule]().Size())
	t.Logf("%d rules stored and a snapshot held: %d bytes a rule (a rule is %d bytes)", n, perRule, size)
	if perRule >= 2*size {
		t.Fatalf("store and snapshot retain %d bytes a rule, two copies of it or more (%d bytes)", perRule, 2*size)
	}
}

// A snapshot's rules are the store's, read-only: a rule put again later
// is a new copy, and the snapshot still reads the rule as it was.
func TestSnapshotUnchangedByLaterPuts(t *testing.T) {
	s := New(nil, time.Now)
	if _, err := s.Replace("file:a", shareRules(10)); err != nil {
		t.Fatal(err)
	}
	snap := s.Effective()
	r := shareRules(10)[4]
	r.Match.Dst = netip.MustParsePrefix("192.0.2.9/32")
	r.Priority = 7
	if _, err := s.Put("file:a", r); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete("file:a", "s5"); err != nil {
		t.Fatal(err)
	}
	want := shareRules(10)
	if !reflect.DeepEqual(snap.Set.Rules, want) {
		t.Fatalf("the snapshot changed after later puts: %v", snap.Set.Rules)
	}
	e, _ := s.Get("s4")
	if e.Rule.Match.Dst != r.Match.Dst || e.Rule.Priority != 7 {
		t.Fatalf("s4 reads %v, want the rule put", e.Rule)
	}
	if got := s.Effective().Set.Rules; len(got) != 9 || got[4].Priority != 7 {
		t.Fatalf("a new snapshot reads %v", got)
	}
	if got := s.SourceRules("file:a"); len(got) != 9 || got[4].Priority != 7 || got[5].ID != "s6" {
		t.Fatalf("SourceRules reads %v", got)
	}
}
