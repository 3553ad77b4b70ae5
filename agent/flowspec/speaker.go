// Package flowspec is scrubd's BGP FlowSpec source: an in-process GoBGP v3
// speaker that peers with the configured neighbours for IPv4 and IPv6
// FlowSpec (RFC 8955, RFC 8956) and turns each route into a drop rule in the
// store, under the source "bgp".
//
//   - traffic-rate-bytes or traffic-rate-packets 0 means drop. Any other
//     action (a non-zero rate, redirect, traffic-marking) or a component the
//     rule model cannot hold (IPv6 flow label, prefix offsets, an OR of TCP
//     flag terms) refuses that route alone: it is logged and counted by
//     reason, the session stays up and no other rule is touched.
//   - A route decides packets of its own address family only (RFC 8955,
//     8956): one without prefix components gets the family's whole space
//     (0.0.0.0/0 or ::/0) as its destination.
//   - A rule is named by its route (family and NLRI), not by the peer: the
//     same route from two route reflectors is one rule, in force while
//     either announces it, and a route announced again keeps its rule, its
//     placement and its counters.
//   - A withdraw ends that peer's announcement; the rule goes when no peer
//     announces it.
//   - Graceful restart (RFC 4724), as the receiving speaker: scrubd
//     advertises the capability for both FlowSpec families. When a peer that
//     advertised it goes away without a NOTIFICATION, its routes stay in
//     force, marked stale, for the restart time the peer advertised (plus
//     the long-lived stale time when both sides advertise it, RFC 9494). Routes the peer
//     announces again are refreshed in place; at its End-of-RIB the routes
//     it did not announce again are swept. No rule leaves or moves while a
//     route reflector restarts.
//   - Any other session loss: the peer's routes are kept for HoldTime and
//     then removed ("hold", the default), removed at once ("remove"), or
//     kept until withdrawn ("keep"); with hold, an End-of-RIB after the
//     session returns sweeps the routes not announced again.
//   - AllowedDestinations (required: with none, every route is refused)
//     refuses routes whose destination prefix lies outside them, and only
//     configured neighbours can connect at all. A route the store's guard
//     finds too broad is refused too (reason too_broad).
//
// Peers never reach GoBGP directly. Package bgpguard owns their TCP
// sessions (the listener, and the connects to active neighbours, which GoBGP
// still times: it connects to the guard, which connects on) and checks each
// message a peer sends with GoBGP's own decoder before GoBGP reads it, since
// GoBGP v3's session goroutine decodes without a recover: a message its
// decoder panics on would stop the agent. Such a message resets the session
// with a NOTIFICATION instead and is counted (Stats.Malformed); a peer that
// repeats it is held down for a while (Stats.HeldDown), as is one whose
// session passes Config.MaxRoutes routes in a family (Stats.RouteLimited):
// GoBGP keeps every route it is sent. GoBGP
// listens on 127.0.0.1 alone and knows each neighbour by a loopback alias;
// the speaker maps aliases back to the configured addresses in everything it
// reports.
//
// Fleet use: many DPUs each run scrubd with the same route reflector (or
// two) as their neighbours; one announcement reaches every DPU, and each
// places the rule on its own hardware or software path.
//
// GoBGP v3's server loop (BgpServer.Serve) has no exit of its own; Run ends
// it through GoBGP's timing hook after stopping the BGP instance, so no
// goroutine of the speaker outlives Run.
//
// The race detector reports a data race inside GoBGP v3.37 when a session
// with graceful restart goes down: the server loop marks adj-RIB-in paths
// stale while the event watcher's goroutine reads the same flag of paths it
// converted (reported to GoBGP as "A data race occurs when a watcher handles
// path event while the related peer is closing down", osrg/gobgp on GitHub,
// open). It is a boolean read by the watcher's conversion and never used by
// this package.
package flowspec

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	api "github.com/osrg/gobgp/v3/api"
	"github.com/osrg/gobgp/v3/pkg/apiutil"
	gobgplog "github.com/osrg/gobgp/v3/pkg/log"
	"github.com/osrg/gobgp/v3/pkg/packet/bgp"
	"github.com/osrg/gobgp/v3/pkg/server"

	"github.com/scrubd/scrubd/agent/flowspec/bgpguard"
	"github.com/scrubd/scrubd/agent/store"
	"github.com/scrubd/scrubd/swpath/rule"
)

// StoreSource is the store source of every FlowSpec rule. A rule belongs to
// the route (its NLRI), not to the peer that sent it: the same route from
// two route reflectors is one rule, in force while either announces it.
const StoreSource = "bgp"

