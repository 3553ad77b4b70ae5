package placement

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/scrubd/scrubd/agent/dataplane"
	"github.com/scrubd/scrubd/swpath/rule"
)

// ringWorld: a one-entry table holding a quiet rule, a flood in software,
// and workers whose counters rise by rx and oob packets per second each.
func ringRounds(t *testing.T, c Config, workers int, hz float64, rx, oob []float64) (*Placer, *world) {
	t.Helper()
	w := newWorld(t, 1)
	w.sw.workers, w.sw.hz = workers, hz
	p := New(c, w.hw, w.sw, quiet(), w.now)
	quietR, flood := drop("quiet", "198.51.100.0/24"), drop("flood", "203.0.113.0/24")
	w.want(quietR, flood)
	ctx := context.Background()
	p.Apply(ctx, snap(1, quietR, flood))
	if got, _ := pathOf(p.View(), "flood"); got != SW {
		t.Fatalf("flood starts on %s", got)
	}
	var total float64
	for _, r := range rx {
		total += r
	}
	p.Tick(ctx)
	for i := 1; i <= 3; i++ {
		w.clock = w.clock.Add(5 * time.Second)
		secs := float64(i * 5)
		w.sw.rules["flood"] = dataplane.Counter{Packets: uint64(total * secs), Bytes: uint64(total*secs) * 64}
		w.sw.stats.Workers = nil // a fresh slice: the placer keeps the last one
		for q := range rx {
			w.sw.stats.Workers = append(w.sw.stats.Workers, dataplane.WorkerStats{Worker: q,
				RxPackets: uint64(rx[q] * secs), OutOfBuffer: uint64(oob[q] * secs)})
		}
		w.hw.stats["quiet"] = dataplane.Counter{Packets: uint64(i) * 5000, Bytes: uint64(i) * 5000 * 1500}
		p.Tick(ctx)
	}
	return p, w
}

func even(n int, v float64) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = v
	}
	return out
}

// 16 workers at 3.26 GHz and 346 cycles per packet have a CPU capacity of
// 16 x 3260/346 = 150.75 Mpps; 100 Mpps is 66 % of it, under the 80 % high
// water, so the CPU model moves nothing. With a drain rate of 5.5 Mpps per
// queue the rings hold 16 x 5.5 = 88 Mpps: 100 Mpps is 114 % of that, and
// the flood goes to hardware (swapping with the quiet rule).
func TestRingLimitMovesRule(t *testing.T) {
	rx, none := even(16, 100e6/16), even(16, 0)
	c := cfg()
	c.CyclesPerPacket = 346
	p, _ := ringRounds(t, c, 16, 3.26e9, rx, none)
	v := p.View()
	if got, why := pathOf(v, "flood"); got != SW {
		t.Fatalf("CPU model alone: flood moved to %s (%s)", got, why)
	}
	if math.Abs(v.SWCapacityPPS-16*3.26e9/346) > 1 || v.Limit != "cpu" || v.RingCapacityPPS != 0 {
		t.Fatalf("CPU model alone: capacity %.0f limit %q ring %.0f", v.SWCapacityPPS, v.Limit, v.RingCapacityPPS)
	}
	c.QueueDrainPPS = 5.5e6
	p, _ = ringRounds(t, c, 16, 3.26e9, rx, none)
	v = p.View()
	got, why := pathOf(v, "flood")
	if got != HW || !strings.Contains(why, "limit ring: 16 queues x 5.50 Mpps drain / imbalance 1.00 = 88.00 Mpps, below the CPU's 150.75 Mpps") {
		t.Fatalf("with the ring: flood on %s (%s)", got, why)
	}
	if v.Limit != "ring" || math.Abs(v.RingCapacityPPS-88e6) > 1 || math.Abs(v.CPUCapacityPPS-16*3.26e9/346) > 1 {
		t.Fatalf("view: limit %q ring %.0f cpu %.0f", v.Limit, v.RingCapacityPPS, v.CPUCapacityPPS)
	}
	for _, d := range v.Decisions {
		if d.Rule == "flood" && d.To == HW && (d.Inputs.Limit != "ring" || d.Inputs.RingCapacityPPS != 88e6) {
			t.Fatalf("decision inputs %+v", d.Inputs)
		}
	}
}

