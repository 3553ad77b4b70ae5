package placement

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/scrubd/scrubd/agent/dataplane"
	"github.com/scrubd/scrubd/agent/store"
	"github.com/scrubd/scrubd/swpath/rule"
)

func snap(v uint64, rules ...rule.Rule) store.Snapshot {
	return store.Snapshot{Version: v, Set: rule.Set{Rules: rules}}
}

func (w *world) want(rules ...rule.Rule) {
	w.wanted = map[string]bool{}
	for _, r := range rules {
		if r.Action == rule.Drop {
			w.wanted[r.ID] = true
		}
	}
}

func pathOf(v *View, id string) (Path, string) {
	for _, r := range v.Rules.All() {
		if r.ID == id {
			return r.Path, r.Reason
		}
	}
	return "", ""
}

func cfg() Config {
	// These tests look at which rules each path holds, so the software
	// backstop (hardware rules also held in software) is off; TestBackstop
	// covers it.
	return Config{HighWater: 0.8, LowWater: 0.5, MinDwell: 10 * time.Second, MaxMoves: 4, CyclesPerPacket: 100, NoBackstop: true}
}

func TestOffloadFirstAndReasons(t *testing.T) {
	w := newWorld(t, 2)
	p := New(cfg(), w.hw, w.sw, quiet(), w.now)
	lenRule := drop("len", "203.0.113.0/24")
	lenRule.Match.Length = rule.Ranges{{Lo: 0, Hi: 100}}
	rs := []rule.Rule{
		{ID: "ok-accept", Priority: 0, Action: rule.Accept, Match: rule.Match{Dst: mp("192.0.2.10/32")}},
		drop("a", "203.0.113.0/24"), lenRule, drop("overlap", "192.0.2.0/24"), drop("b", "198.51.100.0/24"), drop("c", "198.51.101.0/24"),
	}
	w.want(rs...)
	p.Apply(context.Background(), snap(1, rs...))
	v := p.View()
	for id, want := range map[string]string{"a": "hw", "b": "hw", "len": "sw", "overlap": "sw", "c": "sw", "ok-accept": "none"} {
		if got, why := pathOf(v, id); string(got) != want {
			t.Errorf("%s: %s (%s), want %s", id, got, why, want)
		}
	}
	for id, want := range map[string]string{"len": "unsupported", "overlap": "accept_overlap", "c": "table full"} {
		if _, why := pathOf(v, id); !strings.Contains(why, want) {
			t.Errorf("%s: reason %q lacks %q", id, why, want)
		}
	}
	// The software set holds the accept rule and the software drops only.
	if got := len(w.sw.set.Rules); got != 4 || w.sw.set.Rules[0].ID != "ok-accept" {
		t.Fatalf("sw set %+v", w.sw.set.Rules)
	}
	// Removing a hardware rule frees room: c moves up on the next tick.
	rs2 := []rule.Rule{rs[0], rs[2], rs[3], rs[4], rs[5]}
	w.want(rs2...)
	p.Apply(context.Background(), snap(2, rs2...))
	if _, ok := w.hw.installed["a"]; ok {
		t.Fatal("a still in hardware")
	}
	p.Tick(context.Background())
	w.clock = w.clock.Add(11 * time.Second)
	p.Tick(context.Background())
	if got, why := pathOf(p.View(), "c"); got != HW {
		t.Fatalf("c: %s %s", got, why)
	}
}

func mp(s string) (p netipPrefix) { return mustPrefix(s) }

