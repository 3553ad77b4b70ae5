//go:build race

package prm

import "sync/atomic"

// Under the race detector the doorbell stores are atomic, so the
// detector sees the ordering between the driver and the emulator it
// checks; mmio.go has the plain stores every other build uses.

func store32(p *uint32, v uint32) { atomic.StoreUint32(p, v) }
func store64(p *uint64, v uint64) { atomic.StoreUint64(p, v) }
