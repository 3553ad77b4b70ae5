package xdp

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestGeneratedUpToDate regenerates the bpf2go output from bpf/scrub.c with
// the //go:generate line of gen.go and compares it with the committed files
// (the same check as `go generate ./swpath/xdp/ && git diff --exit-code
// swpath/xdp`).
func TestGeneratedUpToDate(t *testing.T) {
	if runtime.GOARCH != "amd64" {
		t.Skip("regeneration is checked on the amd64 pass (clang runs on the build host)")
	}
	for _, tool := range []string{"clang", "llvm-strip", "go"} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("CI=true but %s is missing: %v", tool, err)
			}
			t.Skipf("%s not installed: cannot regenerate the BPF objects", tool)
		}
	}
	src, err := os.ReadFile("gen.go")
	if err != nil {
		t.Fatal(err)
	}
	var args []string
	for _, line := range strings.Split(string(src), "\n") {
		if rest, ok := strings.CutPrefix(line, "//go:generate go tool bpf2go "); ok {
			args = strings.Fields(rest)
		}
	}
	if args == nil {
		t.Fatal("no //go:generate bpf2go line in gen.go")
	}
	out := t.TempDir()
	cmd := exec.Command("go", append([]string{"tool", "bpf2go", "-output-dir", out}, args...)...)
	cmd.Env = append(os.Environ(), "GOPACKAGE=xdp", "GOFILE=gen.go")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("bpf2go: %v\n%s", err, b)
	}
	for _, name := range []string{"scrub_bpfel.go", "scrub_bpfel.o", "scrub_bpfeb.go", "scrub_bpfeb.o"} {
		want, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join(out, name))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from a fresh bpf2go run: run go generate ./swpath/xdp/ and commit", name)
		}
	}
}