// The live imbalance: four workers offered 15, 10/3, 10/3 and 10/3 Mpps
// (25 in all, a mean of 6.25): the busiest is 15/6.25 = 2.4 times the mean,
// so four queues draining 10 Mpps hold 4 x 10 / 2.4 = 16.67 Mpps, and 25
// Mpps is above it, though the CPU (4 x 3 GHz / 100 = 120 Mpps) has room.
func TestImbalanceFeedsRingCapacity(t *testing.T) {
	c := cfg()
	c.QueueDrainPPS = 10e6
	p, _ := ringRounds(t, c, 4, 3e9, []float64{15e6, 10e6 / 3, 10e6 / 3, 10e6 / 3}, even(4, 0))
	v := p.View()
	if math.Abs(v.Imbalance-2.4) > 1e-6 || math.Abs(v.RingCapacityPPS-40e6/2.4) > 10 || v.Limit != "ring" {
		t.Fatalf("imbalance %.4f ring %.0f limit %q", v.Imbalance, v.RingCapacityPPS, v.Limit)
	}
	if got, why := pathOf(v, "flood"); got != HW {
		t.Fatalf("flood on %s (%s)", got, why)
	}
}

// Out-of-buffer counts are the ring's verdict even with no drain rate
// configured: the workers received 70 Mpps while 30 Mpps found no buffer,
// so the load is 100 Mpps and the rings' capacity 70 Mpps, below the CPU's
// 150.75.
func TestOutOfBufferIsTheRingsVerdict(t *testing.T) {
	c := cfg()
	c.CyclesPerPacket = 346
	p, _ := ringRounds(t, c, 16, 3.26e9, even(16, 70e6/16), even(16, 30e6/16))
	v := p.View()
	if v.Limit != "ring (out-of-buffer)" || math.Abs(v.SWCapacityPPS-70e6) > 10 || math.Abs(v.SWLoadPPS-100e6) > 10 || math.Abs(v.OutOfBufferPPS-30e6) > 10 {
		t.Fatalf("limit %q capacity %.0f load %.0f oob %.0f", v.Limit, v.SWCapacityPPS, v.SWLoadPPS, v.OutOfBufferPPS)
	}
	if got, why := pathOf(v, "flood"); got != HW || !strings.Contains(why, "out-of-buffer 30.00 Mpps") {
		t.Fatalf("flood on %s (%s)", got, why)
	}
}

// A rule's offered rate counts its share of what the rings lost: the
// workers received 60 Mpps (the flood's rule decided 50, a rule hardware
// cannot take 10) while 40 Mpps found no buffer, so the load is 100 and the
// rings' capacity 60. The flood offered 50 x 100/60 = 83.3 Mpps; moving it
// leaves 16.7 Mpps, under the high water of 48, so it swaps in. Counting
// only its decided 50 would have left 50 Mpps and refused the swap.
func TestSwapCountsTheRulesLostPackets(t *testing.T) {
	w := newWorld(t, 1)
	w.sw.workers, w.sw.hz = 16, 3.26e9
	c := cfg()
	c.CyclesPerPacket = 346
	p := New(c, w.hw, w.sw, quiet(), w.now)
	quietR, flood := drop("quiet", "198.51.100.0/24"), drop("flood", "203.0.113.0/24")
	tiny := drop("tiny", "192.0.2.0/24")
	tiny.Match.Length = rule.Ranges{{Lo: 0, Hi: 100}}
	w.want(quietR, flood, tiny)
	ctx := context.Background()
	p.Apply(ctx, snap(1, quietR, flood, tiny))
	p.Tick(ctx)
	for i := 1; i <= 3; i++ {
		w.clock = w.clock.Add(5 * time.Second)
		secs := float64(i * 5)
		w.sw.rules["flood"] = dataplane.Counter{Packets: uint64(50e6 * secs), Bytes: uint64(50e6*secs) * 64}
		w.sw.rules["tiny"] = dataplane.Counter{Packets: uint64(10e6 * secs), Bytes: uint64(10e6*secs) * 64}
		w.sw.stats.Workers = nil
		for q := 0; q < 16; q++ {
			w.sw.stats.Workers = append(w.sw.stats.Workers, dataplane.WorkerStats{Worker: q,
				RxPackets: uint64(60e6 / 16 * secs), OutOfBuffer: uint64(40e6 / 16 * secs)})
		}
		w.hw.stats["quiet"] = dataplane.Counter{Packets: uint64(i) * 5000, Bytes: uint64(i) * 5000 * 1500}
		p.Tick(ctx)
	}
	if got, why := pathOf(p.View(), "flood"); got != HW {
		t.Fatalf("flood on %s (%s)", got, why)
	}
}
