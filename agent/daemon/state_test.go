package daemon

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/scrubd/scrubd/agent/store"
	"github.com/scrubd/scrubd/swpath/rule"
)

var stateT0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func ptr[T any](v T) *T { return &v }

func dropRule(id string, i int) rule.Rule {
	return rule.Rule{ID: id, Action: rule.Drop, Priority: 100,
		Match: rule.Match{Dst: netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}), 32), Proto: []uint8{rule.ProtoUDP}}}
}

// modTimes returns each state file's modification time (nanoseconds) by
// name.
func modTimes(t *testing.T, dir string) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	names, _ := filepath.Glob(filepath.Join(dir, SourcesDir, "*.yaml"))
	for _, n := range names {
		fi, err := os.Stat(n)
		if err != nil {
			t.Fatal(err)
		}
		out[filepath.Base(n)] = fi.ModTime().UnixNano()
	}
	return out
}

// The saver writes only the source a change touched: after an API add
// the rule file's state file (5000 rules) is the same file, untouched, and
// the API's journal holds the new rule; a source emptied loses its file; what it
// wrote loads back rule for rule (Spec for Spec); a source that is not
// persisted (protect) has no file.
func TestStateSaverWritesChangedSourcesOnly(t *testing.T) {
	dir := t.TempDir()
	now := func() time.Time { return stateT0 }
	st := store.New(nil, now)
	var file []rule.Rule
	for i := range 5000 {
		file = append(file, dropRule(fmt.Sprintf("f%d", i), i))
	}
	if _, err := st.Replace("file:/etc/scrubd/rules.yaml", file); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Put("api", dropRule("a1", 1<<20)); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Put("bgp:192.0.2.1", dropRule("b1", 1<<21)); err != nil {
		t.Fatal(err)
	}
	s := NewStateSaver(dir, st, now)
	if err := s.Save(); err != nil {
		t.Fatal(err)
	}
	if got := s.Stats(); got != (SaverStats{Whole: 3}) {
		t.Errorf("after the first save: %+v, want every source written whole (3)", got)
	}
	m0 := modTimes(t, dir)
	if len(m0) != 3 {
		t.Fatalf("state files %v, want one per source (3)", m0)
	}
	fileName := sourceFile("file:/etc/scrubd/rules.yaml")
	time.Sleep(20 * time.Millisecond) // modification times apart
	if _, err := st.Put("api", dropRule("a2", 1<<20+1)); err != nil {
		t.Fatal(err)
	}
	if err := st.Delete("bgp:192.0.2.1", "b1"); err != nil {
		t.Fatal(err)
	}
	if err := s.Save(); err != nil {
		t.Fatal(err)
	}
	if got := s.Stats(); got != (SaverStats{Journaled: 1, Whole: 3}) {
		t.Errorf("after an add and a source emptied: %+v, want the API's journal appended to (1) and nothing more written whole", got)
	}
	m1 := modTimes(t, dir)
	if m1[fileName] != m0[fileName] {
		t.Errorf("an API add rewrote the rule file's state (%s)", fileName)
	}
	if m1[sourceFile("api")] != m0[sourceFile("api")] {
		t.Errorf("an API add rewrote the API's state file, where its journal takes the change")
	}
	if j, err := os.ReadFile(journalPath(filepath.Join(dir, SourcesDir, sourceFile("api")))); err != nil || bytes.Count(j, []byte("\n")) != 2 {
		t.Errorf("the API's journal after one add: %q, %v; want its header and one line", j, err)
	}
	if _, ok := m1[sourceFile("bgp:192.0.2.1")]; ok || len(m1) != 2 {
		t.Errorf("state files after the peer's last rule went: %v", m1)
	}
	got, errs, err := LoadState(dir, stateT0)
	if err != nil || len(errs) > 0 {
		t.Fatal(err, errs)
	}
	for src, want := range map[string][]rule.Rule{"file:/etc/scrubd/rules.yaml": file, "api": {dropRule("a1", 1<<20), dropRule("a2", 1<<20+1)}} {
		if len(got[src]) != len(want) {
			t.Fatalf("%s: %d rules loaded, want %d", src, len(got[src]), len(want))
		}
		for i := range want {
			a, _ := json.Marshal(got[src][i].Spec())
			b, _ := json.Marshal(want[i].Spec())
			if string(a) != string(b) {
				t.Fatalf("%s rule %d: loaded %s, saved %s", src, i, a, b)
			}
		}
	}
	if len(got) != 2 {
		t.Errorf("sources loaded: %d, want 2", len(got))
	}
}

