//go:build linux

package xdp

import (
	"errors"
	"testing"

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
