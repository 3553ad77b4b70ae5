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

// fill reads counts with read (a classifier's CountsInto) into the other
// buffer, read as classifier counts (the same layout: counts_unsafe.go),
// and returns it as dataplane counters: the buffer the engine returns is
// the one the classifier wrote, where a third buffer between the two
// held every rule's counts once more. The buffer is kept for the read
// after next unless far larger than the set (after a set shrank).
func (c *countBufs) fill(read func([]classifier.Count) []classifier.Count) []dataplane.Counter {
	c.k ^= 1
	b := asCounters(read(asCounts(c.buf[c.k][:0])))
	c.buf[c.k] = b
	if cap(b) > 2*len(b)+1024 {
		c.buf[c.k] = nil
	}
	return b
}
