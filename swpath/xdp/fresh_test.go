//go:build linux

package xdp

import (
	"encoding/binary"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/scrubd/scrubd/swpath/packet"
	"github.com/scrubd/scrubd/swpath/rule"
	"github.com/scrubd/scrubd/swpath/traffic"
)

// Fresh 5-tuples: a spoofed flood gives every frame a new 5-tuple. The
// in-kernel live-frames sender (and BPF_PROG_TEST_RUN with repeat) sends
// one frame over and over, so a small XDP program of ours, the ring
// program, overwrites the frame in place with the next frame of a ring of
// distinct frames before each run: a counter in a map picks the slot. In
// live-frames mode (net/bpf/test_run.c, xdp_test_run_batch) the page pool's
// pages keep what the program wrote (reset_ctx resets the pointers only;
// Documentation/bpf/bpf_prog_run.rst: "the page content is not
// rewritten"), and every byte the receiver reads is rewritten on every run.

// ringFrameLen is the length of every ring frame: traffic.Fixed(64) less
// the FCS.
const ringFrameLen = 60

// ringFreshEvery: every ringFreshEvery-th frame of a ring is one no rule
// matches; the rest (95 %) are frames the set drops, as a ClassBench trace
// aims most packets at a rule.
const ringFreshEvery = 20

// ringKey is the 5-tuple of an IPv4 ring frame as tupleCounter stores it:
// source and destination address, the first 4 bytes of L4 (ports, or ICMP
// type, code and checksum), the protocol in a native-order u32.
type ringKey [16]byte

func ringKeyOf(f []byte) ringKey {
	var k ringKey
	copy(k[0:8], f[26:34])
	copy(k[8:12], f[34:38])
	binary.NativeEndian.PutUint32(k[12:], uint32(f[23]))
	return k
}

// freshRing returns k frames va -> vb of ringFrameLen bytes, IPv4 without
// options or fragmentation, with k distinct 5-tuples: every
// ringFreshEvery-th one decided by no rule of set, every other one dropped
// by a rule of set (decided by a linear scan; TestRingTailCall compares
// with rule.Set.Decide). It also returns whether each frame is dropped.
func freshRing(tb testing.TB, set *rule.Set, k int, src, dst net.HardwareAddr) ([][]byte, []bool) {
	tb.Helper()
	// Drop rules of one priority: the first rule in file order that
	// matches decides (rule.Set.Decide's order). Rules are bucketed by the
	// first byte of their destination prefix (those shorter than /8, or
	// without one, in every bucket), so the scan looks at few rules.
	var byOctet [256][]int
	var wild []int
	for i := range set.Rules {
		r := &set.Rules[i]
		if r.Action != rule.Drop || r.Priority != set.Rules[0].Priority {
			tb.Fatalf("freshRing takes drop rules of one priority; rule %q is not", r.ID)
		}
		if d := r.Match.Dst; d.IsValid() && d.Addr().Is4() && d.Bits() >= 8 {
			o := d.Addr().As4()[0]
			byOctet[o] = append(byOctet[o], i)
		} else {
			wild = append(wild, i)
		}
	}
	first := func(idx []int, f *rule.Fields) int {
		for _, i := range idx {
			if set.Rules[i].Match.Matches(f) {
				return i
			}
		}
		return -1
	}
	decide := func(fr []byte, f *rule.Fields) int {
		a, b := first(byOctet[fr[30]], f), first(wild, f)
		if a < 0 || b >= 0 && b < a {
			return b
		}
		return a
	}
	hit := traffic.NewGenerator(traffic.Config{Seed: 11, Rules: set, RuleFraction: 1, IPv6Fraction: 1e-12, Sizes: traffic.Fixed(64)})
	miss := traffic.NewGenerator(traffic.Config{Seed: 12, Rules: set, RuleFraction: 0, IPv6Fraction: 1e-12, Sizes: traffic.Fixed(64)})
	seen := map[ringKey]bool{}
	next := func(g *traffic.Generator, drop bool) []byte {
		var f rule.Fields
		for range 200 * k {
			fr := g.Next(nil)
			if len(fr) != ringFrameLen || binary.BigEndian.Uint16(fr[12:]) != 0x0800 || fr[14] != 0x45 ||
				binary.BigEndian.Uint16(fr[20:])&0x3fff != 0 {
				continue
			}
			key := ringKeyOf(fr)
			if seen[key] || packet.Parse(fr, &f) != packet.OK {
				continue
			}
			if d := decide(fr, &f); drop != (d >= 0) {
				continue
			}
			seen[key] = true
			copy(fr[0:], dst)
			copy(fr[6:], src)
			return fr
		}
		tb.Fatalf("fewer than %d distinct frames (drop %v) from the generator", k, drop)
		return nil
	}
	frames := make([][]byte, k)
	drops := make([]bool, k)
	for i := range frames {
		drops[i] = i%ringFreshEvery != ringFreshEvery-1
		frames[i] = next(map[bool]*traffic.Generator{true: hit, false: miss}[drops[i]], drops[i])
	}
	return frames, drops
}