// The older whole-state file is read, a source file wins over its copy
// there, and the first save removes it; a damaged source file is moved
// aside (a *CorruptStateError) while the other sources load.
func TestStateOlderFileAndCorruptSource(t *testing.T) {
	dir := t.TempDir()
	old := State{Version: 1, Saved: stateT0, Sources: map[string][]rule.Spec{}}
	for _, r := range []rule.Rule{dropRule("o1", 1), dropRule("o2", 2)} {
		old.Sources["api"] = append(old.Sources["api"], r.Spec())
	}
	r3 := dropRule("o3", 3)
	old.Sources["bgp:x"] = []rule.Spec{r3.Spec()}
	data, _ := json.Marshal(old)
	if err := os.WriteFile(filepath.Join(dir, StateFile), data, 0o600); err != nil {
		t.Fatal(err)
	}
	got, errs, err := LoadState(dir, stateT0)
	if err != nil || len(errs) > 0 || len(got["api"]) != 2 || len(got["bgp:x"]) != 1 {
		t.Fatalf("older file: %v %v %v", got, errs, err)
	}
	// A newer API source file wins over the older file's copy.
	st := store.New(nil, func() time.Time { return stateT0 })
	if _, err := st.Put("api", dropRule("n1", 9)); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, SourcesDir), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := writeSource(filepath.Join(dir, SourcesDir), "api", st.SourceRules("api"), stateT0, "g1"); err != nil {
		t.Fatal(err)
	}
	got, _, _ = LoadState(dir, stateT0)
	if len(got["api"]) != 1 || got["api"][0].ID != "n1" || len(got["bgp:x"]) != 1 {
		t.Fatalf("source file over the older file: %v", got)
	}
	if err := NewStateSaver(dir, st, func() time.Time { return stateT0 }).Save(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, StateFile)); !os.IsNotExist(err) {
		t.Fatalf("the older whole-state file is still there after a save: %v", err)
	}
	// A source file cut off mid-rule, and one without its header.
	p := filepath.Join(dir, SourcesDir, sourceFile("api"))
	body, _ := os.ReadFile(p)
	if err := os.WriteFile(p, body[:len(body)-20], 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, SourcesDir, sourceFile("bgp:y")), []byte("rules:\n  - {id: y, action: drop, match: {dst: 10.9.9.9/32}}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := writeSource(filepath.Join(dir, SourcesDir), "bgp:z", []*rule.Rule{ptr(dropRule("z1", 5))}, stateT0, "g2"); err != nil {
		t.Fatal(err)
	}
	got, _, err = LoadState(dir, stateT0)
	var ce *CorruptStateError
	if !errors.As(err, &ce) {
		t.Fatalf("damaged source files: error %v, want a CorruptStateError", err)
	}
	if len(got) != 1 || len(got["bgp:z"]) != 1 {
		t.Fatalf("damaged source files: loaded %v, want bgp:z alone", got)
	}
	aside, _ := filepath.Glob(filepath.Join(dir, SourcesDir, "*.corrupt-*"))
	if len(aside) != 2 || !slices.ContainsFunc(aside, func(s string) bool { return strings.Contains(s, sourceFile("api")) }) {
		t.Fatalf("moved aside: %v", aside)
	}
}

