package view

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/scrubd/scrubd/agent/dataplane"
	"github.com/scrubd/scrubd/agent/placement"
	"github.com/scrubd/scrubd/agent/protect"
	"github.com/scrubd/scrubd/agent/sim"
	"github.com/scrubd/scrubd/agent/store"
	"github.com/scrubd/scrubd/swpath/packet"
	"github.com/scrubd/scrubd/swpath/rule"
)

const clearScreen = "\033[H\033[2J"

// render draws s as the terminal view and returns its lines, checking
// that it fits an 80x24 terminal: at most 24 lines (the last one not
// terminated, or the terminal would scroll the first away) of at most 80
// columns each.
func render(t *testing.T, s *screen) []string {
	t.Helper()
	var b strings.Builder
	drawStatus(&b, s, true)
	out, ok := strings.CutPrefix(b.String(), clearScreen)
	if !ok {
		t.Fatalf("the view does not start by clearing the screen: %q", b.String()[:min(20, b.Len())])
	}
	lines := strings.Split(out, "\n")
	if len(lines) > 24 {
		t.Errorf("%d lines (a final newline counts: the terminal scrolls), want at most 24:\n%s", len(lines), out)
	}
	for i, l := range lines {
		if n := utf8.RuneCountInString(l); n > 80 {
			t.Errorf("line %d is %d columns, want at most 80: %q", i+1, n, l)
		}
	}
	return lines
}

// representative is the view a few minutes into `scrubd run --sim`: the
// demo's rules (with the reasons placement gives), the built-in traffic
// mix's counters after hours (ten-digit counts), the per-user socket.
func representative() *screen {
	v := &placement.View{Time: time.Date(2026, 12, 2, 1, 2, 3, 0, time.UTC), HWBudget: dataplane.Budget{MaxEntries: 10, UsedEntries: 10},
		HWPPS: 69.5e6, HWAvgFrame: 301, SWLoadPPS: 37.2e6, SWCapacityPPS: 86.1e6, Limit: "cpu", SWPPS: 34.1e6,
		CyclesPerPacket: 297, MeasuredCyclesPerPacket: 631,
		Moves: map[[2]placement.Path]uint64{{placement.SW, placement.HW}: 3, {placement.HW, placement.SW}: 1},
		NIC:   map[string]uint64{"rx_out_of_buffer": 9_876_543_210, "rx_discards_phy": 0}}
	for _, r := range []struct {
		id, action string
		path       placement.Path
		reason     string
	}{
		{"protect-0", "accept", placement.None, "protect list"},
		{"resolver-allow", "accept", placement.None, "accept rule: enforced in software, its pass entries in hardware"},
		{"gre-bulk", "drop", placement.HW, "fits in hardware (1 entry)"},
		{"ntp-amp", "drop", placement.HW, "fits in hardware (1 entry)"},
		{"dns-amp", "drop", placement.HW, "fits in hardware behind resolver-allow's pass entry (2 entries)"},
		{"tiny-udp", "drop", placement.SW, "packet length has no hardware key (mlx5 matches no IP length range)"},
		{"sctp-flood", "drop", placement.SW, "SCTP ports have no hardware key on this device"},
		{"udp-mgmt-net", "drop", placement.SW, "moved to software: syn-flood needs the entry more (60.0 Mpps of 64 B frames against 1.0)"},
		{"udp-flood", "drop", placement.SW, "needs 8 hardware entries (port range 1000-2000), 0 left of 10"},
		{"syn-flood", "drop", placement.HW, "moved to hardware: small frames at 60.0 Mpps exceed the software's headroom"},
	} {
		v.Rules = placement.RuleListOf(append(v.Rules.Slice(), placement.RuleView{ID: r.id, Action: r.action, Path: r.path, Reason: r.reason, PPS: 12.34e6, AvgFrame: 1500,
			HW: dataplane.Counter{Packets: 123_456_789_012}, SW: dataplane.Counter{Packets: 9_876_543_210}})...)
	}
	var flows []sim.FlowStats
	for _, f := range sim.DefaultFlows() {
		flows = append(flows, sim.FlowStats{Name: f.Name, Protected: f.Protected, Sent: 259_000, OOB: 24_000, Passed: 235_000})
	}
	return &screen{v: v, flows: flows, lost: map[string]uint64{dataplane.LostOutOfBuffer: 48_000, dataplane.LostHWRule: 0,
		dataplane.LostSWRule: 0, dataplane.LostUnforwarded: 0},
		eng:    sim.EngineStats{Workers: 12},
		swName: "dv (emulated NIC)", workers: 12, hz: 2.13e9, scale: 1000,
		apiSocket: "/run/user/1000/scrubd/sim.sock", metricsURL: "http://127.0.0.1:9477/metrics"}
}

