// Package view is the live view of `scrubd run --sim`: it feeds the demo
// rules into the store as simulated time passes, keeps the simulated NIC's
// reference rule set in step with the store, and draws the status view on
// a terminal (or writes plain status lines when the output is not one).
//
// The agent (agent/daemon) knows nothing of it: the caller (`scrubd run`)
// starts Run beside the agent once the agent is up, with the agent's store
// and placer.
package view

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/scrubd/scrubd/agent/dataplane"
	"github.com/scrubd/scrubd/agent/placement"
	"github.com/scrubd/scrubd/agent/sim"
	"github.com/scrubd/scrubd/agent/store"
)

// DemoSource is the store source of the --sim demo rules.
const DemoSource = "demo"

// Config is what the live view is given.
type Config struct {
	NIC    *sim.NIC
	Store  *store.Store
	Placer *placement.Placer
	Log    *slog.Logger
	// NoDemo leaves the demo rules out (a config file with offload.backend
	// sim: the rules come from its files, the API and FlowSpec).
	NoDemo bool
	// Out, when set, receives the status view; TTY says it is a terminal
	// (the view is redrawn in place) rather than a log (plain lines).
	Out io.Writer
	TTY bool
	// APISocket is the path of the agent's API socket ("" when none) and
	// MetricsURL the URL of its metrics ("" when none), for the view to
	// show where the agent can be reached.
	APISocket  string
	MetricsURL string
	// Now and Ticker are injected in tests; default time.Now and real
	// tickers.
	Now    func() time.Time
	Ticker func(d time.Duration) (<-chan time.Time, func())
}

func realTicker(d time.Duration) (<-chan time.Time, func()) {
	t := time.NewTicker(d)
	return t.C, t.Stop
}

// Run feeds the demo rules (unless c.NoDemo) into the store as simulated
// time passes, keeps the simulator's reference set in step with the store,
// and draws the status view, until ctx ends.
func Run(ctx context.Context, c Config) error {
	now, ticker := c.Now, c.Ticker
	if now == nil {
		now = time.Now
	}
	if ticker == nil {
		ticker = realTicker
	}
	log := c.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return runDemo(ctx, c.NIC, c.Store, c.Placer, log, c, now, ticker)
}

// runDemo is Run's loop.
func runDemo(ctx context.Context, n *sim.NIC, st *store.Store, p *placement.Placer, log *slog.Logger, opt Config,
	now func() time.Time, ticker func(time.Duration) (<-chan time.Time, func())) error {
	var demo []sim.DemoRule
	if !opt.NoDemo {
		demo = sim.DemoRules()
	}
	start := n.Now()
	next := 0
	tick, stop := ticker(250 * time.Millisecond)
	defer stop()
	var lastDecision int
	var lastDraw time.Time
	var refVersion uint64
	haveRef := false
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick:
		}
		for next < len(demo) && n.Now().Sub(start) >= demo[next].After {
			r, err := sim.ParseDemo(demo[next], now())
			next++
			if err != nil {
				log.Error("demo rule", "err", err)
				continue
			}
			e, err := st.Put(DemoSource, r)
			msg := "rule arrived"
			if err != nil {
				msg = "rule arrived and was refused"
			}
			log.Info(msg, "rule", r.ID, "action", r.Action.String(), "match", r.Match.String(), "status", string(e.Status), "reason", e.Reason)
		}
		// The reference set follows the store: copied when it changed,
		// not every tick (a copy of every rule, four times a second).
		if v := st.Version(); !haveRef || v != refVersion {
			snap := st.Effective()
			n.SetReference(&snap.Set)
			refVersion, haveRef = snap.Version, true
		}
		v := p.View()
		if v == nil || opt.Out == nil {
			continue
		}
		if opt.TTY {
			if now().Sub(lastDraw) >= time.Second {
				drawStatus(opt.Out, readScreen(v, n, &opt), true)
				lastDraw = now()
			}
			continue
		}
		// Plain lines: placement decisions as they happen, a summary every
		// few seconds.
		for _, d := range v.Decisions[min(lastDecision, len(v.Decisions)):] {
			fmt.Fprintf(opt.Out, "placement %s: %s -> %s: %s\n", d.Rule, d.From, d.To, d.Reason)
		}
		lastDecision = len(v.Decisions)
		if now().Sub(lastDraw) >= 5*time.Second {
			s := readScreen(v, n, &opt)
			if lastDraw.IsZero() {
				_, _, cpp := n.Model()
				fmt.Fprintln(opt.Out, modelLine(s, cpp))
			}
			io.WriteString(opt.Out, statusLines(s))
			lastDraw = now()
		}
	}
}

