package dv

import (
	"fmt"

	"github.com/scrubd/scrubd/swpath/pool"
)

// Arena locates the buffers of one swpath/pool node: the region the NIC
// registers as one memory region (VPP registers its whole buffer arena
// once, device.c rdma_dev_init), and the geometry that turns a buffer
// index into an offset. A worker's cache allocates only from its own
// node, so every buffer a worker posts lies in its node's arena.
type Arena struct {
	Mem      []byte
	Node     int
	Stride   int
	Headroom int
	BufSize  int
}

// ArenaOf returns node's arena in p.
func ArenaOf(p *pool.Pool, node int) (Arena, error) {
	mem := p.Region(node)
	if mem == nil {
		return Arena{}, fmt.Errorf("dv: pool has no arena on node %d (nodes %v)", node, p.Nodes())
	}
	return Arena{Mem: mem, Node: node, Stride: p.Stride(), Headroom: p.Headroom(), BufSize: p.BufSize()}, nil
}

// Offset returns the offset in Mem of buffer idx's data area.
func (a *Arena) Offset(idx uint32) int {
	return int(idx&(pool.MaxBuffersPerNode-1))*a.Stride + a.Headroom
}

// Frame returns the first n bytes of buffer idx's data area.
func (a *Arena) Frame(idx uint32, n uint32) []byte {
	off := a.Offset(idx)
	return a.Mem[off : off+int(min(n, uint32(a.BufSize)))]
}
