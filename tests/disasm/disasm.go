// Package disasm checks assembly stubs by their encodings: it cross-builds a
// package's test binary for an architecture, disassembles it with
// `go tool objdump`, and compares every stub of one .s file with a golden
// list of instruction words. A barrier with a wrong option still runs, so
// only a check like this catches it. The arm and x86 packages use it.
package disasm

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// Check builds the package in the current directory (import path pkg) for
// linux/goarch, disassembles its symbols, and requires the stubs defined in
// srcFile to be exactly the words in the golden file, and no others.
func Check(t *testing.T, goarch, pkg, srcFile, golden string) {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("go command not on PATH, cannot build the %s object: %v", goarch, err)
	}
	want := ReadGolden(t, golden)
	bin := filepath.Join(t.TempDir(), goarch+".test")
	build := exec.Command(goBin, "test", "-c", "-o", bin, ".")
	build.Env = append(os.Environ(), "GOOS=linux", "GOARCH="+goarch, "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("GOARCH=%s go test -c: %v\n%s", goarch, err, out)
	}
	out, err := exec.Command(goBin, "tool", "objdump", "-s", "^"+strings.ReplaceAll(pkg, ".", `\.`)+`\.`, bin).CombinedOutput()
	if err != nil {
		t.Fatalf("go tool objdump: %v\n%s", err, out)
	}
	got := ParseObjdump(t, out, srcFile)
	for name, enc := range want {
		g, ok := got[name]
		if !ok {
			t.Errorf("stub %s not found in the %s disassembly", name, goarch)
			continue
		}
		if !slices.Equal(g, enc) {
			t.Errorf("stub %s assembles to %v, want %v", name, g, enc)
		}
	}
	for name := range got {
		if _, ok := want[name]; !ok {
			t.Errorf("stub %s in %s has no golden entry", name, srcFile)
		}
	}
}

// ReadGolden reads lines "Name word word ..." (hex, lower case); '#' starts
// a comment.
func ReadGolden(t *testing.T, path string) map[string][]string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string][]string{}
	for line := range strings.Lines(string(b)) {
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if len(f) < 2 {
			t.Fatalf("%s: malformed line %q", path, line)
		}
		m[f[0]] = f[1:]
	}
	return m
}

// ParseObjdump maps each ABI0 assembly function defined in srcFile to the
// hex instruction words go tool objdump printed for it.
func ParseObjdump(t *testing.T, out []byte, srcFile string) map[string][]string {
	t.Helper()
	got := map[string][]string{}
	var cur string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		line := sc.Text()
		if rest, ok := strings.CutPrefix(line, "TEXT "); ok {
			cur = ""
			f := strings.Fields(rest)
			if len(f) == 2 && strings.HasSuffix(f[1], "/"+srcFile) {
				sym := strings.TrimSuffix(f[0], "(SB)")
				sym = sym[strings.LastIndexByte(sym, '/')+1:]
				sym = strings.TrimPrefix(sym, sym[:strings.IndexByte(sym, '.')+1])
				cur = strings.TrimSuffix(sym, ".abi0")
			}
			continue
		}
		if cur == "" {
			continue
		}
		f := strings.Fields(line)
		// file:line  address  encoding  mnemonic...
		// Alignment padding after RET shows up as "?" and is skipped.
		if len(f) >= 4 && strings.HasPrefix(f[0], srcFile+":") && f[3] != "?" {
			got[cur] = append(got[cur], strings.ToLower(f[2]))
		}
	}
	if len(got) == 0 {
		t.Fatalf("no stubs from %s in objdump output:\n%s", srcFile, out)
	}
	return got
}

// Build cross-builds the test binary of the package in the current
// directory for linux/goarch (cgo off) and returns its path, in a
// directory the test removes. It skips when the go command is missing.
func Build(t *testing.T, goarch string) string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("go command not on PATH, cannot build the %s object: %v", goarch, err)
	}
	bin := filepath.Join(t.TempDir(), goarch+".test")
	build := exec.Command(goBin, "test", "-c", "-o", bin, ".")
	build.Env = append(os.Environ(), "GOOS=linux", "GOARCH="+goarch, "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("GOARCH=%s go test -c: %v\n%s", goarch, err, out)
	}
	return bin
}

// Objdump disassembles the symbols of bin matching the regular expression
// sym with `go tool objdump -s`.
func Objdump(t *testing.T, bin, sym string) []byte {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("go command not on PATH: %v", err)
	}
	out, err := exec.Command(goBin, "tool", "objdump", "-s", sym, bin).CombinedOutput()
	if err != nil {
		t.Fatalf("go tool objdump: %v\n%s", err, out)
	}
	return out
}
