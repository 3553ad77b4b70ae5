//go:build !linux

package sys

import (
	"errors"
	"time"
)

// ErrNotSupported is returned on systems without these calls.
var ErrNotSupported = errors.New("sys: not supported on this OS")

// ErrFewHugePages is Linux's; ReserveHugePages returns ErrNotSupported
// here.
var ErrFewHugePages = errors.New("sys: the kernel set aside too few huge pages")

// Memory policy constants, same values as Linux, so callers build.
const (
	MPOL_DEFAULT    = 0
	MPOL_BIND       = 2
	MPOL_INTERLEAVE = 3
	MPOL_MF_STRICT  = 1
	MPOL_MF_MOVE    = 2
	MPOL_F_NODE     = 1
	MPOL_F_ADDR     = 2
	MaxNodes        = 1024
	HugePageSize    = 2 << 20
)

func MapAnon(length int, huge bool) ([]byte, error)          { return nil, ErrNotSupported }
func HugePages() (HugePool, error)                           { return HugePool{}, ErrNotSupported }
func ReserveHugePages(free int) (func(), error)              { return func() {}, ErrNotSupported }
func Unmap(b []byte) error                                   { return ErrNotSupported }
func AdviseHuge(b []byte) error                              { return ErrNotSupported }
func CollapseHuge(b []byte) error                            { return ErrNotSupported }
func SetAffinity(cpus []int) error                           { return ErrNotSupported }
func SetProcessAffinity(cpus []int) error                    { return ErrNotSupported }
func Affinity() ([]int, error)                               { return nil, ErrNotSupported }
func Gettid() int                                            { return 0 }
func Mbind(b []byte, mode int, nodes []int, flags int) error { return ErrNotSupported }
func NodeOfPage(b []byte) (int, error)                       { return 0, ErrNotSupported }
func PolicyOf(b []byte) (mode int, nodes []int, err error)   { return 0, nil, ErrNotSupported }
func Addr(b []byte) uintptr                                  { return 0 }
func Uint32s(b []byte) []uint32                              { return nil }
func ThreadCPUTime() time.Duration                           { return 0 }
func Getcpu() (cpu, node int, err error)                     { return 0, 0, ErrNotSupported }
