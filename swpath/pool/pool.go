package pool

import (
	"errors"
	"fmt"
	"math"
	"os"
	"sync"
	"sync/atomic"

	"github.com/scrubd/scrubd/swpath/internal/sys"
	"github.com/scrubd/scrubd/swpath/numa"
)

// Index layout: the owning node in the top NodeBits, the buffer within
// that node's arena in the low LocalBits.
const (
	LocalBits         = 26
	NodeBits          = 32 - LocalBits
	MaxNodes          = 1 << NodeBits
	MaxBuffersPerNode = 1 << LocalBits
	localMask         = MaxBuffersPerNode - 1
)

// Defaults for zero Config fields.
const (
	DefaultBuffersPerNode = 16384
	DefaultBufSize        = 2048
	DefaultHeadroom       = 128
	DefaultCacheSize      = 512
	DefaultBatch          = 64
)

// Placement chooses the node a receive queue's cache allocates from.
type Placement int

const (
	// WorkerNode: the node of the CPU that polls the queue (default).
	WorkerNode Placement = iota
	// DeviceNode: the node of the NIC, as VPP does; kept for comparison.
	DeviceNode
)

// HugePages chooses the arena page size.
type HugePages int

const (
	HugeAuto    HugePages = iota // 2 MiB hugetlb if reserved, else normal pages
	HugeOff                      // normal pages (with MADV_HUGEPAGE)
	HugeRequire                  // 2 MiB hugetlb or New fails
)

// BindMode chooses whether arenas are mbind'ed to their node.
type BindMode int

const (
	// BindAuto binds when the topology was read from the live /sys, and
	// skips binding for a fake topology (tests).
	BindAuto BindMode = iota
	BindOff
	BindRequire
)

// Config configures a Pool. Zero fields take the defaults.
type Config struct {
	Topology       *numa.Topology // nil: numa.ReadLive()
	BuffersPerNode int            // default 16384
	BufSize        int            // data bytes per buffer, default 2048
	Headroom       int            // bytes before the data, default 128
	CacheSize      int            // per-worker cache, default 512
	Batch          int            // refill/spill unit, default 64
	Placement      Placement
	HugePages      HugePages
	Bind           BindMode
	Debug          bool // double-free and leak detection
}

// ErrExhausted is matched (errors.Is) by every *ExhaustedError.
var ErrExhausted = errors.New("pool: no free buffer")

// ExhaustedError is returned when a node has no free buffer for a cache.
type ExhaustedError struct {
	Node    int
	Buffers int
}

func (e *ExhaustedError) Error() string {
	return fmt.Sprintf("pool: node %d exhausted: all %d buffers allocated or cached", e.Node, e.Buffers)
}

// Is reports whether target is ErrExhausted.
func (e *ExhaustedError) Is(target error) bool { return target == ErrExhausted }

// FreeError is returned for a Free that was refused: an index outside
// every arena, or (Debug) a buffer already free.
type FreeError struct {
	Index  uint32
	Reason string
}

func (e *FreeError) Error() string {
	return fmt.Sprintf("pool: free of index %#x (node %d, buffer %d): %s", e.Index, e.Index>>LocalBits, e.Index&localMask, e.Reason)
}

// ConfigError names an invalid Config field.
type ConfigError struct {
	Field string
	Value any
	Why   string
}

func (e *ConfigError) Error() string {
	return fmt.Sprintf("pool: Config.%s = %v: %s", e.Field, e.Value, e.Why)
}

// Pool is a set of per-node buffer arenas. Its methods are safe for
// concurrent use; Caches are not.
type Pool struct {
	cfg    Config
	topo   *numa.Topology
	stride int
	nodes  []*node // topology order
	byID   [MaxNodes]*node
	first  *node

	mu           sync.Mutex
	caches       map[*Cache]struct{}
	retired      map[int]*Counters // closed caches' totals by home node
	retiredCross map[int]uint64    // closed caches' cross-node frees by owning node
	closed       bool
}

// node is one NUMA node's arena and its shared free stack.
type node struct {
	free stack // batches of free buffers

	id    int
	mem   []byte
	words []uint32 // mem as 32-bit words
	wps   int      // words per stride
	base  uintptr
	n     uint32 // buffers
	huge  bool
	bound bool
	batch int

	freeBits  []atomic.Uint64 // Debug: bit set = buffer is free
	exhausted *ExhaustedError
	corrupt   atomic.Uint64 // free-list links found overwritten
}

// stack is a Treiber stack of batches of free buffers. A batch is stored
// in the memory of its own first buffer (the carrier), which is free:
// word 0 links to the next batch's carrier (local index + 1; 0 ends the
// stack), word 1 is the count, words 2.. the indices. head = tag<<32 |
// (carrier+1); the tag changes on every successful operation, so a pop
// that read a stale link cannot succeed (ABA). Pushing or popping a whole
// batch is one CAS on head.
type stack struct {
	_    [128]byte
	head atomic.Uint64
	_    [120]byte
}

