//go:build race || !(amd64 || arm64 || loong64 || mips64 || mips64le || ppc64 || ppc64le || riscv64 || s390x)

package classifier

import "sync/atomic"

// add adds to the counts atomically: under the race detector, which
// would report counter_plain.go's plain stores beside Snapshot's atomic
// loads, and on 32-bit processors, where a plain 64-bit store is two.
func (c *counter) add(packets, bytes uint64) {
	atomic.AddUint64(&c.packets, packets)
	atomic.AddUint64(&c.bytes, bytes)
}

// add adds to the statistic atomically.
func (s *stat) add(n uint64) { atomic.AddUint64(&s.n, n) }
