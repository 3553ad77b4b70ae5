package pool

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
)

// TestConcurrent runs many workers on four nodes that allocate, hand
// buffers to each other (cross-node frees), free in bursts and run pools
// dry. An ownership table outside the pool catches any buffer handed to
// two owners at once; at the end every buffer must be back and
// allocatable exactly once. Run it with -race.
func TestConcurrent(t *testing.T) {
	for _, debug := range []bool{false, true} {
		t.Run(fmt.Sprintf("debug=%v", debug), func(t *testing.T) { testConcurrent(t, debug) })
	}
}

func testConcurrent(t *testing.T, debug bool) {
	const (
		n       = 1024 // per node: small, so nodes run dry now and then
		workers = 12
		rounds  = 3000
	)
	topo := fakeTopo(t, "nps4")
	p := newPool(t, Config{Topology: topo, BuffersPerNode: n, CacheSize: 128, Batch: 16, Debug: debug})
	owner := make([]atomic.Int32, len(topo.Nodes)*n)
	slotOf := func(idx uint32) int { return NodeOf(idx)*n + int(idx&(MaxBuffersPerNode-1)) }
	var bad atomic.Int64
	claim := func(idx uint32, w int32) {
		if !owner[slotOf(idx)].CompareAndSwap(0, w) {
			bad.Add(1)
		}
	}
	release := func(idx uint32, w int32) {
		if !owner[slotOf(idx)].CompareAndSwap(w, 0) {
			bad.Add(1)
		}
	}
	mail := make([]chan []uint32, workers)
	for i := range mail {
		mail[i] = make(chan []uint32, 8)
	}
	var exhausted atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			id := int32(w + 1)
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			c, err := p.NewCacheOnNode(fmt.Sprint("w", w), w%len(topo.Nodes))
			if err != nil {
				t.Error(err)
				return
			}
			defer c.Close()
			var held []uint32
			for range rounds {
				switch rng.IntN(5) {
				case 0, 1: // burst alloc
					buf := make([]uint32, 1+rng.IntN(80))
					k, err := c.AllocBatch(buf)
					if err != nil {
						if !errors.Is(err, ErrExhausted) {
							t.Error(err)
						}
						exhausted.Add(1)
					}
					for _, idx := range buf[:k] {
						claim(idx, id)
						p.Bytes(idx)[0] = byte(id)
					}
					held = append(held, buf[:k]...)
				case 2: // hand some to a neighbour
					k := min(len(held), rng.IntN(40))
					out := append([]uint32(nil), held[len(held)-k:]...)
					for _, idx := range out {
						release(idx, id)
					}
					select {
					case mail[(w+1+rng.IntN(workers-1))%workers] <- out:
						held = held[:len(held)-k]
					default:
						for _, idx := range out {
							claim(idx, id)
						}
					}
				case 3: // free received buffers (often another node's)
					select {
					case in := <-mail[w]:
						for _, idx := range in {
							claim(idx, id)
							release(idx, id)
						}
						if err := c.FreeBatch(in); err != nil {
							t.Error(err)
						}
					default:
					}
				case 4: // free some of our own, one by one
					k := min(len(held), rng.IntN(60))
					for _, idx := range held[len(held)-k:] {
						release(idx, id)
						if err := c.Free(idx); err != nil {
							t.Error(err)
						}
					}
					held = held[:len(held)-k]
				}
				if rng.IntN(50) == 0 {
					c.Publish()
					_ = p.Snapshot()
				}
			}
			for _, idx := range held {
				release(idx, id)
			}
			if err := c.FreeBatch(held); err != nil {
				t.Error(err)
			}
		})
	}
	// A scraper reading stats concurrently.
	stop := make(chan struct{})
	var scr sync.WaitGroup
	scr.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
				_ = p.Snapshot()
			}
		}
	})
	wg.Wait()
	close(stop)
	scr.Wait()
	if bad.Load() != 0 {
		t.Fatalf("%d ownership violations: a buffer had two owners", bad.Load())
	}
	// Return what is still in the mailboxes.
	last := newCache(t, p, "drain", 0)
	for _, ch := range mail {
		close(ch)
		for in := range ch {
			if err := last.FreeBatch(in); err != nil {
				t.Fatal(err)
			}
		}
	}
	last.Close()
	if debug {
		if out, _ := p.Outstanding(); len(out) != 0 {
			t.Fatalf("%d buffers leaked, e.g. %#x", len(out), out[0])
		}
	}
	// Every buffer of every node is allocatable exactly once.
	for _, node := range p.Nodes() {
		c := newCache(t, p, "check", node)
		all := make([]uint32, n)
		if k, err := c.AllocBatch(all); k != n || err != nil {
			t.Fatalf("node %d: got back %d of %d buffers: %v", node, k, n, err)
		}
		if _, err := c.Alloc(); !errors.Is(err, ErrExhausted) {
			t.Fatalf("node %d handed out more than %d buffers", node, n)
		}
		seen := map[uint32]bool{}
		for _, idx := range all {
			if seen[idx] || NodeOf(idx) != node {
				t.Fatalf("node %d: duplicate or foreign buffer %#x", node, idx)
			}
			seen[idx] = true
		}
		c.FreeBatch(all)
		c.Close()
	}
	s := p.Snapshot()
	var allocs, frees, cross, crossIn, empty uint64
	for _, ns := range s.Nodes {
		allocs += ns.Allocs
		frees += ns.Frees
		cross += ns.CrossNodeFrees
		crossIn += ns.CrossNodeFreesIn
		empty += ns.EmptyFailures
	}
	if empty != uint64(exhausted.Load())+uint64(len(s.Nodes)) { // + the final check per node
		t.Errorf("empty failures counted %d, seen %d + %d", empty, exhausted.Load(), len(s.Nodes))
	}
	if allocs != frees || cross != crossIn || cross == 0 {
		t.Fatalf("totals: allocs %d frees %d cross %d crossIn %d", allocs, frees, cross, crossIn)
	}
	t.Logf("allocs %d, cross-node frees %d, empty failures %d (seen by workers %d)", allocs, cross, empty, exhausted.Load())
}
