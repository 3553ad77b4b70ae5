package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
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
	"github.com/scrubd/scrubd/agent/store"
)

// Run runs the agent until ctx ends. Nothing is touched before the whole
// config is checked; then the listeners open, so that a port in use fails
// the start before a rule is loaded or a device touched; on a failure
// every listener is closed (the socket file removed). Each step below is a
// method of agent with its own doc; Run is their list, in order.
func Run(ctx context.Context, cfg *config.Config, opt Options) error {
	a := newAgent(cfg, opt)
	defer a.stopTickers()
	rules, err := a.checkConfig(ctx)
	if err != nil {
		if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
			return nil // stopped while reading the rule files: nothing was touched
		}
		return err
	}
	if err := a.openListeners(); err != nil {
		return err
	}
	defer a.lns.close()
	if err := a.newStore(); err != nil {
		return err
	}
	if err := a.buildPaths(ctx); err != nil {
		return err
	}
	if a.paths.Close != nil {
		defer a.paths.Close()
	}
	if err := a.restoreState(); err != nil {
		return err
	}
	a.newPlacer(ctx)
	a.loadRuleFiles(rules)
	g, gctx := errgroup.WithContext(ctx)
	a.startPlacement(g, gctx)
	a.startRuleFiles(g, gctx)
	a.startStateSaver(g, gctx)
	a.startFlowSpec(g, gctx)
	a.startAPI(g, gctx)
	a.startMetrics(g, gctx)
	a.startTasks(g, gctx)
	a.ready()
	err = g.Wait()
	a.shutdown()
	if err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}

// agent is what Run's steps build and share.
type agent struct {
	cfg    *config.Config
	opt    Options
	log    *slog.Logger
	now    func() time.Time
	ticker func(time.Duration) (<-chan time.Time, func())
	stops  []func() // the tickers' stops

	fs           config.FlowSpec // cfg.FlowSpec with router_id auto resolved
	lns          *listeners
	st           *store.Store
	paths        Paths
	stateCorrupt uint64
	placer       *placement.Placer
	d            *Daemon
	save         func() error
	saver        *StateSaver
}

// newAgent takes the options' logger, clock and tickers, or the defaults.
func newAgent(cfg *config.Config, opt Options) *agent {
	a := &agent{cfg: cfg, opt: opt, log: opt.Log, now: opt.Now, ticker: opt.Ticker}
	if a.log == nil {
		a.log = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	if a.now == nil {
		a.now = time.Now
	}
	if a.ticker == nil {
		a.ticker = realTicker
	}
	return a
}

// tick starts a ticker that Run stops when it returns.
func (a *agent) tick(d time.Duration) <-chan time.Time {
	c, stop := a.ticker(d)
	a.stops = append(a.stops, stop)
	return c
}

func (a *agent) stopTickers() {
	for _, stop := range a.stops {
		stop()
	}
}

// checkConfig checks the whole config as `scrubd config check` does
// (token file, TLS files, addresses, rule files: read and parsed, once),
// then resolves flowspec.router_id auto.
func (a *agent) checkConfig(ctx context.Context) (config.LoadedRules, error) {
	name := a.opt.ConfigName
	if name == "" {
		name = "config"
	}
	rules, err := a.cfg.ValidateRun(ctx, name)
	if err != nil {
		return rules, err
	}
	a.fs = a.cfg.FlowSpec
	if a.fs.Enabled {
		if err := resolveRouterID(&a.fs); err != nil {
			return rules, err
		}
	}
	return rules, nil
}

// openListeners opens the API socket, the API's TCP listener and the
// metrics listener.
func (a *agent) openListeners() error {
	lns, err := openListeners(a.cfg)
	if err != nil {
		return err
	}
	a.lns = lns
	return nil
}

// newStore builds the protect list and the rule store with its guard and
// limits.
func (a *agent) newStore() error {
	pl, err := ProtectList(a.cfg)
	if err != nil {
		return err
	}
	a.st = store.New(pl, a.now)
	a.st.SetGuard(a.cfg.Rules.Guard.Rule()) // every source: files, API, FlowSpec, restored state
	a.st.SetMaxPerSource(a.cfg.Rules.MaxRulesPerSource)
	a.st.OnRemove(func(e store.Entry, why string) {
		a.log.Info("rule removed", "rule", e.Rule.ID, "source", e.Source, "reason", why)
	})
	return nil
}

// buildPaths builds the hardware and software paths (Options.Paths).
func (a *agent) buildPaths(ctx context.Context) error {
	if a.opt.Paths == nil {
		return errors.New("no dataplane: Options.Paths is not set (agent/backend.Paths builds it from the config)")
	}
	p, err := a.opt.Paths(ctx, a.cfg)
	if err != nil {
		return fmt.Errorf("dataplane: %w", err)
	}
	a.paths = p
	return nil
}

// restoreState restores persisted rules: API rules as they were, FlowSpec
// rules held for the hold time unless their peer sends them again. A
// corrupt state file is moved aside and the agent starts from its
// sources: a bad file must not keep the scrubber down.
func (a *agent) restoreState() error {
	cfg, log, st := a.cfg, a.log, a.st
	restored, serrs, err := LoadState(cfg.StateDir, a.now())
	var corrupt *CorruptStateError
	switch {
	case errors.As(err, &corrupt):
		a.stateCorrupt++
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
			st.MarkStale(src, a.now().Add(cfg.FlowSpec.HoldTime))
		}
		log.Info("state: restored rules", "source", src, "rules", len(rs))
	}
	return nil
}

