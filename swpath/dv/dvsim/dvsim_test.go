package dvsim_test

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/scrubd/scrubd/swpath/classifier"
	"github.com/scrubd/scrubd/swpath/dv/dvsim"
	"github.com/scrubd/scrubd/swpath/nicemu"
	"github.com/scrubd/scrubd/swpath/numa"
	"github.com/scrubd/scrubd/swpath/packet"
	"github.com/scrubd/scrubd/swpath/pool"
	"github.com/scrubd/scrubd/swpath/rule"
	"github.com/scrubd/scrubd/swpath/traffic"
)

// stallAfter is how long a wait tolerates no progress at all (nothing
// offered, received or completed) before it fails and prints the rings.
// A wait never depends on speed otherwise; the cap only keeps a broken
// build (a lost barrier, stale mini-CQE slots) from hanging the suite.
const stallAfter = 10 * time.Second

// waitFor polls cond until it holds. It fails, printing every ring's
// state, when sim has made no progress for stallAfter, or after 5 minutes
// in all.
func waitFor(t *testing.T, sim *dvsim.Sim, what string, cond func() bool) {
	t.Helper()
	progress := func() uint64 {
		s := sim.Snapshot()
		return s.Offered + s.Total.Rx + s.Total.RxErrors + s.Total.TxDone + s.TxFrames
	}
	start := time.Now()
	last, lastAt := progress(), start
	for !cond() {
		now := time.Now()
		if p := progress(); p != last {
			last, lastAt = p, now
		}
		if now.Sub(lastAt) > stallAfter || now.Sub(start) > 5*time.Minute {
			t.Fatalf("gave up waiting for %s after %v (no progress for %v); rings:\n%s",
				what, now.Sub(start).Round(time.Millisecond), now.Sub(lastAt).Round(time.Millisecond), sim.RingState())
		}
		time.Sleep(time.Millisecond)
	}
}

// waitExhausted waits for the emulator to offer every frame of its
// source, under waitFor's deadlines.
func waitExhausted(t *testing.T, sim *dvsim.Sim) {
	t.Helper()
	waitFor(t, sim, "the source to be offered in full", func() bool {
		select {
		case <-sim.Emulator.Exhausted():
			return true
		default:
			return false
		}
	})
}

type tapped struct {
	mu     sync.Mutex
	frames [][]byte
	res    []classifier.Result
}

func (tp *tapped) tap(f []byte, r classifier.Result) {
	tp.mu.Lock()
	tp.frames = append(tp.frames, slices.Clone(f))
	tp.res = append(tp.res, r)
	tp.mu.Unlock()
}

type sunk struct {
	mu     sync.Mutex
	frames [][]byte
}

func (s *sunk) sink(f []byte) {
	s.mu.Lock()
	s.frames = append(s.frames, slices.Clone(f))
	s.mu.Unlock()
}

type runCase struct {
	workers      int
	host         bool
	backpressure bool
	compress     float64
	start        uint32
	frames       int
	repeat       int
	rqLog2       uint
	errorRate    float64
}

func (c runCase) String() string {
	return fmt.Sprintf("w%d-host%v-bp%v-z%.1f-err%.2f-start%#x", c.workers, c.host, c.backpressure, c.compress, c.errorRate, c.start)
}

