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
	"text/tabwriter"
	"time"

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
		snap := st.Snapshot()
		n.SetReference(&snap.Set)
		v := p.View()
		if v == nil || opt.Out == nil {
			continue
		}
		if opt.TTY {
			if now().Sub(lastDraw) >= time.Second {
				drawStatus(opt.Out, v, n, true)
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
			if lastDraw.IsZero() {
				fmt.Fprintln(opt.Out, modelLine(v, n)+"; rates and counts below are modelled (1 packet in "+fmt.Sprint(n.Scale())+" runs through the real path)")
			}
			fmt.Fprintf(opt.Out, "status (modelled): hw %.1f Mpps dropped (%d/%d entries), sw %.1f Mpps dropped, sw load %.1f of %.1f Mpps (limit %s), out-of-buffer %d, protected drops %d; engine measured %.0f cycles/pkt\n",
				v.HWPPS/1e6, v.HWBudget.UsedEntries, v.HWBudget.MaxEntries, v.SWPPS/1e6, v.SWLoadPPS/1e6, v.SWCapacityPPS/1e6, v.Limit,
				v.NIC["rx_out_of_buffer"], n.ProtectedDrops(), v.MeasuredCyclesPerPacket)
			fmt.Fprintln(opt.Out, engineLine(n))
			lastDraw = now()
		}
	}
}

// drawStatus renders the live view.
func drawStatus(w io.Writer, v *placement.View, n *sim.NIC, clear bool) {
	var b strings.Builder
	if clear {
		b.WriteString("\033[H\033[2J")
	}
	fmt.Fprintf(&b, "scrubd --sim   %s   simulated NIC: offload/sim flow table + %s\n", v.Time.Format("15:04:05"), n.SW().Name())
	b.WriteString(modelLine(v, n) + "\n\n")
	fmt.Fprintf(&b, "hardware: %d/%d entries, dropping %.1f Mpps* (avg %.0f B)   software: load %.1f of %.1f Mpps* (limit %s; model %.0f cycles/pkt), dropping %.1f Mpps* (avg %.0f B)\n",
		v.HWBudget.UsedEntries, v.HWBudget.MaxEntries, v.HWPPS/1e6, v.HWAvgFrame, v.SWLoadPPS/1e6, v.SWCapacityPPS/1e6, v.Limit, v.CyclesPerPacket, v.SWPPS/1e6, v.SWAvgFrame)
	b.WriteString(engineLine(n) + "\n")
	fmt.Fprintf(&b, "NIC out-of-buffer: %d*   moves sw->hw %d hw->sw %d   protected packets dropped: %d\n\n",
		v.NIC["rx_out_of_buffer"], v.Moves[[2]placement.Path{placement.SW, placement.HW}], v.Moves[[2]placement.Path{placement.HW, placement.SW}], n.ProtectedDrops())
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "RULE\tPATH\tMpps*\tFRAME\tHW DROPPED*\tSW DROPPED*\tREASON")
	for _, r := range v.Rules {
		if strings.HasPrefix(r.ID, "protect-") {
			continue
		}
		sw := fmt.Sprint(r.SW.Packets)
		if r.Action == "accept" {
			sw = "(" + sw + " accepted)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%.2f\t%.0f\t%d\t%s\t%s\n", r.ID, r.Path, r.PPS/1e6, r.AvgFrame, r.HW.Packets, sw, trim(r.Reason, 90))
	}
	tw.Flush()
	b.WriteString("\ntraffic:\n")
	tw = tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "FLOW\tSENT*\tHW DROP*\tSW DROP*\tPASSED*\tOUT-OF-BUF*")
	for _, f := range n.Stats() {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\n", f.Name, f.Sent, f.HWDropped, f.SWDropped, f.Passed, f.OOB)
	}
	tw.Flush()
	fmt.Fprintf(&b, "\n* modelled 100G figures: 1 packet in %.0f really runs through the table and the engine; counts are multiplied by %.0f\n", n.Scale(), n.Scale())
	io.WriteString(w, b.String())
}

// engineLine reports the engine's own (real, unscaled) counters.
func engineLine(n *sim.NIC) string {
	e := n.Engine()
	t := e.Total
	split := ""
	if t.Rx > 0 {
		r := float64(t.Rx) / e.CyclesPerTick
		split = fmt.Sprintf("; cycles/pkt %.0f (rx+refill %.0f, classify %.0f, drop/fwd %.0f)", float64(t.Cycles)/r,
			float64(t.CyclesRx)/r, float64(t.CyclesClassify)/r, float64(t.CyclesOut)/r)
	}
	out := "counted (host mode)"
	if e.Forward {
		out = fmt.Sprintf("forwarded, peer port sent %d", e.PeerSent)
	}
	return fmt.Sprintf("engine (real packets, this machine): %d workers received %d, dropped %d, passed %d %s, ring out-of-buffer %d%s",
		e.Workers, t.Rx, t.Dropped, t.Passed, out, e.RingOutOfBuffer, split)
}

// modelLine says what is measured and what is modelled.
func modelLine(v *placement.View, n *sim.NIC) string {
	w, hz, cpp := n.Model()
	meas := "not yet measured"
	if v.MeasuredCyclesPerPacket > 0 {
		meas = fmt.Sprintf("the engine on this machine takes %.0f cycles/pkt at %.2f GHz (its time per packet at the sampled rate; small bursts cost more per packet than scrubd bench's full ones)", v.MeasuredCyclesPerPacket, hz/1e9)
	}
	return fmt.Sprintf("modelled: 100G link, software capacity %d workers x %.2f GHz / %.0f cycles/pkt (BlueField-3 DV figure); %s", w, hz/1e9, cpp, meas)
}

func trim(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-1] + "…"
}