// ring is a ring of frames in an array map and the counter that picks the
// next one.
type ring struct {
	frames *ebpf.Map
	ctr    *ebpf.Map
	n      int
	list   [][]byte // the frames, for the packet-socket sender (liveGen)
}

func newRing(tb testing.TB, frames [][]byte) *ring {
	tb.Helper()
	n := len(frames)
	if n&(n-1) != 0 {
		tb.Fatalf("ring of %d frames: not a power of two", n)
	}
	fm, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.Array, KeySize: 4, ValueSize: 64, MaxEntries: uint32(n)})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { fm.Close() })
	keys := make([]uint32, n)
	vals := make([][64]byte, n)
	for i, f := range frames {
		keys[i] = uint32(i)
		copy(vals[i][:], f)
	}
	if _, err := fm.BatchUpdate(keys, vals, nil); err != nil {
		tb.Fatal(err)
	}
	// One counter for all CPUs (the sender is one thread; a per-CPU one
	// would start over when the thread moves).
	cm, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.Array, KeySize: 4, ValueSize: 8, MaxEntries: 1})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { cm.Close() })
	return &ring{frames: fm, ctr: cm, n: n, list: frames}
}

// reset starts the walk over the ring at frame 0.
func (r *ring) reset(tb testing.TB) {
	if err := r.ctr.Put(uint32(0), uint64(0)); err != nil {
		tb.Fatal(err)
	}
}

// e0AttachType is the engine program's attach type (cilium/ebpf gives
// SEC("xdp") BPF_XDP).
const e0AttachType = ebpf.AttachXDP

// Ends of a ring program.
const (
	ringTX   = iota // XDP_TX: the live-frames sender
	ringDrop        // XDP_DROP: the ring's own cost, for the program-alone figures
	ringTail        // tail call into slot 0 of a program array
)

