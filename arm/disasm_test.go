package arm

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestDisassembly cross-compiles this package's test binary for arm64 (on
// any host), disassembles it with `go tool objdump`, and requires every
// stub in barrier_arm64.s to be exactly the instruction words listed in
// testdata/objdump_arm64.golden. A barrier with a wrong option still runs,
// so only this check catches it.
func TestDisassembly(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("go command not on PATH, cannot build the arm64 object: %v", err)
	}
	want := readGolden(t, "testdata/objdump_arm64.golden")
	bin := filepath.Join(t.TempDir(), "arm64.test")
	build := exec.Command(goBin, "test", "-c", "-o", bin, ".")
	build.Env = append(os.Environ(), "GOOS=linux", "GOARCH=arm64", "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("GOARCH=arm64 go test -c: %v\n%s", err, out)
	}
	out, err := exec.Command(goBin, "tool", "objdump", "-s", `^github.com/scrubd/scrubd/arm\.`, bin).CombinedOutput()
	if err != nil {
		t.Fatalf("go tool objdump: %v\n%s", err, out)
	}
	got := parseObjdump(t, out, "barrier_arm64.s")
	for name, enc := range want {
		g, ok := got[name]
		if !ok {
			t.Errorf("stub %s not found in the arm64 disassembly", name)
			continue
		}
		if !slices.Equal(g, enc) {
			t.Errorf("stub %s assembles to %v, want %v", name, g, enc)
		}
	}
	for name := range got {
		if _, ok := want[name]; !ok {
			t.Errorf("stub %s in barrier_arm64.s has no golden entry", name)
		}
	}
}

// TestGoldenMatchesArchitecture checks the golden words themselves against
// the encoding formulas of the Arm ARM (C6.2 DMB/DSB: 0xd50330bf|CRm<<8 and
// 0xd503309f|CRm<<8; C6.2 MRS with o0=1,op1=3,CRn=14,CRm=0,op2=2 for
// CNTVCT_EL0 and op2=0 for CNTFRQ_EL0; RET = 0xd65f03c0), so a golden
// regenerated from a wrong build would fail here.
func TestGoldenMatchesArchitecture(t *testing.T) {
	dmb := func(crm uint32) string { return fmt.Sprintf("%08x", 0xd50330bf|crm<<8) }
	dsb := func(crm uint32) string { return fmt.Sprintf("%08x", 0xd503309f|crm<<8) }
	// MRS Xt, S3_3_C14_C0_op2: 0xd5300000 | o0<<19 | op1<<16 | CRn<<12 | CRm<<8 | op2<<5 | Rt
	mrs := func(op2, rt uint32) string {
		return fmt.Sprintf("%08x", 0xd5300000|1<<19|3<<16|14<<12|0<<8|op2<<5|rt)
	}
	const ret = "d65f03c0"
	want := map[string]string{
		"DMBOSHLD": dmb(0b0001),
		"DMBOSHST": dmb(0b0010),
		"DMBOSH":   dmb(0b0011),
		"DSBST":    dsb(0b1110),
		"CNTVCT":   mrs(2, 0),
		"CNTFRQ":   mrs(0, 0),
	}
	golden := readGolden(t, "testdata/objdump_arm64.golden")
	if len(golden) != len(want) {
		t.Errorf("golden has %d stubs, want %d", len(golden), len(want))
	}
	for name, first := range want {
		g := golden[name]
		if len(g) < 2 || g[0] != first || g[len(g)-1] != ret {
			t.Errorf("golden %s = %v, want first word %s and last word %s (RET)", name, g, first, ret)
		}
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
