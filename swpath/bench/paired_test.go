package bench

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/scrubd/scrubd/swpath/traffic"
)

// fakeSide is a side whose ring-fulls of n packets cost cost CPU ns a
// packet, and cold more for the first timed ring-full after the other
// side ran (a warm ring-full in between takes it instead). It logs its
// calls to log.
type fakeSide struct {
	id         int
	n          int
	cost, cold time.Duration
	last       *int // the side that ran last
	log        *[]string
}

func (f *fakeSide) run() time.Duration {
	d := f.cost * time.Duration(f.n)
	if *f.last != f.id {
		d += f.cold * time.Duration(f.n)
	}
	*f.last = f.id
	return d
}

func (f *fakeSide) warm() {
	f.run()
	*f.log = append(*f.log, fmt.Sprintf("w%d", f.id))
}

func (f *fakeSide) timed(r *workerResult) int {
	r.cpu += f.run()
	*f.log = append(*f.log, fmt.Sprintf("t%d", f.id))
	return f.n
}

// TestAlternate checks the paired run's order and arithmetic against
// sides of known cost: each round runs both, the baseline first in even
// rounds, each warmed by an untimed ring-full before its timed ones, and
// the ratios are side 1's cost over side 0's within each round.
func TestAlternate(t *testing.T) {
	last := -1
	var log []string
	s0 := &fakeSide{id: 0, n: 100, cost: 20, cold: 15, last: &last, log: &log}
	s1 := &fakeSide{id: 1, n: 100, cost: 30, cold: 15, last: &last, log: &log}
	cpu, pkts, ratios, err := alternate(context.Background(), [2]side{s0, s1}, 3, 250)
	if err != nil {
		t.Fatal(err)
	}
	want := "w0 t0 t0 t0 w1 t1 t1 t1 w1 t1 t1 t1 w0 t0 t0 t0 w0 t0 t0 t0 w1 t1 t1 t1"
	if got := strings.Join(log, " "); got != want {
		t.Errorf("calls\n%s\nwant\n%s", got, want)
	}
	if pkts != [2]int{900, 900} {
		t.Errorf("packets %v, want 900 each (three ring-fulls of 100 a round, to reach 250)", pkts)
	}
	if cpu != [2]time.Duration{900 * 20, 900 * 30} {
		t.Errorf("CPU %v, want %v: the cold ring-full must be the untimed one", cpu, [2]time.Duration{18000, 27000})
	}
	if !slices.Equal(ratios, []float64{1.5, 1.5, 1.5}) {
		t.Errorf("ratios %v, want 1.5 in each of three rounds", ratios)
	}
}

// TestAlternateErrors: a side that takes no CPU time, one that receives
// nothing (which would otherwise loop for ever), or a cancelled context
// ends the run with an error instead of a ratio.
func TestAlternateErrors(t *testing.T) {
	last := -1
	var log []string
	s0 := &fakeSide{id: 0, n: 100, cost: 20, last: &last, log: &log}
	zero := &fakeSide{id: 1, n: 100, cost: 0, last: &last, log: &log}
	if _, _, _, err := alternate(context.Background(), [2]side{s0, zero}, 1, 100); err == nil || !strings.Contains(err.Error(), "side 1") {
		t.Errorf("a side with no CPU time: err %v, want one naming side 1", err)
	}
	empty := &fakeSide{id: 1, n: 0, cost: 20, last: &last, log: &log}
	if _, _, _, err := alternate(context.Background(), [2]side{s0, empty}, 1, 100); err == nil || !strings.Contains(err.Error(), "received nothing") {
		t.Errorf("a side whose ring-fulls receive nothing: err %v, want one saying so", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, _, err := alternate(ctx, [2]side{s0, s0}, 1, 100); err == nil {
		t.Error("a cancelled run gave no error")
	}
}

// TestRunPairedSmall runs a paired measurement end to end on the
// emulator: the five source rules against 1,000 ClassBench-style rules.
func TestRunPairedSmall(t *testing.T) {
	base := traffic.SourceWorkload()
	more := traffic.ClassBenchRules(1, 1000)
	cfg := Config{FrameSizes: []int{64, 512}, Packets: 8192, RQLog2: 8, Flows: 256, Rules: more}
	ps, err := RunPaired(context.Background(), cfg, base, 4)
	if err != nil {
		t.Fatal(err)
	}
	if len(ps) != 2 {
		t.Fatalf("%d frame sizes, want 2", len(ps))
	}
	for i, p := range ps {
		if p.FrameSize != cfg.FrameSizes[i] || p.Rounds != 4 || p.BaseRules != len(base.Rules) || p.Rules != len(more.Rules) {
			t.Errorf("%+v", p)
		}
		if p.BaseCPUNsPerPkt <= 0 || p.CPUNsPerPkt <= 0 || p.RatioMin <= 0 || !(p.RatioMin <= p.Ratio && p.Ratio <= p.RatioMax) {
			t.Errorf("%+v", p)
		}
	}
	var text strings.Builder
	if err := WritePairs(&text, ps); err != nil || !strings.Contains(text.String(), fmt.Sprintf("%.2fx", ps[0].Ratio)) {
		t.Errorf("table %q, err %v", text.String(), err)
	}
	if _, err := RunPaired(context.Background(), Config{Workers: 2, Rules: more}, base, 1); err == nil || !strings.Contains(err.Error(), "one worker") {
		t.Errorf("two workers: err %v, want one saying a paired run takes one worker", err)
	}
}
