package pool

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/scrubd/scrubd/swpath/internal/sys"
	"github.com/scrubd/scrubd/swpath/numa"
)

// threadCPU returns the CPU time the calling thread has consumed. This
// machine's cores are shared with other jobs, so wall-clock ns/op include
// time spent descheduled; the cpu-ns metrics count only our own thread's
// running time. Call with the goroutine locked to its thread.
func threadCPU() time.Duration { return sys.ThreadCPUTime() }

// cpuTimer measures the benchmark goroutine's thread CPU time over b.Loop.
func cpuTimer(b *testing.B) func(unit string, per float64) {
	runtime.LockOSThread()
	t0 := threadCPU()
	return func(unit string, per float64) {
		el := threadCPU() - t0
		runtime.UnlockOSThread()
		b.ReportMetric(float64(el.Nanoseconds())/(float64(b.N)*per), unit)
	}
}

// BenchmarkCachedPair is one Alloc and one Free on a warm cache: the cost
// every packet pays when the cache neither runs dry nor overflows.
func BenchmarkCachedPair(b *testing.B) {
	p := newPool(b, Config{Topology: fakeTopo(b, "one"), BuffersPerNode: 4096})
	c := newCache(b, p, "w", 0)
	defer c.Close()
	x, _ := c.Alloc()
	c.Free(x)
	b.ResetTimer()
	done := cpuTimer(b)
	for b.Loop() {
		idx, err := c.Alloc()
		if err != nil {
			b.Fatal(err)
		}
		c.Free(idx)
	}
	done("cpu-ns/pair", 1)
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/pair")
}

// BenchmarkCachedBurst32 is AllocBatch+FreeBatch of 32 on a warm cache,
// per buffer.
func BenchmarkCachedBurst32(b *testing.B) {
	p := newPool(b, Config{Topology: fakeTopo(b, "one"), BuffersPerNode: 4096})
	c := newCache(b, p, "w", 0)
	defer c.Close()
	var burst [32]uint32
	done := cpuTimer(b)
	for b.Loop() {
		n, _ := c.AllocBatch(burst[:])
		c.FreeBatch(burst[:n])
	}
	done("cpu-ns/buf", 32)
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*32), "ns/buf")
}

// BenchmarkRefillSpill moves one batch from the shared part into the cache
// and one back, uncontended: the cost per buffer of the batch path.
func BenchmarkRefillSpill(b *testing.B) {
	for _, batch := range []int{32, 64, 128} {
		b.Run(fmt.Sprint("batch=", batch), func(b *testing.B) {
			p := newPool(b, Config{Topology: fakeTopo(b, "one"), BuffersPerNode: 4096, Batch: batch})
			c := newCache(b, p, "w", 0)
			defer c.Close()
			done := cpuTimer(b)
			for b.Loop() {
				if !c.refill() {
					b.Fatal("refill failed")
				}
				c.spill()
			}
			done("cpu-ns/buf", float64(2*batch))
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*2*batch), "ns/buf")
		})
	}
}

// burstCache is what the scaling workload needs from a cache.
type burstCache interface {
	AllocBatch([]uint32) (int, error)
	FreeBatch([]uint32) error
}

// vppPool reproduces VPP's arrangement (src/vlib/buffer_funcs.h): one
// shared free list per pool behind one spin lock, and a 512-buffer
// per-thread cache refilled and spilled in batches.
type vppPool struct {
	_    [128]byte
	lock atomic.Uint32
	_    [124]byte
	free []uint32
}

func (v *vppPool) acquire() {
	for spins := 0; ; spins++ {
		if v.lock.Load() == 0 && v.lock.CompareAndSwap(0, 1) {
			return
		}
		if spins&1023 == 1023 {
			runtime.Gosched()
		}
	}
}

type vppCache struct {
	p     *vppPool
	objs  []uint32
	n     int
	batch int
	_     [64]byte
}

func (c *vppCache) AllocBatch(dst []uint32) (int, error) {
	got := 0
	for got < len(dst) {
		if c.n == 0 {
			c.p.acquire()
			k := min(c.batch, len(c.p.free))
			copy(c.objs, c.p.free[len(c.p.free)-k:])
			c.p.free = c.p.free[:len(c.p.free)-k]
			c.p.lock.Store(0)
			if k == 0 {
				return got, ErrExhausted
			}
			c.n = k
		}
		k := min(c.n, len(dst)-got)
		copy(dst[got:], c.objs[c.n-k:c.n])
		c.n -= k
		got += k
	}
	return got, nil
}

func (c *vppCache) FreeBatch(ix []uint32) error {
	for _, idx := range ix {
		if c.n == len(c.objs) {
			c.p.acquire()
			c.p.free = append(c.p.free, c.objs[c.n-c.batch:c.n]...)
			c.p.lock.Store(0)
			c.n -= c.batch
		}
		c.objs[c.n] = idx
		c.n++
	}
	return nil
}