// Neighbor is one peer.
type Neighbor struct {
	Address string
	ASN     uint32
	Port    uint32 // 0: 179
	Passive bool
	// LocalAddress binds the session's source address (optional).
	LocalAddress string
}

// GracefulRestart configures RFC 4724 graceful restart (and RFC 9494
// long-lived graceful restart) as scrubd uses it: the receiving speaker.
type GracefulRestart struct {
	Enabled bool
	// RestartTime is the restart time scrubd advertises in its capability
	// (how long a peer keeps scrubd's routes; scrubd sends none, but the
	// capability needs one).
	RestartTime time.Duration
	// LongLivedStaleTime, when positive, advertises the long-lived graceful
	// restart capability for the FlowSpec families with this stale time.
	// A restarting peer that advertised it too keeps its rules for its
	// restart time plus the lesser of the two stale times.
	LongLivedStaleTime time.Duration
}

// Config configures the speaker.
type Config struct {
	ASN             uint32
	RouterID        string
	ListenPort      int32 // -1: no listener
	ListenAddresses []string
	Neighbors       []Neighbor
	OnSessionDown   string // hold | remove | keep
	HoldTime        time.Duration
	Priority        uint32
	Allowed         []netip.Prefix
	// ConnectRetry for active sessions: GoBGP waits between this and twice
	// this before each connection attempt (0: 5 s).
	ConnectRetry time.Duration
	// MaxRoutes bounds the routes one neighbour holds in one family,
	// refused ones included (0: no bound; the agent's config defaults to
	// config.DefaultMaxRoutes). GoBGP keeps every
	// route a session announces; the guard resets a session whose routes
	// would pass the bound with a Cease, Maximum Number of Prefixes
	// Reached (RFC 4486), and holds the neighbour down.
	MaxRoutes       int
	GracefulRestart GracefulRestart
}

// DefaultConnectRetry is the connect-retry when none is configured.
const DefaultConnectRetry = 5 * time.Second

// Stats are the speaker's counters.
type Stats struct {
	Refused   map[string]uint64 // by reason
	Accepted  uint64
	Withdrawn uint64
	Sessions  map[string]bool // peer -> established
	// Swept counts rules removed because a peer's End-of-RIB showed it no
	// longer announces them after a session came back.
	Swept uint64
	// Stale is the number of rules every announcing peer of which is down
	// (kept for the restart or hold time).
	Stale int
	// Malformed counts, per peer, the messages kept from GoBGP because its
	// decoder panics on them (each reset the session).
	Malformed map[string]uint64
	// HeldDown is, per peer held down (for repeating such messages, or
	// for Config.MaxRoutes), when its hold-down ends (no session with it
	// until then).
	HeldDown map[string]time.Time
	// RouteLimited counts, per peer, the sessions reset for announcing
	// more than Config.MaxRoutes routes in one family.
	RouteLimited map[string]uint64
	// ConnRefused counts the BGP connections the guard refused, by reason
	// (bgpguard.RefusedNotNeighbor, RefusedLimit, RefusedHeldDown).
	ConnRefused map[string]uint64
}

// claim is one peer's announcement of a route.
type claim struct {
	stale bool
	until time.Time // zero with stale: no deadline (on_session_down keep)
}

// route is one FlowSpec route (one rule) and the peers announcing it.
type route struct {
	fam   bgp.RouteFamily
	peers map[string]*claim
}

// Speaker is the FlowSpec source.
type Speaker struct {
	cfg Config
	st  *store.Store
	log *slog.Logger
	now func() time.Time

	mu        sync.Mutex
	refused   map[string]uint64
	accepted  uint64
	withdrawn uint64
	swept     uint64
	up        map[string]bool
	llgr      map[string]map[bgp.RouteFamily]time.Duration // per peer: long-lived stale time negotiated
	routes    map[string]*route                            // by rule id
	srv       *server.BgpServer
	guard     *bgpguard.Guard
	// byAlias maps the loopback alias GoBGP knows a neighbour by to the
	// neighbour's configured address; aliasOf the other way.
	byAlias, aliasOf map[string]string
	// pickPort picks the loopback port GoBGP listens on (tests replace
	// it).
	pickPort func() (uint16, error)

	// evMu serialises event handling with shutdown: once closed is set no
	// event handler calls into the BGP server any more.
	evMu   sync.Mutex
	closed bool

	// GoBGP's watch hands events to event, which queues them for the
	// handler goroutine (handleEvents); what queued up while it worked is
	// taken at once, and the paths of consecutive table events are one
	// store transaction (GoBGP sends, and delivers, one FlowSpec route per
	// UPDATE, so a burst is otherwise one store version per route).
	qMu   sync.Mutex
	queue []*api.WatchEventResponse
	qSig  chan struct{}
}

