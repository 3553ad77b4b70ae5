//go:build linux

package classifier

import (
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/scrubd/scrubd/swpath/rule"
)

// guardedFields returns n zero rule.Fields that end where an
// inaccessible page begins: a stub that reads one byte past them faults.
// The mapping is unmapped when the test ends.
func guardedFields(t *testing.T, n int) []rule.Fields {
	t.Helper()
	pg := unix.Getpagesize()
	size := n * int(unsafe.Sizeof(rule.Fields{}))
	data := (size + pg - 1) / pg * pg
	m, err := unix.Mmap(-1, 0, data+pg, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		t.Fatalf("mmap: %v", err)
	}
	t.Cleanup(func() { unix.Munmap(m) })
	if err := unix.Mprotect(m[data:], unix.PROT_NONE); err != nil {
		t.Fatalf("mprotect: %v", err)
	}
	return unsafe.Slice((*rule.Fields)(unsafe.Pointer(&m[data-size])), n)
}
