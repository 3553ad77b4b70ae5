package nicemu

import (
	"sync"

	"github.com/scrubd/scrubd/swpath/dv/prm"
)

// Memory is the emulated device's table of registered memory regions
// (ibv_reg_mr): lkey -> virtual address range -> bytes.
type Memory struct {
	mu  sync.RWMutex
	mrs []mr
}

type mr struct {
	lkey uint32
	base uint64
	mem  []byte
}

// Register adds mem under lkey (the driver's single arena MR, as VPP
// registers its whole buffer arena once).
func (m *Memory) Register(lkey uint32, mem []byte) {
	m.mu.Lock()
	m.mrs = append(m.mrs, mr{lkey: lkey, base: prm.Addr(mem), mem: mem})
	m.mu.Unlock()
}

// translate returns the n bytes at device address addr under lkey, or nil
// when they are not inside a region registered with that key (the device
// would complete with a local protection error).
func (m *Memory) translate(lkey uint32, addr uint64, n uint32) []byte {
	m.mu.RLock()
	defer m.mu.RUnlock()
	for i := range m.mrs {
		r := &m.mrs[i]
		if r.lkey != lkey || addr < r.base {
			continue
		}
		off := addr - r.base
		if off > uint64(len(r.mem)) || uint64(n) > uint64(len(r.mem))-off {
			return nil
		}
		return r.mem[off : off+uint64(n) : off+uint64(n)]
	}
	return nil
}