// maxBatch bounds the table events one store transaction takes, so the
// store's lock is never held for long.
const maxBatch = 1024

// New returns a speaker feeding st.
func New(cfg Config, st *store.Store, log *slog.Logger, now func() time.Time) *Speaker {
	if cfg.Priority == 0 {
		cfg.Priority = 500
	}
	if cfg.ConnectRetry <= 0 {
		cfg.ConnectRetry = DefaultConnectRetry
	}
	s := &Speaker{cfg: cfg, st: st, log: log, now: now, refused: map[string]uint64{}, up: map[string]bool{}, routes: map[string]*route{},
		llgr: map[string]map[bgp.RouteFamily]time.Duration{}, qSig: make(chan struct{}, 1),
		byAlias: map[string]string{}, aliasOf: map[string]string{}, pickPort: pickLoopbackPort}
	taken := map[netip.Addr]bool{}
	for _, n := range cfg.Neighbors {
		if a, err := netip.ParseAddr(n.Address); err == nil {
			taken[a.Unmap()] = true
		}
	}
	next := aliasBase
	for _, n := range cfg.Neighbors {
		for taken[next] {
			next = next.Next()
		}
		s.byAlias[next.String()], s.aliasOf[n.Address] = n.Address, next.String()
		next = next.Next()
	}
	// A rule the store removed at its deadline (the restart or hold time
	// ran out) is forgotten, unless a peer announced it again meanwhile.
	st.OnRemove(func(e store.Entry, _ string) {
		if e.Source != StoreSource {
			return
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		if r := s.routes[e.Rule.ID]; r != nil && allStale(r) {
			delete(s.routes, e.Rule.ID)
		}
	})
	return s
}

// aliasBase is the first loopback alias (see bgpguard): one a neighbour,
// in order, skipping any configured neighbour's own address.
var aliasBase = netip.MustParseAddr("127.233.0.1")

// realAddr is the configured address of the neighbour GoBGP knows by alias
// (alias itself for anything else, such as "" for a local path).
func (s *Speaker) realAddr(alias string) string {
	if a, ok := s.byAlias[alias]; ok {
		return a
	}
	return alias
}

// byString keys m by the addresses' text, as Stats reports peers.
func byString[V any](m map[netip.Addr]V) map[string]V {
	out := make(map[string]V, len(m))
	for a, v := range m {
		out[a.String()] = v
	}
	return out
}

// Stats returns a copy of the counters.
func (s *Speaker) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := Stats{Refused: map[string]uint64{}, Accepted: s.accepted, Withdrawn: s.withdrawn, Swept: s.swept, Sessions: map[string]bool{},
		Malformed: map[string]uint64{}, HeldDown: map[string]time.Time{}, ConnRefused: map[string]uint64{},
		RouteLimited: map[string]uint64{}}
	if s.guard != nil {
		out.Malformed, out.HeldDown, out.RouteLimited = byString(s.guard.Malformed()), byString(s.guard.HeldDown()), byString(s.guard.RouteLimited())
		out.ConnRefused = s.guard.Refused()
	}
	for k, v := range s.refused {
		out.Refused[k] = v
	}
	for _, n := range s.cfg.Neighbors {
		out.Sessions[n.Address] = s.up[n.Address]
	}
	for _, r := range s.routes {
		if allStale(r) {
			out.Stale++
		}
	}
	return out
}

var families = []*api.Family{
	{Afi: api.Family_AFI_IP, Safi: api.Family_SAFI_FLOW_SPEC_UNICAST},
	{Afi: api.Family_AFI_IP6, Safi: api.Family_SAFI_FLOW_SPEC_UNICAST},
}

// stopHook ends GoBGP's server loop. BgpServer.Serve has no exit; it calls
// its timing hook on its own goroutine after every operation, so once stop
// is set the next operation's hook ends that goroutine (runtime.Goexit runs
// no further code of the loop, and the loop holds no lock there).
type stopHook struct{ stop atomic.Bool }

// shutdownWait bounds how long Run waits for GoBGP's server loop to end.
const shutdownWait = 15 * time.Second

