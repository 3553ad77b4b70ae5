package swengine

import (
	"fmt"
	"math"
	"runtime"

	"github.com/scrubd/scrubd/agent/config"
	"github.com/scrubd/scrubd/agent/plan"
)

// RxRing returns the receive ring entries per queue for the dv engine and
// the NIC emulator, and why: software.rx_ring_entries, or for 0 (auto) the
// capacity model's recommendation (agent/plan.RecommendRing). The model's
// queue load is the 64-byte line rate of link_gbps spread over the
// workers, at most what one queue can carry (software.queue_drain_mpps and
// the worker's CPU ceiling, software.ghz / software.cycles_per_packet,
// whichever are known); the ring holds DefaultAbsorbMicros of it within the
// LLC share of a worker's core, read from sysfs under sysRoot (a worker's
// CPU: the highest-numbered, where the engine puts its workers).
func RxRing(cfg *config.Config, sysRoot string) (int, string) {
	sw := &cfg.Software
	if sw.RxRingEntries != 0 {
		return sw.RxRingEntries, "software.rx_ring_entries"
	}
	workers := max(sw.Workers, 1)
	load := plan.LineRatePPS(cfg.LinkGbps*1e9, 64) / 1e6 / float64(workers)
	bound := "64 B line rate over the workers"
	if sw.QueueDrainMpps > 0 && sw.QueueDrainMpps < load {
		load, bound = sw.QueueDrainMpps, "software.queue_drain_mpps"
	}
	if sw.GHz > 0 && !sw.CyclesPerPacket.Auto() {
		if c := sw.GHz * 1e3 / float64(sw.CyclesPerPacket); c < load {
			load, bound = c, "the worker's CPU ceiling"
		}
	}
	llc, err := plan.LLCShareKiB(sysRoot, runtime.NumCPU()-1)
	if err != nil {
		llc = 0
	}
	if math.IsNaN(load) || load <= 0 {
		return plan.DefaultRing, "no queue load to size from: the default"
	}
	n, why := plan.RecommendRing(load, plan.DefaultAbsorbMicros, 64, llc)
	return n, fmt.Sprintf("sized from the capacity model (queue load %.2f Mpps: %s): %s", load, bound, why)
}
