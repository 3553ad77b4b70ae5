package store

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"reflect"
	"runtime"
	"slices"
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

// Reads of the effective set after random puts (most of new rules, so the
// set grows at its end), replacements, deletions, transactions, file
// replaces, stale marks and sweeps equal the set built afresh from the
// stored entries, and every set handed out before still reads as it did.
// A read after rules were only added hands out the same array, longer.
func TestEffectiveExtendsInPlace(t *testing.T) {
	s, c := newStore()
	rng := rand.New(rand.NewPCG(3, 4))
	next := 0
	rnd := func(fresh bool) rule.Rule {
		id := fmt.Sprintf("d%d", rng.IntN(max(next, 1)))
		if fresh {
			id = fmt.Sprintf("d%d", next)
			next++
		}
		x := rule.Rule{ID: id, Priority: uint32(1000 + rng.IntN(3)), Action: rule.Drop,
			Match: rule.Match{Dst: netip.PrefixFrom(netip.AddrFrom4([4]byte{192, 0, 2, byte(8 + rng.IntN(4))}), 32)}} // .10 is protected: refused
		if rng.IntN(8) == 0 {
			x.Expires = c.t.Add(time.Duration(1+rng.IntN(3)) * time.Second)
		}
		return x
	}
	type held struct {
		snap  Snapshot
		rules []rule.Rule
		seqs  []uint64
	}
	var hs []held
	prev := s.Effective()
	shared := 0
	steps := 2000
	if testing.Short() {
		steps = 600 // CI's -race -short
	}
	for step := range steps {
		c.t = c.t.Add(time.Second)
		switch k := rng.IntN(20); {
		case k < 12:
			_, _ = s.Put("api", rnd(true))
		case k < 13:
			_, _ = s.Put("api", rnd(false))
		case k < 14:
			_ = s.Delete("api", fmt.Sprintf("d%d", rng.IntN(max(next, 1))))
		case k < 16:
			s.Update(func(tx *Tx) {
				for range 1 + rng.IntN(5) {
					_, _ = tx.Put("api", rnd(rng.IntN(4) != 0))
				}
			})
		case k < 17:
			var rs []rule.Rule
			for i := range rng.IntN(5) {
				x := rnd(false)
				x.ID = fmt.Sprintf("f%d", i+rng.IntN(3))
				if !slices.ContainsFunc(rs, func(y rule.Rule) bool { return y.ID == x.ID }) {
					rs = append(rs, x)
				}
			}
			_, _ = s.Replace("file:a", rs)
		case k < 18:
			s.MarkStale("api", c.t.Add(time.Hour))
		default:
			s.Sweep()
		}
		var cur Snapshot
		if rng.IntN(2) == 0 {
			cur = s.Effective()
		} else {
			cur = s.Snapshot()
		}
		var wantRules []rule.Rule
		var wantSeqs []uint64
		for _, r := range s.ProtectRules() {
			wantRules, wantSeqs = append(wantRules, r), append(wantSeqs, 0)
		}
		for _, e := range s.List() {
			if e.InForce() {
				wantRules, wantSeqs = append(wantRules, e.Rule), append(wantSeqs, e.seq)
			}
		}
		if !slices.EqualFunc(cur.Set.Rules, wantRules, sameTestRule) || !slices.Equal(cur.Seqs, wantSeqs) {
			t.Fatalf("step %d: the effective set\n got %v\nwant %v", step, cur.Set.Rules, wantRules)
		}
		if cap(cur.Set.Rules) != len(cur.Set.Rules) || cap(cur.Seqs) != len(cur.Seqs) {
			t.Fatalf("step %d: a set handed out with room beyond its length", step)
		}
		if len(cur.Set.Rules) > len(prev.Set.Rules) && len(prev.Set.Rules) > 0 && &cur.Set.Rules[0] == &prev.Set.Rules[0] {
			shared++
		}
		prev = cur
		if step%10 == 0 {
			hs = append(hs, held{cur, slices.Clone(cur.Set.Rules), slices.Clone(cur.Seqs)})
		}
		if step%500 == 499 {
			for _, h := range hs {
				if !slices.EqualFunc(h.snap.Set.Rules, h.rules, sameTestRule) || !slices.Equal(h.snap.Seqs, h.seqs) {
					t.Fatalf("step %d: the set of version %d changed after it was handed out", step, h.snap.Version)
				}
			}
		}
	}
	// Rules added one by one past the room the array has: a new array.
	first := &s.Effective().Set.Rules[0]
	for i := 0; ; i++ {
		if i == 5000 {
			t.Fatal("5000 rules added in place after the last copy")
		}
		r := rnd(true)
		r.Expires, r.Match.Dst = time.Time{}, netip.MustParsePrefix("198.51.100.0/24")
		if _, err := s.Put("api", r); err != nil {
			t.Fatal(err)
		}
		cur := s.Effective()
		if n := len(cur.Set.Rules); !sameTestRule(cur.Set.Rules[n-1], r) {
			t.Fatalf("the last rule of the set is %v, want %v", cur.Set.Rules[n-1], r)
		}
		if &cur.Set.Rules[0] != first {
			t.Logf("a new array after %d rules added in place", i)
			break
		}
	}
	t.Logf("%d of %d reads extended the last set in place", shared, steps)
	if shared < steps/10 {
		t.Fatalf("only %d of %d reads extended the last set in place", shared, steps)
	}
}

// sameTestRule compares what the rules of TestEffectiveExtendsInPlace and
// the protect list's differ in.
func sameTestRule(a, b rule.Rule) bool {
	return a.ID == b.ID && a.Priority == b.Priority && a.Action == b.Action && a.Expires.Equal(b.Expires) && a.Match.Dst == b.Match.Dst
}

// Sets handed out are read by other goroutines (placement, the simulated
// NIC) while the store writes the rules added after them into the same
// array: the writes land past every length handed out, which the race
// detector checks here (go test -race), readers reading every rule of
// each set as the store extends it.
func TestEffectiveExtendWhileRead(t *testing.T) {
	s := New(nil, time.Now)
	if _, err := s.Replace("file:a", shareRules(100)); err != nil {
		t.Fatal(err)
	}
	sets := make(chan []rule.Rule)
	done := make(chan int)
	for range 2 {
		go func() {
			n := 0
			for rs := range sets {
				for i := range rs {
					r := &rs[i]
					n += len(r.ID) + int(r.Priority) + int(r.Action) + r.Match.Dst.Bits()
				}
			}
			done <- n
		}()
	}
	first := s.Effective().Set.Rules
	shared := 0
	for i := range 200 {
		r := shareRules(1)[0]
		r.ID = fmt.Sprintf("x%d", i)
		if _, err := s.Put("api", r); err != nil {
			t.Fatal(err)
		}
		cur := s.Effective().Set.Rules
		if &cur[0] == &first[0] {
			shared++
		}
		sets <- cur
		sets <- cur
	}
	close(sets)
	<-done
	<-done
	if shared == 0 {
		t.Fatal("no read extended the set in place: nothing was checked")
	}
}
