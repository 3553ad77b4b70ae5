package classifier

import (
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/scrubd/scrubd/swpath/packet"
	"github.com/scrubd/scrubd/swpath/rule"
	"github.com/scrubd/scrubd/swpath/traffic"
)

const burstSize = 256

type workload struct {
	set  *rule.Set
	fs   []rule.Fields
	lens []uint32
}

var (
	workMu sync.Mutex
	works  = map[string]*workload{}
)

// classBench returns a cached ClassBench-style workload: n rules, and
// packets derived from them, low cardinality (1000 flows) or high (every
// packet new).
func classBench(b testing.TB, n int, high bool) *workload {
	name := fmt.Sprintf("%d/%v", n, high)
	workMu.Lock()
	defer workMu.Unlock()
	if w := works[name]; w != nil {
		return w
	}
	set := traffic.ClassBenchRules(uint64(n), n)
	cfg := traffic.Config{Seed: 99, Rules: set, RuleFraction: 0.95, Flows: 1000}
	npk := 16384
	if high {
		cfg.Flows, npk = 0, 65536
	}
	fs := make([]rule.Fields, npk)
	lens := make([]uint32, npk)
	g := traffic.NewGenerator(cfg)
	var buf []byte
	for i := range fs {
		buf = g.Next(buf[:0])
		packet.Parse(buf, &fs[i])
		lens[i] = uint32(len(buf))
	}
	w := &workload{set: set, fs: fs, lens: lens}
	works[name] = w
	return w
}

// cpuClock measures the benchmark loop's thread CPU time.
type cpuClock struct{ start int64 }

func startCPU() cpuClock {
	runtime.LockOSThread()
	return cpuClock{threadCPU()}
}

func (c cpuClock) stop(b *testing.B, pkts int) {
	end := threadCPU()
	runtime.UnlockOSThread()
	if c.start != 0 && end != 0 {
		b.ReportMetric(float64(end-c.start)/float64(pkts), "cpu-ns/pkt")
	}
}

func report(b *testing.B, pkts int, probes int) {
	el := b.Elapsed()
	b.ReportMetric(float64(el.Nanoseconds())/float64(pkts), "ns/pkt")
	b.ReportMetric(float64(pkts)/el.Seconds()/1e6, "Mpps")
	if probes >= 0 {
		b.ReportMetric(float64(probes)/float64(pkts), "tuples/pkt")
	}
	b.ReportMetric(0, "ns/op") // per-op time is per burst: meaningless next to ns/pkt
}

func runBursts(b *testing.B, w *Worker, fs []rule.Fields, lens []uint32) {
	out := make([]Result, burstSize)
	w.ClassifyBurst(fs[:burstSize], lens[:burstSize], out)
	s0 := w.c.Snapshot()
	pkts := 0
	b.ResetTimer()
	cpu := startCPU()
	off := 0
	for i := 0; i < b.N; i++ {
		if off+burstSize > len(fs) {
			off = 0
		}
		w.ClassifyBurst(fs[off:off+burstSize], lens[off:off+burstSize], out)
		off += burstSize
		pkts += burstSize
	}
	b.StopTimer()
	cpu.stop(b, pkts)
	s1 := w.c.Snapshot()
	report(b, pkts, int(s1.TablesProbed-s0.TablesProbed))
	b.ReportMetric(100*float64(s1.CacheHits-s0.CacheHits)/float64(pkts), "cache-hit%")
}

// runTable runs Table.DecideBurst: the tuple lookup alone, no flow cache and
// no counters.
func runTable(b *testing.B, tab *Table, fs []rule.Fields) {
	out := make([]int32, burstSize)
	b.ResetTimer()
	cpu := startCPU()
	pkts, probes, off := 0, 0, 0
	for i := 0; i < b.N; i++ {
		if off+burstSize > len(fs) {
			off = 0
		}
		probes += tab.DecideBurst(fs[off:off+burstSize], out)
		off += burstSize
		pkts += burstSize
	}
	b.StopTimer()
	cpu.stop(b, pkts)
	report(b, pkts, probes)
}

// runDecide runs Table.Decide one packet at a time.
func runDecide(b *testing.B, tab *Table, fs []rule.Fields) {
	b.ResetTimer()
	cpu := startCPU()
	pkts, off := 0, 0
	sum := 0
	for i := 0; i < b.N; i++ {
		if off+burstSize > len(fs) {
			off = 0
		}
		for j := off; j < off+burstSize; j++ {
			sum += tab.Decide(&fs[j])
		}
		off += burstSize
		pkts += burstSize
	}
	b.StopTimer()
	cpu.stop(b, pkts)
	report(b, pkts, -1)
	if sum == 1 {
		b.Log(sum)
	}
}