// BenchmarkStateSaveAt100k: one API rule put into a store that holds a
// 100k-rule file, then the state saved, as an API add does before it
// answers. "changed" is the saver (only the API's file is written),
// "whole" every persisted source written from a snapshot (SaveState).
func BenchmarkStateSaveAt100k(b *testing.B) {
	now := func() time.Time { return stateT0 }
	st := store.New(nil, now)
	file := make([]rule.Rule, 100000)
	for i := range file {
		file[i] = dropRule(fmt.Sprintf("f%d", i), i)
	}
	if _, err := st.Replace("file:/etc/scrubd/rules.yaml", file); err != nil {
		b.Fatal(err)
	}
	for _, mode := range []string{"changed", "whole"} {
		b.Run(mode, func(b *testing.B) {
			dir := b.TempDir()
			s := NewStateSaver(dir, st, now)
			if err := s.Save(); err != nil {
				b.Fatal(err)
			}
			i := 0
			for b.Loop() {
				if _, err := st.Put("api", dropRule(fmt.Sprintf("a%d", i), 1<<22+i)); err != nil {
					b.Fatal(err)
				}
				i++
				var err error
				if mode == "changed" {
					err = s.Save()
				} else {
					err = SaveState(dir, st.Snapshot(), now())
				}
				if err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkStateSaveAPIAdd: one rule added through the API beside n API
// rules, then the state saved, as the API's add does before it answers.
// The saver appends one journal line (a whole rewrite of the n once the
// journal outgrows them, amortized over as many adds).
func BenchmarkStateSaveAPIAdd(b *testing.B) {
	for _, n := range []int{1000, 10000, 100000} {
		b.Run(fmt.Sprintf("rules=%d", n), func(b *testing.B) {
			now := func() time.Time { return stateT0 }
			st := store.New(nil, now)
			for i := range n {
				if _, err := st.Put("api", dropRule(fmt.Sprintf("p%d", i), i)); err != nil {
					b.Fatal(err)
				}
			}
			s := NewStateSaver(b.TempDir(), st, now)
			if err := s.Save(); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if _, err := st.Put("api", dropRule(fmt.Sprintf("a%d", i), 1<<22+i)); err != nil {
					b.Fatal(err)
				}
				i++
				if err := s.Save(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// A save that cannot write (the state directory's sources/ is a file,
// as a full or broken disk would refuse) returns the error and is
// counted; the rules stay in the store, and the next save that can write
// writes every source whole, so a restart then restores them all.
func TestStateSaverFailureCounted(t *testing.T) {
	dir := t.TempDir()
	now := func() time.Time { return stateT0 }
	st := store.New(nil, now)
	if _, err := st.Put("api", dropRule("a1", 1)); err != nil {
		t.Fatal(err)
	}
	s := NewStateSaver(dir, st, now)
	if err := s.Save(); err != nil {
		t.Fatal(err)
	}
	sdir := filepath.Join(dir, SourcesDir)
	if err := os.Rename(sdir, sdir+".away"); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(sdir, []byte("not a directory"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Put("api", dropRule("a2", 2)); err != nil {
		t.Fatal(err)
	}
	if err := s.Save(); err == nil {
		t.Fatal("a save into a sources/ that is a file succeeded")
	}
	if got := s.Stats(); got.Failed != 1 {
		t.Errorf("after a failed save: %+v, want Failed 1", got)
	}
	if err := os.Remove(sdir); err != nil {
		t.Fatal(err)
	}
	if err := s.Save(); err != nil {
		t.Fatal(err)
	}
	if got := s.Stats(); got != (SaverStats{Whole: 2, Failed: 1}) {
		t.Errorf("after the directory came back: %+v, want the source written whole again", got)
	}
	got, errs, err := LoadState(dir, stateT0)
	if err != nil || len(errs) > 0 {
		t.Fatal(err, errs)
	}
	if len(got["api"]) != 2 {
		t.Errorf("restored %d API rules, want 2", len(got["api"]))
	}
}

// State files removed under a running agent (a cleaned state directory)
// are written again at the next save, not left to a journal that restores
// nothing: with the snapshot gone the source is written whole; with only
// its journal gone, too (a journal created again without its header
// would be ignored on load, every change in it lost).
func TestStateSaverFilesRemovedUnderIt(t *testing.T) {
	dir := t.TempDir()
	now := func() time.Time { return stateT0 }
	st := store.New(nil, now)
	s := NewStateSaver(dir, st, now)
	snap := filepath.Join(dir, SourcesDir, sourceFile("api"))
	put := func(i int) {
		t.Helper()
		if _, err := st.Put("api", dropRule(fmt.Sprintf("a%d", i), i)); err != nil {
			t.Fatal(err)
		}
		if err := s.Save(); err != nil {
			t.Fatal(err)
		}
	}
	restored := func(want int) {
		t.Helper()
		got, errs, err := LoadState(dir, stateT0)
		if err != nil || len(errs) > 0 {
			t.Fatal(err, errs)
		}
		if len(got["api"]) != want {
			t.Fatalf("restored %d API rules, want %d (saver %+v)", len(got["api"]), want, s.Stats())
		}
	}
	put(1) // whole: the journal is not yet begun
	if err := os.Remove(snap); err != nil {
		t.Fatal(err)
	}
	put(2)
	restored(2)
	put(3) // journaled
	if err := os.Remove(journalPath(snap)); err != nil {
		t.Fatal(err)
	}
	put(4)
	restored(4)
	if got := s.Stats(); got.Whole != 3 || got.Failed != 0 {
		t.Errorf("saver %+v: want the source written whole at the start and after each removal (3), no failure", got)
	}
}