func (h *stopHook) Observe(server.FSMOperation, time.Duration, time.Duration) {
	if h.stop.Load() {
		runtime.Goexit()
	}
}

// peerConf is the GoBGP peer of one neighbour. GoBGP knows it by its alias
// and, unless it is passive, connects to the guard's listener for it (dial),
// which connects on to the neighbour.
func (s *Speaker) peerConf(n Neighbor, dial netip.AddrPort) *api.Peer {
	p := &api.Peer{
		Conf:      &api.PeerConf{NeighborAddress: s.aliasOf[n.Address], PeerAsn: n.ASN},
		Transport: &api.Transport{PassiveMode: n.Passive, RemotePort: uint32(dial.Port())},
		Timers:    &api.Timers{Config: &api.TimersConfig{ConnectRetry: uint64(max(1, s.cfg.ConnectRetry.Round(time.Second)/time.Second))}},
	}
	gr := s.cfg.GracefulRestart
	if gr.Enabled {
		p.GracefulRestart = &api.GracefulRestart{Enabled: true, RestartTime: uint32(gr.RestartTime / time.Second),
			LonglivedEnabled: gr.LongLivedStaleTime > 0}
	}
	for _, f := range families {
		a := &api.AfiSafi{Config: &api.AfiSafiConfig{Family: f, Enabled: true}}
		if gr.Enabled {
			a.MpGracefulRestart = &api.MpGracefulRestart{Config: &api.MpGracefulRestartConfig{Enabled: true}}
			if gr.LongLivedStaleTime > 0 {
				a.LongLivedGracefulRestart = &api.LongLivedGracefulRestart{Config: &api.LongLivedGracefulRestartConfig{
					Enabled: true, RestartTime: uint32(gr.LongLivedStaleTime / time.Second)}}
			}
		}
		p.AfiSafis = append(p.AfiSafis, a)
	}
	return p
}

// pickLoopbackPort returns a TCP port free on 127.0.0.1 a moment ago:
// GoBGP v3's StartBgp opens its listeners itself, from a port number, so
// the port is picked by listening and closing, and another process may
// take it before GoBGP listens (startBgp then picks again).
func pickLoopbackPort() (uint16, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("flowspec: picking a loopback port for the BGP speaker: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).AddrPort().Port(), nil
}

// startTries bounds startBgp's picks of a loopback port.
const startTries = 5

// startBgp starts GoBGP listening on a loopback port it picks, and points
// the guard there. A port taken between the pick and GoBGP's listen is
// picked again, up to startTries times.
func (s *Speaker) startBgp(ctx context.Context, srv *server.BgpServer, guard *bgpguard.Guard) error {
	for try := 1; ; try++ {
		port, err := s.pickPort()
		if err != nil {
			return err
		}
		g := &api.Global{Asn: s.cfg.ASN, RouterId: s.cfg.RouterID, ListenPort: int32(port), ListenAddresses: []string{"127.0.0.1"}}
		err = srv.StartBgp(ctx, &api.StartBgpRequest{Global: g})
		if err == nil {
			guard.SetUpstream(netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 0, 0, 1}), port))
			return nil
		}
		if !errors.Is(err, syscall.EADDRINUSE) || try == startTries {
			return fmt.Errorf("flowspec: starting BGP on 127.0.0.1:%d: %w", port, err)
		}
		s.log.Warn("flowspec: the loopback port picked for the BGP speaker was taken before it listened; picking another", "port", port, "try", try)
	}
}

// newGuard binds the guard's listeners (where GoBGP would have listened).
func (s *Speaker) newGuard() (*bgpguard.Guard, error) {
	gc := bgpguard.Config{ConnectRetry: s.cfg.ConnectRetry, MaxRoutes: s.cfg.MaxRoutes, Log: s.log}
	if p := s.cfg.ListenPort; p >= 0 {
		if p == 0 {
			p = 179 // GoBGP's default
		}
		port := strconv.Itoa(int(p))
		if len(s.cfg.ListenAddresses) == 0 {
			gc.Listen = []string{":" + port} // every address, both families
		}
		for _, a := range s.cfg.ListenAddresses {
			gc.Listen = append(gc.Listen, net.JoinHostPort(a, port))
		}
	}
	for i, n := range s.cfg.Neighbors {
		addr, err := netip.ParseAddr(n.Address)
		if err != nil {
			return nil, fmt.Errorf("flowspec: neighbors[%d].address %q: %w", i, n.Address, err)
		}
		gn := bgpguard.Neighbor{Addr: addr, Port: uint16(n.Port), Passive: n.Passive, Alias: netip.MustParseAddr(s.aliasOf[n.Address])}
		if n.LocalAddress != "" {
			if gn.Local, err = netip.ParseAddr(n.LocalAddress); err != nil {
				return nil, fmt.Errorf("flowspec: neighbors[%d].local_address %q: %w", i, n.LocalAddress, err)
			}
		}
		gc.Neighbors = append(gc.Neighbors, gn)
	}
	g, err := bgpguard.New(gc)
	if err != nil {
		return nil, fmt.Errorf("flowspec: %w", err)
	}
	return g, nil
}

