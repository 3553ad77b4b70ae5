//go:build linux

package xdp

import (
	"net"
	"testing"

	"github.com/scrubd/scrubd/swpath/traffic"
)

// BenchmarkProgRun measures the program alone through BPF_PROG_TEST_RUN
// (kernel-reported ns per run, no veth): the UDP port rules of the veth
// benchmark with the frame hitting the last rule, and a ClassBench-like set
// on generated traffic.
func BenchmarkProgRun(b *testing.B) {
	mac := net.HardwareAddr{2, 0, 0, 0, 0, 1}
	for _, n := range []int{5, 1000, 10000} {
		b.Run("ports/"+itoa(n), func(b *testing.B) {
			e := newEngine(b, Options{})
			if err := e.Replace(benchRules(n)); err != nil {
				b.Fatal(err)
			}
			progBench(b, e, [][]byte{benchFrame(mac, mac, uint16(10000+n-1))}, XDPDrop)
		})
	}
	b.Run("classbench/1000", func(b *testing.B) {
		e := newEngine(b, Options{})
		set := traffic.ClassBenchRules(1, 1000)
		if err := e.Replace(set); err != nil {
			b.Fatal(err)
		}
		frames := traffic.NewGenerator(traffic.Config{Seed: 1, Rules: set, RuleFraction: 0.8}).Frames(64)
		progBench(b, e, frames, 0)
	})
}

func progBench(b *testing.B, e *Engine, frames [][]byte, want uint32) {
	var total float64
	for _, f := range frames {
		act, d, err := e.Program().Benchmark(f, max(b.N/len(frames), 1), nil)
		if err != nil {
			b.Fatal(err)
		}
		if want != 0 && act != want {
			b.Fatalf("action %d, want %d", act, want)
		}
		total += float64(d.Nanoseconds())
	}
	b.ReportMetric(total/float64(len(frames)), "kernel-ns/pkt")
}

// BenchmarkCounters measures reading every rule's counters (one batch
// lookup of the per-CPU map) with 10k rules.
func BenchmarkCounters(b *testing.B) {
	e := newEngine(b, Options{})
	if err := e.Replace(benchRules(10000)); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		c, err := e.Counters()
		if err != nil || len(c) != 10000 {
			b.Fatal(err)
		}
	}
}
