package x86

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

// TestDisassembly cross-compiles this package's test binary for amd64 (on
// any host), disassembles it with `go tool objdump`, and requires every
// stub in barrier_amd64.s to be exactly the instruction words listed in
// testdata/objdump_amd64.golden. A barrier with a wrong option still runs,
// so only this check catches it.
func TestDisassembly(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("go command not on PATH, cannot build the amd64 object: %v", err)
	}
	want := readGolden(t, "testdata/objdump_amd64.golden")
	bin := filepath.Join(t.TempDir(), "amd64.test")
	build := exec.Command(goBin, "test", "-c", "-o", bin, ".")
	build.Env = append(os.Environ(), "GOOS=linux", "GOARCH=amd64", "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("GOARCH=amd64 go test -c: %v\n%s", err, out)
	}
	out, err := exec.Command(goBin, "tool", "objdump", "-s", `^github.com/scrubd/scrubd/x86\.`, bin).CombinedOutput()
	if err != nil {
		t.Fatalf("go tool objdump: %v\n%s", err, out)
	}
	got := parseObjdump(t, out, "barrier_amd64.s")
	for name, enc := range want {
		g, ok := got[name]
		if !ok {
			t.Errorf("stub %s not found in the amd64 disassembly", name)
			continue
		}
		if !slices.Equal(g, enc) {
			t.Errorf("stub %s assembles to %v, want %v", name, g, enc)
		}
	}
	for name := range got {
		if _, ok := want[name]; !ok {
			t.Errorf("stub %s in barrier_amd64.s has no golden entry", name)
		}
	}
}

// TestGoldenMatchesArchitecture checks the golden bytes against the
// opcodes in the Intel SDM Vol. 2 (LFENCE 0F AE E8, SFENCE 0F AE F8, MFENCE
// 0F AE F0, RDTSC 0F 31, RET C3), so a golden regenerated from a wrong build
// fails here.
func TestGoldenMatchesArchitecture(t *testing.T) {
	const ret = "c3"
	want := map[string]string{
		"LFENCE":          "0faee8",
		"SFENCE":          "0faef8",
		"MFENCE":          "0faef0",
		"CompilerBarrier": ret,
		"RDTSC":           "0f31",
	}
	golden := readGolden(t, "testdata/objdump_amd64.golden")
	if len(golden) != len(want) {
		t.Errorf("golden has %d stubs, want %d", len(golden), len(want))
	}
	for name, first := range want {
		g := golden[name]
		if len(g) < 1 || g[0] != first || g[len(g)-1] != ret {
			t.Errorf("golden %s = %v, want first %s and last %s (RET)", name, g, first, ret)
		}
	}
	if g := golden["CompilerBarrier"]; len(g) != 1 {
		t.Errorf("CompilerBarrier must be a bare RET, golden has %v", g)
	}
}

// readGolden reads lines "Name word word ..." (hex, lower case); '#' starts
// a comment.
func readGolden(t *testing.T, path string) map[string][]string {
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

// parseObjdump maps each ABI0 assembly function defined in srcFile to the
// hex instruction words go tool objdump printed for it.
func parseObjdump(t *testing.T, out []byte, srcFile string) map[string][]string {
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