// putBatch returns ix (1..batch buffers of this node) to the shared part.
func (nd *node) putBatch(ix []uint32) {
	carrier := ix[0] & localMask
	w := nd.words[int(carrier)*nd.wps:]
	w[1] = uint32(len(ix))
	copy(w[2:], ix)
	for {
		old := nd.free.head.Load()
		atomic.StoreUint32(&w[0], uint32(old))
		if nd.free.head.CompareAndSwap(old, (old>>32+1)<<32|uint64(carrier+1)) {
			return
		}
	}
}

// getBatch pops one batch into dst (len >= batch) and returns its size, 0
// if the node has no free buffer.
func (nd *node) getBatch(dst []uint32) int {
	for {
		old := nd.free.head.Load()
		top := uint32(old)
		if top == 0 {
			return 0
		}
		w := nd.words[int(top-1)*nd.wps:]
		next := atomic.LoadUint32(&w[0])
		if next > nd.n {
			// Either a stale read (the carrier was popped and reused
			// since head was read: retry) or a write into a free buffer
			// (use after free) destroyed the link: stop using the stack
			// rather than follow it out of the arena.
			if nd.free.head.Load() == old {
				nd.corrupt.Add(1)
				return 0
			}
			continue
		}
		if nd.free.head.CompareAndSwap(old, (old>>32+1)<<32|uint64(next)) {
			// The batch is ours now: its words were written before the
			// pusher's CAS and nobody else can pop it.
			k := min(int(w[1]), nd.batch)
			return copy(dst, w[2:2+k])
		}
	}
}

// New maps one arena per node of cfg.Topology and fills its shared part.
func New(cfg Config) (*Pool, error) {
	if cfg.Topology == nil {
		t, err := numa.ReadLive()
		if err != nil {
			return nil, err
		}
		cfg.Topology = t
	}
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	def(&cfg.BuffersPerNode, DefaultBuffersPerNode)
	def(&cfg.BufSize, DefaultBufSize)
	def(&cfg.Headroom, DefaultHeadroom)
	def(&cfg.CacheSize, DefaultCacheSize)
	def(&cfg.Batch, DefaultBatch)
	switch {
	case cfg.BuffersPerNode < 1 || cfg.BuffersPerNode > MaxBuffersPerNode:
		return nil, &ConfigError{"BuffersPerNode", cfg.BuffersPerNode, fmt.Sprintf("must be 1..%d", MaxBuffersPerNode)}
	case cfg.BufSize < 1 || cfg.BufSize > 1<<20:
		return nil, &ConfigError{"BufSize", cfg.BufSize, "must be 1..1048576"}
	case cfg.Headroom < 0 || cfg.Headroom > 1<<16:
		return nil, &ConfigError{"Headroom", cfg.Headroom, "must be 0..65536"}
	case cfg.Batch < 1 || cfg.Batch > 4096:
		return nil, &ConfigError{"Batch", cfg.Batch, "must be 1..4096"}
	case (cfg.Headroom+cfg.BufSize+63)&^63 < 4*(cfg.Batch+2):
		return nil, &ConfigError{"Batch", cfg.Batch, fmt.Sprintf("a batch is stored in a free buffer: needs Headroom+BufSize >= %d", 4*(cfg.Batch+2))}
	case cfg.CacheSize < 2*cfg.Batch:
		return nil, &ConfigError{"CacheSize", cfg.CacheSize, fmt.Sprintf("must be at least 2*Batch = %d", 2*cfg.Batch)}
	case cfg.Placement != WorkerNode && cfg.Placement != DeviceNode:
		return nil, &ConfigError{"Placement", cfg.Placement, "unknown"}
	case cfg.HugePages < HugeAuto || cfg.HugePages > HugeRequire:
		return nil, &ConfigError{"HugePages", cfg.HugePages, "unknown"}
	case cfg.Bind < BindAuto || cfg.Bind > BindRequire:
		return nil, &ConfigError{"Bind", cfg.Bind, "unknown"}
	case len(cfg.Topology.Nodes) == 0:
		return nil, &ConfigError{"Topology", cfg.Topology.Root, "has no nodes"}
	}
	p := &Pool{
		cfg:     cfg,
		topo:    cfg.Topology,
		stride:  (cfg.Headroom + cfg.BufSize + 63) &^ 63,
		caches:  map[*Cache]struct{}{},
		retired: map[int]*Counters{},
	}
	bind := cfg.Bind == BindRequire || (cfg.Bind == BindAuto && cfg.Topology.Root == numa.DefaultRoot)
	for _, tn := range cfg.Topology.Nodes {
		if tn.ID < 0 || tn.ID >= MaxNodes {
			p.unmap()
			return nil, &ConfigError{"Topology", tn.ID, fmt.Sprintf("node id outside 0..%d", MaxNodes-1)}
		}
		nd, err := p.newNode(tn.ID, bind)
		if err != nil {
			p.unmap()
			return nil, err
		}
		p.nodes = append(p.nodes, nd)
		p.byID[tn.ID] = nd
	}
	p.first = p.nodes[0]
	return p, nil
}

