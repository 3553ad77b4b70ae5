package swengine

import (
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/scrubd/scrubd/agent/config"
)

func TestRxRing(t *testing.T) {
	noSys := t.TempDir() // no sysfs: the LLC share is unknown
	c := config.Defaults()
	c.Software.Engine, c.Software.Workers, c.Software.GHz, c.Software.CyclesPerPacket = "dv", 12, 2.13, 297
	// 148.81 Mpps over 12 workers is 12.4 Mpps, above the CPU ceiling
	// 2130/297 = 7.17 Mpps; 500 us of 7.17 Mpps is 3586 packets: 4096.
	n, why := RxRing(&c, noSys)
	if n != 4096 || !strings.Contains(why, "CPU ceiling") {
		t.Fatalf("%d (%s), want 4096 from the CPU ceiling", n, why)
	}
	// A drain rate of 2 Mpps: 1000 packets, 1024 entries.
	c.Software.QueueDrainMpps = 2
	if n, why := RxRing(&c, noSys); n != 1024 || !strings.Contains(why, "queue_drain_mpps") {
		t.Fatalf("%d (%s), want 1024", n, why)
	}
	// A 256 KiB share per core holds 262144 / 208 = 1260 entries: 1024
	// still fits; 128 KiB (630 entries) cuts it to 512.
	cpu := filepath.Join(noSys, "sys/devices/system/cpu")
	{
		d := filepath.Join(cpu, "cpu"+strconv.Itoa(runtime.NumCPU()-1), "cache/index3")
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		for name, v := range map[string]string{"level": "3", "size": "512K", "shared_cpu_list": "0-3"} {
			if err := os.WriteFile(filepath.Join(d, name), []byte(v), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	if n, _ := RxRing(&c, noSys); n != 512 {
		t.Fatalf("within a 128 KiB share: %d, want 512", n)
	}
	c.Software.RxRingEntries = 8192
	if n, why := RxRing(&c, noSys); n != 8192 || why != "software.rx_ring_entries" {
		t.Fatalf("configured: %d (%s)", n, why)
	}
}