// program returns the ring program: it copies the next ring frame over the
// packet (which must be ringFrameLen bytes or longer), then ends as end
// says (tail: the program array for ringTail).
func (r *ring) program(tb testing.TB, end int, tail *ebpf.Map) *ebpf.Program {
	tb.Helper()
	R0, R1, R2, R3, R4, R5, R6, R7, FP := asm.R0, asm.R1, asm.R2, asm.R3, asm.R4, asm.R5, asm.R6, asm.R7, asm.RFP
	insns := asm.Instructions{
		asm.Mov.Reg(R6, R1),
		asm.StoreImm(FP, -4, 0, asm.Word),
		asm.LoadMapPtr(R1, r.ctr.FD()),
		asm.Mov.Reg(R2, FP),
		asm.Add.Imm(R2, -4),
		asm.FnMapLookupElem.Call(),
		asm.JEq.Imm(R0, 0, "abort"),
		asm.LoadMem(R7, R0, 0, asm.DWord),
		asm.Mov.Reg(R1, R7),
		asm.Add.Imm(R1, 1),
		asm.StoreMem(R0, 0, R1, asm.DWord),
		asm.And.Imm(R7, int32(r.n-1)),
		asm.StoreMem(FP, -8, R7, asm.Word),
		asm.LoadMapPtr(R1, r.frames.FD()),
		asm.Mov.Reg(R2, FP),
		asm.Add.Imm(R2, -8),
		asm.FnMapLookupElem.Call(),
		asm.JEq.Imm(R0, 0, "abort"),
		asm.LoadMem(R2, R6, 0, asm.Word), // xdp_md.data
		asm.LoadMem(R3, R6, 4, asm.Word), // xdp_md.data_end
		asm.Mov.Reg(R4, R2),
		asm.Add.Imm(R4, ringFrameLen),
		asm.JGT.Reg(R4, R3, "abort"),
	}
	for off := int16(0); off+8 <= ringFrameLen; off += 8 {
		insns = append(insns, asm.LoadMem(R5, R0, off, asm.DWord), asm.StoreMem(R2, off, R5, asm.DWord))
	}
	if ringFrameLen%8 != 0 {
		off := int16(ringFrameLen - 4)
		insns = append(insns, asm.LoadMem(R5, R0, off, asm.Word), asm.StoreMem(R2, off, R5, asm.Word))
	}
	switch end {
	case ringTX:
		insns = append(insns, asm.Mov.Imm(R0, 3), asm.Return())
	case ringDrop:
		insns = append(insns, asm.Mov.Imm(R0, XDPDrop), asm.Return())
	case ringTail:
		insns = append(insns,
			asm.Mov.Reg(R1, R6),
			asm.LoadMapPtr(R2, tail.FD()),
			asm.Mov.Imm(R3, 0),
			asm.FnTailCall.Call(),
		)
	}
	insns = append(insns, asm.Mov.Imm(R0, 0).WithSymbol("abort"), asm.Return()) // XDP_ABORTED
	// The attach type as the engine's program has it (SEC("xdp")): a
	// program array takes only programs of its first program's kind.
	p, err := ebpf.NewProgram(&ebpf.ProgramSpec{Type: ebpf.XDP, AttachType: e0AttachType, License: "GPL", Instructions: insns})
	if err != nil {
		tb.Fatalf("%+v", err)
	}
	tb.Cleanup(func() { p.Close() })
	return p
}

// tailInto returns the ring program that ends in a tail call into prog, so
// BPF_PROG_TEST_RUN with repeat runs prog on a new ring frame every time.
func (r *ring) tailInto(tb testing.TB, prog *ebpf.Program) *ebpf.Program {
	tb.Helper()
	pa, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.ProgramArray, KeySize: 4, ValueSize: 4, MaxEntries: 1})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { pa.Close() })
	if err := pa.Put(uint32(0), prog); err != nil {
		tb.Fatal(err)
	}
	return r.program(tb, ringTail, pa)
}

// tupleCounter is a receiver for the ring's frames: it counts each frame in
// counts (a hash of ringKey -> u64) and drops it.
func tupleCounter(tb testing.TB, counts *ebpf.Map) *ebpf.Program {
	tb.Helper()
	R0, R1, R2, R3, R4, R5, FP := asm.R0, asm.R1, asm.R2, asm.R3, asm.R4, asm.R5, asm.RFP
	insns := asm.Instructions{
		asm.LoadMem(R2, R1, 0, asm.Word),
		asm.LoadMem(R3, R1, 4, asm.Word),
		asm.Mov.Reg(R4, R2),
		asm.Add.Imm(R4, 38),
		asm.JGT.Reg(R4, R3, "drop"),
		asm.LoadMem(R5, R2, 26, asm.DWord), // addresses
		asm.StoreMem(FP, -16, R5, asm.DWord),
		asm.LoadMem(R5, R2, 34, asm.Word), // ports
		asm.StoreMem(FP, -8, R5, asm.Word),
		asm.LoadMem(R5, R2, 23, asm.Byte), // protocol
		asm.StoreMem(FP, -4, R5, asm.Word),
	}
	insns = append(insns, countAt(counts, -16, "new")...)
	insns = append(insns,
		asm.Mov.Imm(R0, XDPDrop),
		asm.Return(),
		asm.Mov.Imm(R1, 1).WithSymbol("new"),
		asm.StoreMem(FP, -24, R1, asm.DWord),
		asm.LoadMapPtr(R1, counts.FD()),
		asm.Mov.Reg(R2, FP),
		asm.Add.Imm(R2, -16),
		asm.Mov.Reg(R3, FP),
		asm.Add.Imm(R3, -24),
		asm.Mov.Imm(R4, 0),
		asm.FnMapUpdateElem.Call(),
		asm.Mov.Imm(R0, XDPDrop).WithSymbol("drop"),
		asm.Return(),
	)
	p, err := ebpf.NewProgram(&ebpf.ProgramSpec{Type: ebpf.XDP, License: "GPL", Instructions: insns})
	if err != nil {
		tb.Fatalf("%+v", err)
	}
	tb.Cleanup(func() { p.Close() })
	return p
}