// newNode maps, binds and pre-faults one arena and fills its stack.
func (p *Pool) newNode(id int, bind bool) (*node, error) {
	cfg := &p.cfg
	size := cfg.BuffersPerNode * p.stride
	hsize := (size + sys.HugePageSize - 1) &^ (sys.HugePageSize - 1)
	nd := &node{id: id, n: uint32(cfg.BuffersPerNode), batch: cfg.Batch,
		exhausted: &ExhaustedError{Node: id, Buffers: cfg.BuffersPerNode}}
	var err error
	if cfg.HugePages != HugeOff {
		nd.mem, err = sys.MapAnon(hsize, true)
		if err == nil {
			nd.huge = true
		} else if cfg.HugePages == HugeRequire {
			return nil, fmt.Errorf("pool: node %d: %d bytes of 2 MiB huge pages (HugePages=HugeRequire): %w", id, hsize, err)
		}
	}
	if !nd.huge {
		if nd.mem, err = sys.MapAnon(hsize, false); err != nil {
			return nil, fmt.Errorf("pool: node %d: map %d bytes: %w", id, hsize, err)
		}
		_ = sys.AdviseHuge(nd.mem) // best effort: THP may be disabled
	}
	if bind {
		if err := numa.Bind(nd.mem, id); err != nil {
			if cfg.Bind == BindRequire {
				sys.Unmap(nd.mem)
				return nil, fmt.Errorf("pool: node %d: %w", id, err)
			}
		} else {
			nd.bound = true
		}
	}
	pg := os.Getpagesize()
	if nd.huge {
		pg = sys.HugePageSize
	}
	for i := 0; i < len(nd.mem); i += pg {
		nd.mem[i] = 0 // fault in now, on the bound node
	}
	nd.base = sys.Addr(nd.mem)

	nd.words = sys.Uint32s(nd.mem)
	nd.wps = p.stride / 4
	// Push in reverse so the lowest buffers are popped first.
	ix := make([]uint32, 0, cfg.Batch)
	last := (cfg.BuffersPerNode - 1) / cfg.Batch * cfg.Batch
	for lo := last; lo >= 0; lo -= cfg.Batch {
		ix = ix[:0]
		for j := lo; j < min(lo+cfg.Batch, cfg.BuffersPerNode); j++ {
			ix = append(ix, uint32(id)<<LocalBits|uint32(j))
		}
		nd.putBatch(ix)
	}
	if cfg.Debug {
		nd.freeBits = make([]atomic.Uint64, (cfg.BuffersPerNode+63)/64)
		for i := range nd.freeBits {
			nd.freeBits[i].Store(^uint64(0))
		}
	}
	return nd, nil
}

func (p *Pool) unmap() {
	for _, nd := range p.nodes {
		if nd.mem != nil {
			sys.Unmap(nd.mem)
			nd.mem = nil
		}
	}
}

// Close unmaps every arena. No buffer, slice from Bytes or address from
// Addr may be used afterwards; close every Cache first.
func (p *Pool) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil
	}
	if len(p.caches) != 0 {
		return fmt.Errorf("pool: Close with %d caches still open", len(p.caches))
	}
	p.closed = true
	p.unmap()
	return nil
}

// Stride is the distance between consecutive buffers of a node.
func (p *Pool) Stride() int { return p.stride }

// BufSize is the number of data bytes per buffer.
func (p *Pool) BufSize() int { return p.cfg.BufSize }

// Headroom is the number of bytes reserved before each buffer's data.
func (p *Pool) Headroom() int { return p.cfg.Headroom }

// Nodes returns the node ids that have an arena.
func (p *Pool) Nodes() []int {
	ids := make([]int, len(p.nodes))
	for i, nd := range p.nodes {
		ids[i] = nd.id
	}
	return ids
}

// NodeOf returns the node that owns idx (not validated).
func NodeOf(idx uint32) int { return int(idx >> LocalBits) }

func (p *Pool) lookup(idx uint32) *node {
	nd := p.byID[idx>>LocalBits]
	if nd == nil || idx&localMask >= nd.n {
		return nil
	}
	return nd
}

// Valid reports whether idx names a buffer of this pool.
func (p *Pool) Valid(idx uint32) bool { return p.lookup(idx) != nil }

