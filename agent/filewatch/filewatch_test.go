package filewatch

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/scrubd/scrubd/agent/store"
)

func TestReloadAndBadFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "rules.yaml")
	write := func(s string) {
		if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("rules:\n  - {id: a, action: drop, match: {dst: 198.51.100.0/24, proto: gre}}\n  - {id: b, action: drop, match: {dst: 203.0.113.0/24}}\n")
	now := func() time.Time { return time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC) }
	st := store.New(nil, now)
	w := New([]string{path}, st, slog.New(slog.NewTextHandler(io.Discard, nil)), now)
	if bad := w.Check(true); bad != 0 || st.Len() != 2 {
		t.Fatalf("bad %d len %d", bad, st.Len())
	}
	// A bad edit is refused whole: a and b stay, nothing of the new file applies.
	write("rules:\n  - {id: a, action: drop, match: {dst: 198.51.100.0/24, proto: gre}}\n  - {id: c, action: drop, match: {dst: 198.51.100.9/32}}\n  - {id: d, action: drop, match: {dst: 300.1.1.1/32}}\n")
	if bad := w.Check(false); bad != 1 {
		t.Fatalf("bad file accepted")
	}
	if _, ok := st.Get("b"); !ok || st.Len() != 2 {
		t.Fatalf("rules in force changed: len %d", st.Len())
	}
	s := w.Status()[0]
	if s.Err == "" || s.Refusals != 1 || s.Rules != 2 {
		t.Fatalf("status %+v", s)
	}
	// Unchanged bad content is not re-parsed on the next tick, still bad.
	if bad := w.Check(false); bad != 1 || w.Status()[0].Refusals != 1 {
		t.Fatalf("status %+v", w.Status()[0])
	}
	// A good edit replaces the file's rules.
	write("rules:\n  - {id: c, action: drop, match: {dst: 198.51.100.0/24, proto: udp, dst_port: \"53\"}}\n")
	if bad := w.Check(false); bad != 0 {
		t.Fatal("good file refused")
	}
	if _, ok := st.Get("a"); ok || st.Len() != 1 {
		t.Fatalf("len %d", st.Len())
	}
	// A deleted file keeps its rules.
	os.Remove(path)
	if bad := w.Check(false); bad != 1 || st.Len() != 1 {
		t.Fatalf("missing file: bad %d len %d", bad, st.Len())
	}
}

// A rule file replaced by an empty (0-byte) file, one cut off after
// "rules:", or one with a rule the guard finds too broad is refused and
// counted; the rules in force stay. "rules: []" empties it on purpose.
func TestEmptyAndBroadFilesRefused(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "rules.yaml")
	write := func(s string) {
		if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("rules:\n  - {id: a, action: drop, match: {dst: 203.0.113.0/24, proto: udp}}\n")
	now := func() time.Time { return time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC) }
	st := store.New(nil, now)
	w := New([]string{path}, st, slog.New(slog.NewTextHandler(io.Discard, nil)), now)
	if bad := w.Check(true); bad != 0 || st.Len() != 1 {
		t.Fatalf("bad %d len %d", bad, st.Len())
	}
	for i, bad := range []string{"", "rules:\n", "# all gone\n", "rules:\n  - {id: b, action: drop, match: {dst: 0.0.0.0/0, proto: udp}}\n"} {
		write(bad)
		if n := w.Check(false); n != 1 {
			t.Fatalf("%q accepted", bad)
		}
		if _, ok := st.Get("a"); !ok || st.Len() != 1 {
			t.Fatalf("%q removed the rules in force (len %d)", bad, st.Len())
		}
		if s := w.Status()[0]; s.Refusals != uint64(i+1) || s.Err == "" {
			t.Fatalf("%q: status %+v", bad, s)
		}
	}
	write("rules: []\n")
	if n := w.Check(false); n != 0 || st.Len() != 0 {
		t.Fatalf("rules: [] refused (%d) or rules left (%d)", n, st.Len())
	}
}

