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
	// Six entries: gre-bulk, ntp-amp, dns-amp with the resolver-allow
	// rule's pass entry in front of it, udp-mgmt-net with the management
	// address's pass entry; udp-flood (8 entries) never fits, and the SYN
	// flood arrives to a full table.
	n, err := New(Options{Start: start, Scale: 5000, HWEntries: 6})
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	defer func() {
		if !closed {
			n.Close()
		}
	}()
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
	for _, r := range v.Rules.All() {
		paths[r.ID] = r
	}
	for id, want := range map[string]placement.Path{
		// The flood takes the place of the lowest-rate small-frame rule
		// (udp-mgmt-net, 1 Mpps); the rules overlapping accept rules are in
		// hardware behind pass entries.
		"syn-flood": placement.HW, "udp-flood": placement.SW, "ntp-amp": placement.HW,
		"gre-bulk": placement.HW, "dns-amp": placement.HW, "tiny-udp": placement.SW, "sctp-flood": placement.SW, "udp-mgmt-net": placement.SW,
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
	// The software counters are the engine's: every frame that reached a
	// ring was received by a worker and decided there, and the capacity
	// model stays the configured one while the engine's own cycles are
	// measured.
	sw := v.SW.Totals()
	var reached uint64
	for _, f := range n.Stats() {
		reached += f.SWDropped + f.Passed
		if f.OOB != f.ModelOOB {
			t.Errorf("%s: %d lost on a real ring (step mode drains every ring)", f.Name, f.OOB-f.ModelOOB)
		}
	}
	if sw.RxPackets != reached || sw.Dropped+sw.Passed != sw.RxPackets {
		t.Errorf("engine rx %d dropped %d passed %d; flows reached software %d", sw.RxPackets, sw.Dropped, sw.Passed, reached)
	}
	if v.CyclesPerPacket != 297 || v.MeasuredCyclesPerPacket <= 0 {
		t.Errorf("cycles per packet %v (want the model's 297), measured %v", v.CyclesPerPacket, v.MeasuredCyclesPerPacket)
	}
	// The engine's own counts: every passed frame left on the peer port.
	e := n.Engine()
	if e.Total.Rx == 0 || uint64(float64(e.Total.Rx)*n.Scale()) != sw.RxPackets || e.Total.Passed != e.Total.Tx || e.PeerSent != e.Total.Tx || !e.Forward {
		t.Errorf("engine %+v, peer sent %d; scaled rx %d", e.Total, e.PeerSent, sw.RxPackets)
	}
	if u := n.Untagged(); u != 0 {
		t.Errorf("%d frames without a simulator tag reached the engine", u)
	}
	closed = true
	if err := n.Close(); err != nil {
		t.Errorf("close: %v", err)
	}
	// Counters stay readable after Close.
	after := n.SW().Stats()
	if got := after.Totals().RxPackets; got != sw.RxPackets {
		t.Errorf("after close: rx %d, want %d", got, sw.RxPackets)
	}
}

func totalOOB(n *NIC) uint64 {
	var t uint64
	for _, f := range n.Stats() {
		t += f.OOB
	}
	return t
}

// Run: the workers poll on their own threads while traffic is sent in real
// time; once it returns, every packet sent is accounted for.
func TestSimRunLive(t *testing.T) {
	n, err := New(Options{Scale: 20000, HWEntries: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	pl := &protect.List{Entries: []protect.Entry{{Rule: rule.Rule{ID: "protect-mgmt", Action: rule.Accept, Match: rule.Match{Dst: netip.MustParsePrefix("192.0.2.1/32")}}, Note: "mgmt"}}}
	st := store.New(pl, n.Now)
	for _, d := range DemoRules() {
		r, err := ParseDemo(d, n.Now())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.Put("demo", r); err != nil {
			t.Fatal(err)
		}
	}
	p := placement.New(placement.Config{CyclesPerPacket: 297}, n.HW(), n.SW(), slog.New(slog.NewTextHandler(io.Discard, nil)), n.Now)
	snap := st.Snapshot()
	n.SetReference(&snap.Set)
	p.Apply(context.Background(), snap)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- n.Run(ctx, 5*time.Millisecond) }()
	deadline := time.Now().Add(20 * time.Second)
	for {
		var sw uint64
		for _, f := range n.Stats() {
			sw += f.SWDropped
		}
		if sw > 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	var hw, sw uint64
	for _, f := range n.Stats() {
		if f.Sent != f.HWDropped+f.SWDropped+f.Passed+f.OOB {
			t.Errorf("%s: sent %d != hw %d + sw %d + passed %d + oob %d", f.Name, f.Sent, f.HWDropped, f.SWDropped, f.Passed, f.OOB)
		}
		if f.OverDrop != 0 {
			t.Errorf("%s: %d over-dropped", f.Name, f.OverDrop)
		}
		hw += f.HWDropped
		sw += f.SWDropped
	}
	if hw == 0 || sw == 0 {
		t.Errorf("both paths should drop: hw %d sw %d", hw, sw)
	}
	if d := n.ProtectedDrops(); d != 0 {
		t.Errorf("%d protected packets dropped", d)
	}
	if e := n.Engine(); e.Unpinned != 0 {
		t.Logf("%d workers could not be pinned here", e.Unpinned)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
}
