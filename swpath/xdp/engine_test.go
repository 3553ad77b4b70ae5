//go:build linux

package xdp

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/scrubd/scrubd/swpath/packet"
	"github.com/scrubd/scrubd/swpath/rule"
	"github.com/scrubd/scrubd/swpath/traffic"
)

// TestRefusedSetKeepsOld: a set beyond a limit is refused whole and the set
// in force keeps deciding.
func TestRefusedSetKeepsOld(t *testing.T) {
	e := newEngine(t, Options{})
	s1, _, frames := swapSets(t)
	if err := e.Replace(s1); err != nil {
		t.Fatal(err)
	}
	over := &rule.Set{Rules: []rule.Rule{{ID: "wide", Match: rule.Match{
		Proto: []uint8{6, 17, 132}, SrcPort: singlePorts(1, 16), DstPort: singlePorts(100, 16)}}}}
	err := e.Replace(over)
	var le *LimitError
	if !errors.As(err, &le) || le.RuleID != "wide" || le.Limit != "MaxEntriesPerRule" {
		t.Fatalf("Replace(over limit) = %v, want LimitError for rule wide", err)
	}
	if act, err := e.Run(frames[0]); err != nil || act != XDPDrop {
		t.Fatalf("after a refused set: action %d, %v; want drop by the old set", act, err)
	}
	if e.Set() != s1 {
		t.Fatal("Set() changed by a refused Replace")
	}
}

// TestAttachGenericFallback: lo has no native XDP; native-only attach fails,
// and the generic fallback is taken only when allowed, and reported.
func TestAttachGenericFallback(t *testing.T) {
	l := newLab(t)
	var lo int
	l.in(t, l.fdB, func() { lo = ifindex(t, "lo") })
	var e *Engine
	l.in(t, l.fdB, func() { e = newEngine(t, Options{}) })
	var err error
	l.in(t, l.fdB, func() { _, err = e.Attach(lo, false) })
	if err == nil {
		t.Fatal("native attach to lo succeeded; the test needs a device without native XDP")
	}
	var mode AttachMode
	l.in(t, l.fdB, func() { mode, err = e.Attach(lo, true) })
	if err != nil || mode != Generic {
		t.Fatalf("attach with fallback: %s, %v; want generic", mode, err)
	}
	if err := e.Detach(); err != nil {
		t.Fatal(err)
	}
}

// TestDecideMatchesPacketParse compares the traced program with
// rule.Set.Decide over swpath/packet's parse, packet by packet, on the
// shared generator's frames with odd cases.
func TestDecideMatchesPacketParse(t *testing.T) {
	e := newEngine(t, Options{Trace: true})
	for seed := uint64(1); seed <= 8; seed++ {
		set := traffic.RandomRules(seed, 30+int(seed)*20)
		if err := e.Replace(set); err != nil {
			t.Fatal(err)
		}
		var f rule.Fields
		for i, b := range traffic.NewGenerator(traffic.Config{Seed: seed, Rules: set, RuleFraction: 0.7, Odd: true}).Frames(2000) {
			packet.Parse(b, &f)
			want := set.Decide(&f)
			got, v, err := e.Decide(b)
			if err != nil {
				t.Fatal(err)
			}
			if got != want {
				t.Fatalf("seed %d frame %d %x: xdp decided %d (%s), reference %d; fields %+v", seed, i, b, got, v, want, f)
			}
			// The test's own parser agrees with swpath/packet too.
			if rf := refParse(b); rf != f {
				t.Fatalf("frame %x: refParse %+v, packet.Parse %+v", b, rf, f)
			}
		}
	}
}

// TestRunStats: with BPF run-time statistics on, the program's runs are
// counted one per frame and take time. (That they stay still while off is
// not checked: another test process may hold them on meanwhile.)
func TestRunStats(t *testing.T) {
	e := newEngine(t, Options{})
	if err := e.Replace(benchRules(5)); err != nil {
		t.Fatal(err)
	}
	mac := []byte{2, 0, 0, 0, 0, 1}
	frame := benchFrame(mac, mac, 10004)
	run := func(n int) {
		for i := 0; i < n; i++ {
			if _, err := e.Run(frame); err != nil {
				t.Fatal(err)
			}
		}
	}
	on, err := ebpf.EnableStats(unix.BPF_STATS_RUN_TIME)
	if err != nil {
		t.Fatalf("enable BPF statistics: %v", err)
	}
	t0, n0, err := e.RunStats()
	if err != nil {
		on.Close()
		t.Fatal(err)
	}
	run(500)
	t1, n1, err := e.RunStats()
	on.Close()
	if err != nil {
		t.Fatal(err)
	}
	if n1-n0 != 500 || t1 <= t0 {
		t.Fatalf("with statistics on: %d runs in %v, want 500 runs and some time", n1-n0, t1-t0)
	}
	t.Logf("%v per run", (t1-t0)/time.Duration(n1-n0))
}

// TestHoledSetIsItsRules: a set with holes (rules the placer removed in
// place) is enforced as its rules alone, as the reference Decide, which
// skips holes, decides: a hole decides nothing, even where it shares its
// id with a rule of the set (an id removed, then added again at the end).
func TestHoledSetIsItsRules(t *testing.T) {
	e := newEngine(t, Options{Trace: true})
	for seed := uint64(1); seed <= 4; seed++ {
		base := traffic.RandomRules(seed, 80)
		rules := append(slices.Clone(base.Rules), base.Rules[3])
		h := (*rule.Holes)(nil).With(3)
		for i := 10; i < len(base.Rules); i += 7 {
			h = h.With(i)
		}
		set := &rule.Set{Rules: rules, Holes: h}
		if err := e.Replace(set); err != nil {
			t.Fatal(err)
		}
		var f rule.Fields
		for i, b := range traffic.NewGenerator(traffic.Config{Seed: seed, Rules: base, RuleFraction: 0.8}).Frames(2000) {
			packet.Parse(b, &f)
			want, got := "", ""
			if k := set.Decide(&f); k >= 0 {
				want = set.Rules[k].ID
			}
			k, _, err := e.Decide(b)
			if err != nil {
				t.Fatal(err)
			}
			if k >= 0 {
				got = e.Set().Rules[k].ID
			}
			if got != want {
				t.Fatalf("seed %d frame %d: xdp decided %q, the reference %q", seed, i, got, want)
			}
		}
	}
}