// The regime: software overloaded by a small-frame flood on a software rule;
// the hardware table is full of a quiet large-frame rule. After the dwell
// time the flood rule swaps in, the quiet rule goes to software, and every
// step keeps both enforced.
func TestRegimeSwap(t *testing.T) {
	w := newWorld(t, 1)
	p := New(cfg(), w.hw, w.sw, quiet(), w.now)
	quietR, flood := drop("quiet", "198.51.100.0/24"), drop("flood", "203.0.113.0/24")
	w.want(quietR, flood)
	p.Apply(context.Background(), snap(1, quietR, flood))
	if got, _ := pathOf(p.View(), "flood"); got != SW {
		t.Fatalf("flood %s", got)
	}
	ctx := context.Background()
	p.Tick(ctx)
	// Capacity is 1 core x 1 GHz / 100 cycles = 10 Mpps. Offer 9.5 Mpps of
	// 64 B to software, 1 kpps of 1500 B to hardware.
	for i := 1; i <= 3; i++ {
		w.clock = w.clock.Add(5 * time.Second)
		w.sw.rules["flood"] = dataplane.Counter{Packets: uint64(i) * 5 * 9_500_000, Bytes: uint64(i) * 5 * 9_500_000 * 64}
		w.sw.stats.Workers = []dataplane.WorkerStats{{RxPackets: uint64(i) * 5 * 9_600_000, Cycles: uint64(i) * 5 * 9_600_000 * 100}}
		w.hw.stats["quiet"] = dataplane.Counter{Packets: uint64(i) * 5000, Bytes: uint64(i) * 5000 * 1500}
		p.Tick(ctx)
	}
	v := p.View()
	if got, why := pathOf(v, "flood"); got != HW {
		t.Fatalf("flood %s (%s); load %.0f cap %.0f", got, why, v.SWLoadPPS, v.SWCapacityPPS)
	}
	if got, why := pathOf(v, "quiet"); got != SW || !strings.Contains(why, "makes room for flood") {
		t.Fatalf("quiet %s (%s)", got, why)
	}
	if v.Moves[[2]Path{SW, HW}] != 1 || v.Moves[[2]Path{HW, SW}] != 1 {
		t.Fatalf("moves %v", v.Moves)
	}
	var sawInputs bool
	for _, d := range v.Decisions {
		if d.Rule == "flood" && d.To == HW && d.Inputs.RulePPS > 9e6 && d.Inputs.RuleAvgFrame == 64 && d.Inputs.SWCapacityPPS == 1e7 {
			sawInputs = true
		}
	}
	if !sawInputs {
		t.Fatalf("decision inputs not recorded: %+v", v.Decisions)
	}
	// Counters add up across the paths: flood's software total stays what
	// software counted while it held flood (two ticks: at the second flood
	// went to hardware; the engine reports counts for its set's rules only,
	// so the third tick's software count of flood is not read).
	for _, r := range v.Rules.All() {
		if r.ID == "flood" && r.SW.Packets != 2*5*9_500_000 {
			t.Fatalf("flood sw total %d", r.SW.Packets)
		}
	}
	// Dwell: with the flood gone quiet, nothing flaps back within MinDwell.
	moves := v.Moves[[2]Path{HW, SW}]
	w.clock = w.clock.Add(time.Second)
	p.Tick(ctx)
	if p.View().Moves[[2]Path{HW, SW}] != moves {
		t.Fatal("flapped within dwell time")
	}
}

func TestDeviceGoneEvacuates(t *testing.T) {
	w := newWorld(t, 10)
	p := New(cfg(), w.hw, w.sw, quiet(), w.now)
	a, b := drop("a", "203.0.113.0/24"), drop("b", "198.51.100.0/24")
	w.want(a, b)
	p.Apply(context.Background(), snap(1, a, b))
	if len(w.hw.installed) != 2 {
		t.Fatal("not offloaded")
	}
	// The device vanishes: its rules no longer enforce anything.
	// Until the agent notices, nothing can hold the invariant.
	w.hw.gone = true
	w.hw.installed = map[string]bool{}
	w.wanted = nil
	c := drop("c", "198.51.102.0/24")
	p.Apply(context.Background(), snap(2, a, b, c))
	p.Tick(context.Background())
	w.want(a, b, c)
	for _, id := range []string{"a", "b", "c"} {
		if !w.sw.has(id) {
			t.Fatalf("%s not in software after device loss", id)
		}
	}
	v := p.View()
	if v.HWUp || v.HWFailures[dataplane.KindDeviceGone] == 0 {
		t.Fatalf("hw up %v failures %v", v.HWUp, v.HWFailures)
	}
	// The device returns: rules go back to hardware.
	w.hw.gone = false
	w.clock = w.clock.Add(time.Minute)
	p.Tick(context.Background())
	if len(w.hw.installed) != 3 || w.sw.has("a") {
		t.Fatalf("after recovery hw %v sw %v", w.hw.installed, w.sw.set.Rules)
	}
}

