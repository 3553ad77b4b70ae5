package verbs

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestDeviceForNetdevRefuses(t *testing.T) {
	// Loopback exists everywhere and never has an RDMA device; a made-up
	// name does not exist.
	for _, name := range []string{"lo", "scrubd-no-such-if"} {
		dev, err := DeviceForNetdev(name)
		var ne *NetdevError
		if err == nil || !errors.As(err, &ne) || ne.Netdev != name {
			t.Errorf("%s: got %q, %v; want a NetdevError naming it", name, dev, err)
		}
	}
}

func TestOutOfBuffer(t *testing.T) {
	old := SysfsRoot
	t.Cleanup(func() { SysfsRoot = old })
	SysfsRoot = t.TempDir()
	dir := filepath.Join(SysfsRoot, "mlx5_0", "ports", "1", "hw_counters")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "out_of_buffer"), []byte("123456\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if v, err := OutOfBuffer("mlx5_0", 1); err != nil || v != 123456 {
		t.Fatalf("got %d, %v", v, err)
	}
	if _, err := OutOfBuffer("mlx5_0", 2); err == nil {
		t.Fatal("missing port read without error")
	}
}