// TestRingTailCall: BPF_PROG_TEST_RUN of the ring program tail-calling the
// engine's program runs the engine on ring frame 0, 1, 2, ... in turn, and
// the engine decides each as rule.Set.Decide (the linear reference) does:
// what the program-alone fresh benchmarks measure is the real program on
// the ring's frames. The ring holds distinct 5-tuples, 95 % dropped.
func TestRingTailCall(t *testing.T) {
	e := newEngine(t, Options{})
	set := traffic.ClassBenchRules(1000, 1000)
	if err := e.Replace(set); err != nil {
		t.Fatal(err)
	}
	mac := net.HardwareAddr{2, 0, 0, 0, 0, 1}
	frames, drops := freshRing(t, set, 1024, mac, mac)
	seen := map[ringKey]bool{}
	ndrop := 0
	for i, fr := range frames {
		seen[ringKeyOf(fr)] = true
		if drops[i] {
			ndrop++
		}
	}
	if len(seen) != len(frames) || ndrop != len(frames)-len(frames)/ringFreshEvery {
		t.Fatalf("ring: %d distinct tuples of %d frames, %d dropped", len(seen), len(frames), ndrop)
	}
	r := newRing(t, frames)
	r.reset(t)
	prog := r.tailInto(t, e.Program())
	other := make([]byte, ringFrameLen) // overwritten by each ring frame
	for i := range 2 * len(frames) {
		fr := frames[i%len(frames)]
		var f rule.Fields
		packet.Parse(fr, &f)
		want := uint32(XDPPass)
		if d := set.Decide(&f); d >= 0 && set.Rules[d].Action == rule.Drop {
			want = XDPDrop
		}
		if (want == XDPDrop) != drops[i%len(frames)] {
			t.Fatalf("frame %d: the ring says drop=%v, rule.Set.Decide %d", i, drops[i%len(frames)], want)
		}
		act, err := prog.Run(&ebpf.RunOptions{Data: other})
		if err != nil {
			t.Fatal(err)
		}
		if act != want {
			t.Fatalf("run %d (ring frame %d): action %d, want %d", i, i%len(frames), act, want)
		}
	}
	// repeat=N walks the ring too: N runs move the counter N frames on.
	r.reset(t)
	if _, _, err := prog.Benchmark(other, 3*len(frames)+5, nil); err != nil {
		t.Fatal(err)
	}
	act, err := prog.Run(&ebpf.RunOptions{Data: other})
	if err != nil {
		t.Fatal(err)
	}
	if want := map[bool]uint32{true: XDPDrop, false: XDPPass}[drops[5]]; act != want {
		t.Fatalf("after %d runs: action %d, want ring frame 5's %d", 3*len(frames)+5, act, want)
	}
}

// TestFreshSenderVeth: the live-frames sender with the ring program puts
// the ring's frames on the wire in turn, each rewritten in full: a receiver
// on vb that counts frames by 5-tuple sees exactly the ring's distinct
// tuples, each as often as the ring was sent round.
func TestFreshSenderVeth(t *testing.T) {
	l, _, vaMAC, _ := newBenchLab(t)
	set := traffic.ClassBenchRules(1000, 1000)
	const k, rounds = 4096, 3
	frames, _ := freshRing(t, set, k, vaMAC, l.vbMAC)
	r := newRing(t, frames)
	r.reset(t)
	counts, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.Hash, KeySize: 16, ValueSize: 8, MaxEntries: 2 * k})
	if err != nil {
		t.Fatal(err)
	}
	defer counts.Close()
	recv := tupleCounter(t, counts)
	var lk interface{ Close() error }
	l.in(t, l.fdB, func() {
		lk, err = link.AttachXDP(link.XDPOptions{Program: recv, Interface: l.vb, Flags: link.XDPDriverMode})
	})
	if err != nil {
		t.Fatal(err)
	}
	defer lk.Close()
	gen := newGen(t, r.program(t, ringTX, nil), r)
	l.in(t, l.fdA, func() {
		var one unix.CPUSet
		one.Set(0)
		if err = unix.SchedSetaffinity(0, &one); err != nil {
			return
		}
		err = gen.send(l.va, frames[0], k*rounds)
		var all unix.CPUSet
		for c := range 1024 {
			all.Set(c)
		}
		unix.SchedSetaffinity(0, &all)
	})
	if err != nil {
		t.Fatal(err)
	}
	want := map[ringKey]bool{}
	for _, f := range frames {
		want[ringKeyOf(f)] = true
	}
	var key ringKey
	var n uint64
	got, total := 0, uint64(0)
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		got, total = 0, 0
		it := counts.Iterate()
		for it.Next(&key, &n) {
			if !want[key] {
				t.Fatalf("the receiver saw a tuple not in the ring: % x", key[:])
			}
			got++
			total += n
		}
		if err := it.Err(); err != nil {
			t.Fatal(err)
		}
		if total >= k*rounds || time.Now().After(deadline) {
			break
		}
	}
	if got != k || total != k*rounds {
		t.Fatalf("receiver: %d distinct tuples in %d frames, want %d in %d", got, total, k, k*rounds)
	}
}

