//go:build !race && (amd64 || arm64 || loong64 || mips64 || mips64le || ppc64 || ppc64le || riscv64 || s390x)

package classifier

// add adds to the counts with plain loads and stores: only the counter's
// worker adds to it, and an aligned 64-bit store does not tear on these
// processors, so a reader's atomic load sees the count before or after an
// add, never a mix (the Go memory model's rule for races on a location no
// larger than a machine word). counter_atomic.go is the atomic version
// the race detector and 32-bit processors build.
func (c *counter) add(packets, bytes uint64) {
	c.packets += packets
	c.bytes += bytes
}

// add adds to the statistic as counter.add does.
func (s *stat) add(n uint64) { s.n += n }
