package sim

import (
	"context"
	"io"
	"log/slog"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/scrubd/scrubd/agent/placement"
	"github.com/scrubd/scrubd/agent/protect"
	"github.com/scrubd/scrubd/agent/store"
	"github.com/scrubd/scrubd/swpath/rule"
)

// ringFlows: a 100 Mpps flood of 64 B frames from 256 sources, a 2 Mpps
// amplification flood of 1500 B frames, and some legitimate traffic.
func ringFlows() []Flow {
	ip := func(frame int) uint32 { return uint32(frame - 18) }
	return []Flow{
		{Name: "udp-flood 64B", Fields: udp("198.18.2.1", "203.0.113.30", 40000, 1500, ip(64)), Frame: 64, PPS: 100e6, Vary: 256},
		{Name: "dns-amp 1500B", Fields: udp("198.18.3.1", "203.0.113.10", 53, 33000, ip(1500)), Frame: 1500, PPS: 2e6, Vary: 64},
		{Name: "legit https 594B", Fields: tcp("198.19.0.1", "203.0.113.80", 50000, 443, rule.ACK, ip(594)), Frame: 594, PPS: 1e6, Vary: 256},
	}
}

type ringRun struct {
	view            *placement.View
	ringLost, model uint64 // modelled packets the rings / the whole model lost
	oobAfter        uint64 // out-of-buffer in the last 5 s
	flood           placement.RuleView
}

// runRing: 16 queues of a 3.26 GHz, 346 cycles/packet software path (the
// VPP drop-path figures: a CPU capacity of 16 x 9.42 = 150.75 Mpps), a
// one-entry hardware table. The amplification rule arrives first and takes
// the table; the flood's rule goes to software. simDrain is the queues'
// drain rate in the simulated NIC, placeDrain what placement is told.
func runRing(t *testing.T, simDrain, placeDrain float64) ringRun {
	t.Helper()
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	n, err := New(Options{Start: start, Scale: 5000, Workers: 16, Hz: 3.26e9, CPP: 346, QueueDrainPPS: simDrain,
		HWEntries: 1, Flows: ringFlows(), Host: true})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	st := store.New(&protect.List{}, n.Now)
	p := placement.New(placement.Config{HighWater: 0.8, LowWater: 0.5, MinDwell: 3 * time.Second, MaxMoves: 8,
		CyclesPerPacket: 346, QueueDrainPPS: placeDrain}, n.HW(), n.SW(), slog.New(slog.NewTextHandler(io.Discard, nil)), n.Now)
	ctx := context.Background()
	put := func(y string) {
		r, err := rule.ParseRule("test", []byte(y), n.Now())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.Put("test", r); err != nil {
			t.Fatal(err)
		}
		snap := st.Snapshot()
		n.SetReference(&snap.Set)
		p.Apply(ctx, snap)
	}
	put(`{id: dns-amp, action: drop, match: {dst: 203.0.113.0/24, proto: udp, src_port: "53"}}`)
	put(`{id: udp-flood, action: drop, match: {dst: 203.0.113.30/32, proto: udp, dst_port: "1500"}}`)
	if v := p.View(); v.Rules.At(1).Path != placement.SW || v.Rules.At(0).Path != placement.HW {
		t.Fatalf("start: %+v", v.Rules)
	}
	var oob15 uint64
	for i := 1; i <= 200; i++ { // 20 simulated seconds
		n.Step(100 * time.Millisecond)
		if i%10 == 0 {
			p.Tick(ctx)
		}
		if i == 150 {
			oob15 = totalOOB(n)
		}
	}
	var r ringRun
	r.view = p.View()
	for _, l := range n.RingLost() {
		r.ringLost += l
	}
	for _, f := range n.Stats() {
		r.model += f.ModelOOB
		if f.Sent != f.HWDropped+f.SWDropped+f.Passed+f.OOB || f.OverDrop != 0 {
			t.Errorf("%s: %+v", f.Name, f)
		}
	}
	r.oobAfter = totalOOB(n) - oob15
	for _, rv := range r.view.Rules.All() {
		if rv.ID == "udp-flood" {
			r.flood = rv
		}
	}
	return r
}

