package filewatch

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"
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
