// Package pool provides packet buffers for the software path: one arena
// per NUMA node, mmap'd outside the Go heap, cut into fixed-size buffers
// named by a 32-bit index, with a private cache per worker in front of a
// lock-free shared part per node.
//
// It exists so that the two failures in the source material cannot happen
// here: one buffer pool behind one lock shared by every worker (VPP at 62
// workers fell from 350 to 148 Mpps; one pool per node gave 450), and
// buffers taken from the device's node rather than the polling CPU's node
// (2.5x slower in the netdev thread).
//
// # Layout
//
// Each node's arena is one contiguous mapping: 2 MiB hugetlb pages when
// reserved (HugeAuto tries them first), normal pages with
// MADV_HUGEPAGE otherwise; which one was used is reported in Stats and
// Arena. On a live topology the arena is bound to its node with mbind
// before the first touch, then pre-faulted. Buffer i of node n starts at
// base(n) + i*Stride; Headroom bytes precede the BufSize data bytes. An
// index is node<<LocalBits | i, so the owner of any buffer is known from
// the index alone. Addresses never change while the Pool is open, so each
// arena can be registered once for DMA (Arena gives base and length).
// While a buffer is free the pool may keep a batch of free-buffer indices
// in its first 4*(Batch+2) bytes, so a freshly allocated buffer's contents
// are undefined, and writing to a buffer after freeing it corrupts the
// free list (detected and counted as FreeListCorrupt, never followed).
//
// # Shared part
//
// Per node, free buffers travel in batches (Config.Batch, default 64)
// between caches and the node's shared part, a lock-free Treiber stack of
// batches. A batch is written into the memory of one of its own free
// buffers, so the stack needs no storage of its own and pushing or popping
// a whole batch is a single CAS on one 64-bit head word (32-bit ABA tag,
// 32-bit buffer number). There is no lock that a descheduled worker could
// hold while the others spin, which matters in Go, where any goroutine can
// be preempted, and each node has its own head, so workers of different
// nodes never touch the same line. BenchmarkSharedPath measures this head
// against VPP's one spin-locked free list; BenchmarkScaling runs both under
// a whole worker pipeline.
//
// # Caches
//
// A Cache belongs to one worker goroutine and is not safe for concurrent
// use. Alloc/Free (and AllocBatch/FreeBatch) touch only the cache until it
// runs empty or full, then move one batch. Freeing a buffer of another
// node stages it per node and returns full batches to the owning node's
// stacks: no global lock anywhere. The node a cache allocates from is
// chosen per receive queue by Config.Placement: the polling worker's node
// (WorkerNode, the default) or the NIC's node (DeviceNode, VPP's
// behaviour, kept for comparison).
//
// Exhaustion is an *ExhaustedError (errors.Is ErrExhausted) returned to
// the caller and counted; nothing blocks or panics. Counters are plain
// fields on the hot path, published to Stats at every refill and spill and
// whenever the worker calls Publish (once per poll burst is plenty).
//
// With Config.Debug every Alloc and Free also flips a per-buffer bit:
// a double free is refused with a *FreeError, and Outstanding lists the
// buffers allocated and never freed (leaks). Off by default; the hot path
// then has one predictable branch.
//
// # Example
//
//	topo, _ := numa.ReadLive()
//	p, err := pool.New(pool.Config{Topology: topo, BuffersPerNode: 65536})
//	if err != nil { ... }
//	defer p.Close()
//	devNode, _ := topo.NetdevNode("p0")
//	c, err := p.NewCache(pool.Queue{Name: "p0/rx0", CPU: 3, DeviceNode: devNode})
//	if err != nil { ... }
//	defer c.Close()
//	var burst [32]uint32
//	n, err := c.AllocBatch(burst[:]) // err is an *ExhaustedError if n < 32
//	for _, idx := range burst[:n] {
//		addr := p.Addr(idx) // DMA address of the data area
//		buf := p.Bytes(idx) // the same bytes, as a slice
//		_, _ = addr, buf
//	}
//	_ = c.FreeBatch(burst[:n])
//	c.Publish()
//
// # Remote-node cost
//
// On a one-node machine every buffer is local, so the cost of touching
// remote memory cannot be measured here; the benchmarks only measure the
// allocator. On a multi-node host or DPU, `scrubd bench` measures it by
// building a Pool on the live topology, pinning a worker to node A, and
// running the same alloc/touch/free loop with Placement=WorkerNode (arena
// on A) and Placement=DeviceNode for a device on node B (arena on B),
// reporting ns per buffer and the ratio, with NodeOfMemory confirming
// where the arena pages really are.
package pool
