package classifier

import (
	"fmt"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/scrubd/scrubd/swpath/rule"
	"github.com/scrubd/scrubd/swpath/traffic"
)

// changeMetrics reports what changes cost: wall time of the calls
// (ns/change), CPU time of the process over them, a fold's goroutine
// included (cpu-ns/change), and bytes allocated (B/change).
type changeMetrics struct {
	wall    time.Duration
	cpu0    int64
	alloc0  uint64
	changes int
	ms      runtime.MemStats
}

func (m *changeMetrics) begin() {
	runtime.ReadMemStats(&m.ms)
	m.alloc0 = m.ms.TotalAlloc
	m.cpu0 = processCPU()
}

func (m *changeMetrics) report(b *testing.B) {
	cpu := processCPU() - m.cpu0
	runtime.ReadMemStats(&m.ms)
	b.ReportMetric(float64(m.wall.Nanoseconds())/float64(m.changes), "ns/change")
	if cpu > 0 {
		b.ReportMetric(float64(cpu)/float64(m.changes), "cpu-ns/change")
	}
	b.ReportMetric(float64(m.ms.TotalAlloc-m.alloc0)/float64(m.changes), "B/change")
	b.ReportMetric(0, "ns/op") // an op is two changes: per change above
}

// BenchmarkChange: one rule added (in the middle of the set) and removed
// again, on ClassBench-style sets of 1k, 10k and 100k rules: Patch against
// Swap. The set stays one rule from its compiled base, so no fold runs.
//
//	go test -run '^$' -bench 'Change$' -benchtime 4x ./swpath/classifier/
func BenchmarkChange(b *testing.B) {
	for _, n := range []int{1000, 10000, 100000} {
		set := traffic.ClassBenchRules(uint64(n), n)
		extra := traffic.ClassBenchRules(uint64(n)+1, 1).Rules[0]
		extra.ID = "added"
		with := &rule.Set{Rules: slices.Insert(slices.Clone(set.Rules), n/2, extra)}
		for _, how := range []string{"swap", "patch"} {
			b.Run(fmt.Sprintf("%s/%d", how, n), func(b *testing.B) {
				c, err := New(set)
				if err != nil {
					b.Fatal(err)
				}
				runtime.GC()
				var m changeMetrics
				m.begin()
				for range b.N {
					t0 := time.Now()
					if how == "swap" {
						err = c.Swap(with)
					} else {
						err = c.Patch(set, with, nil, []int{n / 2})
					}
					if err == nil {
						if how == "swap" {
							err = c.Swap(set)
						} else {
							err = c.Patch(with, set, []int{n / 2}, nil)
						}
					}
					m.wall += time.Since(t0)
					if err != nil {
						b.Fatal(err)
					}
					m.changes += 2
				}
				c.Settle()
				m.report(b)
			})
		}
	}
}

// BenchmarkRemove: rules removed one by one (a different rule each
// time, the masked rules piling up below the fold bound), on
// ClassBench-style sets of 10k and 100k rules, by Patch: "copy" to a new
// array without the rule (its building, the caller's, is not timed: a
// copy of the whole array), "inplace" to the same array with the rule's
// position made a hole (rule.Holes). ns/change and B/change are Patch's
// alone.
//
//	go test -run '^$' -bench 'Remove$' -benchtime 20x ./swpath/classifier/
func BenchmarkRemove(b *testing.B) {
	for _, n := range []int{10000, 100000} {
		set := traffic.ClassBenchRules(uint64(n), n)
		for _, how := range []string{"copy", "inplace"} {
			b.Run(fmt.Sprintf("%s/%d", how, n), func(b *testing.B) {
				if b.N > n/32 {
					b.Skip("more removals than the masked bound lets through without a fold")
				}
				benchPatches(b, set, func(i int, cur *rule.Set) (*rule.Set, []int, []int) {
					at := (i * 7919) % n // a live rule of the original set
					if how == "copy" {
						at -= i - countBelow(i, n, at) // its index once the earlier removals are gone
						return &rule.Set{Rules: slices.Delete(slices.Clone(cur.Rules), at, at+1)}, []int{at}, nil
					}
					return &rule.Set{Rules: cur.Rules, Holes: cur.Holes.With(at)}, []int{at}, nil
				}, nil)
			})
		}
	}
}