// Run starts the BGP instance, peers and watches until ctx ends, then stops
// the instance and GoBGP's server loop: when Run returns, no goroutine it
// started is left.
func (s *Speaker) Run(ctx context.Context) error {
	guard, err := s.newGuard()
	if err != nil {
		return err
	}
	gctx, gcancel := context.WithCancel(context.WithoutCancel(ctx))
	guardDone := make(chan struct{})
	guardStarted := false
	defer func() {
		// Last, after GoBGP has stopped: its Cease NOTIFICATIONs to
		// the peers go through the guard.
		gcancel()
		if !guardStarted {
			guard.Close()
			return
		}
		<-guardDone
	}()
	s.mu.Lock()
	s.guard = guard
	s.mu.Unlock()
	hook := &stopHook{}
	srv := server.NewBgpServer(server.LoggerOption(&logAdapter{l: s.log}), server.TimingHookOption(hook))
	served := make(chan struct{})
	go func() {
		defer close(served)
		srv.Serve()
	}()
	s.mu.Lock()
	s.srv = srv
	s.mu.Unlock()
	// The event watch outlives ctx: it is cancelled only in the shutdown
	// below, after the server loop is told to end. GoBGP's WatchEvent
	// goroutine unregisters itself with one last management operation
	// once its context ends (pkg/server/server.go, BgpServer.WatchEvent and
	// watcher.Stop); had ctx ended it, that operation could reach the loop
	// at any time, also after the loop ended, and whichever of it and a
	// later call came second would wait for the loop forever.
	wctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	watching := false
	stopEvents, eventsDone := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(eventsDone)
		s.handleEvents(stopEvents)
	}()
	defer func() {
		// The event handler goroutine ends first; events still queued
		// are dropped with the session.
		close(stopEvents)
		<-eventsDone
		// No event handler calls into the server from here on: they hold
		// evMu while they do, and see closed once they get it.
		s.evMu.Lock()
		s.closed = true
		s.evMu.Unlock()
		// Stop with a fresh context: ctx is already done. The peers are
		// deleted and the listeners closed, so no session event reaches
		// the loop after this.
		sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer scancel()
		_ = srv.StopBgp(sctx, &api.StopBgpRequest{})
		// The next operation ends the loop through the hook. With a watch
		// running, that is the watch's own last operation, started by
		// cancel; without one, a GetBgp. Either way exactly one operation
		// is left to the loop, and none waits after it.
		hook.stop.Store(true)
		cancel()
		if !watching {
			_, _ = srv.GetBgp(sctx, &api.GetBgpRequest{})
		}
		select {
		case <-served:
		case <-time.After(shutdownWait):
			// Never keep the agent from exiting: say so and go on.
			s.log.Error("flowspec: GoBGP's server loop did not end on shutdown; leaving it running", "waited", shutdownWait)
		}
	}()
	if err := s.startBgp(ctx, srv, guard); err != nil {
		return err
	}
	err = srv.WatchEvent(wctx, &api.WatchEventRequest{
		Peer: &api.WatchEventRequest_Peer{},
		Table: &api.WatchEventRequest_Table{Filters: []*api.WatchEventRequest_Table_Filter{
			{Type: api.WatchEventRequest_Table_Filter_ADJIN, Init: true},
			{Type: api.WatchEventRequest_Table_Filter_EOR},
		}},
	}, s.event)
	if err != nil {
		return fmt.Errorf("flowspec: watching events: %w", err)
	}
	watching = true
	for _, n := range s.cfg.Neighbors {
		dial, _ := guard.DialAddr(netip.MustParseAddr(n.Address)) // zero for a passive one
		if err := srv.AddPeer(ctx, &api.AddPeerRequest{Peer: s.peerConf(n, dial)}); err != nil {
			return fmt.Errorf("flowspec: neighbor %s: %w", n.Address, err)
		}
	}
	guardStarted = true
	go func() {
		defer close(guardDone)
		guard.Run(gctx)
	}()
	s.log.Info("flowspec speaker up", "asn", s.cfg.ASN, "router_id", s.cfg.RouterID, "listen_port", s.cfg.ListenPort,
		"neighbors", len(s.cfg.Neighbors), "graceful_restart", s.cfg.GracefulRestart.Enabled, "connect_retry", s.cfg.ConnectRetry)
	<-ctx.Done()
	return nil
}

