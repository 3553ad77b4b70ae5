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

// The simulated NIC under the built-in traffic mix, with the demo rules
// arriving one by one, driven by an injected clock (no wall-clock timing).
func TestSimRegime(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	n, err := New(Options{Start: start, Scale: 5000})
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
	apply()
	demo := DemoRules()
	next := 0
	const step = 100 * time.Millisecond
	var oobAt25 uint64
	for i := 1; i <= 400; i++ { // 40 simulated seconds
		el := time.Duration(i) * step
		for next < len(demo) && el >= demo[next].After {
			r, err := ParseDemo(demo[next], n.Now())
			if err != nil {
				t.Fatal(err)
			}
			if _, err := st.Put("demo", r); err != nil {
				t.Fatalf("%s: %v", r.ID, err)
			}
			next++
			apply()
		}
		n.Step(step)
		if i%10 == 0 {
			p.Tick(ctx)
		}
		if el == 30*time.Second {
			oobAt25 = totalOOB(n)
		}
	}
	// Let the last counters reach the placer (hardware refreshes once a
	// second).
	n.Idle(2 * time.Second)
	p.Tick(ctx)
	n.Idle(2 * time.Second)
	p.Tick(ctx)

	v := p.View()
	paths := map[string]placement.RuleView{}
	for _, r := range v.Rules {
		paths[r.ID] = r
	}
	for id, want := range map[string]placement.Path{
		"syn-flood": placement.HW, "udp-flood": placement.HW, "ntp-amp": placement.HW,
		"gre-bulk": placement.SW, "dns-amp": placement.SW, "tiny-udp": placement.SW, "sctp-flood": placement.SW, "udp-mgmt-net": placement.SW,
	} {
		if got := paths[id]; got.Path != want {
			t.Errorf("%s on %s (%s), want %s", id, got.Path, got.Reason, want)
		}
	}
	if v.Moves[[2]placement.Path{placement.SW, placement.HW}] < 1 || v.Moves[[2]placement.Path{placement.HW, placement.SW}] < 1 {
		t.Errorf("no regime swap: moves %v", v.Moves)
	}
	// Protected traffic is never dropped, and no engine drops what the
	// rules pass.
	if d := n.ProtectedDrops(); d != 0 {
		t.Errorf("%d protected packets dropped", d)
	}
	flows := map[string]FlowStats{}
	for _, f := range n.Stats() {
		flows[f.Name] = f
		if f.OverDrop != 0 {
			t.Errorf("%s: %d packets dropped that the rules pass", f.Name, f.OverDrop)
		}
		if f.Sent != f.HWDropped+f.SWDropped+f.Passed+f.OOB {
			t.Errorf("%s: sent %d != hw %d + sw %d + passed %d + oob %d", f.Name, f.Sent, f.HWDropped, f.SWDropped, f.Passed, f.OOB)
		}
		if f.Sent == 0 {
			t.Errorf("%s: no traffic", f.Name)
		}
	}
	// Per rule, hardware + software counters equal what its flow lost to
	// drops, across the move between paths.
	for rid, flow := range map[string]string{"syn-flood": "syn-flood 64B", "udp-flood": "udp-flood 64B", "gre-bulk": "gre-bulk 1400B",
		"ntp-amp": "ntp-amp 468B", "tiny-udp": "tiny-udp 64B", "sctp-flood": "sctp-flood 128B", "dns-amp": "dns-amp 1500B"} {
		r, f := paths[rid], flows[flow]
		if r.HW.Packets != f.HWDropped || r.SW.Packets != f.SWDropped {
			t.Errorf("%s: rule hw %d sw %d, flow hw %d sw %d", rid, r.HW.Packets, r.SW.Packets, f.HWDropped, f.SWDropped)
		}
	}
	if paths["syn-flood"].HW.Packets == 0 || paths["syn-flood"].SW.Packets == 0 {
		t.Errorf("syn-flood should have dropped in both paths (sw before the move, hw after): %+v", paths["syn-flood"])
	}
	// Once the flood is in hardware, software keeps up: no more
	// out-of-buffer losses.
	if end := totalOOB(n); end != oobAt25 {
		t.Errorf("out-of-buffer grew from %d to %d in the last 10 s", oobAt25, end)
	}
	if v.SWLoadPPS > 0.8*v.SWCapacityPPS {
		t.Errorf("software load %.0f still above high water of %.0f", v.SWLoadPPS, v.SWCapacityPPS)
	}
}

func totalOOB(n *NIC) uint64 {
	var t uint64
	for _, f := range n.Stats() {
		t += f.OOB
	}
	return t
}
