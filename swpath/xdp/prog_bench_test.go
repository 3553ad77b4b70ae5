//go:build linux

package xdp

import (
	"encoding/binary"
	"net"
	"os"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"

	"github.com/scrubd/scrubd/swpath/traffic"
)

// xdpFilterObj is xdp-filter's UDP program for policy "allow" (what
// matches is dropped, the rest passed; Debian package xdp-tools), the one
// `xdp-filter load -f udp` attaches.
const xdpFilterObj = "/usr/lib/x86_64-linux-gnu/bpf/xdpfilt_alw_udp.o"

// BenchmarkProgRun measures the program alone through BPF_PROG_TEST_RUN
// (kernel-reported ns per run, no veth): the UDP port rules of the veth
// benchmark with the frame hitting the last rule, side by side with
// xdp-filter's program holding the same ports (metric x-xdpfilter: its
// ns/pkt over ours, >1 means we are faster; "empty" is a program that only
// returns XDP_DROP: the test run's own cost in every figure), and a
// ClassBench-like set on generated traffic.
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
		var filt float64
		if n <= 1000 {
			b.Run("xdp-filter/ports/"+itoa(n), func(b *testing.B) {
				filt = xdpFilterProgBench(b, n, frame)
			})
		}
		b.Run("ports/"+itoa(n), func(b *testing.B) {
			e := newEngine(b, Options{})
			if err := e.Replace(benchRules(n)); err != nil {
				b.Fatal(err)
			}
			ns := progBench(b, e.Program(), [][]byte{frame}, XDPDrop)
			if filt > 0 {
				b.ReportMetric(filt/ns, "x-xdpfilter")
			}
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

// xdpFilterProgBench loads xdp-filter's UDP program directly (no libxdp
// dispatcher) with destination ports 10000..10000+n-1 and returns its kernel
// ns per run on frame.
func xdpFilterProgBench(b *testing.B, n int, frame []byte) float64 {
	needBPF(b)
	if _, err := os.Stat(xdpFilterObj); err != nil {
		b.Skipf("xdp-filter's object is not installed (Debian package xdp-tools): %v", err)
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
	defer coll.Close()
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
	// It must drop the frame of the last port and pass the next one.
	other := append([]byte(nil), frame...)
	binary.BigEndian.PutUint16(other[36:], uint16(10000+n))
	if act, err := prog.Run(&ebpf.RunOptions{Data: other}); err != nil || act != XDPPass {
		b.Fatalf("xdp-filter on a port without a rule: action %d, %v; want pass", act, err)
	}
	return progBench(b, prog, [][]byte{frame}, XDPDrop)
}

func progBench(b *testing.B, prog *ebpf.Program, frames [][]byte, want uint32) float64 {
	var total float64
	for _, f := range frames {
		act, d, err := prog.Benchmark(f, max(b.N/len(frames), 1), nil)
		if err != nil {
			b.Fatal(err)
		}
		if want != 0 && act != want {
			b.Fatalf("action %d, want %d", act, want)
		}
		total += float64(d.Nanoseconds())
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
