package daemon

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/scrubd/scrubd/agent/protect"
	"github.com/scrubd/scrubd/agent/store"
	"github.com/scrubd/scrubd/swpath/rule"
)

// specsOf returns rules as their specs in JSON, one string a rule.
func specsOf[R rule.Rule | *rule.Rule](rs []R) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		var p *rule.Rule
		switch r := any(r).(type) {
		case rule.Rule:
			p = &r
		case *rule.Rule:
			p = r
		}
		js, _ := json.Marshal(p.Spec())
		out[i] = string(js)
	}
	return out
}

// want returns, per persisted source with a rule in force, its rules in
// force in the store's order: what a restart must load.
func want(st *store.Store) map[string][]string {
	out := map[string][]string{}
	for src := range st.SourceVersions() {
		if rs := st.SourceRules(src); persisted(src) && len(rs) > 0 {
			out[src] = specsOf(rs)
		}
	}
	return out
}

// loaded returns LoadState's rules as want does.
func loaded(t *testing.T, dir string, now time.Time) map[string][]string {
	t.Helper()
	got, errs, err := LoadState(dir, now)
	if err != nil || len(errs) > 0 {
		t.Fatalf("LoadState: %v %v", err, errs)
	}
	out := map[string][]string{}
	for src, rs := range got {
		out[src] = specsOf(rs)
	}
	return out
}

func sameState(a, b map[string][]string) string {
	if len(a) != len(b) {
		return fmt.Sprintf("%d sources, want %d", len(a), len(b))
	}
	for src, w := range b {
		g := a[src]
		if len(g) != len(w) {
			return fmt.Sprintf("source %s: %d rules, want %d", src, len(g), len(w))
		}
		for i := range w {
			if g[i] != w[i] {
				return fmt.Sprintf("source %s rule %d: %s, want %s", src, i, g[i], w[i])
			}
		}
	}
	return ""
}

// The journaled saver against the store itself: thousands of random
// changes (adds, changes in place, removals, ids re-used after a removal
// and by another source, whole-source replaces, rules refused by the
// protect list and back in force at their old place, expiries swept,
// sources emptied), saved at random points; after every save a restart
// loads, source by source and in order, exactly the rules in force the
// store holds. The saver must have journaled most saves and folded some
// journals (a test of whole rewrites alone would pass without journals).
func TestJournalEqualsStore(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	clock := stateT0
	now := func() time.Time { return clock }
	prot := &protect.List{Entries: []protect.Entry{{Rule: rule.Rule{ID: "p", Action: rule.Accept,
		Match: rule.Match{Dst: netip.MustParsePrefix("10.200.0.0/16")}}, Note: "test"}}}
	st := store.New(prot, now)
	dir := t.TempDir()
	s := NewStateSaver(dir, st, now)
	srcs := []string{"api", "bgp:192.0.2.1", "bgp:192.0.2.2", "file:/r.yaml", "test:unsaved"}
	mk := func(id string) rule.Rule {
		r := dropRule(id, rng.IntN(1<<16))
		switch rng.IntN(8) {
		case 0: // refused: inside the protected prefix
			r.Match.Dst = netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 200, byte(rng.IntN(256)), 1}), 32)
		case 1: // narrowed: in force
			r.Match.Dst = netip.MustParsePrefix("10.0.0.0/8")
		case 2:
			r.Expires = clock.Add(time.Duration(1+rng.IntN(20)) * time.Second)
		}
		r.Priority = uint32(rng.IntN(3))
		return r
	}
	ids := func(src string) []string {
		var out []string
		for _, e := range st.Source(src) {
			out = append(out, e.Rule.ID)
		}
		return out
	}
	next := 0
	for step := range 3000 {
		src := srcs[rng.IntN(len(srcs))]
		switch op := rng.IntN(20); {
		case op < 9: // a new rule, or an id re-used
			id := fmt.Sprintf("r%d", next)
			if rng.IntN(4) == 0 && next > 0 {
				id = fmt.Sprintf("r%d", rng.IntN(next))
			} else {
				next++
			}
			st.Put(src, mk(id)) // errors (id of another source, refused) are part of the test
		case op < 13: // a change in place, or back in force
			if have := ids(src); len(have) > 0 {
				st.Put(src, mk(have[rng.IntN(len(have))]))
			}
		case op < 17:
			if have := ids(src); len(have) > 0 {
				st.Delete(src, have[rng.IntN(len(have))])
			}
		case op < 18: // a whole-source replace keeping some rules
			var rs []rule.Rule
			for _, id := range ids(src) {
				if rng.IntN(3) > 0 {
					rs = append(rs, mk(id))
				}
			}
			for range rng.IntN(5) {
				rs = append(rs, mk(fmt.Sprintf("r%d", next)))
				next++
			}
			st.Replace(src, rs)
		case op < 19:
			clock = clock.Add(time.Duration(rng.IntN(10)) * time.Second)
			st.Sweep()
		default: // empty a source
			for _, id := range ids(src) {
				st.Delete(src, id)
			}
		}
		if rng.IntN(3) == 0 || step == 2999 {
			if err := s.Save(); err != nil {
				t.Fatal(err)
			}
			if d := sameState(loaded(t, dir, clock), want(st)); d != "" {
				t.Fatalf("step %d: loaded state differs from the store: %s", step, d)
			}
		}
	}
	if s.journaled < 500 || s.whole < 20 {
		t.Errorf("sources journaled %d times, written whole %d times: want both", s.journaled, s.whole)
	}
	t.Logf("sources journaled %d times, written whole %d times", s.journaled, s.whole)
}

