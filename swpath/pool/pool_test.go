package pool

import (
	"errors"
	"slices"
	"testing"

	"github.com/scrubd/scrubd/swpath/numa"
)

func fakeTopo(t testing.TB, name string) *numa.Topology {
	t.Helper()
	topo, err := numa.Read("../numa/testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return topo
}

func newPool(t testing.TB, cfg Config) *Pool {
	t.Helper()
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Error(err)
		}
	})
	return p
}

func newCache(t testing.TB, p *Pool, name string, node int) *Cache {
	t.Helper()
	c, err := p.NewCacheOnNode(name, node)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestAllocAllThenExhausted(t *testing.T) {
	const n = 1000
	p := newPool(t, Config{Topology: fakeTopo(t, "two"), BuffersPerNode: n, BufSize: 100, Headroom: 28, CacheSize: 128, Batch: 32})
	c := newCache(t, p, "w0", 1)
	seen := map[uint32]bool{}
	for i := range n {
		idx, err := c.Alloc()
		if err != nil {
			t.Fatalf("alloc %d: %v", i, err)
		}
		if seen[idx] || NodeOf(idx) != 1 || !p.Valid(idx) {
			t.Fatalf("alloc %d gave %#x (seen %v, node %d)", i, idx, seen[idx], NodeOf(idx))
		}
		seen[idx] = true
		b := p.Bytes(idx)
		if len(b) != 100 || cap(b) != 100 {
			t.Fatalf("Bytes len %d cap %d", len(b), cap(b))
		}
		b[0], b[99] = byte(i), byte(i>>8)
	}
	_, err := c.Alloc()
	var ee *ExhaustedError
	if !errors.Is(err, ErrExhausted) || !errors.As(err, &ee) || ee.Node != 1 || ee.Buffers != n {
		t.Fatalf("alloc past the end: err = %v", err)
	}
	k, err := c.AllocBatch(make([]uint32, 4))
	if k != 0 || !errors.Is(err, ErrExhausted) {
		t.Fatalf("AllocBatch past the end = %d, %v", k, err)
	}
	// Data written is still there and buffers do not overlap.
	i := 0
	for idx := range seen {
		_ = i
		b := p.Bytes(idx)
		if p.Addr(idx) == 0 {
			t.Fatal("Addr 0")
		}
		back, ok := p.IndexOf(p.Addr(idx) + 5)
		if !ok || back != idx {
			t.Fatalf("IndexOf(Addr(%#x)+5) = %#x, %v", idx, back, ok)
		}
		_ = b
	}
	ids := slices.Sorted(func(yield func(uint32) bool) {
		for k := range seen {
			if !yield(k) {
				return
			}
		}
	})
	for j := 1; j < len(ids); j++ {
		if p.Addr(ids[j])-p.Addr(ids[j-1]) != uintptr(p.Stride()) {
			t.Fatalf("buffers %#x and %#x not one stride (%d) apart", ids[j-1], ids[j], p.Stride())
		}
	}
	if p.Stride() != 128 {
		t.Fatalf("stride %d, want 128 (28+100 rounded to 64)", p.Stride())
	}
	for idx := range seen {
		if err := c.Free(idx); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	s := p.Snapshot()
	ns := s.Nodes[1]
	if ns.Allocs != n || ns.Frees != n || ns.EmptyFailures != 2 || ns.Refills == 0 || ns.Spills == 0 {
		t.Fatalf("node stats %+v", ns)
	}
	if s.Nodes[0].Allocs != 0 {
		t.Fatalf("node 0 stats %+v", s.Nodes[0])
	}
}