func has(t *testing.T, lines []string, want string) {
	t.Helper()
	for _, l := range lines {
		if strings.Contains(l, want) {
			return
		}
	}
	t.Errorf("no line shows %q:\n%s", want, strings.Join(lines, "\n"))
}

// The demo's state fits 80x24 whole: every rule but the protect list's,
// both protected flows, where to reach the agent, one cycles/pkt figure.
func TestViewFits80x24(t *testing.T) {
	s := representative()
	lines := render(t, s)
	if len(lines) != 23 {
		t.Errorf("%d lines, want 23 (7 of state, 2 blank, 2 headers, 9 rules, 2 flows, the footnote)", len(lines))
	}
	for _, r := range s.v.Rules.All() {
		if r.ID == "protect-0" {
			continue
		}
		has(t, lines, r.ID+" ")
	}
	has(t, lines, "API socket  /run/user/1000/scrubd/sim.sock")
	has(t, lines, "metrics     http://127.0.0.1:9477/metrics")
	has(t, lines, "mgmt ssh (protected)")
	has(t, lines, "mgmt snmp (protected)")
	// Counts are not cut: the accept rule's, the widest, whole.
	has(t, lines, "resolver-allow none  12.34  1500   123.5G  acc 9.9G  accept rule: ")
	// 48000 of the two flows' 2 x 259000 lost, 9.3 %.
	has(t, lines, "NIC       out-of-buffer 9.9G*   protected lost 48.0k* of 518.0k* (9.3%)")
	// By cause, per flow: 24000 each, all for want of buffers.
	has(t, lines, "mgmt ssh (protected)       259.0k    24.0k    24.0k        0        0")
	if n := strings.Count(strings.Join(lines, "\n"), "cycles/pkt"); n != 1 {
		t.Errorf("%d cycles/pkt figures, want the engine's one", n)
	}
	has(t, lines, "engine    631 cycles/pkt at 2.13 GHz, measured here over the last round")
}

// Many rules, many protected flows and a long socket path still fit: the
// tables say how many rows they left out, long fields are cut.
func TestViewFitsWithManyRules(t *testing.T) {
	s := representative()
	s.apiSocket = "/tmp/" + strings.Repeat("very-long-directory-name/", 6) + "sim.sock"
	for i := range 290 {
		s.v.Rules = placement.RuleListOf(append(s.v.Rules.Slice(), placement.RuleView{ID: fmt.Sprintf("flowspec-route-%04d-with-a-long-id", i), Action: "drop", Path: placement.SW,
			Reason: strings.Repeat("a long reason ", 10)})...)
	}
	for i := range 5 {
		s.flows = append(s.flows, sim.FlowStats{Name: fmt.Sprintf("bgp session %d (protected)", i), Protected: true})
	}
	lines := render(t, s)
	if len(lines) != 24 {
		t.Errorf("%d lines, want 24", len(lines))
	}
	// Hand-derived: 24 lines less 7 of state, 2 blank, 2 headers and the
	// footnote leave 12 rows; three go to the protected flows (two and
	// "5 more"), nine to the rules (eight and "291 more" of 9 + 290).
	has(t, lines, "... 291 more rules: scrubd rules list")
	has(t, lines, "... 5 more protected flows")
	has(t, lines, "API socket  /tmp/very-long-directory-name/")
}

