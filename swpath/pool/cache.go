package pool

import (
	"errors"
	"sync/atomic"
)

// Counters are a worker's (or node's) buffer operations.
type Counters struct {
	Allocs         uint64 // buffers handed out
	Frees          uint64 // buffers taken back (local and cross-node)
	Refills        uint64 // batches moved from a node's shared part into a cache
	Spills         uint64 // batches moved from a cache (or cross-node stage) to a shared part
	CrossNodeFrees uint64 // frees of buffers owned by another node than the cache's
	EmptyFailures  uint64 // allocations refused because the node was exhausted
	BadFrees       uint64 // frees refused (invalid index, or double free in Debug)
}

func (a *Counters) add(b *Counters) {
	a.Allocs += b.Allocs
	a.Frees += b.Frees
	a.Refills += b.Refills
	a.Spills += b.Spills
	a.CrossNodeFrees += b.CrossNodeFrees
	a.EmptyFailures += b.EmptyFailures
	a.BadFrees += b.BadFrees
}

type published struct {
	allocs, frees, refills, spills, cross, empty, bad atomic.Uint64
	cached                                            atomic.Int64
	crossTo                                           []atomic.Uint64 // by owning node
}

type remoteStage struct {
	ix      []uint32 // cap = batch
	crossTo uint64
}

// Cache is one worker's private stock of buffers from one node. It is not
// safe for concurrent use: one goroutine (the queue's poller) owns it.
type Cache struct {
	// hot
	n       int
	allocLo int // Alloc's fast path needs n > allocLo: 0, or MaxInt in Debug
	freeLim int // Free's fast path needs n < freeLim: len(objs), or 0 in Debug
	objs    []uint32
	homeLo  uint32 // first index of the home node
	homeC   uint32 // buffers on the home node
	homeN   uint32 // home node id
	home    *node
	debug   bool
	batch   int
	p       *Pool
	// Counters on the hot path: Alloc counts nothing; allocations are
	// derived at publish time as in - out + localFrees - n.
	localFrees uint64 // frees of home buffers into the cache
	in, out    uint64 // buffers moved into / out of the cache by refill, spill, flush
	st         Counters

	remote []remoteStage // by node id; nil ix for the home node
	pub    published
	name   string
	closed bool
	_      [64]byte // keep the next cache's hot fields off this line
}

// Node is the node this cache allocates from.
func (c *Cache) Node() int { return c.home.id }

// Alloc returns a free buffer of the cache's node, or an *ExhaustedError
// (counted) when the node has none left. It never blocks.
//
// The body is kept within the inliner's budget (cost 80 with Go 1.26: check
// with -gcflags=-m=2): the fast path first, the slow path through a
// two-result assignment rather than "return c.allocSlow()", which costs 6
// more.
func (c *Cache) Alloc() (idx uint32, err error) {
	if c.n > c.allocLo {
		c.n--
		return c.objs[c.n], nil
	}
	idx, err = c.allocSlow()
	return
}

func (c *Cache) allocSlow() (uint32, error) {
	if c.n == 0 && !c.refill() {
		c.st.EmptyFailures++
		return 0, c.home.exhausted
	}
	c.n--
	idx := c.objs[c.n]
	if c.debug {
		c.home.markAllocated(idx)
	}
	return idx, nil
}

// AllocBatch fills dst with free buffers and returns how many it got; if
// fewer than len(dst), err is an *ExhaustedError (counted once).
func (c *Cache) AllocBatch(dst []uint32) (int, error) {
	got := 0
	for got < len(dst) {
		if c.n == 0 && !c.refill() {
			c.st.EmptyFailures++
			c.finishAlloc(dst[:got])
			return got, c.home.exhausted
		}
		k := min(c.n, len(dst)-got)
		copy(dst[got:got+k], c.objs[c.n-k:c.n])
		c.n -= k
		got += k
	}
	c.finishAlloc(dst)
	return got, nil
}

func (c *Cache) finishAlloc(ix []uint32) {
	if c.debug {
		for _, idx := range ix {
			c.home.markAllocated(idx)
		}
	}
}

// Free returns buffer idx. A buffer of another node goes back to that
// node's shared part (in batches, without a lock). An invalid index, or in
// Debug mode a buffer that is already free, is refused with a *FreeError
// and counted.
func (c *Cache) Free(idx uint32) error {
	// One unsigned compare checks "home node and in range".
	if idx-c.homeLo >= c.homeC || c.n >= c.freeLim {
		return c.freeSlow(idx)
	}
	c.objs[c.n] = idx
	c.n++
	c.localFrees++
	return nil
}

func (c *Cache) freeSlow(idx uint32) error {
	if idx>>LocalBits != c.homeN || idx&localMask >= c.homeC {
		return c.freeOther(idx)
	}
	if c.debug {
		if err := c.home.markFree(idx); err != nil {
			c.st.BadFrees++
			return err
		}
	}
	if c.n == len(c.objs) {
		c.spill()
	}
	c.objs[c.n] = idx
	c.n++
	c.localFrees++
	return nil
}