func TestReconcileAdoptsAndRemovesStale(t *testing.T) {
	w := newWorld(t, 10)
	w.hw.installed["a"] = true
	w.hw.installed["old"] = true
	p := New(cfg(), w.hw, w.sw, quiet(), w.now)
	a, b := drop("a", "203.0.113.0/24"), drop("b", "198.51.100.0/24")
	w.want(a, b)
	if err := p.Reconcile(context.Background()); err != nil {
		t.Fatal(err)
	}
	p.Apply(context.Background(), snap(1, a, b))
	if w.hw.installs != 1 { // only b; a adopted in place
		t.Fatalf("%d installs", w.hw.installs)
	}
	if w.hw.installed["old"] || !w.hw.installed["a"] || !w.hw.installed["b"] {
		t.Fatalf("hw %v", w.hw.installed)
	}
	if _, why := pathOf(p.View(), "a"); !strings.Contains(why, "adopted") {
		t.Fatalf("a: %s", why)
	}
}

func TestNewAcceptDemotesOverlappingHWRule(t *testing.T) {
	w := newWorld(t, 10)
	p := New(cfg(), w.hw, w.sw, quiet(), w.now)
	a := drop("a", "203.0.113.0/24")
	w.want(a)
	p.Apply(context.Background(), snap(1, a))
	if !w.hw.installed["a"] {
		t.Fatal("a not in hw")
	}
	acc := rule.Rule{ID: "allow", Priority: 10, Action: rule.Accept, Match: rule.Match{Dst: mp("203.0.113.5/32")}}
	p.Apply(context.Background(), snap(2, acc, a))
	if w.hw.installed["a"] || !w.sw.has("a") || !w.sw.has("allow") {
		t.Fatalf("hw %v sw %+v", w.hw.installed, w.sw.set)
	}
	// The demotion put a in software before it left hardware.
	iSW, iHW := -1, -1
	for i, op := range w.ops {
		if op == "hw-a" {
			iHW = i
		}
		if strings.HasPrefix(op, "sw=") && iHW < 0 {
			iSW = i
		}
	}
	if iSW < 0 || iHW < iSW {
		t.Fatalf("ops %v", w.ops)
	}
}

// The engine's measured cycles per packet replace the configured figure
// only with LiveCycles (or when no figure was configured); otherwise they
// are published beside it. An engine without cycle counters (xdp) reports
// an estimate instead, which stands in the same way.
func TestLiveCycles(t *testing.T) {
	for _, src := range []struct {
		name    string
		workers []dataplane.WorkerStats
		est     float64
		meas    float64
	}{
		{"counted", []dataplane.WorkerStats{{RxPackets: 1000, Cycles: 250_000}}, 0, 250},
		{"estimated", []dataplane.WorkerStats{{RxPackets: 1000}}, 40, 40},
	} {
		for _, tc := range []struct {
			live    bool
			cfgCPP  float64
			wantCPP float64 // 0: the measured figure
		}{{false, 100, 100}, {true, 100, 0}, {false, 0, 0}} {
			w := newWorld(t, 2)
			c := cfg()
			c.LiveCycles, c.CyclesPerPacket = tc.live, tc.cfgCPP
			p := New(c, w.hw, w.sw, quiet(), w.now)
			r := drop("r", "203.0.113.0/24")
			w.want(r)
			p.Apply(context.Background(), snap(1, r))
			p.Tick(context.Background())
			w.clock = w.clock.Add(time.Second)
			w.sw.stats.Workers, w.sw.stats.EstCyclesPerPacket = src.workers, src.est
			p.Tick(context.Background())
			v := p.View()
			want := tc.wantCPP
			if want == 0 {
				want = src.meas
			}
			if v.CyclesPerPacket != want || v.MeasuredCyclesPerPacket != src.meas {
				t.Errorf("%s, live %v cfg %v: cycles %v measured %v, want %v and %v", src.name, tc.live, tc.cfgCPP,
					v.CyclesPerPacket, v.MeasuredCyclesPerPacket, want, src.meas)
			}
			if cp := 1e9 / want; v.SWCapacityPPS != cp {
				t.Errorf("%s, live %v: capacity %v, want %v", src.name, tc.live, v.SWCapacityPPS, cp)
			}
		}
	}
}

