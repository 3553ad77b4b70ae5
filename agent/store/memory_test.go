package store

import (
	"net/netip"
	"reflect"
	"runtime"
	"testing"
	"time"

	"github.com/scrubd/scrubd/swpath/rule"
)

// A stored entry is six words beside its rule: the rule, source, note,
// time added and stale deadline by pointer, and the place. With the
// Entry's fields as values (source, status and reason strings, two
// time.Time) it was 112 bytes, 11 MB at 100k rules.
func TestStoredEntryIsSixWords(t *testing.T) {
	if got := reflect.TypeFor[stored]().Size(); got > 48 {
		t.Fatalf("a stored entry is %d bytes, want at most 48", got)
	}
}

// Effective read twice at one version (placement, and the simulated NIC's
// reference set) hands out one array, not two copies: n rules stored and
// three reads of the effective set held (two Effective, one Snapshot)
// retain less than one rule's size and 200 bytes a rule, where a copy per
// read retains three rules' size and more. The array ends at its length,
// so holders that append each get their own.
func TestSnapshotsOfOneVersionShare(t *testing.T) {
	const n = 20000
	var m0, m1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m0)
	s := New(nil, time.Now)
	if _, err := s.Replace("file:a", shareRules(n)); err != nil {
		t.Fatal(err)
	}
	// A refused rule is stored but not in the set: the set's array is
	// made for every stored rule, one more than it holds.
	gone := rule.Rule{ID: "gone", Action: rule.Drop, Expires: time.Now().Add(-time.Hour), Match: shareRules(1)[0].Match}
	if _, err := s.Put("api", gone); err == nil {
		t.Fatal("an expired rule was put without an error")
	}
	a, b, c := s.Effective(), s.Effective(), s.Snapshot()
	c.Entries = nil
	runtime.GC()
	runtime.ReadMemStats(&m1)
	runtime.KeepAlive(s)
	perRule := (int64(m1.HeapAlloc) - int64(m0.HeapAlloc)) / n
	size := int64(reflect.TypeFor[rule.Rule]().Size())
	t.Logf("%d rules stored, three reads of the effective set held: %d bytes a rule (a rule is %d bytes)", n, perRule, size)
	if perRule >= size+200 {
		t.Fatalf("store and three reads of one version retain %d bytes a rule, want under %d", perRule, size+200)
	}
	for _, x := range []Snapshot{b, c} {
		if len(x.Set.Rules) != n || &x.Set.Rules[0] != &a.Set.Rules[0] || &x.Seqs[0] != &a.Seqs[0] || x.Version != a.Version {
			t.Fatalf("reads of version %d do not share the set", a.Version)
		}
	}
	if cap(a.Set.Rules) != n || cap(a.Seqs) != n {
		t.Fatalf("shared set has capacity %d/%d beyond its %d rules", cap(a.Set.Rules), cap(a.Seqs), n)
	}
	x := append(a.Set.Rules, rule.Rule{ID: "x"})
	y := append(b.Set.Rules, rule.Rule{ID: "y"})
	if x[n].ID != "x" || y[n].ID != "y" {
		t.Fatalf("two holders appending to one shared set wrote one place: %q, %q", x[n].ID, y[n].ID)
	}
	// A change is a new version: a new copy, the old one unchanged.
	r := shareRules(1)[0]
	r.Match.Dst = netip.MustParsePrefix("192.0.2.9/32")
	if _, err := s.Put("file:a", r); err != nil {
		t.Fatal(err)
	}
	d := s.Effective()
	if &d.Set.Rules[0] == &a.Set.Rules[0] || d.Set.Rules[0].Match.Dst != r.Match.Dst || a.Set.Rules[0].Match.Dst == r.Match.Dst {
		t.Fatalf("after a change: new set %v, old set %v", d.Set.Rules[0].Match.Dst, a.Set.Rules[0].Match.Dst)
	}
}

// Statuses, reasons, added times and stale deadlines read back as stored
// (they are held by pointer, shared between entries).
func TestEntryFieldsReadBack(t *testing.T) {
	at := time.Date(2026, 12, 2, 6, 0, 0, 0, time.UTC)
	now := at
	s := New(nil, func() time.Time { return now })
	if _, err := s.Replace("file:a", shareRules(3)); err != nil {
		t.Fatal(err)
	}
	now = at.Add(time.Minute)
	old := shareRules(4)[3]
	old.Expires = at
	if _, err := s.Put("api", old); err == nil {
		t.Fatal("an expired rule was put without an error")
	}
	hold := at.Add(time.Hour)
	if n := s.MarkStale("file:a", hold); n != 3 {
		t.Fatalf("MarkStale marked %d", n)
	}
	if !s.SetStale("file:a", "s1", time.Time{}) {
		t.Fatal("SetStale did not find s1")
	}
	want := map[string]Entry{
		"s0": {Source: "file:a", Status: Active, Added: at, StaleAt: hold},
		"s1": {Source: "file:a", Status: Active, Added: at},
		"s2": {Source: "file:a", Status: Active, Added: at, StaleAt: hold},
		"s3": {Source: "api", Status: Refused, Reason: "refused: already expired at 2026-12-02T06:00:00Z", Added: at.Add(time.Minute)},
	}
	for _, e := range s.List() {
		w := want[e.Rule.ID]
		if e.Source != w.Source || e.Status != w.Status || e.Reason != w.Reason || !e.Added.Equal(w.Added) || !e.StaleAt.Equal(w.StaleAt) {
			t.Errorf("%s: got %s %s %q added %v stale %v, want %s %s %q added %v stale %v", e.Rule.ID,
				e.Source, e.Status, e.Reason, e.Added, e.StaleAt, w.Source, w.Status, w.Reason, w.Added, w.StaleAt)
		}
	}
	now = hold
	var got []string
	for _, e := range s.Sweep() {
		got = append(got, e.Rule.ID+": "+e.Reason)
	}
	wantGone := []string{"s0: source gone; hold time ended at 2026-12-02T07:00:00Z",
		"s2: source gone; hold time ended at 2026-12-02T07:00:00Z", "s3: expired at 2026-12-02T06:00:00Z"}
	if !reflect.DeepEqual(got, wantGone) {
		t.Fatalf("sweep at the hold time removed %q, want %q", got, wantGone)
	}
	if e, ok := s.Get("s1"); !ok || !e.StaleAt.IsZero() {
		t.Fatalf("s1 after the sweep: %v %+v", ok, e)
	}
}
