//go:build !race

package prm

import "github.com/scrubd/scrubd/swpath/barrier"

// Doorbell records and the BlueFlame register take plain stores, as
// rdma-core writes them (util/mmio.h mmio_write64_be; *db = htobe32(v)):
// atomic.StoreUint32/64 would be a locked XCHG on amd64. The ordering the
// device needs comes from the barriers the callers issue around them.
// Under the race detector (mmio_race.go) they are atomic stores instead,
// so the detector sees the happens-before edge the emulator relies on;
// assembly stores are invisible to it.

func store32(p *uint32, v uint32) { barrier.MMIOWrite32(p, v) }
func store64(p *uint64, v uint64) { barrier.MMIOWrite64(p, v) }
