package sim

import (
	"context"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/scrubd/scrubd/agent/dataplane"
	"github.com/scrubd/scrubd/swpath/packet"
	"github.com/scrubd/scrubd/swpath/rule"
)

// The protected flow of these tests goes to the management address; the
// flood beside it overloads the modelled software path (one worker at
// 1 GHz and 1000 cycles per packet: 1 Mpps, offered 5.1 Mpps), so most of
// what reaches software is lost for want of receive buffers.
var mgmt = netip.MustParseAddr("192.0.2.1")

const (
	lostScale = 1000
	lostStep  = 100 * time.Millisecond
	// Real frames per step: PPS x 0.1 s / Scale.
	mgmtPerStep  = 10  // 0.1 Mpps
	floodPerStep = 500 // 5 Mpps
)

func lostFlows() []Flow {
	return []Flow{
		{Name: "udp-flood 64B", Fields: udp("198.18.2.1", "203.0.113.30", 40000, 1500, 46), Frame: 64, PPS: 5e6, Vary: 64},
		{Name: "mgmt ssh (protected)", Fields: tcp("198.19.1.1", mgmt.String(), 40022, 22, rule.ACK, 110), Frame: 128, PPS: 0.1e6, Protected: true},
	}
}

// sinkCounter counts, from the frames the peer port transmits, those to
// the management address: parsed from the bytes, not from the simulator's
// tags or counters.
type sinkCounter struct{ mgmt, all atomic.Uint64 }

func (s *sinkCounter) sink(frame []byte) {
	var f rule.Fields
	if packet.Parse(frame, &f) != packet.OK {
		return
	}
	s.all.Add(1)
	if f.Dst.Netip(f.Family) == mgmt {
		s.mgmt.Add(1)
	}
}

func newLostNIC(t *testing.T, sk *sinkCounter) *NIC {
	t.Helper()
	n, err := New(Options{Start: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), Scale: lostScale, Workers: 1, Hz: 1e9, CPP: 1000,
		Flows: lostFlows(), Sink: sk.sink})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := n.Close(); err != nil {
			t.Error(err)
		}
	})
	return n
}

