package testenv

import (
	"os"
	"path/filepath"
	"testing"
)

func TestWatchOpens(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(path, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	opens := WatchOpens(t, path)
	if n := opens(); n != 0 {
		t.Fatalf("%d opens before any, want 0", n)
	}
	for i := 0; i < 3; i++ {
		if _, err := os.ReadFile(path); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := os.Stat(path); err != nil { // no open
		t.Fatal(err)
	}
	if n := opens(); n != 3 {
		t.Fatalf("%d opens after three reads, want 3", n)
	}
	if n := opens(); n != 0 {
		t.Fatalf("%d opens counted again, want 0", n)
	}
}