func TestBackstop(t *testing.T) {
	w := newWorld(t, 2)
	c := cfg()
	c.NoBackstop = false
	p := New(c, w.hw, w.sw, quiet(), w.now)
	lenRule := drop("len", "203.0.113.0/24")
	lenRule.Match.Length = rule.Ranges{{Lo: 0, Hi: 100}}
	rs := []rule.Rule{drop("a", "198.51.100.0/24"), drop("b", "198.51.101.0/24"), lenRule}
	w.want(rs...)
	p.Apply(context.Background(), snap(1, rs...))
	v := p.View()
	for id, want := range map[string]string{"a": "hw", "b": "hw", "len": "sw"} {
		if got, why := pathOf(v, id); string(got) != want {
			t.Fatalf("%s: %s (%s), want %s", id, got, why, want)
		}
	}
	// Software holds the hardware rules too, in rule-set order.
	var ids []string
	for _, r := range w.sw.set.Rules {
		ids = append(ids, r.ID)
	}
	if strings.Join(ids, ",") != "a,b,len" {
		t.Fatalf("backstop sw set = %v, want a,b,len", ids)
	}
	// An engine that cannot take the larger set still gets the software rules.
	w.sw.maxRules = 2
	rs2 := []rule.Rule{rs[0], rs[1], lenRule, drop("d", "192.0.2.0/24")}
	w.want(rs2...)
	p.Apply(context.Background(), snap(2, rs2...))
	ids = ids[:0]
	for _, r := range w.sw.set.Rules {
		ids = append(ids, r.ID)
	}
	if strings.Join(ids, ",") != "len,d" {
		t.Fatalf("fallback sw set = %v, want the software-placed rules", ids)
	}
}

// A table that lost its entries (qdisc deleted): Resync puts the lost
// rules in software first, then back in hardware, and counts one resync.
// A table that lost nothing is left alone.
func TestResyncAfterFlush(t *testing.T) {
	w := newWorld(t, 4)
	p := New(cfg(), w.hw, w.sw, quiet(), w.now)
	a, b, l := drop("a", "203.0.113.0/24"), drop("b", "198.51.100.0/24"), drop("len", "198.51.101.0/24")
	l.Match.Length = rule.Ranges{{Lo: 0, Hi: 100}}
	w.want(a, b, l)
	ctx := context.Background()
	p.Apply(ctx, snap(1, a, b, l))
	if n := p.Resync(ctx, "nothing happened"); n != 0 || p.View().Resyncs != 0 {
		t.Fatalf("resync of an intact table: %d lost, %d resyncs", n, p.View().Resyncs)
	}
	installs := w.hw.installs
	w.hw.installed = map[string]bool{} // the qdisc went, and its filters
	if n := p.Resync(ctx, "qdisc deleted"); n != 2 {
		t.Fatalf("resync found %d lost rules, want 2", n)
	}
	v := p.View()
	for _, id := range []string{"a", "b"} {
		if got, why := pathOf(v, id); got != HW || !strings.Contains(why, "reinstalled after qdisc deleted") {
			t.Errorf("%s: %s (%s)", id, got, why)
		}
		if !w.hw.installed[id] {
			t.Errorf("%s not back in the table", id)
		}
	}
	if got, _ := pathOf(v, "len"); got != SW {
		t.Errorf("len moved to %s", got)
	}
	if v.Resyncs != 1 || w.hw.installs != installs+2 || v.Moves[[2]Path{HW, SW}] != 2 || v.Moves[[2]Path{SW, HW}] != 2 {
		t.Fatalf("resyncs %d, installs %d (was %d), moves %v", v.Resyncs, w.hw.installs, installs, v.Moves)
	}
}
