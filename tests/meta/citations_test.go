package meta

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestCitationsArePublic: product text (code, comments, docs, scripts)
// cites sources a reader of the repository can open: an RFC, an
// rdma-core, DPDK or kernel file and function, a PRM section, an
// article's title. Internal notes, tracker items and seed files are not
// among them.
func TestCitationsArePublic(t *testing.T) {
	bad := regexp.MustCompile(`(?i)research/[a-z0-9-]+\.md|shared/(research|seeds)|seeds?/[0-9]|seed 00[0-9]|\bissue #?[0-9]+\b`)
	exts := map[string]bool{".go": true, ".md": true, ".sh": true, ".c": true, ".h": true, ".yaml": true, ".yml": true, ".json": true, ".s": true}
	n := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); name == ".git" || name == "testdata" || (strings.HasPrefix(name, ".") && path != root) {
				return filepath.SkipDir
			}
			return nil
		}
		if !exts[filepath.Ext(path)] {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		n++
		for i, line := range strings.Split(string(b), "\n") {
			if m := bad.FindString(line); m != "" {
				rel, _ := filepath.Rel(root, path)
				t.Errorf("%s:%d cites %q, which a reader cannot open: name the public source", rel, i+1, m)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n < 100 {
		t.Fatalf("read only %d files", n)
	}
}