func runAccounting(t *testing.T, c runCase) {
	set := traffic.RandomRules(uint64(c.frames)+7, 40)
	gen := traffic.NewGenerator(traffic.Config{Seed: 11, Rules: set, RuleFraction: 0.6, Odd: true,
		Sizes: traffic.Sizes{Min: 64, Max: 1518}, Flows: 0})
	frames := gen.Frames(c.frames)
	var tp tapped
	var sk sunk
	sim, err := dvsim.New(dvsim.Config{
		Rules: set, Workers: c.workers, Host: c.host, Start: c.start,
		RQLog2: c.rqLog2, CQLog2: c.rqLog2 + 1, SQLog2: 8, Poison: true,
		Source: &nicemu.FrameList{Frames: frames, Repeat: c.repeat},
		Emu: nicemu.Config{Seed: 5, Pace: true, Compress: c.compress, MaxSession: 40, Backpressure: c.backpressure,
			ErrorRate: c.errorRate},
		Tap: tp.tap, Sink: sk.sink,
		Pool: &pool.Config{HugePages: pool.HugeOff, Bind: pool.BindOff, Debug: true},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := sim.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	waitExhausted(t, sim)
	waitFor(t, sim, "the engine to receive everything delivered", func() bool {
		if err := sim.ProtocolErr(); err != nil {
			// The emulated device stopped on a malformed ring: fail now
			// rather than wait for completions that will never come.
			t.Fatalf("protocol error: %v; rings:\n%s", err, sim.RingState())
		}
		s := sim.Snapshot()
		return s.Total.Rx+s.Total.RxErrors == s.Delivered+s.RxErrors && s.Total.TxDone == s.Total.Tx
	})
	s := sim.Snapshot()
	if err := sim.Close(); err != nil {
		t.Fatal(err)
	}
	total := uint64(len(frames) * max(c.repeat, 1))
	tt := s.Total
	t.Logf("%v: offered %d rx %d dropped %d passed %d tx %d txfull %d oob %d error-cqes %d sessions %d",
		c, s.Offered, tt.Rx, tt.Dropped, tt.Passed, tt.Tx, tt.TxFull, s.OutOfBuffer, tt.RxErrors, tt.Sessions)
	// Every packet accounted for.
	if s.Offered != total || s.Offered != tt.Rx+s.OutOfBuffer {
		t.Errorf("offered %d (want %d) != rx %d + out-of-buffer %d", s.Offered, total, tt.Rx, s.OutOfBuffer)
	}
	// Injected error completions carry no packet; each one's buffer came
	// back to the pool (checked by the leak test below).
	if tt.RxErrors != s.RxErrors || (c.errorRate > 0) != (s.RxErrors > 0) {
		t.Errorf("engine saw %d error completions, device wrote %d", tt.RxErrors, s.RxErrors)
	}
	if tt.Rx != tt.Dropped+tt.Passed {
		t.Errorf("rx %d != dropped %d + passed %d", tt.Rx, tt.Dropped, tt.Passed)
	}
	if tt.OutOfBuffer != s.OutOfBuffer {
		t.Errorf("workers saw out-of-buffer %d, device counted %d", tt.OutOfBuffer, s.OutOfBuffer)
	}
	if c.host {
		if tt.Tx != 0 || s.TxFrames != 0 {
			t.Errorf("host mode transmitted %d/%d", tt.Tx, s.TxFrames)
		}
	} else if tt.Passed != tt.Tx+tt.TxFull || s.TxFrames != tt.Tx {
		t.Errorf("passed %d != tx %d + txfull %d, or device sent %d", tt.Passed, tt.Tx, tt.TxFull, s.TxFrames)
	}
	if tt.SeqErrors != 0 || tt.Unposted != 0 {
		t.Errorf("sequence errors %d, unposted completions %d", tt.SeqErrors, tt.Unposted)
	}
	if c.backpressure && s.OutOfBuffer != 0 {
		t.Errorf("out-of-buffer %d under backpressure", s.OutOfBuffer)
	}
	if sim.Leaked != 0 || sim.BadFrees != 0 {
		t.Errorf("%d buffers leaked after shutdown, %d freed twice", sim.Leaked, sim.BadFrees)
	}
	// Per-rule counts equal the reference decision on the same packets.
	if uint64(len(tp.frames)) != tt.Rx {
		t.Fatalf("tap saw %d frames, rx %d", len(tp.frames), tt.Rx)
	}
	want := make([]uint64, len(set.Rules))
	var wantPass uint64
	var f rule.Fields
	for i, fr := range tp.frames {
		packet.Parse(fr, &f)
		d := set.Decide(&f)
		if int(tp.res[i].Rule) != d {
			t.Fatalf("frame %d: engine rule %d, reference %d", i, tp.res[i].Rule, d)
		}
		if d < 0 {
			wantPass++
		} else {
			want[d]++
		}
	}
	cs := sim.Class.Snapshot()
	for i, rc := range cs.Rules {
		if rc.Packets != want[i] {
			t.Errorf("rule %s: classifier counted %d, reference %d", rc.ID, rc.Packets, want[i])
		}
	}
	if cs.PassPackets != wantPass {
		t.Errorf("pass: classifier %d, reference %d", cs.PassPackets, wantPass)
	}
	// The per-rule counters add up to the engine's totals, and the drops
	// to what the far side did not receive: offered = out-of-buffer +
	// error completions' packets (none: they carry none) + dropped +
	// transmitted + refused by a full send queue (+ passed, in host mode).
	var ruleDrops, ruleAccepts uint64
	for i, rc := range cs.Rules {
		if set.Rules[i].Action == rule.Drop {
			ruleDrops += rc.Packets
		} else {
			ruleAccepts += rc.Packets
		}
	}
	if ruleDrops != tt.Dropped || ruleAccepts+cs.PassPackets != tt.Passed {
		t.Errorf("per-rule drops %d, accepts %d + pass %d; engine dropped %d, passed %d", ruleDrops, ruleAccepts, cs.PassPackets, tt.Dropped, tt.Passed)
	}
	if !c.host {
		if notSent := s.Offered - s.TxFrames; notSent != s.OutOfBuffer+ruleDrops+tt.TxFull {
			t.Errorf("the far side missed %d of %d offered, but out-of-buffer %d + per-rule drops %d + send queue full %d = %d",
				notSent, s.Offered, s.OutOfBuffer, ruleDrops, tt.TxFull, s.OutOfBuffer+ruleDrops+tt.TxFull)
		}
	}
	if c.backpressure && c.workers == 1 {
		// Nothing lost and one queue: the engine saw the input in order.
		for i, fr := range tp.frames {
			if !bytes.Equal(fr, frames[i%len(frames)]) {
				t.Fatalf("frame %d differs from the input", i)
			}
		}
	}
	if !c.host && c.workers == 1 {
		// What the peer port sent is exactly the passed frames, in order
		// (minus those the full send queue refused).
		var passed [][]byte
		for i, fr := range tp.frames {
			if tp.res[i].Verdict != classifier.Drop {
				passed = append(passed, fr)
			}
		}
		if tt.TxFull == 0 && len(sk.frames) != len(passed) {
			t.Fatalf("sent %d frames, passed %d", len(sk.frames), len(passed))
		}
		j := 0
		for _, fr := range sk.frames {
			for j < len(passed) && !bytes.Equal(passed[j], fr) {
				j++
			}
			if j == len(passed) {
				t.Fatal("a sent frame is not among the passed frames, in order")
			}
			j++
		}
	}
}

func TestAccounting(t *testing.T) {
	n, rep := 3000, 3
	if testing.Short() {
		n, rep = 1500, 1
	}
	for _, c := range []runCase{
		{workers: 1, backpressure: true, compress: 0.5, start: 0xffff00, frames: n, repeat: rep, rqLog2: 9},
		{workers: 1, host: true, backpressure: true, compress: 0, start: 0xfffff0, frames: n, repeat: rep, rqLog2: 9},
		{workers: 2, backpressure: false, compress: 0.5, start: 0xffff80, frames: n, repeat: rep, rqLog2: 6},
		{workers: 1, backpressure: false, compress: 0.9, start: 0, frames: n, repeat: rep, rqLog2: 5},
		{workers: 2, backpressure: true, compress: 0.3, start: 0xfffe00, frames: n, repeat: rep, rqLog2: 7, errorRate: 0.05},
	} {
		t.Run(c.String(), func(t *testing.T) { runAccounting(t, c) })
	}
}

// TestLongWrap runs well past the 16-bit WQE counter and the 24-bit CQ
// index wraps, with random pacing and compressed sessions.
func TestLongWrap(t *testing.T) {
	if testing.Short() {
		t.Skip("long run; -short runs TestAccounting's wraps only")
	}
	runAccounting(t, runCase{workers: 1, backpressure: true, compress: 0.7, start: 0xfff000, frames: 5000, repeat: 30, rqLog2: 10})
}

// Snapshots taken back to back while the workers run each show one burst's
// counters per worker: received = dropped + passed, never the received
// count of one burst beside the verdict counts of the next (CI once read
// 746 received against 225 + 528).
func TestLiveSnapshotConsistent(t *testing.T) {
	set := traffic.SourceWorkload()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sim, err := dvsim.New(dvsim.Config{
		Rules: set, Workers: 2,
		Source: dvsim.Generated(traffic.Config{Seed: 3, Rules: set, RuleFraction: 0.5, Flows: 64}, 0),
		Emu:    nicemu.Config{Seed: 1},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := sim.Start(ctx); err != nil {
		t.Fatal(err)
	}
	n, moved := 0, 0
	var last uint64
	for end := time.Now().Add(time.Second); time.Now().Before(end); n++ {
		s := sim.Snapshot()
		for _, w := range append(s.Workers, s.Total) {
			if w.Dropped+w.Passed != w.Rx {
				t.Fatalf("snapshot %d: %s: received %d, dropped %d + passed %d", n, w.Name, w.Rx, w.Dropped, w.Passed)
			}
		}
		if s.Total.Rx != last {
			moved++
			last = s.Total.Rx
		}
	}
	cancel()
	if err := sim.Close(); err != nil {
		t.Fatal(err)
	}
	if moved < 10 {
		t.Fatalf("the counters moved in %d of %d snapshots: the workers did not run", moved, n)
	}
	t.Logf("%d snapshots, the counters moved in %d", n, moved)
}

// TestRunSimStyle is how `scrubd run --sim` uses the package: an endless
// generated mix at a set rate, live counters read while it runs, stopped
// by cancelling the root context.
func TestRunSimStyle(t *testing.T) {
	set := traffic.SourceWorkload()
	ctx, cancel := context.WithCancel(context.Background())
	sim, err := dvsim.New(dvsim.Config{
		Rules: set, Workers: 2,
		Source: dvsim.Generated(traffic.Config{Seed: 9, Rules: set, RuleFraction: 0.5, Sizes: traffic.Sizes{IMIX: true}, Flows: 64}, 0),
		Emu:    nicemu.Config{Seed: 1, Rate: 200000},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := sim.Start(ctx); err != nil {
		t.Fatal(err)
	}
	var last uint64
	for i := 0; i < 3; i++ {
		waitFor(t, sim, "more packets", func() bool { return sim.Snapshot().Total.Rx > last })
		s := sim.Snapshot()
		if s.Total.Dropped+s.Total.Passed != s.Total.Rx {
			t.Fatalf("live snapshot inconsistent: %+v", s.Total)
		}
		last = s.Total.Rx
	}
	cancel()
	if err := sim.Close(); err != nil {
		t.Fatal(err)
	}
	s := sim.Snapshot()
	if s.Offered != s.Delivered+s.OutOfBuffer+s.RxErrors || s.Total.Rx > s.Delivered || s.Total.Dropped == 0 || s.Total.Tx == 0 {
		t.Fatalf("after close: %+v", s)
	}
	if sim.Leaked != 0 {
		t.Fatalf("%d buffers leaked", sim.Leaked)
	}
}

// TestWorkerPinned checks that a worker runs on a thread pinned to its
// CPU (read from inside the worker, through its tap), and that a CPU that
// cannot be pinned is reported by Close.
func TestWorkerPinned(t *testing.T) {
	gen := traffic.NewGenerator(traffic.Config{Seed: 2, Sizes: traffic.Fixed(64)})
	var mu sync.Mutex
	var seen []int
	sim, err := dvsim.New(dvsim.Config{
		CPUs: []int{0}, Source: &nicemu.FrameList{Frames: gen.Frames(64)},
		Emu: nicemu.Config{Backpressure: true},
		Tap: func([]byte, classifier.Result) {
			mu.Lock()
			defer mu.Unlock()
			if seen == nil {
				seen, _ = numa.ThreadAffinity()
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := sim.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	waitFor(t, sim, "64 packets", func() bool { return sim.Snapshot().Total.Rx == 64 })
	if err := sim.Close(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 1 || seen[0] != 0 {
		t.Fatalf("worker thread affinity %v, want [0]", seen)
	}

	bad, err := dvsim.New(dvsim.Config{CPUs: []int{100000}})
	if err != nil {
		t.Fatal(err)
	}
	if err := bad.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	waitFor(t, bad, "the pin failure", func() bool { return bad.Engine.Err() != nil })
	if err := bad.Close(); err == nil {
		t.Fatal("pinning to CPU 100000 was not reported")
	}
}

// TestUnforwardedSeesEveryFullQueueFrame: a worker whose peer send queue
// (16 WQEs) is never serviced while it decides a burst of 64 frames that
// all pass can post 16; the other 48 are recycled. Unforwarded must see
// exactly those 48, byte for byte: the frames delivered less the frames
// the peer port transmitted once its queue is serviced.
func TestUnforwardedSeesEveryFullQueueFrame(t *testing.T) {
	var mu sync.Mutex
	var lost [][]byte
	var sk sunk
	sim, err := dvsim.New(dvsim.Config{Workers: 1, RQLog2: 6, CQLog2: 7, SQLog2: 4, Sink: sk.sink,
		Unforwarded: func(f []byte) {
			mu.Lock()
			lost = append(lost, slices.Clone(f))
			mu.Unlock()
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer sim.Close()
	w := sim.Workers[0]
	w.Step() // post the receive buffers
	gen := traffic.NewGenerator(traffic.Config{Seed: 3, Sizes: traffic.Fixed(64)})
	frames := gen.Frames(64)
	for i, f := range frames {
		if got := sim.RX[0].Deliver(f); got != nicemu.Placed {
			t.Fatalf("frame %d: %v", i, got)
		}
	}
	if got := w.Step(); got != 64 {
		t.Fatalf("received %d, want 64", got)
	}
	for sim.TX[0].Service() > 0 {
	}
	if len(sk.frames) != 16 || len(lost) != 48 {
		t.Fatalf("peer sent %d and %d unforwarded; want 16 and 48", len(sk.frames), len(lost))
	}
	want := map[string]int{}
	for _, f := range frames {
		want[string(f)]++
	}
	for _, f := range sk.frames {
		want[string(f)]--
	}
	for _, f := range lost {
		want[string(f)]--
	}
	for f, n := range want {
		if n != 0 {
			t.Fatalf("frame %x: delivered minus sent minus unforwarded is %d", f[:20], n)
		}
	}
	if c := sim.Snapshot().Total; c.TxFull != 48 {
		t.Fatalf("TxFull %d, want 48", c.TxFull)
	}
}