// BenchmarkProgRunFresh measures the program alone through
// BPF_PROG_TEST_RUN on BenchmarkVethPipapo's sets and streams (1k and 10k
// ClassBench-style drop rules): "fresh" runs the ring program, which puts
// the next of 65536 frames with distinct 5-tuples (95 % dropped by a rule)
// over the test frame and tail-calls the engine, so one call with repeat=N
// runs the engine on N different frames in a row; "1flow" runs the engine
// on the one dropped frame of the single-flow stream, N times. The
// baselines run alternately with them: the ring program ending in XDP_DROP
// ("ring") and a program that only drops ("empty"). Reported, kernel ns per
// run, mean of the middle half of progRounds rounds: fresh-ns and ring-ns,
// 1flow-ns and empty-ns, and the engine's own cost per frame, prog-ns for
// the fresh stream (fresh less ring: the tail call included) and
// 1flow-prog-ns (1flow less empty). nftables has no test-run entry point;
// BenchmarkVethPipapo's filter-ns is the comparable figure.
func BenchmarkProgRunFresh(b *testing.B) {
	mac := net.HardwareAddr{2, 0, 0, 0, 0, 1}
	needBPF(b)
	empty, err := ebpf.NewProgram(&ebpf.ProgramSpec{Type: ebpf.XDP, License: "GPL", Instructions: asm.Instructions{
		asm.Mov.Imm(asm.R0, XDPDrop), asm.Return()}})
	if err != nil {
		b.Fatal(err)
	}
	defer empty.Close()
	for _, n := range []int{1000, 10000} {
		set := traffic.ClassBenchRules(uint64(n), n)
		frames, _ := freshRing(b, set, 1<<16, mac, mac)
		single := pipapoFrame(b, set, mac, mac)
		e := newEngine(b, Options{})
		if err := e.Replace(set); err != nil {
			b.Fatal(err)
		}
		r := newRing(b, frames)
		fresh, ringOnly := r.tailInto(b, e.Program()), r.program(b, ringDrop, nil)
		tmpl := make([]byte, ringFrameLen)
		b.Run(strconv.Itoa(n/1000)+"k", func(b *testing.B) {
			var f, o, s, z []float64
			for range progRounds {
				f = append(f, runNs(b, fresh, tmpl, b.N, 0))
				o = append(o, runNs(b, ringOnly, tmpl, b.N, XDPDrop))
				s = append(s, runNs(b, e.Program(), single, b.N, XDPDrop))
				z = append(z, runNs(b, empty, single, b.N, XDPDrop))
			}
			fm, om, sm, zm := midMean(f), midMean(o), midMean(s), midMean(z)
			b.ReportMetric(fm, "fresh-ns")
			b.ReportMetric(om, "ring-ns")
			b.ReportMetric(fm-om, "prog-ns")
			b.ReportMetric(sm, "1flow-ns")
			b.ReportMetric(zm, "empty-ns")
			b.ReportMetric(sm-zm, "1flow-prog-ns")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// progRounds is how many times BenchmarkProgRunFresh alternates its four
// programs.
const progRounds = 8