// The view of a real simulated run: the demo rules arriving while the
// built-in mix overloads the software path, so the protected flows lose
// packets for want of buffers until the floods reach hardware. The loss
// the view shows is what was sent to the management address less what the
// peer port transmitted to it (frames parsed at the sink), times the
// scale; its one cycles/pkt figure is the placer's measurement.
func TestViewShowsProtectedLoss(t *testing.T) {
	mgmt := netip.MustParseAddr("192.0.2.1")
	var sunk atomic.Uint64
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	n, err := sim.New(sim.Options{Start: start, Scale: 1000, HWEntries: 6, Sink: func(fr []byte) {
		var f rule.Fields
		if packet.Parse(fr, &f) == packet.OK && f.Dst.Netip(f.Family) == mgmt {
			sunk.Add(1)
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	pl := &protect.List{Entries: []protect.Entry{{Rule: rule.Rule{ID: "protect-0", Action: rule.Accept, Match: rule.Match{Dst: netip.MustParsePrefix("192.0.2.1/32")}}, Note: "mgmt"}}}
	st := store.New(pl, n.Now)
	p := placement.New(placement.Config{HighWater: 0.8, LowWater: 0.5, MinDwell: 3 * time.Second, MaxMoves: 8, CyclesPerPacket: 297},
		n.HW(), n.SW(), slog.New(slog.NewTextHandler(io.Discard, nil)), n.Now)
	ctx := context.Background()
	apply := func() {
		snap := st.Snapshot()
		n.SetReference(&snap.Set)
		p.Apply(ctx, snap)
	}
	apply()
	demo := sim.DemoRules()
	next := 0
	const step = 100 * time.Millisecond
	const steps = 120 // 12 simulated seconds
	for i := 1; i <= steps; i++ {
		for next < len(demo) && time.Duration(i)*step >= demo[next].After {
			r, err := sim.ParseDemo(demo[next], n.Now())
			if err != nil {
				t.Fatal(err)
			}
			if _, err := st.Put(DemoSource, r); err != nil {
				t.Fatal(err)
			}
			next++
			apply()
		}
		n.Step(step)
		if i%10 == 0 {
			p.Tick(ctx)
		}
	}
	v := p.View()
	lines := render(t, readScreen(v, n, &Config{APISocket: "/run/scrubd/sim.sock", MetricsURL: "http://127.0.0.1:9477/metrics"}))
	// The two management flows send 0.02 Mpps each: 2 real frames per
	// 100 ms step at scale 1000.
	sent := uint64(steps * 2 * 2)
	lost := (sent - sunk.Load()) * 1000
	if lost == 0 {
		t.Fatal("no protected packet was lost: the run does not overload the software path")
	}
	has(t, lines, fmt.Sprintf("protected lost %s* of %s* (%.1f%%)", human(lost), human(sent*1000), 100*float64(lost)/float64(sent*1000)))
	has(t, lines, "API socket  /run/scrubd/sim.sock")
	has(t, lines, "metrics     http://127.0.0.1:9477/metrics")
	if v.MeasuredCyclesPerPacket <= 0 {
		t.Fatal("the placer measured no cycles per packet")
	}
	has(t, lines, fmt.Sprintf("engine    %.0f cycles/pkt at 2.13 GHz", v.MeasuredCyclesPerPacket))
	if n := strings.Count(strings.Join(lines, "\n"), "cycles/pkt"); n != 1 {
		t.Errorf("%d cycles/pkt figures, want one", n)
	}
	t.Logf("the view:\n%s", strings.Join(lines, "\n"))
}

func TestHuman(t *testing.T) {
	for _, c := range []struct {
		n    uint64
		want string
	}{{0, "0"}, {9999, "9999"}, {10000, "10.0k"}, {24000, "24.0k"}, {259000, "259.0k"}, {999949, "999.9k"},
		{999950, "1.0M"}, {1234567, "1.2M"}, {9_876_543_210, "9.9G"}, {123_456_789_012_345, "123.5T"}} {
		if got := human(c.n); got != c.want {
			t.Errorf("human(%d) = %q, want %q", c.n, got, c.want)
		}
	}
}

// Plain output (not a terminal) carries the same figures: the protected
// loss by cause and the engine's one cycles/pkt figure.
func TestStatusLines(t *testing.T) {
	out := statusLines(representative())
	for _, want := range []string{"status (modelled): ", "protected lost 48.0k* of 518.0k* (9.3%): buffers 48.0k, rules 0, unforwarded 0",
		"engine 631 cycles/pkt at 2.13 GHz, measured here over the last round", "engine (real packets, this machine): 12 workers"} {
		if !strings.Contains(out, want) {
			t.Errorf("status lines lack %q:\n%s", want, out)
		}
	}
	if n := strings.Count(out, "cycles/pkt"); n != 1 {
		t.Errorf("%d cycles/pkt figures, want one:\n%s", n, out)
	}
}

// newRunRig is a simulated NIC with a 6-entry table, an empty store and a
// placer over the NIC's paths, for the tests of Run; the NIC closes with
// the test.
func newRunRig(t *testing.T) (*sim.NIC, *store.Store, *placement.Placer) {
	t.Helper()
	n, err := sim.New(sim.Options{Start: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), Scale: 1000, HWEntries: 6})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	st := store.New(&protect.List{}, n.Now)
	p := placement.New(placement.Config{CyclesPerPacket: 297}, n.HW(), n.SW(), slog.New(slog.NewTextHandler(io.Discard, nil)), n.Now)
	return n, st, p
}

// Run draws the terminal view with what its Config carries: the socket
// and the metrics URL the caller passes, redrawn in place once a second
// (by the injected clock), each frame fitting 80x24.
func TestRunDrawsTerminalView(t *testing.T) {
	n, st, p := newRunRig(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	snap := st.Snapshot()
	p.Apply(ctx, snap)
	for range 10 {
		n.Step(100 * time.Millisecond)
	}
	p.Tick(ctx)
	ticks := make(chan time.Time)
	var clock atomic.Int64
	var out strings.Builder
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Config{NIC: n, Store: st, Placer: p, NoDemo: true, Out: &out, TTY: true,
			APISocket: "/run/user/1000/scrubd/sim.sock", MetricsURL: "http://127.0.0.1:9477/metrics",
			Now:    func() time.Time { return time.Unix(clock.Add(1), 0) }, // a second later at every call
			Ticker: func(time.Duration) (<-chan time.Time, func()) { return ticks, func() {} }})
	}()
	for range 3 {
		ticks <- time.Time{}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	frames := strings.Split(out.String(), clearScreen)
	if len(frames) != 4 || frames[0] != "" {
		t.Fatalf("%d frames (want 3, each after a clear):\n%q", len(frames)-1, out.String())
	}
	last := frames[3]
	lines := strings.Split(last, "\n")
	if len(lines) > 24 {
		t.Errorf("%d lines", len(lines))
	}
	for _, l := range lines {
		if utf8.RuneCountInString(l) > 80 {
			t.Errorf("%d columns: %q", utf8.RuneCountInString(l), l)
		}
	}
	has(t, lines, "API socket  /run/user/1000/scrubd/sim.sock")
	has(t, lines, "metrics     http://127.0.0.1:9477/metrics")
	has(t, lines, "protected lost ")
}

// The view hands the simulated NIC the store's rule set whenever it
// changes: a drop rule stored after the view started, and placed on
// neither path, is what the reference decides by, so the NIC counts the
// packets it lets through as under-dropped. With the reference left as it
// was at start (no rules) nothing would count.
func TestRunFollowsStoreForReference(t *testing.T) {
	n, st, p := newRunRig(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ticks := make(chan time.Time)
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Config{NIC: n, Store: st, Placer: p, NoDemo: true,
			Ticker: func(time.Duration) (<-chan time.Time, func()) { return ticks, func() {} }})
	}()
	ticks <- time.Time{}
	r, err := rule.ParseRule("test", []byte(`{id: all-udp, action: drop, match: {dst: 203.0.113.0/24, proto: udp}}`), n.Now())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Put("test", r); err != nil {
		t.Fatal(err)
	}
	ticks <- time.Time{}
	ticks <- time.Time{} // the second has run the first's work
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	for range 5 {
		n.Step(100 * time.Millisecond)
	}
	var under uint64
	for _, f := range n.Stats() {
		under += f.UnderPass
	}
	if under == 0 {
		t.Fatal("no packet counted as under-dropped: the NIC's reference did not get the stored drop rule")
	}
}