// countLocked counts a refused route. s.mu is held.
func (s *Speaker) countLocked(reason string) {
	s.refused[reason]++
}

// event is GoBGP's watch callback: it queues ev for handleEvents.
func (s *Speaker) event(ev *api.WatchEventResponse) {
	s.qMu.Lock()
	s.queue = append(s.queue, ev)
	s.qMu.Unlock()
	select {
	case s.qSig <- struct{}{}:
	default:
	}
}

// handleEvents handles the queued events, all that queued up at a time,
// until stop is closed.
func (s *Speaker) handleEvents(stop <-chan struct{}) {
	for {
		select {
		case <-stop:
			return
		case <-s.qSig:
		}
		s.qMu.Lock()
		evs := s.queue
		s.queue = nil
		s.qMu.Unlock()
		s.handle(evs)
	}
}

// handle handles events in the order they came: a peer event on its own,
// the paths of consecutive table events (at most maxBatch events) as one
// store transaction.
func (s *Speaker) handle(evs []*api.WatchEventResponse) {
	s.evMu.Lock()
	defer s.evMu.Unlock()
	for i := 0; i < len(evs); {
		if s.closed {
			return
		}
		if pe := evs[i].GetPeer(); pe != nil {
			s.peerEvent(pe)
			i++
			continue
		}
		j := i + 1
		for j < len(evs) && j-i < maxBatch && evs[j].GetPeer() == nil {
			j++
		}
		s.tableEvents(evs[i:j])
		i = j
	}
}

// tableEvents applies the paths of table events (routes, withdrawals,
// End-of-RIB markers) in one store transaction.
func (s *Speaker) tableEvents(evs []*api.WatchEventResponse) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.st.Update(func(tx *store.Tx) {
		for _, ev := range evs {
			for _, p := range ev.GetTable().GetPaths() {
				if p.GetNlri() == nil {
					s.endOfRIBLocked(tx, s.realAddr(p.GetNeighborIp()), p.GetFamily())
					continue
				}
				s.pathLocked(tx, p)
			}
		}
	})
}

// allStale reports whether every peer announcing r is down.
func allStale(r *route) bool {
	for _, c := range r.peers {
		if !c.stale {
			return false
		}
	}
	return true
}

// settleLocked brings rule id's store entry in line with its claims: gone
// when no peer announces it, no deadline while one announces it live, else
// the latest deadline of the peers holding it, within tx. s.mu is held.
func (s *Speaker) settleLocked(tx *store.Tx, id string, r *route) {
	if len(r.peers) == 0 {
		delete(s.routes, id)
		if tx.Delete(StoreSource, id) == nil {
			s.withdrawn++
		}
		return
	}
	var until time.Time
	for _, c := range r.peers {
		if !c.stale || c.until.IsZero() {
			until = time.Time{}
			break
		}
		if c.until.After(until) {
			until = c.until
		}
	}
	tx.SetStale(StoreSource, id, until)
}

// grState asks GoBGP whether the peer it knows by alias went down
// gracefully (RFC 4724: the capability was exchanged and the session ended
// without a NOTIFICATION) and the restart time the peer advertised.
func (s *Speaker) grState(alias string) (restarting bool, restart time.Duration) {
	s.mu.Lock()
	srv := s.srv
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = srv.ListPeer(ctx, &api.ListPeerRequest{Address: alias}, func(p *api.Peer) {
		if gr := p.GetGracefulRestart(); gr != nil && p.GetConf().GetNeighborAddress() == alias {
			restarting, restart = gr.PeerRestarting, time.Duration(gr.PeerRestartTime)*time.Second
		}
	})
	return restarting, restart
}