// runSingle runs Worker.Classify one packet at a time (counters and flow
// cache included).
func runSingle(b *testing.B, w *Worker, fs []rule.Fields, lens []uint32) {
	b.ResetTimer()
	cpu := startCPU()
	pkts, off := 0, 0
	for i := 0; i < b.N; i++ {
		if off+burstSize > len(fs) {
			off = 0
		}
		for j := off; j < off+burstSize; j++ {
			w.Classify(&fs[j], lens[j])
		}
		off += burstSize
		pkts += burstSize
	}
	b.StopTimer()
	cpu.stop(b, pkts)
	report(b, pkts, -1)
}

// runChunked runs the table-by-table burst lookup (decideChunks).
func runChunked(b *testing.B, tab *Table, fs []rule.Fields) {
	out := make([]int32, burstSize)
	b.ResetTimer()
	cpu := startCPU()
	pkts, probes, off := 0, 0, 0
	for i := 0; i < b.N; i++ {
		if off+burstSize > len(fs) {
			off = 0
		}
		probes += tab.decideChunks(fs[off:off+burstSize], out)
		off += burstSize
		pkts += burstSize
	}
	b.StopTimer()
	cpu.stop(b, pkts)
	report(b, pkts, probes)
}

// BenchmarkSourceWorkload is the source material's workload: five drop rules
// on UDP destination-port ranges, every packet matches, burst API.
func BenchmarkSourceWorkload(b *testing.B) {
	set := traffic.SourceWorkload()
	g := traffic.NewGenerator(traffic.Config{Seed: 1, Rules: set, RuleFraction: 1, IPv6Fraction: 0.0001, Sizes: traffic.Fixed(64)})
	var fs []rule.Fields
	var lens []uint32
	var buf []byte
	for len(fs) < 4096 {
		buf = g.Next(buf[:0])
		var f rule.Fields
		packet.Parse(buf, &f)
		if set.Decide(&f) >= 0 {
			fs = append(fs, f)
			lens = append(lens, uint32(len(buf)))
		}
	}
	c, err := New(set)
	if err != nil {
		b.Fatal(err)
	}
	w := c.NewWorker()
	defer w.Close()
	b.Run("api=burst", func(b *testing.B) { runBursts(b, w, fs, lens) })
	b.Run("api=table", func(b *testing.B) { runTable(b, c.Table(), fs) })
	b.Run("api=parse+burst", func(b *testing.B) {
		frames := make([][]byte, len(fs))
		gg := traffic.NewGenerator(traffic.Config{Seed: 1, Rules: set, RuleFraction: 1, IPv6Fraction: 0.0001, Sizes: traffic.Fixed(64)})
		for i := 0; i < len(frames); {
			buf := gg.Next(nil)
			var f rule.Fields
			packet.Parse(buf, &f)
			if set.Decide(&f) >= 0 {
				frames[i] = buf
				i++
			}
		}
		out := make([]Result, burstSize)
		b.ResetTimer()
		cpu := startCPU()
		off, pkts := 0, 0
		for i := 0; i < b.N; i++ {
			if off+burstSize > len(frames) {
				off = 0
			}
			w.ClassifyFrames(frames[off:off+burstSize], out)
			off += burstSize
			pkts += burstSize
		}
		cpu.stop(b, pkts)
		report(b, pkts, -1)
	})
}