// A change costs the saver what it touches: at 10k API rules one more is
// a journal line, not a rewrite of the 10k (about 1.2 MB); the journal is
// folded into a new snapshot once it holds more lines than the snapshot
// holds rules.
func TestJournalWritesWhatChanged(t *testing.T) {
	now := func() time.Time { return stateT0 }
	st := store.New(nil, now)
	for i := range 10000 {
		if _, err := st.Put("api", dropRule(fmt.Sprintf("a%d", i), i)); err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	s := NewStateSaver(dir, st, now)
	if err := s.Save(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, SourcesDir, sourceFile("api"))
	size := func() int64 {
		var n int64
		for _, p := range []string{path, journalPath(path)} {
			if fi, err := os.Stat(p); err == nil {
				n += fi.Size()
			}
		}
		return n
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	snap := fi.Size()
	for i := range 100 {
		if _, err := st.Put("api", dropRule(fmt.Sprintf("b%d", i), 1<<20+i)); err != nil {
			t.Fatal(err)
		}
		if err := st.Delete("api", fmt.Sprintf("a%d", i*7)); err != nil {
			t.Fatal(err)
		}
		if err := s.Save(); err != nil {
			t.Fatal(err)
		}
	}
	if fi, _ := os.Stat(path); fi.Size() != snap {
		t.Errorf("100 saves of one add and one removal rewrote the snapshot (%d bytes, was %d)", fi.Size(), snap)
	}
	if grew := size() - snap; grew > 100*300 {
		t.Errorf("100 saves of one add and one removal wrote %d bytes; want at most %d", grew, 100*300)
	}
	if d := sameState(loaded(t, dir, stateT0), want(st)); d != "" {
		t.Fatal(d)
	}
	// Past the snapshot's rules in lines, the journal folds.
	for i := range 12000 {
		if _, err := st.Put("api", dropRule(fmt.Sprintf("c%d", i), 1<<21+i)); err != nil {
			t.Fatal(err)
		}
		if i%10 == 9 {
			if err := s.Save(); err != nil {
				t.Fatal(err)
			}
		}
	}
	j, _ := os.ReadFile(journalPath(path))
	sn, _ := os.ReadFile(path)
	if n, m := bytes.Count(j, []byte("\n")), bytes.Count(sn, []byte("\n  - ")); n > max(journalMinLines, m)+1 {
		t.Errorf("journal of %d lines beside a snapshot of %d rules: not folded", n, m)
	}
	if s.whole < 2 {
		t.Errorf("the journal was never folded (%d whole writes)", s.whole)
	}
	if d := sameState(loaded(t, dir, stateT0), want(st)); d != "" {
		t.Fatal(d)
	}
}

// A crash: the journal's last line cut short (never synced, so never
// answered) is ignored and the state is the one saved before it; a
// journal left behind by a snapshot written after it (a crash between the
// rename and its removal) is not replayed over the newer rules; a line
// that is not a change keeps the lines before it, and the journal is moved
// aside with a *CorruptStateError naming the line.
func TestJournalCrashAndDamage(t *testing.T) {
	now := func() time.Time { return stateT0 }
	st := store.New(nil, now)
	dir := t.TempDir()
	s := NewStateSaver(dir, st, now)
	for i := range 10 {
		st.Put("api", dropRule(fmt.Sprintf("a%d", i), i))
	}
	if err := s.Save(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, SourcesDir, sourceFile("api"))
	var states []map[string][]string
	var journals [][]byte
	for i := range 5 {
		if i%2 == 0 {
			st.Put("api", dropRule(fmt.Sprintf("b%d", i), 100+i))
		} else {
			st.Delete("api", fmt.Sprintf("a%d", i))
		}
		if err := s.Save(); err != nil {
			t.Fatal(err)
		}
		j, err := os.ReadFile(journalPath(path))
		if err != nil {
			t.Fatal(err)
		}
		states, journals = append(states, want(st)), append(journals, j)
	}
	last := journals[4]
	for cut := 1; cut < len(last)-len(journals[3]); cut++ {
		if err := os.WriteFile(journalPath(path), last[:len(last)-cut], 0o640); err != nil {
			t.Fatal(err)
		}
		if d := sameState(loaded(t, dir, stateT0), states[3]); d != "" {
			t.Fatalf("journal cut %d bytes short: %s", cut, d)
		}
	}

	// A line that is not a change, after the third.
	bad := append(append([]byte{}, journals[2]...), "+ {not json\n"...)
	bad = append(bad, last[len(journals[2]):]...)
	if err := os.WriteFile(journalPath(path), bad, 0o640); err != nil {
		t.Fatal(err)
	}
	got, _, err := LoadState(dir, stateT0)
	var ce *CorruptStateError
	var je *JournalError
	if !errors.As(err, &ce) || !errors.As(err, &je) || je.Line != 5 {
		t.Fatalf("a bad journal line: %v, want a *CorruptStateError with the line (5)", err)
	}
	if d := sameState(map[string][]string{"api": specsOf(got["api"])}, states[2]); d != "" {
		t.Fatalf("with a bad line: %s", d)
	}
	if _, err := os.Stat(journalPath(path)); !os.IsNotExist(err) {
		t.Errorf("the bad journal was not moved aside: %v", err)
	}

	// A newer snapshot with the old journal beside it.
	if err := os.WriteFile(journalPath(path), last, 0o640); err != nil {
		t.Fatal(err)
	}
	st.Put("api", dropRule("b0", 7)) // b0 changed
	s.ok = false                     // the next save writes the source whole
	if err := s.Save(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(journalPath(path)); !os.IsNotExist(err) {
		t.Fatalf("a whole write left the old journal: %v", err)
	}
	if err := os.WriteFile(journalPath(path), last, 0o640); err != nil {
		t.Fatal(err)
	}
	if d := sameState(loaded(t, dir, stateT0), want(st)); d != "" {
		t.Fatalf("an older generation's journal was replayed: %s", d)
	}
}