// spsc is a single-producer single-consumer ring of bursts between two
// workers (the "forwarded to another worker, freed there" path).
type spsc struct {
	_    [128]byte
	head atomic.Uint64
	_    [120]byte
	tail atomic.Uint64
	_    [120]byte
	buf  [64][32]uint32
}

func (r *spsc) put(b *[32]uint32) bool {
	t := r.tail.Load()
	if t-r.head.Load() == uint64(len(r.buf)) {
		return false
	}
	r.buf[t%uint64(len(r.buf))] = *b
	r.tail.Store(t + 1)
	return true
}

func (r *spsc) get(b *[32]uint32) bool {
	h := r.head.Load()
	if h == r.tail.Load() {
		return false
	}
	*b = r.buf[h%uint64(len(r.buf))]
	r.head.Store(h + 1)
	return true
}

// runPipeline runs workers on locked, pinned threads. Each iteration a
// worker allocates a 32-buffer burst (an RX refill), touches it, and
// passes it to the next worker, which frees it (a drop on another
// thread); a worker frees its own burst when the ring is full. Caches
// therefore drain on one side and overflow on the other, so the shared
// part is used at a steady rate, as in the VPP drop path.
func runPipeline(b *testing.B, caches []burstCache, touch func(uint32), iters int) (wall, cpu time.Duration) {
	w := len(caches)
	rings := make([]*spsc, w)
	for i := range rings {
		rings[i] = new(spsc)
	}
	cpus, err := numa.ThreadAffinity()
	if err != nil {
		b.Fatal(err)
	}
	var start, done sync.WaitGroup
	start.Add(1)
	var failed atomic.Bool
	var cpuSum atomic.Int64
	for i, c := range caches {
		done.Go(func() {
			// Stay locked: the pinned thread exits with the goroutine
			// instead of returning to the scheduler with a narrowed
			// affinity.
			runtime.LockOSThread()
			if err := numa.PinThread(cpus[i%len(cpus)]); err != nil {
				failed.Store(true)
				return
			}
			out, in := rings[(i+1)%w], rings[i]
			var burst, recv [32]uint32
			start.Wait()
			c0 := threadCPU()
			defer func() { cpuSum.Add(int64(threadCPU() - c0)) }()
			for range iters {
				n, err := c.AllocBatch(burst[:])
				if err != nil && !errors.Is(err, ErrExhausted) {
					failed.Store(true)
				}
				for _, idx := range burst[:n] {
					touch(idx)
				}
				if n < 32 || !out.put(&burst) {
					c.FreeBatch(burst[:n])
				}
				for in.get(&recv) {
					c.FreeBatch(recv[:])
				}
			}
			// Stop receiving only after everyone has stopped sending.
		})
	}
	t0 := time.Now()
	start.Done()
	done.Wait()
	el := time.Since(t0)
	for i, r := range rings {
		var recv [32]uint32
		for r.get(&recv) {
			caches[i].FreeBatch(recv[:])
		}
	}
	if failed.Load() {
		b.Fatal("worker failed (pinning or allocation error)")
	}
	return el, time.Duration(cpuSum.Load())
}

// BenchmarkScaling runs the same pipeline, with 1..GOMAXPROCS workers, on
// three allocators side by side: the VPP arrangement (one spin-locked
// shared pool, 512-buffer caches), this package on the live topology
// (here one node, so one lock-free shared part), and this package on a
// fake four-node topology with workers spread over the nodes (sharding
// only: the memory is the same on a one-node machine). It reports ns per
// buffer for each and the ratio vpp/pool.
func BenchmarkScaling(b *testing.B) {
	const perNode = 1 << 16
	for w := 1; w <= runtime.GOMAXPROCS(0); w++ {
		b.Run(fmt.Sprint("workers=", w), func(b *testing.B) {
			iters := max(b.N/w, 1)
			bufs := float64(iters * w * 32)

			// VPP baseline.
			vp := &vppPool{free: make([]uint32, 0, perNode)}
			for i := range perNode {
				vp.free = append(vp.free, uint32(i))
			}
			// Both allocators touch their buffers with the same code:
			// region of the index's node, offset index*stride.
			const stride = 320
			var vregs [MaxNodes][]byte
			vregs[0] = make([]byte, perNode*stride)
			touch := func(regs *[MaxNodes][]byte) func(uint32) {
				return func(idx uint32) { regs[idx>>LocalBits][int(idx&localMask)*stride]++ }
			}
			vc := make([]burstCache, w)
			for i := range vc {
				vc[i] = &vppCache{p: vp, objs: make([]uint32, 512), batch: 64}
			}
			tv, cv := runPipeline(b, vc, touch(&vregs), iters)

			run := func(topo *numa.Topology) (time.Duration, time.Duration) {
				p, err := New(Config{Topology: topo, BuffersPerNode: perNode, BufSize: 256, Headroom: 64})
				if err != nil {
					b.Fatal(err)
				}
				pc := make([]burstCache, w)
				cs := make([]*Cache, w)
				nodes := p.Nodes()
				for i := range pc {
					cs[i], err = p.NewCacheOnNode(fmt.Sprint("w", i), nodes[i%len(nodes)])
					if err != nil {
						b.Fatal(err)
					}
					pc[i] = cs[i]
				}
				if p.Stride() != stride {
					b.Fatalf("stride %d", p.Stride())
				}
				var regs [MaxNodes][]byte
				for _, n := range nodes {
					regs[n] = p.Region(n)
				}
				el, cpu := runPipeline(b, pc, touch(&regs), iters)
				for _, c := range cs {
					c.Close()
				}
				if err := p.Close(); err != nil {
					b.Fatal(err)
				}
				return el, cpu
			}
			live, err := numa.ReadLive()
			if err != nil {
				b.Fatal(err)
			}
			tp, cp := run(live)
			t4, err := numa.Read("../numa/testdata/nps4")
			if err != nil {
				b.Fatal(err)
			}
			tf, cf := run(t4)
			// Wall time per buffer across all workers (throughput), and
			// CPU time per buffer summed over workers (cost, robust to
			// other load on a shared machine).
			b.ReportMetric(float64(tv.Nanoseconds())/bufs, "vpp-ns/buf")
			b.ReportMetric(float64(tp.Nanoseconds())/bufs, "pool-ns/buf")
			b.ReportMetric(float64(tf.Nanoseconds())/bufs, "pool4-ns/buf")
			b.ReportMetric(float64(cv.Nanoseconds())/bufs, "vpp-cpu-ns/buf")
			b.ReportMetric(float64(cp.Nanoseconds())/bufs, "pool-cpu-ns/buf")
			b.ReportMetric(float64(cf.Nanoseconds())/bufs, "pool4-cpu-ns/buf")
			b.ReportMetric(float64(cv)/float64(cp), "vpp/pool-cpu")
			b.ReportMetric(float64(tv)/float64(tp), "vpp/pool")
		})
	}
}

