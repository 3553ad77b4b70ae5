package sim

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/scrubd/scrubd/agent/placement"
	"github.com/scrubd/scrubd/agent/store"
)

// BenchmarkStep measures what one real packet costs the simulator end to
// end on this machine, with the demo rules placed: frame pick, the
// simulated table's lookup, ring delivery, the engine's burst (parse,
// classify, drop or forward, refill) and the peer port's send. It reports
// real packets per second of one core (the rate --sim can sustain per
// core at Scale 1).
func BenchmarkStep(b *testing.B) {
	n, err := New(Options{Scale: 100, Start: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)})
	if err != nil {
		b.Fatal(err)
	}
	defer n.Close()
	st := store.New(nil, n.Now)
	for _, d := range DemoRules() {
		r, err := ParseDemo(d, n.Now())
		if err != nil {
			b.Fatal(err)
		}
		if _, err := st.Put("demo", r); err != nil {
			b.Fatal(err)
		}
	}
	p := placement.New(placement.Config{CyclesPerPacket: 297}, n.HW(), n.SW(), slog.New(slog.NewTextHandler(io.Discard, nil)), n.Now)
	snap := st.Snapshot()
	n.SetReference(&snap.Set)
	p.Apply(context.Background(), snap)
	var sent uint64
	start := time.Now()
	for b.Loop() {
		n.Step(time.Millisecond) // ~1100 real packets at Scale 100
	}
	el := time.Since(start)
	for _, f := range n.Stats() {
		sent += f.Sent
	}
	real := float64(sent) / n.Scale()
	b.ReportMetric(el.Seconds()*1e9/real, "ns/pkt")
	b.ReportMetric(real/el.Seconds()/1e6, "Mpps")
}
