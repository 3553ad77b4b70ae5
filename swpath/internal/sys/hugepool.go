package sys

import (
	"fmt"
	"strconv"
	"strings"
)

// HugePool is the kernel's pool of huge pages of HugePageSize, as
// /proc/meminfo reports it (mm/hugetlb.c, hugetlb_report_meminfo).
type HugePool struct {
	Free    int // HugePages_Free: pages no mapping holds
	Surplus int // HugePages_Surp: pages above nr_hugepages (0 where the line is missing)
}

// parseHugePool reads a HugePool from the text of /proc/meminfo. It fails,
// naming the line, where HugePages_Free or Hugepagesize is missing or not
// a number, or where the huge page size is not HugePageSize.
func parseHugePool(meminfo string) (HugePool, error) {
	p := HugePool{Free: -1}
	sizeKB := -1
	for _, l := range strings.Split(meminfo, "\n") {
		f := strings.Fields(l)
		if len(f) < 2 {
			continue
		}
		var dst *int
		switch f[0] {
		case "HugePages_Free:":
			dst = &p.Free
		case "HugePages_Surp:":
			dst = &p.Surplus
		case "Hugepagesize:":
			dst = &sizeKB
		default:
			continue
		}
		v, err := strconv.Atoi(f[1])
		if err != nil {
			return HugePool{}, fmt.Errorf("/proc/meminfo: %s %q is not a number", strings.TrimSuffix(f[0], ":"), f[1])
		}
		*dst = v
	}
	if p.Free < 0 || sizeKB < 0 {
		return HugePool{}, fmt.Errorf("/proc/meminfo has no HugePages_Free or Hugepagesize line")
	}
	if sizeKB*1024 != HugePageSize {
		return HugePool{}, fmt.Errorf("/proc/meminfo: Hugepagesize is %d kB, not %d", sizeKB, HugePageSize>>10)
	}
	return p, nil
}
