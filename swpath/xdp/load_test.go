//go:build linux

package xdp

import (
	"os"
	"testing"
	"time"

	"github.com/cilium/ebpf"
)

// needBPF skips when the kernel refuses BPF for lack of privilege, and fails
// under CI, where the tests must run.
func needBPF(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("CI=true but not root: the XDP tests need root")
		}
		t.Skip("needs root (CAP_BPF, CAP_NET_ADMIN, CAP_PERFMON) to load XDP programs")
	}
}

func newEngine(t testing.TB, opts Options) *Engine {
	t.Helper()
	needBPF(t)
	e, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

func TestLoad(t *testing.T) {
	e := newEngine(t, Options{})
	info, err := e.Program().Info()
	if err != nil {
		t.Fatal(err)
	}
	n, _ := info.VerifiedInstructions()
	t.Logf("verifier processed %d instructions", n)
	if e.Program().Type() != ebpf.XDP {
		t.Fatal("not XDP")
	}
}

var testNow = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
