// Package daemon wires scrubd together and runs it: the rule store and its
// sources (rule files, the API, FlowSpec), the placement loop over a
// hardware and a software path, metrics and persisted state. The paths are
// the caller's (Options.Paths; agent/backend builds them from the config,
// for real devices and the simulated NIC alike): the daemon knows no
// device, engine or simulator.
//
// A rule's way through the agent, from its source to the path that
// enforces it:
//
//	rule file ---filewatch--+
//	API (socket, TCP) ------+--> store ---------> placement ---> hardware path
//	BGP FlowSpec --flowspec-+    guard, protect    capacity      agent/hwpath: compile to flower
//	saved state ------------+    list, one         model, moves  entries, tc flower on the devices
//	                             source each                     (or the simulated NIC's table)
//	                                                         +-> software path
//	                                                             agent/swengine: the dv or XDP
//	                                                             engine's classifier (or the dv
//	                                                             engine over the NIC emulator)
//
// Placement puts each drop rule on one path, hardware first while it fits,
// and moves rules as the paths' counters (read back every round) show the
// load. Accept rules (the protect list among them) are in the software
// engine's set and, where one overlaps a drop rule in hardware, in front
// of it as pass entries (agent/hwpath), so neither path drops protected
// traffic by a rule. The metrics and the API read the store and the
// placement's view.
//
// A packet's way, where those rules act on it:
//
//	wire --> NIC flow table (tc flower, skip_sw) --> a hardware rule drops it
//	           | passed (no entry, or a protect pass entry)
//	           v
//	         receive queues (RSS) --> software engine --> a software rule drops it
//	           | no buffer posted:      | passed
//	           v                        v
//	         out-of-buffer drop       host stack, or software.forward_to
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
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"time"

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
	// Watch, if set, subscribes to what tells that the hardware table
	// may have lost scrubd's entries (the clsact qdisc deleted: OVS
	// restarting) and returns the loop that calls lost for each, run
	// until ctx ends; the placer then re-reads the table and reinstalls
	// what is missing. It subscribes before it returns, and the agent
	// calls it before placement starts: a loss while the first rules go
	// in is reported, not missed (placement's first pass reads the table,
	// so a loss before the call is seen too).
	Watch func(lost func(reason string)) (run func(ctx context.Context) error)
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
	// ends (run --sim: the live view); an error from one stops the agent.
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
	// ConfigName names the config in the errors of the start-up check
	// (config.ValidateRun); default "config".
	ConfigName string
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
	for _, r := range v.Rules.All() {
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