func mustRule(t *testing.T, y string) rule.Rule {
	t.Helper()
	r, err := rule.ParseRule("test", []byte(y), time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestProtectedLostAnyCause: protected packets lost are counted whatever
// lost them, and the count is what was sent less what came out of the peer
// port. Three phases of 50 steps: no rules (the loss is out-of-buffer), a
// software rule that wrongly drops the management flow (rule drops in
// software on top of out-of-buffer), and the same rule in hardware (every
// protected packet dropped in the table, none reach the rings).
func TestProtectedLostAnyCause(t *testing.T) {
	var sk sinkCounter
	n := newLostNIC(t, &sk)
	ctx := context.Background()
	const steps = 50
	var sent uint64
	run := func() map[string]uint64 {
		before := n.ProtectedLost()
		for range steps {
			n.Step(lostStep)
		}
		sent += steps * mgmtPerStep
		after := n.ProtectedLost()
		d := map[string]uint64{}
		for _, c := range dataplane.LostCauses {
			d[c] = after[c] - before[c]
		}
		return d
	}
	check := func(phase string) {
		t.Helper()
		lost := n.ProtectedLost()
		var sum uint64
		for _, c := range dataplane.LostCauses {
			sum += lost[c]
		}
		if len(lost) != len(dataplane.LostCauses) {
			t.Errorf("%s: causes %v, want exactly %v", phase, lost, dataplane.LostCauses)
		}
		if want := (sent - sk.mgmt.Load()) * lostScale; sum != want {
			t.Errorf("%s: protected lost %d (%v), want (sent %d - out of the peer port %d) x %d = %d",
				phase, sum, lost, sent, sk.mgmt.Load(), lostScale, want)
		}
	}

	// 1. No rules: protected frames are lost only where the flood exhausts
	// the buffers. The model keeps 1/5.1 of what reaches software, each
	// packet alike, so about 80 % of them are lost (hand-derived:
	// 1 - 1e6/5.1e6 = 0.804; over 500 frames one standard deviation is
	// 0.018, the bounds are four). A loss that fell by the flows' order
	// instead would lose all of them or none.
	d := run()
	check("no rules")
	if d[dataplane.LostOutOfBuffer] == 0 || d[dataplane.LostHWRule]+d[dataplane.LostSWRule]+d[dataplane.LostUnforwarded] != 0 {
		t.Errorf("no rules: %v, want out-of-buffer only", d)
	}
	share := float64(d[dataplane.LostOutOfBuffer]) / float64(steps*mgmtPerStep*lostScale)
	t.Logf("no rules: %.3f of the protected packets lost to out-of-buffer", share)
	if share < 0.73 || share > 0.88 {
		t.Errorf("no rules: %.3f of protected packets lost to out-of-buffer, want about 0.804", share)
	}

	// 2. A software rule drops the management flow: what reached the rings
	// is dropped by it, the rest still lost to out-of-buffer.
	bad := mustRule(t, `{id: bad, action: drop, match: {dst: 192.0.2.1/32, proto: tcp}}`)
	set := &rule.Set{Rules: []rule.Rule{bad}}
	if err := n.SW().SetRules(set); err != nil {
		t.Fatal(err)
	}
	out := sk.mgmt.Load()
	d = run()
	check("software rule")
	if sk.mgmt.Load() != out {
		t.Errorf("software rule: %d protected frames still came out", sk.mgmt.Load()-out)
	}
	if d[dataplane.LostSWRule] == 0 || d[dataplane.LostSWRule]+d[dataplane.LostOutOfBuffer] != steps*mgmtPerStep*lostScale || d[dataplane.LostHWRule] != 0 {
		t.Errorf("software rule: %v, want sw_rule + out_of_buffer = %d", d, steps*mgmtPerStep*lostScale)
	}

	// 3. The rule in hardware: every protected frame dropped in the table.
	if err := n.SW().SetRules(&rule.Set{}); err != nil {
		t.Fatal(err)
	}
	if err := n.HW().Install(ctx, &bad, set); err != nil {
		t.Fatal(err)
	}
	d = run()
	check("hardware rule")
	if d[dataplane.LostHWRule] != steps*mgmtPerStep*lostScale || d[dataplane.LostSWRule]+d[dataplane.LostOutOfBuffer]+d[dataplane.LostUnforwarded] != 0 {
		t.Errorf("hardware rule: %v, want hw_rule %d only", d, steps*mgmtPerStep*lostScale)
	}
	// The software path reports the same counts (dataplane.ProtectedLoss).
	pl, ok := n.SW().(dataplane.ProtectedLoss)
	if !ok {
		t.Fatal("the simulated software path does not implement dataplane.ProtectedLoss")
	}
	got, want := pl.ProtectedLost(), n.ProtectedLost()
	for _, c := range dataplane.LostCauses {
		if got[c] != want[c] {
			t.Errorf("SW().ProtectedLost()[%s] = %d, NIC's %d", c, got[c], want[c])
		}
	}
}

// TestProtectedLostUnforwarded: passed protected frames the engine cannot
// send on (the peer port's send queue full) are lost as unforwarded. The
// worker is stepped by hand without the peer port servicing its send queue
// (512 WQEs): of 576 protected frames received, 512 are posted and 64 find
// the queue full.
func TestProtectedLostUnforwarded(t *testing.T) {
	var sk sinkCounter
	n := newLostNIC(t, &sk)
	v := n.flows[1][0] // the protected flow's frame
	q, w, rq := v.queue, n.dv.Workers[v.queue], n.dv.RX[v.queue]
	delivered := 0
	for batch := 0; batch < 9; batch++ {
		for range 64 {
			if rq.Deliver(v.frames[0]) != 0 {
				t.Fatal("receive ring full")
			}
			delivered++
		}
		for w.Step() > 0 {
		}
	}
	for n.dv.TX[q].Service() > 0 {
	}
	lost := n.ProtectedLost()
	if sk.mgmt.Load() != 512 {
		t.Fatalf("peer port sent %d protected frames, want the send queue's 512", sk.mgmt.Load())
	}
	if want := (uint64(delivered) - sk.mgmt.Load()) * lostScale; lost[dataplane.LostUnforwarded] != want {
		t.Errorf("unforwarded %d (%v), want (received %d - sent %d) x %d = %d", lost[dataplane.LostUnforwarded], lost, delivered, sk.mgmt.Load(), lostScale, want)
	}
	if lost[dataplane.LostHWRule]+lost[dataplane.LostSWRule]+lost[dataplane.LostOutOfBuffer] != 0 {
		t.Errorf("other causes %v, want none", lost)
	}
	if st := n.Stats()[1]; st.Forwarded != 512*lostScale {
		t.Errorf("flow stats forwarded %d, want %d", st.Forwarded, 512*lostScale)
	}
	st := n.SW().Stats()
	if u := st.Totals().Unforwarded; u != 64*lostScale {
		t.Errorf("software path unforwarded %d, want %d", u, 64*lostScale)
	}
}

// TestNICCountersAreDropCounters: the simulated NIC reports only counters
// that mlx5 names as drops (the kernel's
// Documentation/networking/device_drivers/ethernet/mellanox/mlx5/counters.rst):
// rx_out_of_buffer and rx_discards_phy, never rx_packets_phy (every packet
// received, which the metric scrubd_nic_dropped_packets_total would read as
// drops). rx_out_of_buffer is what was sent, less what the table dropped
// and the engine received.
func TestNICCountersAreDropCounters(t *testing.T) {
	var sk sinkCounter
	n := newLostNIC(t, &sk)
	ctx := context.Background()
	// The flood dropped in hardware for half the time, so the table's
	// drops enter the sum.
	flood := mustRule(t, `{id: flood, action: drop, match: {dst: 203.0.113.30/32, proto: udp}}`)
	const steps = 40
	for i := range steps {
		if i == steps/2 {
			if err := n.HW().Install(ctx, &flood, &rule.Set{Rules: []rule.Rule{flood}}); err != nil {
				t.Fatal(err)
			}
		}
		n.Step(lostStep)
	}
	nic, err := n.HW().NICCounters(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{"rx_out_of_buffer": true, "rx_discards_phy": true}
	for k := range nic {
		if !want[k] {
			t.Errorf("NIC counter %q is not a drop counter", k)
		}
	}
	if len(nic) != len(want) {
		t.Errorf("NIC counters %v, want %v", nic, want)
	}
	sent := uint64(steps * (mgmtPerStep + floodPerStep))
	hw, err := n.HW().Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var hwDropped uint64
	for _, c := range hw {
		hwDropped += c.Packets
	}
	if hwDropped != steps/2*floodPerStep*lostScale {
		t.Fatalf("table dropped %d, want %d", hwDropped, steps/2*floodPerStep*lostScale)
	}
	rx := n.Engine().Total.Rx
	if oob := nic["rx_out_of_buffer"]; oob == 0 || oob != (sent-rx)*lostScale-hwDropped {
		t.Errorf("rx_out_of_buffer %d, want (sent %d - received %d) x %d - table drops %d = %d", oob, sent, rx, lostScale, hwDropped, (sent-rx)*lostScale-hwDropped)
	}
	if sk.all.Load() != rx {
		t.Errorf("peer port sent %d, engine received %d (no rule in software)", sk.all.Load(), rx)
	}
}