// BenchmarkChangeInPlace: rules changed one by one (a different rule
// each time, its destination port changed; the overlay grows below the
// fold bound), on ClassBench-style sets of 10k and 100k rules, by Patch:
// "copy" to a new array with the changed rule where it stood (its
// building, the caller's, is not timed; the walk matches the kept
// rules), "inplace" to the same array with the rule's copy appended at
// the old position's key, the old position a hole (rule.Order). ns/change
// and B/change are Patch's alone, its overlay's compile included.
//
//	go test -run '^$' -bench 'ChangeInPlace$' -benchtime 64x ./swpath/classifier/
func BenchmarkChangeInPlace(b *testing.B) {
	for _, n := range []int{10000, 100000} {
		set := traffic.ClassBenchRules(uint64(n), n)
		for _, how := range []string{"copy", "inplace"} {
			b.Run(fmt.Sprintf("%s/%d", how, n), func(b *testing.B) {
				if b.N > foldAt(n) {
					b.Skip("more changes than the overlay's bound lets through without a fold")
				}
				start := &rule.Set{Rules: slices.Grow(slices.Clone(set.Rules), b.N)}
				benchPatches(b, start, func(i int, cur *rule.Set) (*rule.Set, []int, []int) {
					at := (i*7919 + n/3) % n // a rule of the original set, at its own position
					ru := set.Rules[at]
					ru.Match.DstPort = rule.Ranges{{Lo: 53, Hi: 53}}
					if how == "copy" {
						next := &rule.Set{Rules: slices.Clone(cur.Rules)}
						next.Rules[at] = ru
						return next, []int{at}, []int{at}
					}
					next := &rule.Set{Rules: append(cur.Rules, ru), Holes: cur.Holes.With(at)}
					next.Order = cur.Order.With(len(next.Rules)-1, cur.Key(at))
					return next, []int{at}, []int{len(next.Rules) - 1}
				}, func(ps PatchStats) bool { return (how == "inplace") == (ps.InPlace == uint64(b.N)) })
			})
		}
	}
}

// benchPatches patches b.N changes into a classifier of start, change i
// derived from the current set by change (not timed), and reports
// ns/change and B/change of Patch alone. No fold may run, and meant (if
// not nil) must accept the patch stats: which patches were in place.
func benchPatches(b *testing.B, start *rule.Set, change func(i int, cur *rule.Set) (next *rule.Set, removed, added []int), meant func(PatchStats) bool) {
	b.Helper()
	c, err := New(start)
	if err != nil {
		b.Fatal(err)
	}
	cur := start
	var wall time.Duration
	var alloc uint64
	var ms runtime.MemStats
	for i := range b.N {
		b.StopTimer()
		next, removed, added := change(i, cur)
		runtime.ReadMemStats(&ms)
		a0 := ms.TotalAlloc
		b.StartTimer()
		t0 := time.Now()
		err := c.Patch(cur, next, removed, added)
		wall += time.Since(t0)
		b.StopTimer()
		runtime.ReadMemStats(&ms)
		alloc += ms.TotalAlloc - a0
		if err != nil {
			b.Fatal(err)
		}
		cur = next
	}
	c.Settle()
	if ps := c.PatchStats(); ps.Folds+ps.SyncFolds+ps.FoldsStale != 0 || (meant != nil && !meant(ps)) {
		b.Fatalf("%+v: a fold ran, or not the patches meant", ps)
	}
	b.ReportMetric(float64(wall.Nanoseconds())/float64(b.N), "ns/change")
	b.ReportMetric(float64(alloc)/float64(b.N), "B/change")
	b.ReportMetric(0, "ns/op")
}

// countBelow is how many of the first i removals of BenchmarkRemove
// (positions k*7919 mod n of the original set) are above at: i less
// those below it.
func countBelow(i, n, at int) int {
	k := 0
	for j := range i {
		if (j*7919)%n > at {
			k++
		}
	}
	return k
}

