//go:build linux

package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
)

// rte_acl's tables come from DPDK's EAL memory, which production
// deployments back with huge pages; at 100k rules they take 228 MiB, and
// on 4 KiB pages (--no-huge) rte_acl's lookups pay for TLB misses that
// it would not have. reserveHuge sets aside enough 2 MiB pages for the
// EAL's memory (-m) through the kernel's pool, and dpdk-test-acl then
// runs with --in-memory (its pages from that pool, with no hugetlbfs
// files and no shared configuration left behind).

const (
	nrHugePath = "/proc/sys/vm/nr_hugepages"
	memInfo    = "/proc/meminfo"
	hugeKB     = 2048
)

// reserveHuge makes sure mb MiB of 2 MiB pages (and a margin for the EAL's
// own) are free in the kernel's pool, raising nr_hugepages where they are
// not. giveBack puts nr_hugepages back as it was; it may be called more
// than once, from any goroutine.
func reserveHuge(mb int) (giveBack func(), err error) {
	giveBack = func() {}
	need := mb*1024/hugeKB + 16
	info, err := os.ReadFile(memInfo)
	if err != nil {
		return giveBack, err
	}
	free, size, err := hugeFree(string(info))
	if err != nil {
		return giveBack, err
	}
	if size != hugeKB {
		return giveBack, fmt.Errorf("%s: Hugepagesize is %d kB, not %d", memInfo, size, hugeKB)
	}
	if free >= need {
		return giveBack, nil
	}
	raw, err := os.ReadFile(nrHugePath)
	if err != nil {
		return giveBack, err
	}
	old, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	if err != nil {
		return giveBack, fmt.Errorf("%s: %q is not a page count", nrHugePath, strings.TrimSpace(string(raw)))
	}
	surplus := func() int {
		info, err := os.ReadFile(memInfo)
		if err != nil {
			return 0
		}
		return hugeSurplus(string(info))
	}
	surp0 := surplus()
	var once sync.Once
	restore := func() {
		once.Do(func() {
			set := func(n int) { _ = os.WriteFile(nrHugePath, []byte(strconv.Itoa(n)), 0) }
			set(old)
			// Pages still in use when nr_hugepages is lowered stay as
			// surplus pages (HugePages_Surp), and one run here left 216
			// of them free after their user had gone: raising the count
			// by that many makes them the pool's again, and lowering it
			// frees them.
			if extra := surplus() - surp0; extra > 0 {
				set(old + extra)
				set(old)
			}
		})
	}
	if err := os.WriteFile(nrHugePath, []byte(strconv.Itoa(old+need-free)), 0); err != nil {
		return giveBack, fmt.Errorf("%s: %w", nrHugePath, err)
	}
	info, err = os.ReadFile(memInfo)
	if err == nil {
		free, _, err = hugeFree(string(info))
	}
	if err != nil || free < need {
		restore()
		if err == nil {
			err = fmt.Errorf("the kernel set aside %d free 2 MiB pages of the %d needed (%s raised from %d)", free, need, nrHugePath, old)
		}
		return giveBack, err
	}
	return restore, nil
}

// hugeFree returns HugePages_Free and Hugepagesize (kB) from the text of
// /proc/meminfo.
func hugeFree(meminfo string) (free, sizeKB int, err error) {
	free, sizeKB = -1, -1
	for _, l := range strings.Split(meminfo, "\n") {
		f := strings.Fields(l)
		if len(f) < 2 {
			continue
		}
		v, e := strconv.Atoi(f[1])
		switch f[0] {
		case "HugePages_Free:":
			if e != nil {
				return 0, 0, fmt.Errorf("%s: HugePages_Free %q is not a count", memInfo, f[1])
			}
			free = v
		case "Hugepagesize:":
			if e != nil {
				return 0, 0, fmt.Errorf("%s: Hugepagesize %q is not a size", memInfo, f[1])
			}
			sizeKB = v
		}
	}
	if free < 0 || sizeKB < 0 {
		return 0, 0, fmt.Errorf("%s has no HugePages_Free or Hugepagesize line", memInfo)
	}
	return free, sizeKB, nil
}

// hugeSurplus returns HugePages_Surp from the text of /proc/meminfo (0
// where it has none or it does not parse).
func hugeSurplus(meminfo string) int {
	for _, l := range strings.Split(meminfo, "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "HugePages_Surp:" {
			n, _ := strconv.Atoi(f[1])
			return n
		}
	}
	return 0
}