// longLived reads the long-lived graceful restart capability the peer GoBGP
// knows by alias sent (RFC 9494) and returns, per FlowSpec family it names,
// the lesser of its stale time and the configured one.
func (s *Speaker) longLived(alias string) map[bgp.RouteFamily]time.Duration {
	s.mu.Lock()
	srv := s.srv
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	out := map[bgp.RouteFamily]time.Duration{}
	_ = srv.ListPeer(ctx, &api.ListPeerRequest{Address: alias}, func(p *api.Peer) {
		caps, err := apiutil.UnmarshalCapabilities(p.GetState().GetRemoteCap())
		if err != nil {
			return
		}
		for _, c := range caps {
			if c, ok := c.(*bgp.CapLongLivedGracefulRestart); ok {
				for _, tu := range c.Tuples {
					out[bgp.AfiSafiToRouteFamily(tu.AFI, tu.SAFI)] = min(time.Duration(tu.RestartTime)*time.Second, s.cfg.GracefulRestart.LongLivedStaleTime)
				}
			}
		}
	})
	return out
}

func (s *Speaker) peerEvent(pe *api.WatchEventResponse_PeerEvent) {
	if pe.Type != api.WatchEventResponse_PeerEvent_STATE || pe.Peer == nil || pe.Peer.State == nil {
		return
	}
	alias := pe.Peer.State.NeighborAddress
	addr := s.realAddr(alias)
	est := pe.Peer.State.SessionState == api.PeerState_ESTABLISHED
	s.mu.Lock()
	was := s.up[addr]
	s.up[addr] = est
	s.mu.Unlock()
	switch {
	case est && !was:
		var ll map[bgp.RouteFamily]time.Duration
		if s.cfg.GracefulRestart.Enabled && s.cfg.GracefulRestart.LongLivedStaleTime > 0 {
			ll = s.longLived(alias)
		}
		s.mu.Lock()
		s.llgr[addr] = ll
		s.mu.Unlock()
		s.log.Info("flowspec session up", "peer", addr, "long_lived_stale_time", ll)
	case !est && was:
		graceful, restart := false, time.Duration(0)
		if s.cfg.GracefulRestart.Enabled {
			graceful, restart = s.grState(alias)
		}
		now := s.now()
		mode, until := s.cfg.OnSessionDown, time.Time{}
		switch {
		case graceful:
			mode, until = "graceful", now.Add(restart)
		case mode == "hold":
			until = now.Add(s.cfg.HoldTime)
		}
		s.mu.Lock()
		ll := s.llgr[addr]
		n := 0
		s.st.Update(func(tx *store.Tx) { // one store version for all the peer's rules
			for id, r := range s.routes {
				c := r.peers[addr]
				if c == nil {
					continue
				}
				n++
				if mode == "remove" {
					delete(r.peers, addr)
				} else {
					c.stale, c.until = true, until
					if mode == "graceful" {
						// RFC 9494: the long-lived stale time both sides
						// advertised for the family follows the restart time.
						c.until = until.Add(ll[r.fam])
					}
				}
				s.settleLocked(tx, id, r)
			}
		})
		s.mu.Unlock()
		switch mode {
		case "graceful":
			s.log.Warn("flowspec session down, peer restarting gracefully: its rules stay in force as stale until its End-of-RIB or the deadline",
				"peer", addr, "rules", n, "restart_time", restart, "until", until)
		case "remove":
			s.log.Warn("flowspec session down: peer's rules removed", "peer", addr, "rules", n)
		case "keep":
			s.log.Warn("flowspec session down: peer's rules kept until withdrawn or swept by its End-of-RIB", "peer", addr, "rules", n)
		default:
			s.log.Warn("flowspec session down: peer's rules held", "peer", addr, "rules", n, "until", until)
		}
	}
}

// endOfRIB sweeps, after a peer's End-of-RIB for a family (RFC 4724 section
// 4.2), the routes the peer announced before its session went down and has
// not announced again, within tx. s.mu is held.
func (s *Speaker) endOfRIBLocked(tx *store.Tx, peer string, f *api.Family) {
	if peer == "" || f == nil {
		return
	}
	fam := bgp.AfiSafiToRouteFamily(uint16(f.Afi), uint8(f.Safi))
	n := 0
	for id, r := range s.routes {
		if c := r.peers[peer]; c != nil && c.stale && r.fam == fam {
			delete(r.peers, peer)
			n++
			s.swept++
			s.settleLocked(tx, id, r)
		}
	}
	s.log.Info("flowspec End-of-RIB", "peer", peer, "family", fam.String(), "stale_routes_swept", n)
}

