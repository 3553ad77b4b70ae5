//go:build linux

package xdp

import (
	"encoding/binary"
	"net"
	"os"
	"slices"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"

	"github.com/scrubd/scrubd/internal/testenv"
	"github.com/scrubd/scrubd/swpath/traffic"
)

// xdpFilterObj is xdp-filter's UDP program for policy "allow" (what
// matches is dropped, the rest passed; Debian package xdp-tools), the one
// `xdp-filter load -f udp` attaches.
const xdpFilterObj = "/usr/lib/x86_64-linux-gnu/bpf/xdpfilt_alw_udp.o"

// BenchmarkProgRun measures the program alone through BPF_PROG_TEST_RUN
// (kernel-reported ns per run, no veth): the UDP port rules of the veth
// benchmark with the frame hitting the last rule, side by side with
// xdp-filter's program holding the same ports ("empty" is a program that
// only returns XDP_DROP: the test run's own cost in every figure), and a
// ClassBench-like set on generated traffic.
//
// The side-by-side cases alternate the two programs for pairRounds rounds
// of b.N runs each, so a noisy neighbour slows both alike, and report the
// mean of the middle half of the rounds (kernel-ns/pkt for ours,
// xdpfilter-ns/pkt) and their ratio (x-xdpfilter: its ns over ours, >1
// means we are faster). The kernel reports whole ns per run; averaging
// rounds recovers the fraction that a median would round away.
func BenchmarkProgRun(b *testing.B) {
	mac := net.HardwareAddr{2, 0, 0, 0, 0, 1}
	b.Run("empty", func(b *testing.B) {
		needBPF(b)
		prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{Type: ebpf.XDP, License: "GPL", Instructions: asm.Instructions{
			asm.Mov.Imm(asm.R0, XDPDrop), asm.Return()}})
		if err != nil {
			b.Fatal(err)
		}
		defer prog.Close()
		progBench(b, prog, [][]byte{benchFrame(mac, mac, 1)}, XDPDrop)
	})
	for _, n := range []int{5, 1000, 10000} {
		frame := benchFrame(mac, mac, uint16(10000+n-1))
		b.Run("ports/"+itoa(n), func(b *testing.B) {
			e := newEngine(b, Options{})
			if err := e.Replace(benchRules(n)); err != nil {
				b.Fatal(err)
			}
			if n > 1000 {
				progBench(b, e.Program(), [][]byte{frame}, XDPDrop)
				return
			}
			filt, closeFilt := loadXDPFilter(b, n, frame)
			defer closeFilt()
			var ours, theirs []float64
			for range pairRounds {
				ours = append(ours, runNs(b, e.Program(), frame, b.N, XDPDrop))
				theirs = append(theirs, runNs(b, filt, frame, b.N, XDPDrop))
			}
			o, f := midMean(ours), midMean(theirs)
			b.ReportMetric(o, "kernel-ns/pkt")
			b.ReportMetric(f, "xdpfilter-ns/pkt")
			b.ReportMetric(f/o, "x-xdpfilter")
		})
	}
	b.Run("classbench/1000", func(b *testing.B) {
		e := newEngine(b, Options{})
		set := traffic.ClassBenchRules(1, 1000)
		if err := e.Replace(set); err != nil {
			b.Fatal(err)
		}
		frames := traffic.NewGenerator(traffic.Config{Seed: 1, Rules: set, RuleFraction: 0.8}).Frames(64)
		progBench(b, e.Program(), frames, 0)
	})
}

// pairRounds is how many times BenchmarkProgRun alternates two programs.
const pairRounds = 24

// midMean is the mean of the middle half of x.
func midMean(x []float64) float64 {
	x = slices.Clone(x)
	slices.Sort(x)
	x = x[len(x)/4 : len(x)-len(x)/4]
	var s float64
	for _, v := range x {
		s += v
	}
	return s / float64(len(x))
}

// loadXDPFilter loads xdp-filter's UDP program directly (no libxdp
// dispatcher) with destination ports 10000..10000+n-1 and checks that it
// drops frame, the last port's, and passes the next port.
func loadXDPFilter(b *testing.B, n int, frame []byte) (*ebpf.Program, func()) {
	needBPF(b)
	if _, err := os.Stat(xdpFilterObj); err != nil {
		testenv.Missing(b, "xdp-filter's object is not installed (Debian package xdp-tools): %v", err)
	}
	spec, err := ebpf.LoadCollectionSpec(xdpFilterObj)
	if err != nil {
		b.Fatal(err)
	}
	for _, m := range spec.Maps {
		m.Pinning = ebpf.PinNone // xdp-filter pins its maps; not here
	}
	coll, err := ebpf.NewCollection(spec)
	if err != nil {
		b.Fatal(err)
	}
	ncpu, err := ebpf.PossibleCPU()
	if err != nil {
		b.Fatal(err)
	}
	// xdp-filter's port map: per-CPU u64 per port, low bits the match flags
	// (MAP_FLAG_DST 1<<1 | MAP_FLAG_UDP 1<<3), indexed by the port as the
	// program loads it from the header: network byte order.
	val := make([]uint64, ncpu)
	for i := range val {
		val[i] = 1<<1 | 1<<3
	}
	for i := 0; i < n; i++ {
		var nbo [2]byte
		binary.BigEndian.PutUint16(nbo[:], uint16(10000+i))
		if err := coll.Maps["filter_ports"].Put(uint32(binary.NativeEndian.Uint16(nbo[:])), val); err != nil {
			b.Fatal(err)
		}
	}
	prog := coll.Programs["xdpfilt_alw_udp"]
	other := append([]byte(nil), frame...)
	binary.BigEndian.PutUint16(other[36:], uint16(10000+n))
	if act, err := prog.Run(&ebpf.RunOptions{Data: other}); err != nil || act != XDPPass {
		b.Fatalf("xdp-filter on a port without a rule: action %d, %v; want pass", act, err)
	}
	return prog, coll.Close
}

// runNs runs frame repeat times through prog and returns the kernel's ns per
// run, checking the action.
func runNs(b *testing.B, prog *ebpf.Program, frame []byte, repeat int, want uint32) float64 {
	act, d, err := prog.Benchmark(frame, max(repeat, 1), nil)
	if err != nil {
		b.Fatal(err)
	}
	if want != 0 && act != want {
		b.Fatalf("action %d, want %d", act, want)
	}
	return float64(d.Nanoseconds())
}

func progBench(b *testing.B, prog *ebpf.Program, frames [][]byte, want uint32) float64 {
	var total float64
	for _, f := range frames {
		total += runNs(b, prog, f, b.N/len(frames), want)
	}
	ns := total / float64(len(frames))
	b.ReportMetric(ns, "kernel-ns/pkt")
	return ns
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
