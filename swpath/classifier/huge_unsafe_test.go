//go:build linux

package classifier

import (
	"bufio"
	"errors"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/scrubd/scrubd/internal/testenv"
	"github.com/scrubd/scrubd/swpath/internal/sys"
)

// TestHugeAlloc: an array of blocks past hugeMin starts on a huge page
// and, once written and settled, is backed by huge pages, as the
// kernel's account of the mapping says (AnonHugePages in
// /proc/self/smaps); memory that small pages back is backed by huge
// ones once settled; the tight blocks of a set's two trees are one such
// array, tree 1's after tree 0's.
func TestHugeAlloc(t *testing.T) {
	needTHP(t)
	n := 3*sys.HugePageSize/int(unsafe.Sizeof(tblock{})) + 5
	a := hugeAlloc[tblock](n)
	if len(a) != n || uintptr(unsafe.Pointer(&a[0]))%sys.HugePageSize != 0 {
		t.Fatalf("%d blocks at %p: want %d on a huge page", len(a), &a[0], n)
	}
	for i := range a {
		a[i].x[i%vecBlock] = uint32(i)
	}
	hugeSettle(a)
	if huge := anonHuge(t, uintptr(unsafe.Pointer(&a[0]))); huge < 3*sys.HugePageSize {
		unseen(t, unsafe.Slice((*byte)(unsafe.Pointer(&a[0])), 3*sys.HugePageSize), "%d blocks (%d bytes): %d bytes of huge pages, want the three whole ones", n, n*int(unsafe.Sizeof(tblock{})), huge)
	}
	for i := range a {
		if a[i].x[i%vecBlock] != uint32(i) {
			t.Fatalf("block %d lost its word", i)
		}
	}
	// hugeSettle alone, on memory that small pages back: mapped
	// without advice and written, as Go's heap memory that hugeAlloc
	// reuses may be.
	m, err := sys.MapAnon(4*sys.HugePageSize, false)
	if err != nil {
		t.Fatal(err)
	}
	defer sys.Unmap(m)
	off := int(-uintptr(unsafe.Pointer(&m[0])) & (sys.HugePageSize - 1))
	b := unsafe.Slice((*tblock)(unsafe.Pointer(&m[off])), 2*sys.HugePageSize/int(unsafe.Sizeof(tblock{})))
	for i := range b {
		b[i].s[0] = uint32(i)
	}
	before := anonHuge(t, uintptr(unsafe.Pointer(&b[0])))
	hugeSettle(b)
	if after := anonHuge(t, uintptr(unsafe.Pointer(&b[0]))); after < 2*sys.HugePageSize {
		unseen(t, m[off:off+2*sys.HugePageSize], "small pages settled: %d bytes of huge pages before, %d after, want two whole ones", before, after)
	}
	for i := range b {
		if b[i].s[0] != uint32(i) {
			t.Fatalf("settled block %d lost its word", i)
		}
	}
	// Both trees' tight blocks in one array.
	var cblk [2][]cblock
	cblk[0], cblk[1] = make([]cblock, 3), make([]cblock, 2)
	tb, _, _, ok := tblocksOf(cblk, nil)
	if !ok || len(tb[0]) != 3 || cap(tb[0]) != 3 || len(tb[1]) != 2 || uintptr(unsafe.Pointer(&tb[0][0]))+3*unsafe.Sizeof(tblock{}) != uintptr(unsafe.Pointer(&tb[1][0])) {
		t.Fatalf("tight blocks %d (cap %d) and %d, ok %v: not one array, tree 1's after tree 0's", len(tb[0]), cap(tb[0]), len(tb[1]), ok)
	}
}

// needTHP skips the test where the kernel gives no transparent huge
// pages, or fails it under CI=true (testenv.Missing), whose machines
// have them.
func needTHP(t *testing.T) {
	t.Helper()
	mode, err := os.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled")
	if err == nil && !strings.Contains(string(mode), "[never]") {
		return
	}
	testenv.Missing(t, "no transparent huge pages here (%q, %v)", mode, err)
}

// unseen fails t for huge pages of region that the kernel's account does
// not show. It skips t in the emulated pass (GOARCH other than amd64,
// under qemu-user), whose /proc/self/smaps shows none: the amd64 pass
// runs it against the kernel. And it skips t where the kernel has no
// free huge page now, as a collapse of region asked again says (EAGAIN
// or ENOMEM: memory too fragmented), which is the machine's state, not
// the code's; a collapse that succeeds then fails t, as the code should
// have asked for it.
func unseen(t *testing.T, region []byte, format string, args ...any) {
	t.Helper()
	if runtime.GOARCH != "amd64" {
		testenv.MissingUnderEmulation(t, "qemu-user shows no huge pages: "+format, args...)
	}
	if err := sys.CollapseHuge(region); errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.ENOMEM) {
		t.Skipf("no free huge page now (%v): "+format, append([]any{err}, args...)...)
	}
	t.Fatalf(format, args...)
}

// anonHuge returns the bytes of huge pages backing the mapping at addr
// (AnonHugePages of its entry in /proc/self/smaps).
func anonHuge(t *testing.T, addr uintptr) int {
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		// A mapping's line starts "start-end" in hex; its keys follow.
		if f := strings.Fields(line); len(f) > 0 {
			if lo, hi, ok := strings.Cut(f[0], "-"); ok {
				l, err1 := strconv.ParseUint(lo, 16, 64)
				h, err2 := strconv.ParseUint(hi, 16, 64)
				if err1 == nil && err2 == nil {
					in = uint64(addr) >= l && uint64(addr) < h
					continue
				}
			}
		}
		if v, ok := strings.CutPrefix(line, "AnonHugePages:"); ok && in {
			kb, err := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
			if err != nil {
				t.Fatalf("smaps: %q: %v", line, err)
			}
			return kb << 10
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	t.Fatalf("no mapping holds %#x in /proc/self/smaps", addr)
	return 0
}
