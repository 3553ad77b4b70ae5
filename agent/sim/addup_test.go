package sim

import (
	"context"
	"io"
	"log/slog"
	"net/netip"
	"testing"
	"time"

	"github.com/scrubd/scrubd/agent/placement"
	"github.com/scrubd/scrubd/agent/protect"
	"github.com/scrubd/scrubd/agent/store"
	"github.com/scrubd/scrubd/swpath/rule"
)

// TestSimCountersAddUpAcrossChanges runs the demo rules on the simulated
// NIC through four phases: the rules added one by one (with the moves
// between paths the flood causes), three rules whose match changes under
// the same id (two in software, where the engine keeps a rule's counter
// slot by id, one in hardware, where its entries are compiled anew),
// the software engine's rule counters restarting from zero (its slots
// emptied and refilled, as after an engine restart), and more traffic.
// After each phase the placer's per-rule counters must add up: per drop
// rule, hardware and software packets equal what its flow lost to drops
// on each path (the simulator counts every frame a path dropped, outside
// the engines), the software counters of the drop rules sum to the
// engine's Dropped total, and the hardware ones to what the table dropped;
// every flow's packets sent are dropped, passed or lost for want of
// buffers. A placer that carried a running total over a change and then
// added the engine's whole count again (a double count) fails the first
// check after the match change.
func TestSimCountersAddUpAcrossChanges(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	n, err := New(Options{Start: start, Scale: 5000, HWEntries: 6})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	pl := &protect.List{Entries: []protect.Entry{{Rule: rule.Rule{ID: "protect-mgmt", Action: rule.Accept, Match: rule.Match{Dst: netip.MustParsePrefix("192.0.2.1/32")}}, Note: "mgmt"}}}
	st := store.New(pl, n.Now)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	p := placement.New(placement.Config{HighWater: 0.8, LowWater: 0.5, MinDwell: 3 * time.Second, MaxMoves: 8, CyclesPerPacket: 297}, n.HW(), n.SW(), log, n.Now)
	ctx := context.Background()
	if err := p.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	apply := func() {
		snap := st.Snapshot()
		n.SetReference(&snap.Set)
		p.Apply(ctx, snap)
	}
	put := func(yaml string) {
		r, err := ParseDemo(DemoRule{YAML: yaml}, n.Now())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.Put("demo", r); err != nil {
			t.Fatalf("%s: %v", r.ID, err)
		}
	}
	const step = 100 * time.Millisecond
	run := func(steps int) {
		for i := 1; i <= steps; i++ {
			n.Step(step)
			if i%10 == 0 {
				p.Tick(ctx)
			}
		}
		// Hardware counters refresh once a second: let the last reach
		// the placer.
		n.Idle(2 * time.Second)
		p.Tick(ctx)
		n.Idle(2 * time.Second)
		p.Tick(ctx)
	}
	flowOf := map[string]string{"syn-flood": "syn-flood 64B", "udp-flood": "udp-flood 64B", "gre-bulk": "gre-bulk 1400B",
		"ntp-amp": "ntp-amp 468B", "tiny-udp": "tiny-udp 64B", "sctp-flood": "sctp-flood 128B", "dns-amp": "dns-amp 1500B",
		"udp-mgmt-net": "udp-to-mgmt-net 64B"}
	check := func(phase string) map[string]placement.RuleView {
		t.Helper()
		v := p.View()
		flows := map[string]FlowStats{}
		var flowHW, flowSW uint64
		for _, f := range n.Stats() {
			flows[f.Name] = f
			flowHW += f.HWDropped
			flowSW += f.SWDropped
			if f.Sent != f.HWDropped+f.SWDropped+f.Passed+f.OOB {
				t.Errorf("%s: %s: sent %d != hw %d + sw %d + passed %d + oob %d", phase, f.Name, f.Sent, f.HWDropped, f.SWDropped, f.Passed, f.OOB)
			}
			if f.OverDrop != 0 {
				t.Errorf("%s: %s: %d packets dropped that the rules pass", phase, f.Name, f.OverDrop)
			}
		}
		rules := map[string]placement.RuleView{}
		var ruleHW, ruleSW uint64
		for _, r := range v.Rules.All() {
			rules[r.ID] = r
			if r.Action != "drop" {
				continue
			}
			ruleHW += r.HW.Packets
			ruleSW += r.SW.Packets
			fl, ok := flowOf[r.ID]
			if !ok {
				t.Fatalf("%s: drop rule %s has no flow in the test's table", phase, r.ID)
			}
			if f := flows[fl]; r.HW.Packets != f.HWDropped || r.SW.Packets != f.SWDropped {
				t.Errorf("%s: %s (on %s): rule hw %d sw %d, its flow lost hw %d sw %d", phase, r.ID, r.Path, r.HW.Packets, r.SW.Packets, f.HWDropped, f.SWDropped)
			}
		}
		if ruleHW != flowHW || ruleSW != flowSW {
			t.Errorf("%s: drop rules count hw %d sw %d, the flows lost hw %d sw %d", phase, ruleHW, ruleSW, flowHW, flowSW)
		}
		if sw := v.SW.Totals(); sw.Dropped != ruleSW {
			t.Errorf("%s: drop rules' software counters sum to %d, the engine dropped %d", phase, ruleSW, sw.Dropped)
		}
		return rules
	}

	// Phase 1: the demo rules arrive one by one; the flood moves rules
	// between the paths.
	apply()
	demo := DemoRules()
	next := 0
	for i := 1; i <= 300; i++ {
		el := time.Duration(i) * step
		for next < len(demo) && el >= demo[next].After {
			put(demo[next].YAML)
			next++
			apply()
		}
		n.Step(step)
		if i%10 == 0 {
			p.Tick(ctx)
		}
	}
	run(10)
	r1 := check("after the adds")
	if v := p.View(); v.Moves[[2]placement.Path{placement.SW, placement.HW}] < 1 || v.Moves[[2]placement.Path{placement.HW, placement.SW}] < 1 {
		t.Errorf("no move between the paths in both directions: %v", v.Moves)
	}
	for _, id := range []string{"udp-flood", "tiny-udp"} {
		if r1[id].Path != placement.SW || r1[id].SW.Packets == 0 {
			t.Fatalf("%s on %s with %d software packets; the match change below needs it in software, counting", id, r1[id].Path, r1[id].SW.Packets)
		}
	}
	if r1["ntp-amp"].Path != placement.HW || r1["ntp-amp"].HW.Packets == 0 {
		t.Fatalf("ntp-amp on %s with %d hardware packets; the match change below needs it in hardware, counting", r1["ntp-amp"].Path, r1["ntp-amp"].HW.Packets)
	}

	// Phase 2: three rules keep their id and change their match, each
	// still covering its flow.
	put(`{id: udp-flood, action: drop, match: {dst: 203.0.113.30/32, proto: udp, dst_port: "1400-1600"}}`)
	put(`{id: tiny-udp, action: drop, match: {dst: 198.51.100.9/32, proto: udp, length: "0-80"}}`)
	put(`{id: ntp-amp, action: drop, match: {dst: 203.0.113.11/32, proto: udp, src_port: "123"}}`)
	apply()
	run(50)
	r2 := check("after the match changes")
	for _, id := range []string{"udp-flood", "tiny-udp", "ntp-amp"} {
		if a, b := r1[id], r2[id]; b.HW.Packets+b.SW.Packets <= a.HW.Packets+a.SW.Packets {
			t.Errorf("%s did not count after its match changed: %d then %d", id, a.HW.Packets+a.SW.Packets, b.HW.Packets+b.SW.Packets)
		}
	}

	// Phase 3: the engine's rule counters start from zero, as after a
	// restart of the engine; the placer goes on from its totals.
	cur := n.dv.Class.Table().Set()
	if err := n.dv.Class.Swap(&rule.Set{}); err != nil {
		t.Fatal(err)
	}
	if err := n.dv.Class.Swap(cur); err != nil {
		t.Fatal(err)
	}
	for _, rc := range n.dv.Class.Snapshot().Rules {
		if rc.Packets != 0 {
			t.Fatalf("rule %s's engine counter %d after the restart, want 0", rc.ID, rc.Packets)
		}
	}
	run(50)
	check("after the engine's counters restarted")
}