// Bytes returns the data area of buffer idx (BufSize bytes after the
// headroom), or nil if idx is not a buffer of this pool.
func (p *Pool) Bytes(idx uint32) []byte {
	nd := p.lookup(idx)
	if nd == nil {
		return nil
	}
	off := int(idx&localMask)*p.stride + p.cfg.Headroom
	return nd.mem[off : off+p.cfg.BufSize : off+p.cfg.BufSize]
}

// Frame returns headroom and data area of buffer idx together, or nil.
func (p *Pool) Frame(idx uint32) []byte {
	nd := p.lookup(idx)
	if nd == nil {
		return nil
	}
	off := int(idx&localMask) * p.stride
	end := off + p.cfg.Headroom + p.cfg.BufSize
	return nd.mem[off:end:end]
}

// Addr returns the address of buffer idx's data area (for a receive
// descriptor), or 0 if idx is not a buffer of this pool.
func (p *Pool) Addr(idx uint32) uintptr {
	nd := p.lookup(idx)
	if nd == nil {
		return 0
	}
	return nd.base + uintptr(int(idx&localMask)*p.stride+p.cfg.Headroom)
}

// IndexOf maps an address inside a buffer (headroom or data) back to its
// index.
func (p *Pool) IndexOf(addr uintptr) (uint32, bool) {
	for _, nd := range p.nodes {
		if addr >= nd.base && addr < nd.base+uintptr(int(nd.n)*p.stride) {
			return uint32(nd.id)<<LocalBits | uint32((addr-nd.base)/uintptr(p.stride)), true
		}
	}
	return 0, false
}

// ArenaInfo describes one node's contiguous region.
type ArenaInfo struct {
	Node    int
	Base    uintptr // first byte, for DMA registration
	Len     int     // bytes mapped (a multiple of 2 MiB)
	Buffers int
	HugeTLB bool // 2 MiB hugetlb pages; false: normal pages
	Bound   bool // mbind'ed to Node
}

// Arena describes node's region; ok is false if node has none.
func (p *Pool) Arena(node int) (ArenaInfo, bool) {
	if node < 0 || node >= MaxNodes || p.byID[node] == nil {
		return ArenaInfo{}, false
	}
	nd := p.byID[node]
	return ArenaInfo{Node: nd.id, Base: nd.base, Len: len(nd.mem), Buffers: int(nd.n), HugeTLB: nd.huge, Bound: nd.bound}, true
}

// Region returns node's whole arena as one slice (for DMA registration),
// or nil.
func (p *Pool) Region(node int) []byte {
	if node < 0 || node >= MaxNodes || p.byID[node] == nil {
		return nil
	}
	return p.byID[node].mem
}

// Queue describes the receive queue a Cache serves.
type Queue struct {
	Name       string
	CPU        int // CPU of the polling worker
	DeviceNode int // from numa.Topology.NetdevNode; numa.Unknown allowed
}

// NodeFor returns the node a cache for q allocates from under the pool's
// Placement. An unknown worker or device node falls back to the first
// node (VPP uses node 0 for a device with numa_node -1).
func (p *Pool) NodeFor(q Queue) int {
	n := numa.Unknown
	if p.cfg.Placement == DeviceNode {
		n = q.DeviceNode
	} else {
		n = p.topo.NodeOfCPU(q.CPU)
	}
	if n < 0 || n >= MaxNodes || p.byID[n] == nil {
		return p.first.id
	}
	return n
}

// NewCache creates the per-worker cache for q, allocating from
// NodeFor(q). It starts empty and fills on first use.
func (p *Pool) NewCache(q Queue) (*Cache, error) {
	return p.NewCacheOnNode(q.Name, p.NodeFor(q))
}

// NewCacheOnNode creates a cache that allocates from node.
func (p *Pool) NewCacheOnNode(name string, node int) (*Cache, error) {
	if node < 0 || node >= MaxNodes || p.byID[node] == nil {
		return nil, fmt.Errorf("pool: cache %q: node %d has no arena (nodes %v)", name, node, p.Nodes())
	}
	c := &Cache{
		p:       p,
		home:    p.byID[node],
		homeN:   uint32(node),
		homeLo:  uint32(node) << LocalBits,
		homeC:   p.byID[node].n,
		freeLim: p.cfg.CacheSize,
		objs:    make([]uint32, p.cfg.CacheSize),
		batch:   p.cfg.Batch,
		debug:   p.cfg.Debug,
		name:    name,
	}
	if c.debug {
		c.allocLo, c.freeLim = math.MaxInt, 0
	}
	c.remote = make([]remoteStage, MaxNodes)
	for _, nd := range p.nodes {
		if nd.id != node {
			c.remote[nd.id].ix = make([]uint32, 0, p.cfg.Batch)
		}
	}
	c.pub.crossTo = make([]atomic.Uint64, MaxNodes)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, errors.New("pool: NewCache on a closed pool")
	}
	p.caches[c] = struct{}{}
	return c, nil
}
