package plan

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// LLCShareKiB reads, from a sysfs tree (root "/" on a live system), the
// last-level cache of CPU cpu and the CPUs sharing it, and returns its size
// over their count in KiB: the cache one worker's core has for its rings
// when every core sharing it runs a worker.
func LLCShareKiB(root string, cpu int) (float64, error) {
	dir := filepath.Join(root, "sys/devices/system/cpu", "cpu"+strconv.Itoa(cpu), "cache")
	ents, err := os.ReadDir(dir)
	if err != nil {
		return 0, err
	}
	best, bestLevel := "", 0
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), "index") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name(), "level"))
		if err != nil {
			continue
		}
		if l, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && l > bestLevel {
			best, bestLevel = filepath.Join(dir, e.Name()), l
		}
	}
	if best == "" {
		return 0, fmt.Errorf("%s: no cache levels", dir)
	}
	sz, err := os.ReadFile(filepath.Join(best, "size"))
	if err != nil {
		return 0, err
	}
	kib, err := parseCacheSize(strings.TrimSpace(string(sz)))
	if err != nil {
		return 0, fmt.Errorf("%s/size: %w", best, err)
	}
	list, err := os.ReadFile(filepath.Join(best, "shared_cpu_list"))
	if err != nil {
		return 0, err
	}
	n, err := countCPUList(strings.TrimSpace(string(list)))
	if err != nil {
		return 0, fmt.Errorf("%s/shared_cpu_list: %w", best, err)
	}
	return kib / float64(n), nil
}

// parseCacheSize reads sysfs's "32768K" or "16M".
func parseCacheSize(s string) (float64, error) {
	mult := 1.0 / 1024
	switch {
	case strings.HasSuffix(s, "K"):
		mult, s = 1, strings.TrimSuffix(s, "K")
	case strings.HasSuffix(s, "M"):
		mult, s = 1024, strings.TrimSuffix(s, "M")
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || v <= 0 {
		return 0, fmt.Errorf("cache size %q", s)
	}
	return v * mult, nil
}

// countCPUList counts a CPU list such as "0-3,64-67".
func countCPUList(s string) (int, error) {
	n := 0
	for _, part := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil {
			return 0, fmt.Errorf("cpu list %q", s)
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil || b < a {
				return 0, fmt.Errorf("cpu list %q", s)
			}
		}
		n += b - a + 1
	}
	return n, nil
}
