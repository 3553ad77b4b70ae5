package sys

import (
	"strings"
	"testing"
)

// /proc/meminfo's lines as the kernel writes them (fs/proc/meminfo.c,
// mm/hugetlb.c hugetlb_report_meminfo).
func TestParseHugePool(t *testing.T) {
	info := "MemTotal:       24563404 kB\nHugePages_Total:    2200\nHugePages_Free:     2048\nHugePages_Rsvd:        0\nHugepagesize:       2048 kB\n"
	if p, err := parseHugePool(info); err != nil || p != (HugePool{Free: 2048}) {
		t.Fatalf("parseHugePool = %+v, %v; want 2048 free, no surplus", p, err)
	}
	if p, err := parseHugePool(info + "HugePages_Surp:      216\n"); err != nil || p != (HugePool{Free: 2048, Surplus: 216}) {
		t.Fatalf("parseHugePool with surplus = %+v, %v; want 2048 free, 216 surplus", p, err)
	}
	bad := []struct{ text, want string }{
		{"MemTotal: 1 kB\n", "HugePages_Free"},
		{"HugePages_Free: x\nHugepagesize: 2048 kB\n", `"x"`},
		{"HugePages_Free: 3\nHugepagesize: 1048576 kB\n", "1048576 kB"},
	}
	for _, c := range bad {
		if _, err := parseHugePool(c.text); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("parseHugePool(%q) error %v; want one naming %s", c.text, err, c.want)
		}
	}
}
