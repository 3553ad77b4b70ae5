package pool

import (
	"errors"
	"slices"
)

// WorkerStats is one open cache's published counters.
type WorkerStats struct {
	Name   string
	Node   int // node it allocates from
	Cached int // buffers in its cache at the last publish
	Counters
}

// NodeStats aggregates the caches (open and closed) allocating from a
// node, plus the frees other nodes' caches sent back to it.
type NodeStats struct {
	Node             int
	Buffers          int
	HugeTLB          bool
	Bound            bool
	CrossNodeFreesIn uint64 // buffers of this node freed by caches of other nodes
	// FreeListCorrupt counts refills that found a batch link overwritten
	// (a buffer written after it was freed); the node then reports
	// exhaustion instead of following the link.
	FreeListCorrupt uint64
	Counters
}

// Stats is a snapshot of every worker and node.
type Stats struct {
	Workers []WorkerStats
	Nodes   []NodeStats
}

func (p *Pool) retiredIn(node int, n uint64) {
	// p.mu held
	if p.retiredCross == nil {
		p.retiredCross = map[int]uint64{}
	}
	p.retiredCross[node] += n
}

// Snapshot returns the counters published so far. Safe to call from any
// goroutine (e.g. a metrics scrape) while workers run.
func (p *Pool) Snapshot() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	var s Stats
	byNode := map[int]*NodeStats{}
	for _, nd := range p.nodes {
		s.Nodes = append(s.Nodes, NodeStats{Node: nd.id, Buffers: int(nd.n), HugeTLB: nd.huge, Bound: nd.bound,
			FreeListCorrupt: nd.corrupt.Load()})
	}
	for i := range s.Nodes {
		ns := &s.Nodes[i]
		byNode[ns.Node] = ns
		if r := p.retired[ns.Node]; r != nil {
			ns.Counters.add(r)
		}
		ns.CrossNodeFreesIn += p.retiredCross[ns.Node]
	}
	for c := range p.caches {
		w := WorkerStats{
			Name:   c.name,
			Node:   c.home.id,
			Cached: int(c.pub.cached.Load()),
			Counters: Counters{
				Allocs:         c.pub.allocs.Load(),
				Frees:          c.pub.frees.Load(),
				Refills:        c.pub.refills.Load(),
				Spills:         c.pub.spills.Load(),
				CrossNodeFrees: c.pub.cross.Load(),
				EmptyFailures:  c.pub.empty.Load(),
				BadFrees:       c.pub.bad.Load(),
			},
		}
		s.Workers = append(s.Workers, w)
		byNode[w.Node].Counters.add(&w.Counters)
		for _, nd := range p.nodes {
			byNode[nd.id].CrossNodeFreesIn += c.pub.crossTo[nd.id].Load()
		}
	}
	slices.SortFunc(s.Workers, func(a, b WorkerStats) int {
		if a.Name < b.Name {
			return -1
		}
		if a.Name > b.Name {
			return 1
		}
		return a.Node - b.Node
	})
	return s
}

// ErrNoDebug is returned by Outstanding when Config.Debug is off.
var ErrNoDebug = errors.New("pool: leak tracking needs Config.Debug")

// Outstanding lists, in Debug mode, every buffer currently allocated (not
// in any cache, stage or shared part). After all workers have freed what
// they own, a non-empty list is a leak.
func (p *Pool) Outstanding() ([]uint32, error) {
	if !p.cfg.Debug {
		return nil, ErrNoDebug
	}
	var out []uint32
	for _, nd := range p.nodes {
		for w := range nd.freeBits {
			bits := nd.freeBits[w].Load()
			for b := 0; b < 64; b++ {
				i := uint32(w*64 + b)
				if i < nd.n && bits&(1<<b) == 0 {
					out = append(out, uint32(nd.id)<<LocalBits|i)
				}
			}
		}
	}
	return out, nil
}