// pathLocked applies one route or withdrawal within tx. s.mu is held.
func (s *Speaker) pathLocked(tx *store.Tx, p *api.Path) {
	peer := s.realAddr(p.GetNeighborIp())
	if peer == "" {
		return // a local path
	}
	nlri, err := apiutil.GetNativeNlri(p)
	if err != nil {
		s.countLocked(ReasonInvalid)
		s.log.Warn("flowspec route refused", "peer", peer, "reason", ReasonInvalid, "detail", err.Error())
		return
	}
	var comps []bgp.FlowSpecComponentInterface
	var ruleFam rule.Family
	switch n := nlri.(type) {
	case *bgp.FlowSpecIPv4Unicast:
		comps, ruleFam = n.Value, rule.IPv4
	case *bgp.FlowSpecIPv6Unicast:
		comps, ruleFam = n.Value, rule.IPv6
	default:
		return
	}
	raw, err := nlri.Serialize()
	if err != nil {
		s.countLocked(ReasonInvalid)
		return
	}
	fam := bgp.AfiSafiToRouteFamily(nlri.AFI(), nlri.SAFI())
	id := RuleID(fam, raw)
	// drop ends this peer's claim on the route (a withdraw, or a route
	// replaced by one that cannot be enforced).
	drop := func() bool {
		r := s.routes[id]
		if r == nil || r.peers[peer] == nil {
			return false
		}
		delete(r.peers, peer)
		s.settleLocked(tx, id, r)
		return true
	}
	if p.IsWithdraw {
		if drop() {
			s.log.Info("flowspec route withdrawn", "peer", peer, "rule", id, "nlri", nlri.String())
		}
		return
	}
	attrs, err := apiutil.GetNativePathAttributes(p)
	if err != nil {
		s.countLocked(ReasonInvalid)
		s.log.Warn("flowspec route refused", "peer", peer, "reason", ReasonInvalid, "detail", err.Error())
		return
	}
	refuse := func(rf *Refusal) {
		s.countLocked(rf.Reason)
		s.log.Warn("flowspec route refused", "peer", peer, "nlri", nlri.String(), "reason", rf.Reason, "detail", rf.Detail)
		drop()
	}
	if rf := Action(attrs); rf != nil {
		refuse(rf)
		return
	}
	r, rf := Translate(id, s.cfg.Priority, ruleFam, comps, s.cfg.Allowed)
	if rf != nil {
		refuse(rf)
		return
	}
	e, err := tx.Put(StoreSource, r)
	if err != nil && e.Rule.ID == "" {
		reason := ReasonInvalid
		if errors.Is(err, store.ErrGuard) {
			reason = ReasonTooBroad
		} else if errors.Is(err, store.ErrTooMany) {
			reason = ReasonTooMany
		}
		s.countLocked(reason)
		s.log.Warn("flowspec route refused by the store", "peer", peer, "rule", id, "reason", reason, "err", err)
		return
	}
	rt := s.routes[id]
	if rt == nil {
		rt = &route{fam: fam, peers: map[string]*claim{}}
		s.routes[id] = rt
	}
	rt.peers[peer] = &claim{}
	s.accepted++
	// Per route at debug level: a burst of 10k routes is not 10k lines
	// (placement logs each round's counts).
	s.log.Debug("flowspec route learned", "peer", peer, "rule", id, "match", r.Match.String(), "status", string(e.Status), "reason", e.Reason)
}

// logAdapter sends GoBGP's log lines to slog.
type logAdapter struct {
	l     *slog.Logger
	level gobgplog.LogLevel
}

func (a *logAdapter) args(f gobgplog.Fields) []any {
	out := make([]any, 0, 2*len(f)+2)
	out = append(out, "component", "gobgp")
	for k, v := range f {
		out = append(out, k, v)
	}
	return out
}

func (a *logAdapter) Panic(msg string, f gobgplog.Fields) { a.l.Error(msg, a.args(f)...); panic(msg) }
func (a *logAdapter) Fatal(msg string, f gobgplog.Fields) { a.l.Error(msg, a.args(f)...) }
func (a *logAdapter) Error(msg string, f gobgplog.Fields) { a.l.Error(msg, a.args(f)...) }
func (a *logAdapter) Warn(msg string, f gobgplog.Fields)  { a.l.Warn(msg, a.args(f)...) }
func (a *logAdapter) Info(msg string, f gobgplog.Fields)  { a.l.Debug(msg, a.args(f)...) }
func (a *logAdapter) Debug(msg string, f gobgplog.Fields) {}
func (a *logAdapter) SetLevel(l gobgplog.LogLevel)        { a.level = l }
func (a *logAdapter) GetLevel() gobgplog.LogLevel         { return a.level }
