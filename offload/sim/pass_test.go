package sim

import (
	"context"
	"net/netip"
	"testing"

	"github.com/scrubd/scrubd/offload"
	"github.com/scrubd/scrubd/swpath/rule"
)

// A pass entry at a lower priority number than a drop entry lets the
// packets it matches through (tc consults priorities in order and gact
// pass ends classification); one at a higher number comes too late. Pass
// entries are counted, dumped with their action, and take entries and flow
// groups in their own table.
func TestPassEntryPriority(t *testing.T) {
	n := New(Config{Clock: NewFakeClock(t0)})
	drop := entry("203.0.113.0/24", rule.ProtoTCP, 0)
	drop.Prio = 10
	pass := entry("203.0.113.7/32", rule.ProtoTCP, 179)
	pass.Prio, pass.Pass = 8, true
	pass.SetCookie(offload.RuleHash("bgp", &rule.Match{}))
	late := entry("203.0.113.8/32", rule.ProtoTCP, 179)
	late.Prio, late.Pass = 12, true
	late.SetCookie(offload.RuleHash("late", &rule.Match{}))
	for _, r := range mustInstall(t, n, drop, pass, late) {
		if r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	for _, tc := range []struct {
		f       rule.Fields
		drop    bool
		hitPrio uint16
		hitPass bool
		comment string
	}{
		{pkt("203.0.113.7", rule.ProtoTCP, 179), false, 8, true, "the pass entry decides first"},
		{pkt("203.0.113.7", rule.ProtoTCP, 80), true, 10, false, "other ports are dropped"},
		{pkt("203.0.113.9", rule.ProtoTCP, 179), true, 10, false, "other addresses are dropped"},
		{pkt("203.0.113.8", rule.ProtoTCP, 179), true, 10, false, "a pass after the drop comes too late"},
		{pkt("198.51.100.1", rule.ProtoTCP, 179), false, 0, false, "no entry"},
	} {
		h, d := n.Process(&tc.f, 64)
		if d != tc.drop || h.Table.Prio != tc.hitPrio || h.Pass != tc.hitPass {
			t.Errorf("%s: drop %v hit prio %d pass %v, want %v %d %v", tc.comment, d, h.Table.Prio, h.Pass, tc.drop, tc.hitPrio, tc.hitPass)
		}
	}
	n.caps.StatsPeriod = 0
	st, err := n.Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	got := map[uint16]uint64{}
	for _, s := range st {
		got[s.Prio] = s.Packets
	}
	if got[8] != 1 || got[10] != 3 || got[12] != 0 {
		t.Errorf("counters by priority %v, want 8:1 10:3 12:0", got)
	}
	d, _ := n.Dump(context.Background())
	passes := 0
	for _, x := range d {
		if x.Pass {
			passes++
		}
	}
	if passes != 2 {
		t.Errorf("dump shows %d pass entries, want 2", passes)
	}
	c := n.Capacity()
	if c.Entries != 3 || len(c.Tables) != 3 {
		t.Fatalf("capacity %+v", c)
	}
	for _, tu := range c.Tables {
		if tu.Entries != 1 || tu.Groups != 1 {
			t.Errorf("table %+v: want one entry in one group", tu)
		}
	}
	// The pass entry needs the same keys as a drop: an unsupported key is
	// refused the same way.
	bad := pass
	bad.Match.Dst, bad.Match.DstMask = rule.PrefixAddr(netip.MustParsePrefix("203.0.113.0/24"))
	bad.Match.Proto, bad.Match.DstPort, bad.Match.DstPortMask = rule.ProtoGRE, 1, 0xffff
	if r := mustInstall(t, n, bad); r[0].Err == nil {
		t.Error("a GRE port pass entry was accepted")
	}
}