// The terminal the view must fit: the classic 80 columns by 24 lines.
const (
	screenCols  = 80
	screenLines = 24
)

// screen is what one frame of the view shows, read once from the placer's
// view and the simulated NIC.
type screen struct {
	v          *placement.View
	flows      []sim.FlowStats
	lost       map[string]uint64 // protected packets lost, by cause
	eng        sim.EngineStats
	swName     string
	workers    int // modelled software cores
	hz         float64
	scale      float64
	apiSocket  string
	metricsURL string
}

func readScreen(v *placement.View, n *sim.NIC, c *Config) *screen {
	w, hz, _ := n.Model()
	return &screen{v: v, flows: n.Stats(), lost: n.ProtectedLost(), eng: n.Engine(), swName: n.SW().Name(),
		workers: w, hz: hz, scale: n.Scale(), apiSocket: c.APISocket, metricsURL: c.MetricsURL}
}

// protectedTotals sums the protected flows: packets sent and lost.
func (s *screen) protectedTotals() (sent, lost uint64) {
	for _, f := range s.flows {
		if f.Protected {
			sent += f.Sent
		}
	}
	for _, n := range s.lost {
		lost += n
	}
	return sent, lost
}

// protectedLost is the protected traffic's loss, all causes together.
func (s *screen) protectedLost() string {
	sent, lost := s.protectedTotals()
	share := ""
	if sent > 0 {
		share = fmt.Sprintf(" (%.1f%%)", 100*float64(lost)/float64(sent))
	}
	return fmt.Sprintf("protected lost %s* of %s*%s", human(lost), human(sent), share)
}

// protectedLine is the protected traffic's loss, all causes together and
// then each.
func (s *screen) protectedLine() string {
	return fmt.Sprintf("%s: buffers %s, rules %s, unforwarded %s", s.protectedLost(), human(s.lost[dataplane.LostOutOfBuffer]),
		human(s.lost[dataplane.LostHWRule]+s.lost[dataplane.LostSWRule]), human(s.lost[dataplane.LostUnforwarded]))
}

// cyclesLine is the engine's one cycles-per-packet figure: what its
// counters gave over the last placement round (the figure placement uses
// with cycles_per_packet auto and exports as
// scrubd_sw_measured_cycles_per_packet). The average since start, which the
// view also showed, mixes every regime the run went through (the floods in
// software at first, light traffic in small bursts later) and is dropped.
func (s *screen) cyclesLine() string {
	if s.v.MeasuredCyclesPerPacket <= 0 {
		return "engine    cycles/pkt not measured yet (no packets in software)"
	}
	return fmt.Sprintf("engine    %.0f cycles/pkt at %.2f GHz, measured here over the last round",
		s.v.MeasuredCyclesPerPacket, s.hz/1e9)
}

// reach says where the agent answers.
func (s *screen) reach() (api, metrics string) {
	api, metrics = s.apiSocket, s.metricsURL
	if api == "" {
		api = "none"
	}
	if metrics == "" {
		metrics = "none"
	}
	return api, metrics
}

