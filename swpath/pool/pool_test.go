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
	p := newPool(t, Config{Topology: fakeTopo(t, "two"), BuffersPerNode: n, BufSize: 100, Headroom: 28, CacheSize: 128, Batch: 16})
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
	ar, _ := p.Arena(1)
	for idx := range seen {
		b := p.Bytes(idx)
		loc := int(idx & (MaxBuffersPerNode - 1))
		if got, want := p.Addr(idx), ar.Base+uintptr(loc*p.Stride()+p.Headroom()); got != want {
			t.Fatalf("Addr(%#x) = %#x, want base+%d*stride+headroom = %#x", idx, got, loc, want)
		}
		back, ok := p.IndexOf(p.Addr(idx) + 5)
		if !ok || back != idx {
			t.Fatalf("IndexOf(Addr(%#x)+5) = %#x, %v", idx, back, ok)
		}
		// Bytes is the same memory as the arena region at that offset.
		reg := p.Region(1)
		off := loc*p.Stride() + p.Headroom()
		if reg[off] != b[0] || reg[off+99] != b[99] {
			t.Fatalf("Region and Bytes disagree for %#x", idx)
		}
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

func TestConfigErrors(t *testing.T) {
	topo := fakeTopo(t, "one")
	for _, tc := range []struct {
		cfg   Config
		field string
	}{
		{Config{BuffersPerNode: -1}, "BuffersPerNode"},
		{Config{BuffersPerNode: MaxBuffersPerNode + 1}, "BuffersPerNode"},
		{Config{BufSize: -5}, "BufSize"},
		{Config{Headroom: -1}, "Headroom"},
		{Config{Batch: 64, CacheSize: 100}, "CacheSize"},
		{Config{Batch: 5000}, "Batch"},
		{Config{BufSize: 100, Headroom: 0, Batch: 64, CacheSize: 128}, "Batch"}, // 128-byte stride holds 30 indices
		{Config{Placement: 7}, "Placement"},
		{Config{HugePages: 9}, "HugePages"},
		{Config{Bind: 9}, "Bind"},
	} {
		tc.cfg.Topology = topo
		_, err := New(tc.cfg)
		var ce *ConfigError
		if !errors.As(err, &ce) || ce.Field != tc.field {
			t.Errorf("New(%+v) err = %v, want ConfigError on %s", tc.cfg, err, tc.field)
		}
	}
}

func TestPlacement(t *testing.T) {
	topo := fakeTopo(t, "two")
	dev, _ := topo.NetdevNode("p0") // node 1
	q := Queue{Name: "p0/rx0", CPU: 3, DeviceNode: dev}
	for _, tc := range []struct {
		pl   Placement
		q    Queue
		want int
	}{
		{WorkerNode, q, 0},
		{DeviceNode, q, 1},
		{WorkerNode, Queue{CPU: 9, DeviceNode: 0}, 1},
		{DeviceNode, Queue{CPU: 9, DeviceNode: numa.Unknown}, 0}, // VPP: unknown -> node 0
		{WorkerNode, Queue{CPU: 999, DeviceNode: 1}, 0},          // CPU outside the topology -> first node
	} {
		p := newPool(t, Config{Topology: topo, BuffersPerNode: 256, Placement: tc.pl, CacheSize: 128, Batch: 32})
		if got := p.NodeFor(tc.q); got != tc.want {
			t.Errorf("placement %d, %+v: node %d, want %d", tc.pl, tc.q, got, tc.want)
		}
		c, err := p.NewCache(tc.q)
		if err != nil {
			t.Fatal(err)
		}
		idx, err := c.Alloc()
		if err != nil || NodeOf(idx) != tc.want || c.Node() != tc.want {
			t.Errorf("cache for %+v allocated %#x from node %d, %v; want node %d", tc.q, idx, NodeOf(idx), err, tc.want)
		}
		c.Free(idx)
		c.Close()
	}
	p := newPool(t, Config{Topology: topo, BuffersPerNode: 256, CacheSize: 128, Batch: 32})
	if _, err := p.NewCacheOnNode("x", 5); err == nil {
		t.Error("cache on a node without arena accepted")
	}
}

// TestCrossNodeFree: buffers of node 0 freed by a node-1 worker go back to
// node 0's shared part, counted on both sides, and can all be allocated
// again from node 0.
func TestCrossNodeFree(t *testing.T) {
	const n = 512
	p := newPool(t, Config{Topology: fakeTopo(t, "nps4"), BuffersPerNode: n, CacheSize: 128, Batch: 32})
	a := newCache(t, p, "a", 0)
	b := newCache(t, p, "b", 3)
	got := make([]uint32, n)
	if k, err := a.AllocBatch(got); k != n || err != nil {
		t.Fatalf("AllocBatch = %d, %v", k, err)
	}
	if err := b.FreeBatch(got[:300]); err != nil {
		t.Fatal(err)
	}
	for _, idx := range got[300:] {
		if err := b.Free(idx); err != nil {
			t.Fatal(err)
		}
	}
	b.Flush() // returns the partial stage too
	a.Publish()
	s := p.Snapshot()
	if w := s.Workers[1]; w.Name != "b" || w.CrossNodeFrees != n || w.Frees != n || w.Spills != n/32 {
		t.Errorf("worker b: %+v", w)
	}
	if ns := s.Nodes[0]; ns.CrossNodeFreesIn != n || ns.Allocs != n {
		t.Errorf("node 0: %+v", ns)
	}
	if ns := s.Nodes[3]; ns.CrossNodeFreesIn != 0 || ns.Allocs != 0 {
		t.Errorf("node 3: %+v", ns)
	}
	// b's cache holds nothing of node 0; a can take all n back.
	if k, err := a.AllocBatch(got); k != n || err != nil {
		t.Fatalf("second AllocBatch = %d, %v", k, err)
	}
	if err := a.FreeBatch(got); err != nil {
		t.Fatal(err)
	}
	a.Close()
	b.Close()
	if ns := p.Snapshot().Nodes[0]; ns.CrossNodeFreesIn != n || ns.Allocs != 2*n || ns.Frees != n {
		t.Errorf("node 0 after Close: %+v", ns)
	}
}

func TestBadFrees(t *testing.T) {
	p := newPool(t, Config{Topology: fakeTopo(t, "two"), BuffersPerNode: 256, CacheSize: 128, Batch: 32})
	c := newCache(t, p, "w", 0)
	defer c.Close()
	for _, idx := range []uint32{256, 1<<LocalBits | 300, 5 << LocalBits, ^uint32(0)} {
		var fe *FreeError
		if err := c.Free(idx); !errors.As(err, &fe) || fe.Index != idx {
			t.Errorf("Free(%#x) = %v, want FreeError", idx, err)
		}
		if p.Bytes(idx) != nil || p.Frame(idx) != nil || p.Addr(idx) != 0 || p.Valid(idx) {
			t.Errorf("accessors accepted invalid index %#x", idx)
		}
	}
	if err := c.FreeBatch([]uint32{7 << LocalBits}); err == nil {
		t.Error("FreeBatch of invalid index accepted")
	}
	c.Publish()
	if w := p.Snapshot().Workers[0]; w.BadFrees != 5 || w.Frees != 0 {
		t.Errorf("stats %+v", w)
	}
	if _, ok := p.IndexOf(1); ok {
		t.Error("IndexOf(1) found a buffer")
	}
}

func TestDebugDoubleFreeAndLeaks(t *testing.T) {
	p := newPool(t, Config{Topology: fakeTopo(t, "two"), BuffersPerNode: 256, CacheSize: 128, Batch: 32, Debug: true})
	a := newCache(t, p, "a", 0)
	b := newCache(t, p, "b", 1)
	ix := make([]uint32, 10)
	if _, err := a.AllocBatch(ix); err != nil {
		t.Fatal(err)
	}
	x, _ := a.Alloc()
	out, err := p.Outstanding()
	if err != nil || len(out) != 11 {
		t.Fatalf("Outstanding = %d buffers, %v; want 11", len(out), err)
	}
	if err := a.Free(x); err != nil {
		t.Fatal(err)
	}
	var fe *FreeError
	if err := a.Free(x); !errors.As(err, &fe) || fe.Index != x {
		t.Fatalf("local double free: %v", err)
	}
	if err := b.Free(ix[0]); err != nil { // cross-node
		t.Fatal(err)
	}
	if err := b.Free(ix[0]); !errors.As(err, &fe) {
		t.Fatalf("cross-node double free: %v", err)
	}
	if err := a.FreeBatch(ix[:2]); !errors.As(err, &fe) || fe.Index != ix[0] {
		t.Fatalf("batch double free: %v", err)
	}
	out, _ = p.Outstanding()
	if !slices.Equal(out, ix[2:]) {
		t.Fatalf("leaks %v, want %v", out, ix[2:])
	}
	a.FreeBatch(ix[2:])
	a.Close()
	b.Close()
	if out, _ = p.Outstanding(); len(out) != 0 {
		t.Fatalf("leaks after freeing all: %v", out)
	}
	// Node stats sum the caches homed on the node: a (node 0) refused two
	// frees, b (node 1) one.
	st := p.Snapshot()
	if ns := st.Nodes[0]; ns.BadFrees != 2 || ns.Allocs != 11 || ns.Frees != 10 || ns.CrossNodeFreesIn != 1 {
		t.Fatalf("node 0 stats %+v", ns)
	}
	if ns := st.Nodes[1]; ns.BadFrees != 1 || ns.CrossNodeFrees != 1 {
		t.Fatalf("node 1 stats %+v", ns)
	}
	q := newPool(t, Config{Topology: fakeTopo(t, "one"), BuffersPerNode: 256, CacheSize: 128, Batch: 32})
	if _, err := q.Outstanding(); !errors.Is(err, ErrNoDebug) {
		t.Fatalf("Outstanding without Debug: %v", err)
	}
}

// TestPartialBatches returns buffers through many short-lived caches in
// small, odd-sized batches; every buffer must come back exactly once.
func TestPartialBatches(t *testing.T) {
	const n = 200
	p := newPool(t, Config{Topology: fakeTopo(t, "one"), BuffersPerNode: n, CacheSize: 64, Batch: 32, Debug: true})
	all := make([]uint32, n)
	c := newCache(t, p, "a", 0)
	if k, err := c.AllocBatch(all); k != n || err != nil {
		t.Fatalf("AllocBatch = %d, %v", k, err)
	}
	for i := 0; i < n; i += 7 {
		d := newCache(t, p, "d", 0)
		if err := d.FreeBatch(all[i:min(i+7, n)]); err != nil {
			t.Fatal(err)
		}
		d.Close()
	}
	if k, err := c.AllocBatch(all); k != n || err != nil {
		t.Fatalf("AllocBatch after partial frees = %d, %v", k, err)
	}
	if _, err := c.Alloc(); !errors.Is(err, ErrExhausted) {
		t.Fatalf("pool should be empty: %v", err)
	}
	slices.Sort(all)
	if len(slices.Compact(all)) != n {
		t.Fatal("duplicate buffers handed out")
	}
	c.FreeBatch(all)
	c.Close()
}

func TestCloseWithOpenCache(t *testing.T) {
	p, err := New(Config{Topology: fakeTopo(t, "one"), BuffersPerNode: 256, CacheSize: 128, Batch: 32})
	if err != nil {
		t.Fatal(err)
	}
	c := newCache(t, p, "a", 0)
	if err := p.Close(); err == nil {
		t.Fatal("Close with an open cache succeeded")
	}
	c.Close()
	if err := c.Close(); err == nil {
		t.Fatal("second cache Close succeeded")
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := p.NewCacheOnNode("b", 0); err == nil {
		t.Fatal("NewCache on a closed pool succeeded")
	}
}

func TestZeroAllocs(t *testing.T) {
	p := newPool(t, Config{Topology: fakeTopo(t, "two"), BuffersPerNode: 4096, CacheSize: 128, Batch: 32})
	a := newCache(t, p, "a", 0)
	b := newCache(t, p, "b", 1)
	defer a.Close()
	defer b.Close()
	burst := make([]uint32, 200) // > cache: every round refills and spills
	cases := map[string]func(){
		"Alloc+Free": func() {
			idx, _ := a.Alloc()
			a.Free(idx)
		},
		"AllocBatch+FreeBatch (refill, spill)": func() {
			n, _ := a.AllocBatch(burst)
			a.FreeBatch(burst[:n])
		},
		"cross-node FreeBatch": func() {
			n, _ := a.AllocBatch(burst)
			b.FreeBatch(burst[:n])
		},
		"Bytes/Addr/Publish": func() {
			_ = p.Bytes(5)
			_ = p.Addr(5)
			a.Publish()
		},
		"exhausted": func() {
			// node 1 drained below, so this fails every time
			b.Alloc()
		},
	}
	for name, f := range cases {
		if name == "exhausted" {
			var hold []uint32
			for {
				idx, err := b.Alloc()
				if err != nil {
					break
				}
				hold = append(hold, idx)
			}
			defer b.FreeBatch(hold)
		}
		if n := testing.AllocsPerRun(200, f); n != 0 {
			t.Errorf("%s: %v allocs per run, want 0", name, n)
		}
	}
}

// TestUseAfterFreeDoesNotPanic overwrites the batch link stored in a free
// buffer (a use after free); the pool must refuse to follow it, report
// exhaustion and count the corruption, not panic or hand out foreign
// memory.
func TestUseAfterFreeDoesNotPanic(t *testing.T) {
	p := newPool(t, Config{Topology: fakeTopo(t, "one"), BuffersPerNode: 256, CacheSize: 64, Batch: 32})
	c := newCache(t, p, "a", 0)
	defer c.Close()
	// The second batch on the stack is carried by buffer 32; its link word
	// is the first 4 bytes of the frame. Overwrite it with garbage.
	f := p.Frame(32)
	f[0], f[1], f[2], f[3] = 0xff, 0xff, 0xff, 0x7f
	got := 0
	for {
		if _, err := c.Alloc(); err != nil {
			if !errors.Is(err, ErrExhausted) {
				t.Fatal(err)
			}
			break
		}
		got++
	}
	if got != 32 {
		t.Fatalf("allocated %d buffers past the corrupt link, want the 32 of the first batch", got)
	}
	if ns := p.Snapshot().Nodes[0]; ns.FreeListCorrupt != 1 {
		t.Fatalf("FreeListCorrupt = %d, want 1", ns.FreeListCorrupt)
	}
}