// A missing rule file is logged (at ERROR) and counted once when it goes
// missing, not on every poll; when it is back its rules are read afresh
// and that is logged once; missing again is logged again.
func TestMissingFileLoggedOncePerChange(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "rules.yaml")
	good := "rules:\n  - {id: a, action: drop, match: {dst: 203.0.113.0/24, proto: udp}}\n"
	if err := os.WriteFile(path, []byte(good), 0o644); err != nil {
		t.Fatal(err)
	}
	now := func() time.Time { return time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC) }
	st := store.New(nil, now)
	var logs bytes.Buffer
	w := New([]string{path}, st, slog.New(slog.NewTextHandler(&logs, nil)), now)
	if bad := w.Check(true); bad != 0 {
		t.Fatalf("bad %d", bad)
	}
	count := func(s string) int { return strings.Count(logs.String(), s) }
	poll := func(n, wantBad int) {
		t.Helper()
		for range n {
			if bad := w.Check(false); bad != wantBad {
				t.Fatalf("poll: %d files refused, want %d\n%s", bad, wantBad, logs.String())
			}
		}
	}
	steps := []struct {
		what         string
		change       func()
		bad          int
		errors, back int // after the step's five polls
		refusals     uint64
	}{
		{"missing", func() { os.Remove(path) }, 1, 1, 0, 1},
		{"back, same content", func() { os.WriteFile(path, []byte(good), 0o644) }, 0, 1, 1, 1},
		{"missing again", func() { os.Remove(path) }, 1, 2, 1, 2},
		{"back, other content", func() {
			os.WriteFile(path, []byte("rules:\n  - {id: b, action: drop, match: {dst: 203.0.113.0/24, proto: gre}}\n"), 0o644)
		}, 0, 2, 2, 2},
	}
	for _, s := range steps {
		s.change()
		poll(5, s.bad)
		if e, b, r := count("level=ERROR"), count("rule file readable again"), w.Status()[0].Refusals; e != s.errors || b != s.back || r != s.refusals {
			t.Fatalf("%s: %d ERROR lines, %d 'readable again', %d refusals; want %d, %d, %d\n%s", s.what, e, b, r, s.errors, s.back, s.refusals, logs.String())
		}
		if st.Len() != 1 {
			t.Fatalf("%s: %d rules in force, want 1 (a missing file keeps its rules)", s.what, st.Len())
		}
	}
	if _, ok := st.Get("b"); !ok || w.Status()[0].Err != "" {
		t.Fatalf("the file back with new content was not loaded: %+v", w.Status()[0])
	}
}

// A poll of an unchanged file streams it through the hash: it allocates
// a copy buffer, not the file. A 2 MB rule file (10k rules) polled 5
// times allocates under 1/8 of one file's size in all (it allocated the
// file on every poll: 10 MB).
func TestUnchangedPollDoesNotReadWholeFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "rules.yaml")
	var b bytes.Buffer
	b.WriteString("rules:\n")
	for i := range 10000 {
		fmt.Fprintf(&b, "  - {id: r%d, action: drop, match: {dst: 10.%d.%d.0/24, proto: udp, dst_port: \"%d\"}, priority: 100}  # %s\n",
			i, i/256%256, i%256, 1000+i%5000, strings.Repeat("x", 120))
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	size := b.Len()
	now := func() time.Time { return time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC) }
	st := store.New(nil, now)
	w := New([]string{path}, st, slog.New(slog.NewTextHandler(io.Discard, nil)), now)
	if bad := w.Check(true); bad != 0 || st.Len() != 10000 {
		t.Fatalf("bad %d len %d", bad, st.Len())
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range 5 {
		if bad := w.Check(false); bad != 0 {
			t.Fatal("unchanged file refused")
		}
	}
	runtime.ReadMemStats(&after)
	if got := after.TotalAlloc - before.TotalAlloc; got > uint64(size/8) {
		t.Fatalf("5 polls of an unchanged %d-byte file allocated %d bytes; want under %d", size, got, size/8)
	}
	// A change is still seen, and the file parsed again.
	if err := os.WriteFile(path, []byte("rules:\n  - {id: only, action: drop, match: {dst: 198.51.100.0/24}}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if bad := w.Check(false); bad != 0 || st.Len() != 1 {
		t.Fatalf("changed file: bad %d len %d", bad, st.Len())
	}
}
