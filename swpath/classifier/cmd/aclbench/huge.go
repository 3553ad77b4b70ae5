//go:build linux

package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"

	"github.com/scrubd/scrubd/swpath/internal/sys"
)

// rte_acl's tables come from DPDK's EAL memory, which production
// deployments back with huge pages; at 100k rules they take 228 MiB, and
// on 4 KiB pages (--no-huge) rte_acl's lookups pay for TLB misses that
// it would not have. reserveHuge sets aside enough 2 MiB pages for the
// EAL's memory (-m) through the kernel's pool, and dpdk-test-acl then
// runs with --in-memory (its pages from that pool, with no hugetlbfs
// files and no shared configuration left behind).

const nrHugePath = "/proc/sys/vm/nr_hugepages"

// reserveHuge makes sure mb MiB of 2 MiB pages (and a margin for the EAL's
// own) are free in the kernel's pool, raising nr_hugepages where they are
// not. giveBack puts nr_hugepages back as it was; it may be called more
// than once, from any goroutine.
func reserveHuge(mb int) (giveBack func(), err error) {
	giveBack = func() {}
	need := mb<<20/sys.HugePageSize + 16
	pool, err := sys.HugePages()
	if err != nil || pool.Free >= need {
		return giveBack, err
	}
	raw, err := os.ReadFile(nrHugePath)
	if err != nil {
		return giveBack, err
	}
	old, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	if err != nil {
		return giveBack, fmt.Errorf("%s: %q is not a page count", nrHugePath, strings.TrimSpace(string(raw)))
	}
	surp0 := pool.Surplus
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
			if p, err := sys.HugePages(); err == nil && p.Surplus > surp0 {
				set(old + p.Surplus - surp0)
				set(old)
			}
		})
	}
	if err := os.WriteFile(nrHugePath, []byte(strconv.Itoa(old+need-pool.Free)), 0); err != nil {
		return giveBack, fmt.Errorf("%s: %w", nrHugePath, err)
	}
	if pool, err = sys.HugePages(); err != nil || pool.Free < need {
		restore()
		if err == nil {
			err = fmt.Errorf("the kernel set aside %d free 2 MiB pages of the %d needed (%s raised from %d)", pool.Free, need, nrHugePath, old)
		}
		return giveBack, err
	}
	return restore, nil
}
