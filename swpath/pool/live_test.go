package pool

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/scrubd/scrubd/internal/testenv"
	"github.com/scrubd/scrubd/swpath/internal/sys"
	"github.com/scrubd/scrubd/swpath/numa"
)

// kernelPageSize returns the KernelPageSize (bytes) of the mapping that
// contains addr, from /proc/self/smaps: the kernel's own account of the
// page size behind the arena.
func kernelPageSize(t *testing.T, addr uintptr) int {
	t.Helper()
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	in := false
	for sc.Scan() {
		line := sc.Text()
		if f := strings.Fields(line); len(f) > 0 && strings.Contains(f[0], "-") && !strings.HasSuffix(f[0], ":") {
			lo, hi, _ := strings.Cut(f[0], "-")
			l, err1 := strconv.ParseUint(lo, 16, 64)
			h, err2 := strconv.ParseUint(hi, 16, 64)
			in = err1 == nil && err2 == nil && uint64(addr) >= l && uint64(addr) < h
			continue
		}
		if v, ok := strings.CutPrefix(line, "KernelPageSize:"); ok && in {
			kb, err := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			if err != nil {
				t.Fatalf("smaps: %q", line)
			}
			return kb << 10
		}
	}
	t.Fatalf("no smaps mapping contains %#x", addr)
	return 0
}

// TestArenaPagesAsReported checks the reported page kind against the
// kernel (smaps) for whatever this machine gives: 2 MiB hugetlb pages if
// any are reserved, normal pages otherwise.
func TestArenaPagesAsReported(t *testing.T) {
	p := newPool(t, Config{Topology: fakeTopo(t, "one"), BuffersPerNode: 2048})
	ar, _ := p.Arena(0)
	got := kernelPageSize(t, ar.Base)
	want := os.Getpagesize()
	if ar.HugeTLB {
		want = 2 << 20
	}
	t.Logf("arena %#x+%d: HugeTLB=%v, kernel page size %d", ar.Base, ar.Len, ar.HugeTLB, got)
	if got != want {
		t.Fatalf("arena reported HugeTLB=%v but the kernel maps it with %d-byte pages", ar.HugeTLB, got)
	}
	if ar.Len%(2<<20) != 0 || ar.Len < 2048*p.Stride() {
		t.Fatalf("arena length %d", ar.Len)
	}
	if len(p.Region(0)) != ar.Len {
		t.Fatalf("Region length %d != Arena.Len %d", len(p.Region(0)), ar.Len)
	}
}

// TestHugeTLB reserves two 2 MiB pages for the test (root only), builds a
// pool with HugeRequire, and checks the kernel backs it with huge pages.
func TestHugeTLB(t *testing.T) {
	const knob = "/proc/sys/vm/nr_hugepages"
	nr := func() string {
		raw, _ := os.ReadFile(knob)
		return strings.TrimSpace(string(raw))
	}
	orig := nr()
	release, err := sys.ReserveHugePages(2)
	switch {
	case errors.Is(err, os.ErrNotExist):
		testenv.Missing(t, "no hugetlb support: %v", err)
	case errors.Is(err, os.ErrPermission) || errors.Is(err, syscall.EROFS) || errors.Is(err, syscall.EACCES):
		testenv.Missing(t, "cannot reserve huge pages (needs root and a writable /proc/sys/vm/nr_hugepages): %v", err)
	case errors.Is(err, sys.ErrFewHugePages):
		testenv.Missing(t, "memory too fragmented for two huge pages: %v", err)
	case err != nil:
		t.Fatal(err)
	}
	defer release()
	p, err := New(Config{Topology: fakeTopo(t, "one"), BuffersPerNode: 1000, HugePages: HugeRequire})
	if errors.Is(err, syscall.EINVAL) {
		// The arena length is always a 2 MiB multiple (checked in
		// TestArenaPagesAsReported), so EINVAL means this mmap has no
		// 2 MiB hugetlb size: qemu-user rejects MAP_HUGETLB, and arm64
		// kernels with 64 KiB pages have no 2 MiB huge page.
		testenv.MissingUnderEmulation(t, "mmap does not offer 2 MiB hugetlb pages here: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ar, _ := p.Arena(0)
	if !ar.HugeTLB {
		t.Fatal("HugeRequire pool not on hugetlb")
	}
	if got := kernelPageSize(t, ar.Base); got != 2<<20 {
		t.Fatalf("kernel page size %d, want 2 MiB", got)
	}
	c := newCache(t, p, "a", 0)
	idx, _ := c.Alloc()
	p.Bytes(idx)[0] = 1
	c.Free(idx)
	c.Close()
	// With the reservation gone, HugeRequire must fail, HugeAuto fall back:
	// where no huge page is free. nr_hugepages 0 is not enough to say so:
	// pages still in use when it was lowered stay as surplus pages
	// (HugePages_Surp), and can be free.
	release()
	if now := nr(); now != orig {
		t.Errorf("%s is %s after the release, was %s", knob, now, orig)
	}
	if hp, err := sys.HugePages(); err != nil {
		t.Fatal(err)
	} else if hp.Free == 0 {
		if q, err := New(Config{Topology: fakeTopo(t, "one"), BuffersPerNode: 1000, HugePages: HugeRequire}); err == nil {
			q.Close()
			t.Fatal("HugeRequire succeeded with no huge pages reserved")
		}
	}
}

// TestLiveBind builds a pool on the live topology: each arena is bound to
// its node and the kernel reports its pages there.
func TestLiveBind(t *testing.T) {
	topo, err := numa.ReadLive()
	if err != nil {
		t.Fatal(err)
	}
	p, err := New(Config{Topology: topo, BuffersPerNode: 1024, Bind: BindRequire})
	if errors.Is(err, syscall.ENOSYS) {
		testenv.MissingUnderEmulation(t, "mbind not implemented here (kernel without NUMA or qemu-user): %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for _, node := range p.Nodes() {
		ar, _ := p.Arena(node)
		if !ar.Bound {
			t.Errorf("node %d arena not bound", node)
		}
		reg := p.Region(node)
		for _, off := range []int{0, len(reg) / 2, len(reg) - 1} {
			got, err := numa.NodeOfMemory(reg[off:])
			if err != nil {
				t.Fatal(err)
			}
			if got != node {
				t.Errorf("node %d arena byte %d is on node %d", node, off, got)
			}
		}
		mode, nodes, err := numa.PolicyOf(reg)
		if err != nil || mode != 2 || fmt.Sprint(nodes) != fmt.Sprint([]int{node}) {
			t.Errorf("node %d arena policy %d %v %v, want MPOL_BIND [%d]", node, mode, nodes, err, node)
		}
	}
}