// FreeBatch frees every buffer in ix; it returns the first refusal, after
// freeing all the others.
func (c *Cache) FreeBatch(ix []uint32) error {
	var first error
	if !c.debug {
		// Fast path: home-node buffers while the cache has room.
		objs, n := c.objs, c.n
		i := 0
		for ; i < len(ix) && n < len(objs); i++ {
			idx := ix[i]
			if idx>>LocalBits != c.homeN || idx&localMask >= c.homeC {
				break
			}
			objs[n] = idx
			n++
		}
		c.localFrees += uint64(n - c.n)
		c.n = n
		ix = ix[i:]
	}
	for _, idx := range ix {
		if err := c.Free(idx); err != nil && first == nil {
			first = err
		}
	}
	return first
}

func (c *Cache) freeOther(idx uint32) error {
	nd := c.p.lookup(idx)
	if nd == nil {
		c.st.BadFrees++
		return &FreeError{Index: idx, Reason: "not a buffer of this pool"}
	}
	if c.debug {
		if err := nd.markFree(idx); err != nil {
			c.st.BadFrees++
			return err
		}
	}
	r := &c.remote[nd.id]
	r.ix = append(r.ix, idx) // cap is batch: never grows
	r.crossTo++
	c.st.CrossNodeFrees++
	if len(r.ix) == c.batch {
		nd.putBatch(r.ix)
		r.ix = r.ix[:0]
		c.st.Spills++
		c.Publish()
	}
	return nil
}

// refill moves one batch from the home node into the empty cache.
func (c *Cache) refill() bool {
	k := c.home.getBatch(c.objs[c.n:])
	if k == 0 {
		return false
	}
	c.n += k
	c.in += uint64(k)
	c.st.Refills++
	c.Publish()
	return true
}

// spill moves the top batch of the full cache to the home node.
func (c *Cache) spill() {
	c.home.putBatch(c.objs[c.n-c.batch : c.n])
	c.n -= c.batch
	c.out += uint64(c.batch)
	c.st.Spills++
	c.Publish()
}

// Publish makes the cache's counters visible to Pool.Snapshot. Refills and
// spills publish on their own; a poll loop that stays inside its cache
// should call Publish once per burst.
func (c *Cache) Publish() {
	c.sync()
	c.pub.allocs.Store(c.st.Allocs)
	c.pub.frees.Store(c.st.Frees)
	c.pub.refills.Store(c.st.Refills)
	c.pub.spills.Store(c.st.Spills)
	c.pub.cross.Store(c.st.CrossNodeFrees)
	c.pub.empty.Store(c.st.EmptyFailures)
	c.pub.bad.Store(c.st.BadFrees)
	c.pub.cached.Store(int64(c.n))
	for _, nd := range c.p.nodes {
		if r := &c.remote[nd.id]; r.crossTo != 0 {
			c.pub.crossTo[nd.id].Store(r.crossTo)
		}
	}
}

// sync derives the counters that the hot path does not keep.
func (c *Cache) sync() {
	c.st.Allocs = c.in - c.out + c.localFrees - uint64(c.n)
	c.st.Frees = c.localFrees + c.st.CrossNodeFrees
}

// Flush returns every cached and staged buffer to its node's shared part.
func (c *Cache) Flush() {
	for c.n > 0 {
		k := min(c.n, c.batch)
		c.home.putBatch(c.objs[c.n-k : c.n])
		c.n -= k
		c.out += uint64(k)
		c.st.Spills++
	}
	for _, nd := range c.p.nodes {
		if r := &c.remote[nd.id]; len(r.ix) > 0 {
			nd.putBatch(r.ix)
			r.ix = r.ix[:0]
			c.st.Spills++
		}
	}
	c.Publish()
}

// Close flushes the cache and removes it from the pool; its counters stay
// in the node totals of Snapshot.
func (c *Cache) Close() error {
	if c.closed {
		return errors.New("pool: cache " + c.name + " closed twice")
	}
	c.Flush()
	c.closed = true
	p := c.p
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.caches, c)
	c.sync()
	r := p.retired[c.home.id]
	if r == nil {
		r = &Counters{}
		p.retired[c.home.id] = r
	}
	r.add(&c.st)
	for id := range c.remote {
		if x := c.remote[id].crossTo; x != 0 {
			p.retiredIn(id, x)
		}
	}
	return nil
}

// Debug bookkeeping: bit set = free.

func (nd *node) markAllocated(idx uint32) {
	i := idx & localMask
	nd.freeBits[i/64].And(^(uint64(1) << (i % 64)))
}

func (nd *node) markFree(idx uint32) error {
	i := idx & localMask
	m := uint64(1) << (i % 64)
	if old := nd.freeBits[i/64].Or(m); old&m != 0 {
		return &FreeError{Index: idx, Reason: "double free: buffer is already free"}
	}
	return nil
}