// BenchmarkClassBench: 1k, 10k, 100k ClassBench-style rules, low- and
// high-cardinality traffic, burst API. Build time, memory and tuple count
// are reported as metrics too.
func BenchmarkClassBench(b *testing.B) {
	for _, n := range []int{1000, 10000, 100000} {
		for _, high := range []bool{false, true} {
			card := "low"
			if high {
				card = "high"
			}
			for _, api := range []string{"burst", "burst-nocache", "single", "table", "decide", "table-chunked", "table-noprefilter"} {
				b.Run(fmt.Sprintf("rules=%dk/card=%s/api=%s", n/1000, card, api), func(b *testing.B) {
					wl := classBench(b, n, high)
					start := time.Now()
					c, err := New(wl.set)
					if err != nil {
						b.Fatal(err)
					}
					build := time.Since(start)
					st := c.Table().Stats()
					switch api {
					case "burst":
						w := c.NewWorker()
						defer w.Close()
						runBursts(b, w, wl.fs, wl.lens)
					case "single": // the worker one packet at a time (Worker.Classify)
						w := c.NewWorker()
						defer w.Close()
						runSingle(b, w, wl.fs, wl.lens)
					case "burst-nocache": // the worker with its flow cache off: what the cache costs or saves
						w := c.NewWorker()
						defer w.Close()
						w.SetCachePolicy(CacheNever)
						runBursts(b, w, wl.fs, wl.lens)
					case "table":
						runTable(b, c.Table(), wl.fs)
					case "decide": // Table.Decide, one packet at a time
						runDecide(b, c.Table(), wl.fs)
					case "table-chunked": // the burst lookup before the staged one
						runChunked(b, hashTables(b, wl.set), wl.fs)
					default: // the same tables, every one a candidate
						runTable(b, withoutPrefilter(hashTables(b, wl.set)), wl.fs)
					}
					b.ReportMetric(float64(build.Milliseconds()), "build-ms")
					b.ReportMetric(float64(st.Bytes)/(1<<20), "MiB")
					b.ReportMetric(float64(st.Tuples), "tuples")
					if tr := c.Table().tr; tr != nil {
						n, nodes, recs := tr.stats()
						b.ReportMetric(float64(n), "trees")
						b.ReportMetric(float64(nodes), "nodes")
						b.ReportMetric(float64(recs)/float64(len(tr.ents)), "recs/entry")
					}
				})
			}
		}
	}
}

// BenchmarkVersusLinear runs the classifier and the linear reference
// (rule.Set.Decide) side by side on the same 10k-rule set and packets.
func BenchmarkVersusLinear(b *testing.B) {
	wl := classBench(b, 10000, false)
	tab, err := Compile(wl.set)
	if err != nil {
		b.Fatal(err)
	}
	out := make([]int32, burstSize)
	b.Run("impl=tss", func(b *testing.B) { runTable(b, tab, wl.fs) })
	b.Run("impl=tss+cache", func(b *testing.B) {
		c, err := New(wl.set)
		if err != nil {
			b.Fatal(err)
		}
		w := c.NewWorker()
		defer w.Close()
		runBursts(b, w, wl.fs, wl.lens)
	})
	b.Run("impl=linear", func(b *testing.B) {
		cpu := startCPU()
		pkts, off := 0, 0
		for i := 0; i < b.N; i++ {
			if off+16 > len(wl.fs) {
				off = 0
			}
			for j := off; j < off+16; j++ {
				out[j-off] = int32(wl.set.Decide(&wl.fs[j]))
			}
			off += 16
			pkts += 16
		}
		cpu.stop(b, pkts)
		report(b, pkts, -1)
	})
}

// hashTables compiles set with the hash tables deciding (a set that
// decides with the trees has none built).
func hashTables(b *testing.B, set *rule.Set) *Table {
	tab, err := compile(set, treesOff)
	if err != nil {
		b.Fatal(err)
	}
	return tab
}

// withoutPrefilter returns a copy of t whose prefilter lets every table
// through: the plain tuple walk, for side-by-side measurements.
func withoutPrefilter(t *Table) *Table {
	t2 := *t
	// Every table a candidate: a bit per table, bit 63 standing for the
	// 63rd on (more bits would name tables that do not exist).
	var all uint64
	for ti := range t.tables {
		all |= pfBit(ti)
	}
	t2.pf = prefilter{always: all}
	return &t2
}