// The ring limit, not the CPU, moves the flood's rule to hardware. The
// flood offers 100/16 = 6.25 Mpps to each queue, above the 5.5 Mpps drain
// rate, while the CPU model (150.75 Mpps, high water 120.6) has room.
func TestSimRingLimitMovesRuleToHardware(t *testing.T) {
	cpuCap := 16 * 3.26e9 / 346
	// Control: no drain limit anywhere: the CPU model alone keeps the
	// flood in software, and nothing is lost.
	c := runRing(t, 0, 0)
	if c.flood.Path != placement.SW || c.model != 0 {
		t.Fatalf("CPU only: flood on %s (%s), %d lost", c.flood.Path, c.flood.Reason, c.model)
	}
	if c.view.Limit != "cpu" || math.Abs(c.view.SWCapacityPPS-cpuCap) > 1 || c.view.SWLoadPPS > 0.8*cpuCap {
		t.Fatalf("CPU only: limit %s capacity %.0f load %.0f", c.view.Limit, c.view.SWCapacityPPS, c.view.SWLoadPPS)
	}
	t.Logf("CPU only: flood stays in software: load %.2f Mpps, capacity %.2f Mpps (%s)", c.view.SWLoadPPS/1e6, c.view.SWCapacityPPS/1e6, c.view.Limit)

	for _, tc := range []struct {
		name       string
		placeDrain float64
		limit      string
	}{
		{"drain rate known", 5.5e6, "limit ring: 16 queues x 5.50 Mpps drain"},
		{"out-of-buffer only", 0, "limit ring: out-of-buffer"},
	} {
		r := runRing(t, 5.5e6, tc.placeDrain)
		if r.flood.Path != placement.HW {
			t.Fatalf("%s: flood on %s (%s)", tc.name, r.flood.Path, r.flood.Reason)
		}
		var moved *placement.Decision
		for i, d := range r.view.Decisions {
			if d.Rule == "udp-flood" && d.To == placement.HW {
				moved = &r.view.Decisions[i]
			}
		}
		if moved == nil || !strings.Contains(moved.Reason, tc.limit) || !strings.HasPrefix(moved.Inputs.Limit, "ring") ||
			moved.Inputs.CPUCapacityPPS < cpuCap-1 || moved.Inputs.SWLoadPPS > 0.8*moved.Inputs.CPUCapacityPPS {
			t.Fatalf("%s: decision %+v", tc.name, moved)
		}
		// Every packet the model lost, the rings lost; the CPU model lost
		// none; and once the flood is in hardware nothing overflows.
		if r.ringLost == 0 || r.ringLost != r.model || r.oobAfter != 0 {
			t.Fatalf("%s: ring lost %d of the model's %d; out-of-buffer in the last 5 s %d", tc.name, r.ringLost, r.model, r.oobAfter)
		}
		if r.flood.SW.Packets == 0 || r.flood.HW.Packets == 0 {
			t.Fatalf("%s: flood dropped sw %d hw %d", tc.name, r.flood.SW.Packets, r.flood.HW.Packets)
		}
		t.Logf("%s: %s -> %s at %s: %s (load %.2f Mpps, capacity %.2f: cpu %.2f, ring %.2f, imbalance %.2f); rings lost %d packets, the CPU model 0",
			tc.name, moved.From, moved.To, moved.Time.Format("15:04:05"), moved.Reason, moved.Inputs.SWLoadPPS/1e6, moved.Inputs.SWCapacityPPS/1e6,
			moved.Inputs.CPUCapacityPPS/1e6, moved.Inputs.RingCapacityPPS/1e6, moved.Inputs.Imbalance, r.ringLost)
	}
}

// The emulated receive queues take the configured ring size, the CQ twice
// that; a size the engine cannot take is refused.
func TestSimRingEntries(t *testing.T) {
	n, err := New(Options{Workers: 2, RingEntries: 2048, Flows: ringFlows()[:1]})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	if rq, cq := n.Rings(); rq != 2048 || cq != 4096 {
		t.Fatalf("rings %d, CQ %d; want 2048, 4096", rq, cq)
	}
	if _, err := New(Options{Workers: 2, RingEntries: 1000}); err == nil || !strings.Contains(err.Error(), "1000") {
		t.Fatalf("1000 entries: %v", err)
	}
}

// The emulated rings hold the modelled ring's share of the real packets
// (one in Scale), at least one 50 ms round of the whole modelled software
// capacity, as a power of 2 from 256 to the modelled size. The expected
// sizes are worked by hand: 2 workers x 2.13 GHz / 297 cycles = 14.34
// Mpps, 50 ms of it at scale 1000 = 717 packets -> 1024.
func TestEmulatedRing(t *testing.T) {
	for _, c := range []struct {
		modelled int
		opt      Options
		want     int
	}{
		{32768, Options{Scale: 1000, Workers: 2}, 1024},                          // 717 of a round; 33 of the ring
		{32768, Options{Scale: 1000, Workers: 1}, 512},                           // 359
		{4096, Options{Scale: 1000, Workers: 12}, 4096},                          // 4303: the modelled ring bounds it
		{32768, Options{Scale: 1, Workers: 2}, 32768},                            // scale 1: the modelled ring
		{2048, Options{Scale: 1, Workers: 2}, 2048},                              // 2048 > 717
		{32768, Options{Scale: 5000, Workers: 16, Hz: 3.26e9, CPP: 346}, 2048},   // 16 x 9.42 Mpps x 50 ms / 5000 = 1508
		{32768, Options{Scale: 100, Workers: 2}, 8192},                           // 7170 of a round; 328 of the ring
		{256, Options{Scale: 1000, Workers: 12}, 256},                            // the smallest ring
		{32768, Options{Scale: 1e6, Workers: 2, Hz: 1e9, CPP: 1000}, 256},        // 0.1: the smallest ring the engine takes
		{32768, Options{}, 8192},                                                 // New's defaults: 12 x 7.17 Mpps x 50 ms / 1000 = 4303
		{16384, Options{Scale: 10, Workers: 2, Hz: 2.13e9, CPP: 297}, 16384},     // 71717: the modelled ring bounds it
		{32768, Options{Scale: 1000, Workers: 2, Hz: 2.13e9, CPP: 297 * 4}, 256}, // 179
	} {
		if got := EmulatedRing(c.modelled, c.opt); got != c.want {
			t.Errorf("EmulatedRing(%d, scale %g, %d workers, %g Hz, %g cycles) = %d, want %d", c.modelled, c.opt.Scale, c.opt.Workers, c.opt.Hz, c.opt.CPP, got, c.want)
		}
	}
}
