// Package daemon wires scrubd together and runs it: the rule store and its
// sources (rule files, the API, FlowSpec), the placement loop over a
// hardware and a software path, metrics, persisted state, and in --sim mode
// the simulated NIC with its traffic and demo rules.
//
// Run owns one root context and an errgroup; every goroutine it starts ends
// when that context ends. On shutdown hardware rules stay installed unless
// offload.keep_on_shutdown is false, the persisted state (API rules, rules
// FlowSpec peers sent) is saved, and the next start reconciles: rules found
// in hardware that are still wanted are adopted in place, stale ones are
// removed only after every wanted rule is enforced somewhere.
package daemon

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"slices"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/scrubd/scrubd/agent/api"
	"github.com/scrubd/scrubd/agent/config"
	"github.com/scrubd/scrubd/agent/dataplane"
	"github.com/scrubd/scrubd/agent/filewatch"
	"github.com/scrubd/scrubd/agent/flowspec"
	"github.com/scrubd/scrubd/agent/metrics"
	"github.com/scrubd/scrubd/agent/placement"
	"github.com/scrubd/scrubd/agent/protect"
	"github.com/scrubd/scrubd/agent/store"
	"github.com/scrubd/scrubd/swpath/rule"
)

// Paths are the two enforcement paths.
type Paths struct {
	HW dataplane.HW // nil: no offload
	SW dataplane.SW
	// Close releases them (may be nil).
	Close func() error
	// Watch, if set, runs until ctx ends and calls lost whenever the
	// hardware table may have lost scrubd's entries (the clsact qdisc
	// deleted: OVS restarting); the placer then re-reads the table and
	// reinstalls what is missing.
	Watch func(ctx context.Context, lost func(reason string)) error
	// Run, if set, runs until ctx ends: the dataplane's own background
	// work (the XDP engine's cost sampling, the simulated NIC's traffic).
	Run func(ctx context.Context, log *slog.Logger) error
	// Log, if set, logs how the dataplane was sized (once, at start).
	Log func(log *slog.Logger)
	// Calibrate, if set, measures the software engine's cycles per packet
	// for software.cycles_per_packet auto.
	Calibrate func(ctx context.Context) (float64, error)
}

// Options are what the caller provides besides the config.
type Options struct {
	Log *slog.Logger
	// Paths builds the dataplane from the config (agent/backend.Paths;
	// tests give their own).
	Paths func(ctx context.Context, cfg *config.Config) (Paths, error)
	// Tasks run beside the agent once every source is up, each until ctx
	// ends (--sim: the simulated NIC's traffic and the live view); an
	// error from one stops the agent.
	Tasks []func(ctx context.Context, d *Daemon) error
	// Reload triggers a rule-file reload (SIGHUP).
	Reload <-chan struct{}
	// Now and Ticker are injected in tests; default time.Now and real
	// tickers.
	Now    func() time.Time
	Ticker func(d time.Duration) (<-chan time.Time, func())
	// Calibrate measures cycles per packet for software.cycles_per_packet
	// auto (default: the dataplane's Paths.Calibrate; tests inject a
	// figure).
	Calibrate func(ctx context.Context) (float64, error)
	// Ready, if set, is called with the daemon once every source is up.
	Ready func(d *Daemon)
}

// Daemon is a running agent (exposed to Ready for tests and tools).
type Daemon struct {
	Cfg      *config.Config
	Store    *store.Store
	Placer   *placement.Placer
	Speaker  *flowspec.Speaker
	Files    *filewatch.Watcher
	Metrics  *metrics.Collector
	APIAddr  string // the socket path
	HTTPAddr string // the metrics listener address
}

func realTicker(d time.Duration) (<-chan time.Time, func()) {
	t := time.NewTicker(d)
	return t.C, t.Stop
}

// ProtectList builds the protect list: the config's entries and, for every
// FlowSpec neighbour, its BGP session (BGPSessionRules), with this host's
// address toward the peer from the routing table.
func ProtectList(cfg *config.Config) (*protect.List, error) {
	return protectList(cfg, LocalAddrToward)
}