// drawStatus renders the live view: at most screenLines lines of at most
// screenCols columns, the last one unterminated so that a terminal of
// exactly that size does not scroll.
func drawStatus(w io.Writer, s *screen, clear bool) {
	v := s.v
	var lines []string
	add := func(format string, a ...any) { lines = append(lines, fit(fmt.Sprintf(format, a...), screenCols)) }
	api, metrics := s.reach()
	add("scrubd --sim  %s  offload/sim flow table + %s", v.Time.Format("15:04:05"), s.swName)
	add("API socket  %s", api)
	add("metrics     %s", metrics)
	add("hardware  %d/%d entries, dropping %.1f Mpps* (avg %.0f B); moves sw>hw %d hw>sw %d",
		v.HWBudget.UsedEntries, v.HWBudget.MaxEntries, v.HWPPS/1e6, v.HWAvgFrame,
		v.Moves[[2]placement.Path{placement.SW, placement.HW}], v.Moves[[2]placement.Path{placement.HW, placement.SW}])
	add("software  load %.1f of %.1f Mpps* (%s; %d modelled cores), dropping %.1f Mpps*",
		v.SWLoadPPS/1e6, v.SWCapacityPPS/1e6, v.Limit, s.workers, v.SWPPS/1e6)
	lines = append(lines, fit(s.cyclesLine(), screenCols))
	add("NIC       out-of-buffer %s*   %s", human(v.NIC["rx_out_of_buffer"]), s.protectedLost())
	var protected []sim.FlowStats
	for _, f := range s.flows {
		if f.Protected {
			protected = append(protected, f)
		}
	}
	var rules []placement.RuleView
	for _, r := range v.Rules.All() {
		if !strings.HasPrefix(r.ID, "protect-") {
			rules = append(rules, r)
		}
	}
	// What is left for the two tables: a blank line and a header each, the
	// footnote; protected flows get up to three rows, rules the rest.
	room := screenLines - len(lines) - 5
	pRows := min(len(protected), 3)
	rRows := room - pRows
	lines = append(lines, "")
	lines = append(lines, fmt.Sprintf("%-14s %-4s %6s %5s %8s %9s  %s", "RULE", "PATH", "Mpps*", "FRAME", "HW DROP*", "SW DROP*", "REASON"))
	for i, r := range rules {
		if i == rRows-1 && len(rules) > rRows {
			lines = append(lines, fmt.Sprintf("... %d more rules: scrubd rules list", len(rules)-i))
			break
		}
		sw := human(r.SW.Packets)
		if r.Action == "accept" {
			sw = "acc " + sw
		}
		row := fmt.Sprintf("%-14s %-4s %6.2f %5.0f %8s %9s  ", fit(r.ID, 14), r.Path, r.PPS/1e6, r.AvgFrame, human(r.HW.Packets), fit(sw, 9))
		lines = append(lines, row+fit(r.Reason, screenCols-utf8.RuneCountInString(row)))
	}
	lines = append(lines, "")
	lines = append(lines, fmt.Sprintf("%-24s %8s %8s %8s %8s %8s", "PROTECTED FLOW", "SENT*", "LOST*", "BUFFERS*", "RULES*", "UNFWD*"))
	for i, f := range protected {
		if i == pRows-1 && len(protected) > pRows {
			lines = append(lines, fmt.Sprintf("... %d more protected flows", len(protected)-i))
			break
		}
		lines = append(lines, fmt.Sprintf("%-24s %8s %8s %8s %8s %8s", fit(f.Name, 24), human(f.Sent),
			human(f.HWDropped+f.SWDropped+f.OOB+f.Unforwarded), human(f.OOB), human(f.HWDropped+f.SWDropped), human(f.Unforwarded)))
	}
	add("* modelled 100G: 1 packet in %.0f runs through the real table and engine", s.scale)
	var b strings.Builder
	if clear {
		b.WriteString("\033[H\033[2J")
	}
	b.WriteString(strings.Join(lines, "\n"))
	io.WriteString(w, b.String())
}

// statusLines are the plain-output summary (a log, not a terminal).
func statusLines(s *screen) string {
	v := s.v
	return fmt.Sprintf("status (modelled): hw %.1f Mpps dropped (%d/%d entries), sw %.1f Mpps dropped, sw load %.1f of %.1f Mpps (limit %s), out-of-buffer %s, %s; %s\n%s\n",
		v.HWPPS/1e6, v.HWBudget.UsedEntries, v.HWBudget.MaxEntries, v.SWPPS/1e6, v.SWLoadPPS/1e6, v.SWCapacityPPS/1e6, v.Limit,
		human(v.NIC["rx_out_of_buffer"]), s.protectedLine(), strings.Join(strings.Fields(s.cyclesLine()), " "), engineLine(s))
}

// engineLine reports the engine's own (real, unscaled) counters.
func engineLine(s *screen) string {
	e := s.eng
	t := e.Total
	out := "counted (host mode)"
	if e.Forward {
		out = fmt.Sprintf("forwarded, peer port sent %d", e.PeerSent)
	}
	return fmt.Sprintf("engine (real packets, this machine): %d workers received %d, dropped %d, passed %d %s, ring out-of-buffer %d",
		e.Workers, t.Rx, t.Dropped, t.Passed, out, e.RingOutOfBuffer)
}

// modelLine says what is measured and what is modelled.
func modelLine(s *screen, cpp float64) string {
	return fmt.Sprintf("modelled: 100G link, software capacity %d workers x %.2f GHz / %.0f cycles/pkt (BlueField-3 DV figure); rates and counts below are modelled (1 packet in %.0f runs through the real path)",
		s.workers, s.hz/1e9, cpp, s.scale)
}

// human writes a count in at most six characters: 1234, 12.3k, 4.6M.
func human(n uint64) string {
	switch f := float64(n); {
	case n < 10000:
		return fmt.Sprint(n)
	case f < 999.95e3:
		return fmt.Sprintf("%.1fk", f/1e3)
	case f < 999.95e6:
		return fmt.Sprintf("%.1fM", f/1e6)
	case f < 999.95e9:
		return fmt.Sprintf("%.1fG", f/1e9)
	default:
		return fmt.Sprintf("%.1fT", f/1e12)
	}
}

// fit cuts s to at most n columns (runes), marking a cut with "…".
func fit(s string, n int) string {
	if n <= 0 {
		return ""
	}
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}
