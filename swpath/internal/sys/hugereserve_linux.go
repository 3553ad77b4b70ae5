package sys

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
)

// nrHugePages is the kernel's count of persistent huge pages of the
// default size (Documentation/admin-guide/mm/hugetlbpage.rst).
const nrHugePages = "/proc/sys/vm/nr_hugepages"

// ErrFewHugePages: the kernel set aside fewer free huge pages than
// ReserveHugePages asked for (memory too fragmented for more).
var ErrFewHugePages = errors.New("sys: the kernel set aside too few huge pages")

// ReserveHugePages makes sure at least free pages of HugePageSize are
// free in the kernel's pool (HugePages), raising nr_hugepages by what is
// missing; it needs root. release puts nr_hugepages back as it was; it
// may be called more than once, from any goroutine. Where the kernel
// sets aside fewer pages than asked, ReserveHugePages puts the count back
// and returns an error that wraps ErrFewHugePages; where it cannot write
// the count, one that wraps the write's error (os.ErrPermission, for
// one); where the kernel has no huge pages (no nr_hugepages), one that
// wraps os.ErrNotExist.
func ReserveHugePages(free int) (release func(), err error) {
	release = func() {}
	// The count first: a kernel without hugetlb has no such file (an
	// error that wraps os.ErrNotExist), nor the lines HugePages reads.
	raw, err := os.ReadFile(nrHugePages)
	if err != nil {
		return release, err
	}
	pool, err := HugePages()
	if err != nil || pool.Free >= free {
		return release, err
	}
	old, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	if err != nil {
		return release, fmt.Errorf("%s: %q is not a page count", nrHugePages, strings.TrimSpace(string(raw)))
	}
	surp0 := pool.Surplus
	var once sync.Once
	restore := func() {
		once.Do(func() {
			set := func(n int) { _ = os.WriteFile(nrHugePages, []byte(strconv.Itoa(n)), 0) }
			set(old)
			// Pages still in use when nr_hugepages is lowered stay as
			// surplus pages (HugePages_Surp), and one run of aclbench
			// left 216 of them free after their user had gone: raising
			// the count by that many makes them the pool's again, and
			// lowering it frees them.
			if p, err := HugePages(); err == nil && p.Surplus > surp0 {
				set(old + p.Surplus - surp0)
				set(old)
			}
		})
	}
	if err := os.WriteFile(nrHugePages, []byte(strconv.Itoa(old+free-pool.Free)), 0); err != nil {
		return release, fmt.Errorf("%s: %w", nrHugePages, err)
	}
	if pool, err = HugePages(); err != nil || pool.Free < free {
		restore()
		if err == nil {
			err = fmt.Errorf("%w: %d free of the %d asked for (%s raised from %d)", ErrFewHugePages, pool.Free, free, nrHugePages, old)
		}
		return release, err
	}
	return restore, nil
}
