//go:build linux

package main

import "github.com/scrubd/scrubd/swpath/internal/sys"

// rte_acl's tables come from DPDK's EAL memory, which production
// deployments back with huge pages; at 100k rules they take 228 MiB, and
// on 4 KiB pages (--no-huge) rte_acl's lookups pay for TLB misses that
// it would not have. reserveHuge sets aside enough 2 MiB pages for the
// EAL's memory (-m) through the kernel's pool, and dpdk-test-acl then
// runs with --in-memory (its pages from that pool, with no hugetlbfs
// files and no shared configuration left behind).

// reserveHuge makes sure mb MiB of 2 MiB pages (and a margin for the EAL's
// own) are free in the kernel's pool (sys.ReserveHugePages, which raises
// nr_hugepages where they are not). giveBack puts nr_hugepages back as it
// was; it may be called more than once, from any goroutine.
func reserveHuge(mb int) (giveBack func(), err error) {
	return sys.ReserveHugePages(mb<<20/sys.HugePageSize + 16)
}
