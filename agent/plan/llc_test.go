package plan

import (
	"os"
	"path/filepath"
	"testing"
)

// A fake sysfs tree of an AMD EPYC 7742 core: 16 MiB of L3 shared by four
// cores and their eight threads (CPUs 0-3 and 64-67): 2048 KiB each.
func TestLLCShare(t *testing.T) {
	root := t.TempDir()
	write := func(idx, level, size, list string) {
		d := filepath.Join(root, "sys/devices/system/cpu/cpu0/cache", idx)
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		for name, v := range map[string]string{"level": level, "size": size, "shared_cpu_list": list} {
			if err := os.WriteFile(filepath.Join(d, name), []byte(v+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	write("index0", "1", "32K", "0,64")
	write("index2", "2", "512K", "0,64")
	write("index3", "3", "16384K", "0-3,64-67")
	got, err := LLCShareKiB(root, 0)
	if err != nil || got != 2048 {
		t.Fatalf("share %v KiB, err %v; want 2048", got, err)
	}
	write("index3", "3", "16M", "0-3")
	if got, _ := LLCShareKiB(root, 0); got != 4096 {
		t.Fatalf("16M over 4 CPUs: %v KiB", got)
	}
	write("index3", "3", "16M", "3-1")
	if _, err := LLCShareKiB(root, 0); err == nil {
		t.Fatal("a bad cpu list was accepted")
	}
	if _, err := LLCShareKiB(root, 7); err == nil {
		t.Fatal("a missing CPU was accepted")
	}
}
