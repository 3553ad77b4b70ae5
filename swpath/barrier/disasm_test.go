package barrier

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/scrubd/scrubd/internal/testenv"
)

// TestDisassembly builds this package's test binary for arm64 and amd64 and
// checks that each facade function calls exactly the stub it documents
// (and refers to nothing else in arm or x86).
// The stubs' own bytes are checked in arm/ and x86/.
func TestDisassembly(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		testenv.Missing(t, "go command not on PATH, cannot build the objects: %v", err)
	}
	want := map[string]map[string]string{
		"arm64": {
			"FromDevice": "arm.DMBOSHLD", "ToDevice": "arm.DMBOSHST", "OrderingWrite": "arm.DMBOSHST",
			"FlushWC": "arm.DSBST", "WCStart": "arm.DSBST", "Full": "arm.DMBOSH",
			"Cycles": "arm.CNTVCT", "CycleHz": "arm.CNTFRQ",
			"MMIOWrite64": "arm.MMIOWrite64", "MMIOWrite32": "arm.MMIOWrite32",
		},
		"amd64": {
			"FromDevice": "x86.LFENCE", "ToDevice": "x86.CompilerBarrier", "OrderingWrite": "x86.CompilerBarrier",
			"FlushWC": "x86.SFENCE", "WCStart": "x86.SFENCE", "Full": "x86.MFENCE",
			"Cycles": "x86.RDTSC",
			// TSCHz is inlined: a load of its once-computed value.
			"CycleHz":     "x86.tscHz",
			"MMIOWrite64": "x86.MMIOWrite64", "MMIOWrite32": "x86.MMIOWrite32",
		},
	}
	// Any reference (call, jump or load) to a symbol of arm or x86.
	callRe := regexp.MustCompile(`\s()github\.com/scrubd/scrubd/((?:arm|x86)\.\w+)`)
	for arch, funcs := range want {
		t.Run(arch, func(t *testing.T) {
			bin := filepath.Join(t.TempDir(), arch+".test")
			build := exec.Command(goBin, "test", "-c", "-o", bin, ".")
			build.Env = append(os.Environ(), "GOOS=linux", "GOARCH="+arch, "CGO_ENABLED=0")
			if out, err := build.CombinedOutput(); err != nil {
				t.Fatalf("GOARCH=%s go test -c: %v\n%s", arch, err, out)
			}
			out, err := exec.Command(goBin, "tool", "objdump", "-s",
				`^github.com/scrubd/scrubd/swpath/barrier\.[A-Z]\w*$`, bin).CombinedOutput()
			if err != nil {
				t.Fatalf("go tool objdump: %v\n%s", err, out)
			}
			calls := map[string][]string{}
			var cur string
			sc := bufio.NewScanner(bytes.NewReader(out))
			for sc.Scan() {
				line := sc.Text()
				if rest, ok := strings.CutPrefix(line, "TEXT github.com/scrubd/scrubd/swpath/barrier."); ok {
					cur = strings.TrimSuffix(strings.Fields(rest)[0], "(SB)")
					if _, ok := calls[cur]; !ok {
						calls[cur] = nil // present, even if it refers to nothing
					}
					continue
				}
				if m := callRe.FindStringSubmatch(line); m != nil && cur != "" {
					calls[cur] = append(calls[cur], strings.TrimSuffix(m[2], ".abi0"))
				}
			}
			for fn, stub := range funcs {
				got, ok := calls[fn]
				if !ok {
					t.Errorf("%s: barrier.%s not in the binary", arch, fn)
					continue
				}
				if len(got) != 1 || got[0] != stub {
					t.Errorf("%s: barrier.%s calls %v, want exactly [%s]", arch, fn, got, stub)
				}
			}
		})
	}
}

// TestOnlyFacadeImportsArchPackages enforces that nothing but this package
// imports arm or x86, so every barrier in the tree goes through the
// documented rdma-core names.
func TestOnlyFacadeImportsArchPackages(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		testenv.Missing(t, "go command not on PATH: %v", err)
	}
	const mod = "github.com/scrubd/scrubd/"
	for _, arch := range []string{"amd64", "arm64"} {
		cmd := exec.Command(goBin, "list", "-e", "-test", "-f", `{{.ImportPath}} {{join .Imports " "}}`, mod+"...")
		cmd.Env = append(os.Environ(), "GOARCH="+arch)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("go list: %v", err)
		}
		for line := range strings.Lines(string(out)) {
			f := strings.Fields(line)
			if len(f) == 0 {
				continue
			}
			pkg := strings.Fields(strings.ReplaceAll(f[0], "[", " "))[0]
			if pkg == mod+"swpath/barrier" || pkg == mod+"arm" || pkg == mod+"x86" ||
				strings.HasSuffix(pkg, ".test") {
				continue
			}
			for _, imp := range f[1:] {
				if imp == mod+"arm" || imp == mod+"x86" {
					t.Errorf("GOARCH=%s: %s imports %s; only swpath/barrier may", arch, pkg, imp)
				}
			}
		}
	}
}
