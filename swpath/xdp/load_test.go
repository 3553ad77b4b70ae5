//go:build linux

package xdp

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/scrubd/scrubd/internal/testenv"
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
	if err := bpfUsable(); err != nil {
		// qemu-user (the arm64 pass) does not emulate bpf(2); a real kernel
		// without it would fail here too, which is a skip, not a pass.
		testenv.MissingUnderEmulation(t, "bpf(2) is not usable here: %v", err)
	}
}

// bpfUsable probes bpf(2) with a one-element array map; it reports only
// "not implemented" and "not supported", other errors surface in the test.
func bpfUsable() error {
	m, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.Array, KeySize: 4, ValueSize: 4, MaxEntries: 1})
	if err == nil {
		m.Close()
		if _, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.ArrayOfMaps, KeySize: 4, ValueSize: 4, MaxEntries: 1,
			InnerMap: &ebpf.MapSpec{Type: ebpf.Array, KeySize: 4, ValueSize: 4, MaxEntries: 1}}); errors.Is(err, ebpf.ErrNotSupported) || errors.Is(err, unix.ENOSYS) {
			return err
		}
		return nil
	}
	if errors.Is(err, unix.ENOSYS) || errors.Is(err, ebpf.ErrNotSupported) {
		return err
	}
	return nil
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

// TestOlderPinsRefused: tables pinned by a scrubd without the pinned globals
// (an older layout) are refused with an error that says so, and are left in
// place for the operator.
func TestOlderPinsRefused(t *testing.T) {
	needBPF(t)
	dir := bpffs(t)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	old, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.Array, KeySize: 4, ValueSize: 4, MaxEntries: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	if err := old.Pin(filepath.Join(dir, "ports")); err != nil {
		t.Fatal(err)
	}
	e, err := New(Options{PinPath: dir})
	if err == nil {
		e.Close()
		t.Fatal("New took over tables pinned without globals")
	}
	if !strings.Contains(err.Error(), "older") || !strings.Contains(err.Error(), dir) {
		t.Fatalf("error does not name the cause and the path: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "ports")); err != nil {
		t.Fatalf("the old pin was touched: %v", err)
	}
}