// BenchmarkSharedPath isolates the shared part under contention: every
// worker (locked, pinned) takes a batch from the node and puts it back in
// a loop, as if every cache were always empty or full. Lock-free stacks
// (this package) against one spin-locked free list (VPP). Reports CPU ns
// per batch operation summed over workers, and the ratio.
func BenchmarkSharedPath(b *testing.B) {
	const perNode, batch = 1 << 14, 64
	cpus, err := numa.ThreadAffinity()
	if err != nil {
		b.Fatal(err)
	}
	// The last case oversubscribes the CPUs (4 workers per CPU): a spin-lock
	// holder can then be descheduled while the others spin, the hazard a
	// lock-free shared part does not have.
	ws := []int{}
	for w := 1; w <= runtime.GOMAXPROCS(0); w++ {
		ws = append(ws, w)
	}
	ws = append(ws, 4*len(cpus))
	for _, w := range ws {
		b.Run(fmt.Sprint("workers=", w), func(b *testing.B) {
			iters := max(b.N/w, 1)
			par := func(body func(dst []uint32)) (time.Duration, time.Duration) {
				var start, done sync.WaitGroup
				start.Add(1)
				var cpu atomic.Int64
				for i := range w {
					done.Go(func() {
						runtime.LockOSThread() // never unlocked: see runPipeline
						numa.PinThread(cpus[i%len(cpus)])
						dst := make([]uint32, batch)
						start.Wait()
						c0 := threadCPU()
						for range iters {
							body(dst)
						}
						cpu.Add(int64(threadCPU() - c0))
					})
				}
				t0 := time.Now()
				start.Done()
				done.Wait()
				return time.Since(t0), time.Duration(cpu.Load())
			}
			vp := &vppPool{free: make([]uint32, 0, perNode)}
			for i := range perNode {
				vp.free = append(vp.free, uint32(i))
			}
			tv, cv := par(func(dst []uint32) {
				vp.acquire()
				k := copy(dst, vp.free[len(vp.free)-batch:])
				vp.free = vp.free[:len(vp.free)-k]
				vp.lock.Store(0)
				vp.acquire()
				vp.free = append(vp.free, dst[:k]...)
				vp.lock.Store(0)
			})
			p, err := New(Config{Topology: fakeTopo(b, "one"), BuffersPerNode: perNode, BufSize: 256, Headroom: 64, Batch: batch})
			if err != nil {
				b.Fatal(err)
			}
			defer p.Close()
			nd := p.byID[0]
			tp, cp := par(func(dst []uint32) {
				k := nd.getBatch(dst)
				nd.putBatch(dst[:k])
			})
			ops := float64(2 * iters * w)
			b.ReportMetric(float64(cv.Nanoseconds())/ops, "vpp-cpu-ns/batch")
			b.ReportMetric(float64(cp.Nanoseconds())/ops, "pool-cpu-ns/batch")
			b.ReportMetric(float64(tv.Nanoseconds())/ops, "vpp-ns/batch")
			b.ReportMetric(float64(tp.Nanoseconds())/ops, "pool-ns/batch")
			b.ReportMetric(float64(cv)/float64(cp), "vpp/pool-cpu")
		})
	}
}
