package sys

import (
	"errors"
	"os"
	"strconv"
	"sync/atomic"
	"testing"

	"golang.org/x/sys/unix"
)

func TestMapAnonAndUint32s(t *testing.T) {
	b, err := MapAnon(1<<20, false)
	if err != nil {
		t.Fatal(err)
	}
	defer Unmap(b)
	if Addr(b)%uintptr(os.Getpagesize()) != 0 {
		t.Fatalf("mapping at %#x not page aligned", Addr(b))
	}
	w := Uint32s(b)
	if len(w) != len(b)/4 {
		t.Fatalf("Uint32s len %d, want %d", len(w), len(b)/4)
	}
	atomic.StoreUint32(&w[3], 0x04030201)
	if b[12] != 1 || b[15] != 4 {
		t.Fatalf("word 3 not at bytes 12..15 (little endian): % x", b[12:16])
	}
	if Uint32s(b[1:9]) != nil || Uint32s(nil) != nil {
		t.Fatal("Uint32s accepted misaligned or empty memory")
	}
	if Addr(nil) != 0 {
		t.Fatal("Addr(nil) != 0")
	}
}

func TestBadArguments(t *testing.T) {
	b, err := MapAnon(4096, false)
	if err != nil {
		t.Fatal(err)
	}
	defer Unmap(b)
	for name, err := range map[string]error{
		"mbind empty":         Mbind(nil, MPOL_BIND, []int{0}, 0),
		"mbind node -1":       Mbind(b, MPOL_BIND, []int{-1}, 0),
		"mbind node MaxNodes": Mbind(b, MPOL_BIND, []int{MaxNodes}, 0),
		"affinity cpu -1":     SetAffinity([]int{-1}),
		"process cpu -1":      SetProcessAffinity([]int{-1}),
	} {
		if !errors.Is(err, unix.EINVAL) {
			t.Errorf("%s: err = %v, want EINVAL", name, err)
		}
	}
	if _, err := NodeOfPage(nil); !errors.Is(err, unix.EINVAL) {
		t.Errorf("NodeOfPage(nil) = %v", err)
	}
	if _, _, err := PolicyOf(nil); !errors.Is(err, unix.EINVAL) {
		t.Errorf("PolicyOf(nil) = %v", err)
	}
}

// TestSetProcessAffinity binds the process to one of its CPUs and reads
// every thread's mask back from the kernel, then puts the masks back.
func TestSetProcessAffinity(t *testing.T) {
	masks := map[int]unix.CPUSet{}
	tids := func() []int {
		ents, err := os.ReadDir("/proc/self/task")
		if err != nil {
			t.Fatal(err)
		}
		var out []int
		for _, e := range ents {
			tid, _ := strconv.Atoi(e.Name())
			out = append(out, tid)
		}
		return out
	}
	for _, tid := range tids() {
		var set unix.CPUSet
		if err := unix.SchedGetaffinity(tid, &set); err != nil {
			t.Fatal(err)
		}
		masks[tid] = set
	}
	defer func() {
		for tid, set := range masks {
			_ = unix.SchedSetaffinity(tid, &set)
		}
	}()
	cpus, err := Affinity()
	if err != nil || len(cpus) == 0 {
		t.Fatalf("affinity %v, %v", cpus, err)
	}
	cpu := cpus[len(cpus)-1]
	if err := SetProcessAffinity([]int{cpu}); err != nil {
		t.Fatal(err)
	}
	for _, tid := range tids() {
		var set unix.CPUSet
		if err := unix.SchedGetaffinity(tid, &set); err != nil {
			continue // exited
		}
		if set.Count() != 1 || !set.IsSet(cpu) {
			t.Errorf("thread %d: %d CPUs in its mask (CPU %d in it: %v), want only CPU %d", tid, set.Count(), cpu, set.IsSet(cpu), cpu)
		}
	}
}