// newPlacer sets the capacity model's cycles per packet (a fixed figure,
// or for "auto" the engine's calibration now and its live counters later)
// and builds the placer over the two paths.
func (a *agent) newPlacer(ctx context.Context) {
	cfg, log := a.cfg, a.log
	cpp, live := float64(cfg.Software.CyclesPerPacket), cfg.Software.CyclesPerPacket.Auto()
	switch {
	case live && cfg.Software.Engine == "xdp":
		log.Info("software.cycles_per_packet auto: the XDP engine's cost is sampled from the program's run time on live traffic; the capacity model has no figure until traffic flows")
	case live && cfg.Software.Engine != "none":
		cal := a.opt.Calibrate
		if cal == nil {
			cal = a.paths.Calibrate
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
	if a.paths.Log != nil {
		a.paths.Log(log)
	}
	pcfg := placement.Config{HighWater: cfg.Place.HighWater, LowWater: cfg.Place.LowWater, MinDwell: cfg.Place.MinDwell,
		MaxMoves: cfg.Place.MaxMovesPerRound, CyclesPerPacket: cpp, LiveCycles: live, LinkBps: cfg.LinkGbps * 1e9,
		QueueDrainPPS: cfg.Software.QueueDrainMpps * 1e6,
		// A FlowSpec route withdrawn and announced again within the hold
		// or restart time keeps its rule's counters (its rule id is the
		// route's).
		CounterMemory: counterMemory(cfg)}
	a.placer = placement.New(pcfg, a.paths.HW, a.paths.SW, log.With("component", "placement"), a.now)
	a.d = &Daemon{Cfg: cfg, Store: a.st, Placer: a.placer}
	a.saver = NewStateSaver(cfg.StateDir, a.st, a.now)
	a.save = a.saver.Save
}

// loadRuleFiles puts the rule files checkConfig parsed in force before
// placement starts, so that its first pass (which reconciles the
// hardware) sees every wanted rule.
func (a *agent) loadRuleFiles(rules config.LoadedRules) {
	if len(a.cfg.Rules.Files) == 0 {
		return
	}
	a.d.Files = filewatch.New(a.cfg.Rules.Files, a.st, a.log.With("component", "files"), a.now)
	if bad := a.d.Files.Preload(rules.Data, rules.Sets); bad > 0 {
		a.log.Error("rule files refused at start; their rules are not in force", "files", bad)
	}
}

// startPlacement starts the placement loop (the one owner of placement
// state), the hardware table's watch and the dataplane's own work.
func (a *agent) startPlacement(g *errgroup.Group, ctx context.Context) {
	if a.paths.Watch != nil && a.paths.HW != nil {
		// Subscribed here, before the placer's goroutine starts.
		watch := a.paths.Watch(func(reason string) {
			a.log.Warn("hardware table may have lost rules; resync requested", "reason", reason)
			a.placer.RequestResync(reason)
		})
		g.Go(func() error { return watch(ctx) })
	}
	ptick := a.tick(a.cfg.Place.Interval)
	g.Go(func() error { return a.placer.Run(ctx, a.st, ptick) })
	if a.paths.Run != nil {
		g.Go(func() error { return a.paths.Run(ctx, a.log.With("component", "dataplane")) })
	}
}

// startRuleFiles polls the rule files and rereads them on SIGHUP
// (Options.Reload); with no rule files a SIGHUP is logged as having
// nothing to reload.
func (a *agent) startRuleFiles(g *errgroup.Group, ctx context.Context) {
	if a.d.Files != nil {
		ftick := a.tick(a.cfg.Rules.Poll)
		g.Go(func() error { return a.d.Files.Run(ctx, ftick) })
	}
	if a.opt.Reload == nil {
		return
	}
	g.Go(func() error {
		for {
			select {
			case <-ctx.Done():
				return nil
			case <-a.opt.Reload:
				if a.d.Files == nil {
					a.log.Info("reload (SIGHUP): no rule files configured (rules.files is empty); nothing to reload")
					continue
				}
				a.d.Files.Reload()
			}
		}
	})
}

// startStateSaver persists API and FlowSpec rules when the store changes.
func (a *agent) startStateSaver(g *errgroup.Group, ctx context.Context) {
	stick := a.tick(2 * time.Second)
	g.Go(func() error {
		var saved uint64
		for {
			select {
			case <-ctx.Done():
				return nil
			case <-stick:
				if v := a.st.Version(); v != saved {
					if err := a.save(); err != nil {
						a.log.Error("state: save failed", "err", err)
						continue
					}
					saved = v
				}
			}
		}
	})
}

// startFlowSpec starts the BGP FlowSpec speaker when flowspec.enabled.
func (a *agent) startFlowSpec(g *errgroup.Group, ctx context.Context) {
	if !a.cfg.FlowSpec.Enabled {
		return
	}
	fs := a.fs // router_id auto resolved before anything started
	if a.cfg.FlowSpec.RouterID == "auto" {
		a.log.Info("flowspec.router_id auto", "router_id", fs.RouterID)
	}
	fc := flowspec.Config{ASN: fs.ASN, RouterID: fs.RouterID, ListenPort: fs.ListenPort, OnSessionDown: fs.OnSessionDown,
		HoldTime: fs.HoldTime, Priority: fs.Priority, ConnectRetry: fs.ConnectRetry, MaxRoutes: fs.MaxRoutes,
		GracefulRestart: flowspec.GracefulRestart{Enabled: fs.GracefulRestart.GR(), RestartTime: fs.GracefulRestart.RestartTime,
			LongLivedStaleTime: fs.GracefulRestart.LongLivedStaleTime}}
	if fs.ListenAddress != "" {
		fc.ListenAddresses = []string{fs.ListenAddress}
	}
	for _, n := range fs.Neighbors {
		fc.Neighbors = append(fc.Neighbors, flowspec.Neighbor{Address: n.Address, ASN: n.ASN, Port: n.Port, Passive: n.Passive, LocalAddress: n.LocalAddress})
	}
	for _, d := range fs.AllowedDestinations {
		fc.Allowed = append(fc.Allowed, netip.MustParsePrefix(d))
	}
	a.d.Speaker = flowspec.New(fc, a.st, a.log.With("component", "flowspec"), a.now)
	g.Go(func() error { return a.d.Speaker.Run(ctx) })
}

// limits are the HTTP servers' limits from api.*.
func (a *agent) limits() api.Limits {
	c := &a.cfg.API
	return api.Limits{ReadHeaderTimeout: c.ReadHeaderTimeout, ReadTimeout: c.ReadTimeout, WriteTimeout: c.WriteTimeout,
		IdleTimeout: c.IdleTimeout, MaxConns: c.MaxConnections, MaxHeaderBytes: c.MaxHeaderBytes,
		ErrorLog: slog.NewLogLogger(a.log.With("component", "http").Handler(), slog.LevelWarn)}
}

// startAPI serves the API on every listener, within the configured
// limits, the TCP one over TLS when configured.
func (a *agent) startAPI(g *errgroup.Group, ctx context.Context) {
	lim := a.limits()
	apiSrv := &api.Server{Store: a.st, View: a.placer.View, Persist: a.save, Now: a.now, MaxBody: a.cfg.API.MaxBodyBytes}
	if a.lns.unix != nil {
		a.d.APIAddr = a.cfg.API.Socket
		g.Go(func() error { return api.ServeLimited(ctx, a.lns.unix, apiSrv.Handler(), lim, nil) })
	}
	if a.lns.tcp != nil {
		tcpSrv := *apiSrv
		tcpSrv.Token = a.lns.token
		g.Go(func() error { return api.ServeLimited(ctx, a.lns.tcp, tcpSrv.Handler(), lim, a.lns.tls) })
	}
}

// startMetrics builds the metrics collector and serves /metrics and
// /readyz.
func (a *agent) startMetrics(g *errgroup.Group, ctx context.Context) {
	d := a.d
	src := metrics.Sources{View: a.placer.View, RuleCounts: a.st.Counts, Node: a.cfg.Node}
	if d.Speaker != nil {
		sp := d.Speaker
		src.FlowSpec = func() metrics.FlowSpec {
			s := sp.Stats()
			held := make(map[string]time.Duration, len(s.HeldDown))
			for p, until := range s.HeldDown {
				held[p] = max(0, time.Until(until))
			}
			return metrics.FlowSpec{Refused: s.Refused, Sessions: s.Sessions, Malformed: s.Malformed, HeldDown: held, ConnRefused: s.ConnRefused,
				RouteLimited: s.RouteLimited}
		}
	}
	if pl, ok := a.paths.SW.(dataplane.ProtectedLoss); ok {
		// A data plane that tells protected packets among the lost ones
		// (the simulated NIC).
		src.ProtectedLost = pl.ProtectedLost
	}
	corrupt := a.stateCorrupt
	src.StateCorrupt = func() uint64 { return corrupt }
	src.StateWrites = func() (journaled, whole, failed uint64) {
		s := a.saver.Stats()
		return s.Journaled, s.Whole, s.Failed
	}
	if d.Files != nil {
		src.RuleFileRefusals = func() uint64 {
			var n uint64
			for _, f := range d.Files.Status() {
				n += f.Refusals
			}
			return n
		}
	}
	d.Metrics = metrics.New(src, a.cfg.Metrics.MaxRuleSeries)
	if a.lns.metrics != nil {
		d.HTTPAddr = a.lns.metrics.Addr().String()
		h := metrics.HandlerWithReadiness(metrics.NewRegistry(d.Metrics), d.Readiness)
		g.Go(func() error { return api.ServeLimited(ctx, a.lns.metrics, h, a.limits(), nil) })
	}
}

// startTasks starts the caller's tasks (--sim: the live view).
func (a *agent) startTasks(g *errgroup.Group, ctx context.Context) {
	for _, t := range a.opt.Tasks {
		g.Go(func() error { return t(ctx, a.d) })
	}
}

// ready tells the caller (Options.Ready) and the log that every source is
// up.
func (a *agent) ready() {
	if a.opt.Ready != nil {
		a.opt.Ready(a.d)
	}
	cfg := a.cfg
	a.log.Info("scrubd running", "node", cfg.Node, "api", a.d.APIAddr, "metrics", a.d.HTTPAddr,
		"offload", cfg.Offload.Backend, "software", cfg.Software.Engine, "rule_files", len(cfg.Rules.Files))
}

// shutdown runs once every goroutine is done (placement state is ours
// now): hardware rules stay installed unless offload.keep_on_shutdown is
// false, the state is saved, the socket file removed.
func (a *agent) shutdown() {
	cfg, log := a.cfg, a.log
	sctx, cancel := context.WithTimeout(context.Background(), cfg.Shutdown.Timeout)
	defer cancel()
	if !cfg.KeepHW() {
		n := a.placer.RemoveAllHW(sctx)
		log.Info("shutdown: hardware rules removed (offload.keep_on_shutdown: false)", "rules", n)
	} else {
		log.Info("shutdown: hardware rules stay installed; the next start reconciles")
	}
	if serr := a.save(); serr != nil {
		log.Error("state: final save failed", "err", serr)
	}
	if cfg.API.Socket != "" {
		os.Remove(cfg.API.Socket)
	}
}
