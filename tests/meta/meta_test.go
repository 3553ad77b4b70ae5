// Package meta holds repository-wide checks of the rules in the developers'
// guide that no compiler enforces: unsafe only in *_unsafe.go files, a doc
// comment on every package, and metrics kept off the packet path.
package meta

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// root is the repository root, two levels up from tests/meta.
const root = "../.."

type goFile struct {
	path    string // relative to root
	pkgDir  string
	pkg     string
	doc     string
	imports []string
}

func walk(t *testing.T) []goFile {
	t.Helper()
	var out []goFile
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if d.IsDir() {
			// Separate modules and tool output are not part of this module.
			if strings.HasPrefix(d.Name(), ".") && rel != "." || d.Name() == "testdata" || d.Name() == "out" {
				return filepath.SkipDir
			}
			if rel != "." {
				if _, err := os.Stat(filepath.Join(p, "go.mod")); err == nil {
					return filepath.SkipDir
				}
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, parser.ImportsOnly|parser.ParseComments)
		if err != nil {
			return err
		}
		g := goFile{path: rel, pkgDir: filepath.Dir(rel), pkg: f.Name.Name}
		if f.Doc != nil {
			g.doc = f.Doc.Text()
		}
		for _, im := range f.Imports {
			s, _ := strconv.Unquote(im.Path.Value)
			g.imports = append(g.imports, s)
		}
		out = append(out, g)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(out) < 100 {
		t.Fatalf("walked only %d Go files: wrong root?", len(out))
	}
	return out
}

func TestUnsafeOnlyInUnsafeFiles(t *testing.T) {
	for _, f := range walk(t) {
		for _, im := range f.imports {
			if im == "unsafe" && !strings.HasSuffix(f.path, "_unsafe.go") && !strings.HasSuffix(f.path, "_unsafe_test.go") {
				t.Errorf("%s imports unsafe: move that code to a *_unsafe.go file", f.path)
			}
		}
	}
}

func TestEveryPackageHasADoc(t *testing.T) {
	docs := map[string]bool{}
	for _, f := range walk(t) {
		if strings.HasSuffix(f.path, "_test.go") {
			continue
		}
		if _, ok := docs[f.pkgDir]; !ok {
			docs[f.pkgDir] = false
		}
		if strings.HasPrefix(f.doc, "Package "+f.pkg+" ") || (f.pkg == "main" && strings.HasPrefix(f.doc, "Command ")) {
			docs[f.pkgDir] = true
		}
	}
	for dir, ok := range docs {
		if !ok {
			t.Errorf("package in %s has no package doc (\"// Package name ...\")", dir)
		}
	}
}

func TestMetricsOffThePacketPath(t *testing.T) {
	for _, f := range walk(t) {
		if !strings.HasPrefix(f.path, "swpath/") && !strings.HasPrefix(f.path, "offload/") {
			continue
		}
		for _, im := range f.imports {
			if strings.HasPrefix(im, "github.com/prometheus/") {
				t.Errorf("%s imports %s: the packet path and backends export plain counters; agent/metrics reads them", f.path, im)
			}
		}
	}
}
