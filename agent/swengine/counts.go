package swengine

import (
	"github.com/scrubd/scrubd/agent/dataplane"
	"github.com/scrubd/scrubd/swpath/classifier"
)

// countBufs are an engine's two per-rule counter buffers, written in turn
// by its reads (dataplane.SWStats.Counts): the slice one read returns holds
// until the second read after it, and a read of a set of n rules allocates
// nothing once both buffers have room for n.
type countBufs struct {
	buf [2][]dataplane.Counter
	k   int
}

// next returns the other buffer, n long, for this read to fill. A buffer
// far larger than the set (after a set shrank) is given back to the
// collector.
func (c *countBufs) next(n int) []dataplane.Counter {
	c.k ^= 1
	b := c.buf[c.k]
	if cap(b) < n || cap(b) > 2*n+1024 {
		b = make([]dataplane.Counter, n)
	}
	b = b[:n]
	c.buf[c.k] = b
	return b
}

// keepRaw returns b to be passed to the next classifier.CountsInto, or nil
// when b is far larger than the set it holds (the set shrank): the next
// read allocates one of the set's size.
func keepRaw(b []classifier.Count) []classifier.Count {
	if cap(b) > 2*len(b)+1024 {
		return nil
	}
	return b
}