func protectList(cfg *config.Config, local func(fs *config.FlowSpec, peer netip.Addr) (netip.Addr, error)) (*protect.List, error) {
	l := &protect.List{}
	for i, p := range cfg.Protect {
		rs, err := p.Rules(fmt.Sprintf("protect-%d", i))
		if err != nil {
			return nil, err
		}
		note := p.Note
		if note == "" {
			note = "protect " + p.Prefix
		}
		for _, r := range rs {
			l.Entries = append(l.Entries, protect.Entry{Rule: r, Note: note})
		}
	}
	if cfg.FlowSpec.Enabled {
		for i, n := range cfg.FlowSpec.Neighbors {
			a, err := netip.ParseAddr(n.Address)
			if err != nil {
				return nil, fmt.Errorf("flowspec.neighbors[%d].address %q: %v", i, n.Address, err)
			}
			a = a.Unmap()
			la, lerr := local(&cfg.FlowSpec, a)
			note := "BGP session with " + a.String()
			if lerr != nil {
				// No route to the peer yet: the session cannot come up
				// either, but keep it protected from any local address.
				la, note = netip.Addr{}, note+" (local address unknown: "+lerr.Error()+")"
			}
			for j, r := range BGPSessionRules(&cfg.FlowSpec, n, a, la) {
				r.ID = fmt.Sprintf("protect-bgp-%d-%d", i, j)
				l.Entries = append(l.Entries, protect.Entry{Rule: r, Note: note})
			}
		}
	}
	return l, nil
}

// BGPSessionRules returns the accept rules that protect the BGP session
// with neighbour n (address peer) as it reaches this host: TCP from the
// peer to the local address (any local address when local is not valid)
// with destination port flowspec.listen_port when the peer may connect to
// us (listen_port not -1), and with source port neighbors[].port (179 by
// default) when we connect to it (not passive). Nothing else from the peer
// is protected: a drop of the peer's other traffic stays whole.
func BGPSessionRules(fs *config.FlowSpec, n config.Neighbor, peer, local netip.Addr) []rule.Rule {
	base := rule.Match{Src: netip.PrefixFrom(peer, peer.BitLen()), Proto: []uint8{rule.ProtoTCP}}
	if local.IsValid() {
		base.Dst = netip.PrefixFrom(local, local.BitLen())
	}
	var out []rule.Rule
	if lp := fs.ListenPort; lp >= 0 {
		if lp == 0 {
			lp = 179
		}
		m := base
		m.DstPort = rule.Ranges{{Lo: uint32(lp), Hi: uint32(lp)}}
		out = append(out, rule.Rule{Action: rule.Accept, Match: m})
	}
	if !n.Passive {
		rp := n.Port
		if rp == 0 {
			rp = 179
		}
		m := base
		m.SrcPort = rule.Ranges{{Lo: rp, Hi: rp}}
		out = append(out, rule.Rule{Action: rule.Accept, Match: m})
	}
	return out
}

// counterMemory is how long placement remembers a removed rule's counters:
// the longer of flowspec.hold_time and, with graceful restart,
// flowspec.graceful_restart.restart_time.
func counterMemory(cfg *config.Config) time.Duration {
	d := cfg.FlowSpec.HoldTime
	if gr := cfg.FlowSpec.GracefulRestart; gr.GR() {
		d = max(d, gr.RestartTime)
	}
	return d
}