// BenchmarkChangeStream: rules added one by one at the end of the set
// (as a store delta appends them), 4√n + 64 of them, so that Patch's
// overlay passes its fold bound and folds run on their goroutine; their
// CPU time is in cpu-ns/change (the caller's is ns/change). Swap takes
// the first 20 of them (each a compile of the whole set).
//
//	go test -run '^$' -bench 'ChangeStream' -benchtime 1x ./swpath/classifier/
func BenchmarkChangeStream(b *testing.B) {
	for _, n := range []int{10000, 100000} {
		set := traffic.ClassBenchRules(uint64(n), n)
		k := 4*foldAt(n) + 64
		adds := traffic.ClassBenchRules(uint64(n)+2, k).Rules
		// One array: set i is its first n+i rules, so building a set
		// copies nothing.
		all := append(slices.Clone(set.Rules), adds...)
		for i := range adds {
			all[n+i].ID = fmt.Sprintf("added%d", i)
		}
		for _, how := range []string{"swap", "patch"} {
			b.Run(fmt.Sprintf("%s/%d", how, n), func(b *testing.B) {
				var m changeMetrics
				var folds PatchStats
				for range b.N {
					b.StopTimer()
					cur := &rule.Set{Rules: all[:n:n]}
					c, err := New(cur)
					if err != nil {
						b.Fatal(err)
					}
					runtime.GC()
					b.StartTimer()
					m.begin()
					steps := k
					if how == "swap" {
						steps = min(k, 20) // each costs the same compile
					}
					for i := range steps {
						next := &rule.Set{Rules: all[: n+i+1 : n+i+1]}
						t0 := time.Now()
						if how == "swap" {
							err = c.Swap(next)
						} else {
							err = c.Patch(cur, next, nil, []int{n + i})
						}
						m.wall += time.Since(t0)
						if err != nil {
							b.Fatal(err)
						}
						cur = next
						m.changes++
					}
					c.Settle()
					folds = c.PatchStats()
				}
				m.report(b)
				if how == "patch" {
					b.ReportMetric(float64(folds.Folds), "folds")
					b.ReportMetric(float64(folds.SyncFolds), "syncfolds")
				}
			})
		}
	}
}

// BenchmarkPatchedLookup: what a patched table costs a lookup, against
// the compiled table of the same set, on ClassBench-style sets of 1k, 10k
// and 100k rules and fresh traffic (every packet a new flow) steered at
// the rules: DecideBurst (api=table), Decide packet by packet
// (api=decide) and a worker's bursts with its flow cache off
// (api=burst-nocache). "patched-1" has one rule removed and one added (a
// new array); "patched-fold" an overlay and masked rules just under the
// fold bounds (√n added, n/16 removed). "inplace-1" and "inplace-fold"
// remove one rule and n/16 rules in place (the same array, their
// positions made holes: rule.Holes).
//
//	go test -run '^$' -bench PatchedLookup ./swpath/classifier/
func BenchmarkPatchedLookup(b *testing.B) {
	for _, n := range []int{1000, 10000, 100000} {
		for _, how := range []string{"compiled", "patched-1", "patched-fold", "inplace-1", "inplace-fold"} {
			for _, api := range []string{"table", "decide", "burst-nocache"} {
				b.Run(fmt.Sprintf("rules=%dk/%s/api=%s", n/1000, how, api), func(b *testing.B) {
					wl := classBench(b, n, true)
					base := wl.set
					c, err := New(base)
					if err != nil {
						b.Fatal(err)
					}
					nadd, nrm := 1, 1
					switch how {
					case "patched-fold":
						nadd, nrm = foldAt(n), n/16
					case "inplace-1", "inplace-fold":
						nadd, nrm = 0, 1
						if how == "inplace-fold" {
							nrm = n / 16
						}
						step := n / nrm
						var removed []int
						for i := range base.Rules {
							if i%step == step/2 && len(removed) < nrm {
								removed = append(removed, i)
							}
						}
						next := &rule.Set{Rules: base.Rules, Holes: base.Holes.With(removed...)}
						if err := c.Patch(base, next, removed, nil); err != nil {
							b.Fatal(err)
						}
						if ps := c.PatchStats(); c.Table().pt == nil || ps.InPlace != 1 {
							b.Fatalf("%+v: not patched in place", ps)
						}
					}
					if how == "patched-1" || how == "patched-fold" {
						adds := traffic.ClassBenchRules(uint64(n)+3, nadd).Rules
						// Remove every (n/nrm)-th rule, add the new ones spread
						// over the set.
						step := n / nrm
						next := &rule.Set{}
						var removed, added []int
						for i, r := range base.Rules {
							if i%step == step/2 && len(removed) < nrm {
								removed = append(removed, i)
								continue
							}
							if k := len(added); k < nadd && i%(n/nadd) == 0 {
								a := adds[k]
								a.ID = fmt.Sprintf("added%d", k)
								added = append(added, len(next.Rules))
								next.Rules = append(next.Rules, a)
							}
							next.Rules = append(next.Rules, r)
						}
						if err := c.Patch(base, next, removed, added); err != nil {
							b.Fatal(err)
						}
						if c.Table().pt == nil {
							b.Fatal("not patched")
						}
					}
					switch api {
					case "table":
						runTable(b, c.Table(), wl.fs)
					case "decide":
						runDecide(b, c.Table(), wl.fs)
					default:
						w := c.NewWorker()
						defer w.Close()
						w.SetCachePolicy(CacheNever)
						runBursts(b, w, wl.fs, wl.lens)
					}
					c.Settle()
				})
			}
		}
	}
}