// BenchmarkWorkerFlood: a flood of new 5-tuples (2^20 packets, none seen
// twice within a run of 4096 bursts, unlike card=high's trace) through
// Table.DecideBurst (the lookup alone), a Worker with its flow cache off
// (lookup and counting) and a Worker with its cache (what it costs on a
// flood), 16 bursts of 256 each in turn, the order rotating, on one
// thread; the metrics are each one's thread CPU time per packet and the
// share of the cached worker's packets that went through its cache.
func BenchmarkWorkerFlood(b *testing.B) {
	for _, n := range []int{1000, 10000, 100000} {
		b.Run(fmt.Sprintf("rules=%dk", n/1000), func(b *testing.B) {
			set := traffic.ClassBenchRules(uint64(n), n)
			fs, lens := floodTrace(set, 1<<20)
			c, err := New(set)
			if err != nil {
				b.Fatal(err)
			}
			tab := c.Table()
			cached, plain := c.NewWorker(), c.NewWorker()
			defer cached.Close()
			defer plain.Close()
			plain.SetCachePolicy(CacheNever)
			ids := make([]int32, burstSize)
			res := make([]Result, burstSize)
			cpu, pkts := interleave3(b, len(fs), func(v, o int) {
				switch v {
				case 0:
					tab.DecideBurst(fs[o:o+burstSize], ids)
				case 1:
					plain.ClassifyBurst(fs[o:o+burstSize], lens[o:o+burstSize], res)
				case 2:
					cached.ClassifyBurst(fs[o:o+burstSize], lens[o:o+burstSize], res)
				}
			})
			b.ReportMetric(float64(cpu[0])/float64(pkts), "table-cpu-ns/pkt")
			b.ReportMetric(float64(cpu[1])/float64(pkts), "nocache-cpu-ns/pkt")
			b.ReportMetric(float64(cpu[2])/float64(pkts), "cache-cpu-ns/pkt")
			b.ReportMetric(100*float64(cached.cache.lookups)/float64(pkts), "through-cache%")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// interleave3 runs three variants of a burst lookup, v = 0, 1, 2, over
// the same packets b.N times, 16 bursts (burstSize packets from offset o
// of n, by run(v, o)) each in turn, each variant first in turn (it reads
// the packets from memory), on one locked OS thread, and returns each
// variant's thread CPU time and the packets each ran.
func interleave3(b *testing.B, n int, run func(v, o int)) (cpu [3]int64, pkts int) {
	const step = 16 * burstSize
	off := 0
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if off+step > n {
			off = 0
		}
		for k := range 3 {
			v := (k + i) % 3
			t0 := threadCPU()
			for o := off; o < off+step; o += burstSize {
				run(v, o)
			}
			cpu[v] += threadCPU() - t0
		}
		off += step
		pkts += step
	}
	b.StopTimer()
	return cpu, pkts
}

// floodTrace is a flood of n new 5-tuples for set (95 % of them aimed at
// its rules), parsed, with each packet's length.
func floodTrace(set *rule.Set, n int) ([]rule.Fields, []uint32) {
	g := traffic.NewGenerator(traffic.Config{Seed: 99, Rules: set, RuleFraction: 0.95})
	fs := make([]rule.Fields, n)
	lens := make([]uint32, n)
	var buf []byte
	for i := range fs {
		buf = g.Next(buf[:0])
		packet.Parse(buf, &fs[i])
		lens[i] = uint32(len(buf))
	}
	return fs, lens
}

// BenchmarkSmallBursts: BenchmarkWorkerFlood's flood of new 5-tuples in
// bursts of a few packets, as a receive queue polled before it fills
// hands them over: Table.Decide a packet at a time, Table.DecideBurst and
// a Worker (its cache off) in bursts of the given size, alternated in one
// process (interleave3). No burst should cost more a packet than Decide.
func BenchmarkSmallBursts(b *testing.B) {
	for _, n := range []int{10000, 100000} {
		set := traffic.ClassBenchRules(uint64(n), n)
		fs, lens := floodTrace(set, 1<<18)
		c, err := New(set)
		if err != nil {
			b.Fatal(err)
		}
		tab := c.Table()
		for _, size := range []int{1, 2, 4, 8, 16} {
			b.Run(fmt.Sprintf("rules=%dk/burst=%d", n/1000, size), func(b *testing.B) {
				w := c.NewWorker()
				defer w.Close()
				w.SetCachePolicy(CacheNever)
				ids := make([]int32, size)
				res := make([]Result, size)
				sink := 0
				cpu, pkts := interleave3(b, len(fs), func(v, o int) {
					for p := o; p < o+burstSize; p += size {
						switch v {
						case 0:
							for i := p; i < p+size; i++ {
								sink += tab.Decide(&fs[i])
							}
						case 1:
							tab.DecideBurst(fs[p:p+size], ids)
						case 2:
							w.ClassifyBurst(fs[p:p+size], lens[p:p+size], res)
						}
					}
				})
				b.ReportMetric(float64(cpu[0])/float64(pkts), "decide-cpu-ns/pkt")
				b.ReportMetric(float64(cpu[1])/float64(pkts), "table-cpu-ns/pkt")
				b.ReportMetric(float64(cpu[2])/float64(pkts), "worker-cpu-ns/pkt")
				b.ReportMetric(0, "ns/op")
				if sink == -1 {
					b.Log(sink)
				}
			})
		}
	}
}