// Run runs the agent until ctx ends.
func Run(ctx context.Context, cfg *config.Config, opt Options) error {
	log := opt.Log
	if log == nil {
		log = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	now := opt.Now
	if now == nil {
		now = time.Now
	}
	ticker := opt.Ticker
	if ticker == nil {
		ticker = realTicker
	}
	// Nothing is touched before the whole config is checked: the checks of
	// `scrubd config check` (token file, TLS files, addresses, rule
	// files), then router-id auto, then the listeners, so that a port in
	// use fails the start before a rule is loaded or a device touched. On
	// a failure below every listener is closed (the socket file removed).
	if err := cfg.Validate("config", true); err != nil {
		return err
	}
	fsCfg := cfg.FlowSpec
	if fsCfg.Enabled {
		if err := resolveRouterID(&fsCfg); err != nil {
			return err
		}
	}
	lns, err := openListeners(cfg)
	if err != nil {
		return err
	}
	defer lns.close()
	pl, err := ProtectList(cfg)
	if err != nil {
		return err
	}
	st := store.New(pl, now)
	st.SetGuard(cfg.Rules.Guard.Rule()) // every source: files, API, FlowSpec, restored state
	st.SetMaxPerSource(cfg.Rules.MaxRulesPerSource)
	st.OnRemove(func(e store.Entry, why string) {
		log.Info("rule removed", "rule", e.Rule.ID, "source", e.Source, "reason", why)
	})
	if opt.Paths == nil {
		return errors.New("no dataplane: Options.Paths is not set (agent/backend.Paths builds it from the config)")
	}
	paths, err := opt.Paths(ctx, cfg)
	if err != nil {
		return fmt.Errorf("dataplane: %w", err)
	}
	if paths.Close != nil {
		defer paths.Close()
	}
	// Restore persisted rules: API rules as they were, FlowSpec rules held
	// for the hold time unless their peer sends them again. A corrupt state
	// file is moved aside and the agent starts from its sources: a bad file
	// must not keep the scrubber down.
	var stateCorrupt uint64
	restored, serrs, err := LoadState(cfg.StateDir, now())
	var corrupt *CorruptStateError
	switch {
	case errors.As(err, &corrupt):
		stateCorrupt++
		log.Error("STATE FILE CORRUPT: moved aside; starting from the rule files and FlowSpec peers only. Rules added through the API "+
			"and the last good rule-file contents are not restored: re-add them, or recover them from the moved file",
			"file", corrupt.Path, "moved_to", corrupt.MovedTo, "err", corrupt.Err)
	case err != nil:
		return err
	}
	for _, e := range serrs {
		log.Error("state: a persisted source was refused", "err", e)
	}
	for src, rs := range restored {
		if f, ok := strings.CutPrefix(src, "file:"); ok && !slices.Contains(cfg.Rules.Files, f) {
			log.Info("state: rule file no longer configured; its rules are dropped", "file", f)
			continue
		}
		if _, err := st.Replace(src, rs); err != nil {
			log.Error("state: restoring source failed", "source", src, "err", err)
			continue
		}
		if src == flowspec.StoreSource || strings.HasPrefix(src, "bgp:") {
			st.MarkStale(src, now().Add(cfg.FlowSpec.HoldTime))
		}
		log.Info("state: restored rules", "source", src, "rules", len(rs))
	}

	// The capacity model's cycles per packet: a fixed figure, or ("auto") a
	// short calibration now and the engine's live counters later.
	cpp, live := float64(cfg.Software.CyclesPerPacket), cfg.Software.CyclesPerPacket.Auto()
	switch {
	case live && cfg.Software.Engine == "xdp":
		log.Info("software.cycles_per_packet auto: the XDP engine's cost is sampled from the program's run time on live traffic; the capacity model has no figure until traffic flows")
	case live && cfg.Software.Engine != "none":
		cal := opt.Calibrate
		if cal == nil {
			cal = paths.Calibrate
		}
		if cal == nil {
			log.Warn("software.cycles_per_packet auto: the " + cfg.Software.Engine + " engine has no calibration; capacity is unknown until the engine reports cycles")
		} else if c, err := cal(ctx); err != nil {
			log.Warn("software.cycles_per_packet auto: calibration failed; capacity is unknown until the engine reports cycles", "err", err)
		} else {
			cpp = c
			log.Info("software.cycles_per_packet auto: calibrated (scrubd bench, 64 B, one worker, emulated rings)", "cycles_per_packet", c)
		}
	}
	if paths.Log != nil {
		paths.Log(log)
	}
	pcfg := placement.Config{HighWater: cfg.Place.HighWater, LowWater: cfg.Place.LowWater, MinDwell: cfg.Place.MinDwell,
		MaxMoves: cfg.Place.MaxMovesPerRound, CyclesPerPacket: cpp, LiveCycles: live, LinkBps: cfg.LinkGbps * 1e9,
		QueueDrainPPS: cfg.Software.QueueDrainMpps * 1e6,
		// A FlowSpec route withdrawn and announced again within the hold
		// or restart time keeps its rule's counters (its rule id is the
		// route's).
		CounterMemory: counterMemory(cfg)}
	placer := placement.New(pcfg, paths.HW, paths.SW, log.With("component", "placement"), now)
	d := &Daemon{Cfg: cfg, Store: st, Placer: placer}

	// Rule files load before placement starts, so its first pass (which
	// reconciles the hardware) sees every wanted rule.
	if len(cfg.Rules.Files) > 0 {
		d.Files = filewatch.New(cfg.Rules.Files, st, log.With("component", "files"), now)
		if bad := d.Files.Check(true); bad > 0 {
			log.Error("rule files refused at start; their rules are not in force", "files", bad)
		}
	}
	g, gctx := errgroup.WithContext(ctx)
	if paths.Watch != nil && paths.HW != nil {
		g.Go(func() error {
			return paths.Watch(gctx, func(reason string) {
				log.Warn("hardware table may have lost rules; resync requested", "reason", reason)
				placer.RequestResync(reason)
			})
		})
	}
	// Placement: the one owner of placement state.
	ptick, pstop := ticker(cfg.Place.Interval)
	defer pstop()
	g.Go(func() error { return placer.Run(gctx, st, ptick) })
	if paths.Run != nil {
		g.Go(func() error { return paths.Run(gctx, log.With("component", "dataplane")) })
	}

	// Rule files.
	if d.Files != nil {
		ftick, fstop := ticker(cfg.Rules.Poll)
		defer fstop()
		g.Go(func() error { return d.Files.Run(gctx, ftick) })
		if opt.Reload != nil {
			g.Go(func() error {
				for {
					select {
					case <-gctx.Done():
						return nil
					case <-opt.Reload:
						d.Files.Reload()
					}
				}
			})
		}
	}

	// State saver: persists API and FlowSpec rules when the store changes.
	save := func() error { return SaveState(cfg.StateDir, st.Snapshot(), now()) }
	stick, sstop := ticker(2 * time.Second)
	defer sstop()
	g.Go(func() error {
		var saved uint64
		for {
			select {
			case <-gctx.Done():
				return nil
			case <-stick:
				if v := st.Version(); v != saved {
					if err := save(); err != nil {
						log.Error("state: save failed", "err", err)
						continue
					}
					saved = v
				}
			}
		}
	})

	// FlowSpec.
	if cfg.FlowSpec.Enabled {
		fs := fsCfg // router_id auto resolved before anything started
		if cfg.FlowSpec.RouterID == "auto" {
			log.Info("flowspec.router_id auto", "router_id", fs.RouterID)
		}
		fc := flowspec.Config{ASN: fs.ASN, RouterID: fs.RouterID, ListenPort: fs.ListenPort, OnSessionDown: fs.OnSessionDown,
			HoldTime: fs.HoldTime, Priority: fs.Priority, ConnectRetry: fs.ConnectRetry,
			GracefulRestart: flowspec.GracefulRestart{Enabled: fs.GracefulRestart.GR(), RestartTime: fs.GracefulRestart.RestartTime,
				LongLivedStaleTime: fs.GracefulRestart.LongLivedStaleTime}}
		if fs.ListenAddress != "" {
			fc.ListenAddresses = []string{fs.ListenAddress}
		}
		for _, n := range fs.Neighbors {
			fc.Neighbors = append(fc.Neighbors, flowspec.Neighbor{Address: n.Address, ASN: n.ASN, Port: n.Port, Passive: n.Passive, LocalAddress: n.LocalAddress})
		}
		for _, a := range fs.AllowedDestinations {
			fc.Allowed = append(fc.Allowed, netip.MustParsePrefix(a))
		}
		d.Speaker = flowspec.New(fc, st, log.With("component", "flowspec"), now)
		g.Go(func() error { return d.Speaker.Run(gctx) })
	}

	// API: every listener within the configured limits, the TCP one over
	// TLS when configured.
	lim := api.Limits{ReadHeaderTimeout: cfg.API.ReadHeaderTimeout, ReadTimeout: cfg.API.ReadTimeout, WriteTimeout: cfg.API.WriteTimeout,
		IdleTimeout: cfg.API.IdleTimeout, MaxConns: cfg.API.MaxConnections, MaxHeaderBytes: cfg.API.MaxHeaderBytes,
		ErrorLog: slog.NewLogLogger(log.With("component", "http").Handler(), slog.LevelWarn)}
	apiSrv := &api.Server{Store: st, View: placer.View, Persist: save, Now: now, MaxBody: cfg.API.MaxBodyBytes}
	if lns.unix != nil {
		d.APIAddr = cfg.API.Socket
		g.Go(func() error { return api.ServeLimited(gctx, lns.unix, apiSrv.Handler(), lim, nil) })
	}
	if lns.tcp != nil {
		tcpSrv := *apiSrv
		tcpSrv.Token = lns.token
		g.Go(func() error { return api.ServeLimited(gctx, lns.tcp, tcpSrv.Handler(), lim, lns.tls) })
	}

	// Metrics.
	src := metrics.Sources{View: placer.View, Store: st.Snapshot, Node: cfg.Node}
	if d.Speaker != nil {
		sp := d.Speaker
		src.FlowSpec = func() (map[string]uint64, map[string]bool) { s := sp.Stats(); return s.Refused, s.Sessions }
	}
	src.StateCorrupt = func() uint64 { return stateCorrupt }
	if d.Files != nil {
		src.RuleFileRefusals = func() uint64 {
			var n uint64
			for _, f := range d.Files.Status() {
				n += f.Refusals
			}
			return n
		}
	}
	d.Metrics = metrics.New(src, cfg.Metrics.MaxRuleSeries)
	if lns.metrics != nil {
		d.HTTPAddr = lns.metrics.Addr().String()
		h := metrics.HandlerWithReadiness(metrics.NewRegistry(d.Metrics), d.Readiness)
		g.Go(func() error { return api.ServeLimited(gctx, lns.metrics, h, lim, nil) })
	}

	// The caller's tasks (--sim: the simulated NIC's traffic, the live view).
	for _, t := range opt.Tasks {
		g.Go(func() error { return t(gctx, d) })
	}
	if opt.Ready != nil {
		opt.Ready(d)
	}
	log.Info("scrubd running", "node", cfg.Node, "api", d.APIAddr, "metrics", d.HTTPAddr,
		"offload", cfg.Offload.Backend, "software", cfg.Software.Engine, "rule_files", len(cfg.Rules.Files))
	err = g.Wait()
	// Shutdown: every goroutine is done; placement state is ours now.
	sctx, cancel := context.WithTimeout(context.Background(), cfg.Shutdown.Timeout)
	defer cancel()
	if !cfg.KeepHW() {
		n := placer.RemoveAllHW(sctx)
		log.Info("shutdown: hardware rules removed (offload.keep_on_shutdown: false)", "rules", n)
	} else {
		log.Info("shutdown: hardware rules stay installed; the next start reconciles")
	}
	if serr := save(); serr != nil {
		log.Error("state: final save failed", "err", serr)
	}
	if cfg.API.Socket != "" {
		os.Remove(cfg.API.Socket)
	}
	if err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}

// Readiness is /readyz: ready once the first placement round is done
// (hardware reconciled: rules from the last run adopted or removed, every
// rule installed in hardware or loaded in software).
func (d *Daemon) Readiness() (bool, string) {
	v := d.Placer.View()
	if v == nil || !v.Ready {
		return false, fmt.Sprintf("not ready: pending the first placement round (reconcile the hardware table, then place %d rules from the store)",
			d.Store.Len())
	}
	var hw, sw int
	for _, r := range v.Rules {
		switch r.Path {
		case placement.HW:
			hw++
		case placement.SW:
			sw++
		}
	}
	hwState := "up"
	if !v.HWUp {
		hwState = "down (every rule in software)"
	}
	return true, fmt.Sprintf("ready: %d drop rules in hardware, %d in software; hardware path %s", hw, sw, hwState)
}

// listeners are the agent's sockets, opened before anything else starts.
type listeners struct {
	unix, tcp, metrics net.Listener
	token              string      // the TCP listener's bearer token
	tls                *tls.Config // the TCP listener's TLS (nil: plain)
}

// openListeners reads the token and TLS files and opens the API socket,
// the API's TCP listener and the metrics listener; on an error it closes
// what it opened and the error names the config key.
func openListeners(cfg *config.Config) (*listeners, error) {
	ls := &listeners{}
	fail := func(err error) (*listeners, error) {
		ls.close()
		return nil, err
	}
	if cfg.API.TCP != "" {
		tok, err := cfg.API.Token()
		if err != nil {
			return fail(fmt.Errorf("api.token_file %q: %w", cfg.API.TokenFile, err))
		}
		tc, err := cfg.API.TLSConfig()
		if err != nil {
			return fail(err)
		}
		ls.token, ls.tls = tok, tc
	}
	if cfg.API.Socket != "" {
		l, err := api.ListenUnix(cfg.API.Socket)
		if err != nil {
			return fail(fmt.Errorf("api.socket %q: %w", cfg.API.Socket, err))
		}
		ls.unix = l
	}
	if cfg.API.TCP != "" {
		l, err := net.Listen("tcp", cfg.API.TCP)
		if err != nil {
			return fail(fmt.Errorf("api.tcp %q: %w", cfg.API.TCP, err))
		}
		ls.tcp = l
	}
	if cfg.Metrics.Listen != "" {
		l, err := net.Listen("tcp", cfg.Metrics.Listen)
		if err != nil {
			return fail(fmt.Errorf("metrics.listen %q: %w", cfg.Metrics.Listen, err))
		}
		ls.metrics = l
	}
	return ls, nil
}

// close closes every listener (a unix listener removes its socket file);
// closing one that a server already closed is harmless.
func (ls *listeners) close() {
	for _, l := range []net.Listener{ls.unix, ls.tcp, ls.metrics} {
		if l != nil {
			l.Close()
		}
	}
}
