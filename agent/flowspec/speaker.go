// Package flowspec is scrubd's BGP FlowSpec source: an in-process GoBGP v3
// speaker that peers with the configured neighbours for IPv4 and IPv6
// FlowSpec (RFC 8955, RFC 8956) and turns each route into a drop rule in the
// store, under the source "bgp:PEER".
//
//   - traffic-rate-bytes or traffic-rate-packets 0 means drop. Any other
//     action (a non-zero rate, redirect, traffic-marking) or a component the
//     rule model cannot hold (IPv6 flow label, prefix offsets, an OR of TCP
//     flag terms) refuses that route alone: it is logged and counted by
//     reason, the session stays up and no other rule is touched.
//   - A route decides packets of its own address family only (RFC 8955,
//     8956): one without prefix components gets the family's whole space
//     (0.0.0.0/0 or ::/0) as its destination.
//   - A withdraw removes the route's rule.
//   - When a session goes down, the peer's rules are kept for HoldTime and
//     then removed ("hold", the default), removed at once ("remove"), or
//     kept until withdrawn ("keep"). Routes the peer announces again when
//     the session returns are refreshed and stay.
//   - AllowedDestinations, when set, refuses routes whose destination prefix
//     lies outside them (RFC 8955 section 6-style trust), and only configured
//     neighbours can connect at all.
//
// Fleet use: many DPUs each run scrubd with the same route reflector (or
// FastNetMon's gobgpd) as their neighbour; one announcement reaches every
// DPU, and each places the rule on its own hardware or software path.
//
// GoBGP v3's server loop (BgpServer.Serve) has no way to end: Run stops the
// BGP instance (sessions and listeners) on return, but that one parked
// goroutine stays for the life of the process.
package flowspec

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"sync"
	"time"

	api "github.com/osrg/gobgp/v3/api"
	"github.com/osrg/gobgp/v3/pkg/apiutil"
	gobgplog "github.com/osrg/gobgp/v3/pkg/log"
	"github.com/osrg/gobgp/v3/pkg/packet/bgp"
	"github.com/osrg/gobgp/v3/pkg/server"

	"github.com/scrubd/scrubd/agent/store"
	"github.com/scrubd/scrubd/swpath/rule"
)

// Neighbor is one peer.
type Neighbor struct {
	Address string
	ASN     uint32
	Port    uint32 // 0: 179
	Passive bool
	// LocalAddress binds the session's source address (optional).
	LocalAddress string
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
	// ConnectRetry for active sessions (0: GoBGP's default).
	ConnectRetry time.Duration
}

// Stats are the speaker's counters.
type Stats struct {
	Refused   map[string]uint64 // by reason
	Accepted  uint64
	Withdrawn uint64
	Sessions  map[string]bool // peer -> established
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
	up        map[string]bool
	srv       *server.BgpServer
}

// New returns a speaker feeding st.
func New(cfg Config, st *store.Store, log *slog.Logger, now func() time.Time) *Speaker {
	if cfg.Priority == 0 {
		cfg.Priority = 500
	}
	return &Speaker{cfg: cfg, st: st, log: log, now: now, refused: map[string]uint64{}, up: map[string]bool{}}
}

// Source is the store source of a peer's rules.
func Source(peer string) string { return "bgp:" + peer }

// Stats returns a copy of the counters.
func (s *Speaker) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := Stats{Refused: map[string]uint64{}, Accepted: s.accepted, Withdrawn: s.withdrawn, Sessions: map[string]bool{}}
	for k, v := range s.refused {
		out.Refused[k] = v
	}
	for _, n := range s.cfg.Neighbors {
		out.Sessions[n.Address] = s.up[n.Address]
	}
	return out
}

var families = []*api.Family{
	{Afi: api.Family_AFI_IP, Safi: api.Family_SAFI_FLOW_SPEC_UNICAST},
	{Afi: api.Family_AFI_IP6, Safi: api.Family_SAFI_FLOW_SPEC_UNICAST},
}

// Run starts the BGP instance, peers and watches until ctx ends, then stops
// the instance.
func (s *Speaker) Run(ctx context.Context) error {
	srv := server.NewBgpServer(server.LoggerOption(&logAdapter{l: s.log}))
	go srv.Serve()
	s.mu.Lock()
	s.srv = srv
	s.mu.Unlock()
	g := &api.Global{Asn: s.cfg.ASN, RouterId: s.cfg.RouterID, ListenPort: s.cfg.ListenPort, ListenAddresses: s.cfg.ListenAddresses}
	if err := srv.StartBgp(ctx, &api.StartBgpRequest{Global: g}); err != nil {
		return fmt.Errorf("flowspec: starting BGP: %w", err)
	}
	defer func() {
		// Stop with a fresh context: ctx is already done.
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.StopBgp(sctx, &api.StopBgpRequest{})
	}()
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	err := srv.WatchEvent(wctx, &api.WatchEventRequest{
		Peer: &api.WatchEventRequest_Peer{},
		Table: &api.WatchEventRequest_Table{Filters: []*api.WatchEventRequest_Table_Filter{
			{Type: api.WatchEventRequest_Table_Filter_ADJIN, Init: true},
		}},
	}, s.event)
	if err != nil {
		return fmt.Errorf("flowspec: watching events: %w", err)
	}
	for _, n := range s.cfg.Neighbors {
		p := &api.Peer{
			Conf:      &api.PeerConf{NeighborAddress: n.Address, PeerAsn: n.ASN},
			Transport: &api.Transport{PassiveMode: n.Passive, RemotePort: n.Port, LocalAddress: n.LocalAddress},
		}
		if s.cfg.ConnectRetry > 0 {
			p.Timers = &api.Timers{Config: &api.TimersConfig{ConnectRetry: uint64(s.cfg.ConnectRetry.Seconds())}}
		}
		for _, f := range families {
			p.AfiSafis = append(p.AfiSafis, &api.AfiSafi{Config: &api.AfiSafiConfig{Family: f, Enabled: true}})
		}
		if err := srv.AddPeer(ctx, &api.AddPeerRequest{Peer: p}); err != nil {
			return fmt.Errorf("flowspec: neighbor %s: %w", n.Address, err)
		}
	}
	s.log.Info("flowspec speaker up", "asn", s.cfg.ASN, "router_id", s.cfg.RouterID, "listen_port", s.cfg.ListenPort, "neighbors", len(s.cfg.Neighbors))
	<-ctx.Done()
	return nil
}

func (s *Speaker) count(reason string) {
	s.mu.Lock()
	s.refused[reason]++
	s.mu.Unlock()
}

func (s *Speaker) event(ev *api.WatchEventResponse) {
	if pe := ev.GetPeer(); pe != nil {
		s.peerEvent(pe)
		return
	}
	if t := ev.GetTable(); t != nil {
		for _, p := range t.Paths {
			s.path(p)
		}
	}
}

func (s *Speaker) peerEvent(pe *api.WatchEventResponse_PeerEvent) {
	if pe.Type != api.WatchEventResponse_PeerEvent_STATE || pe.Peer == nil || pe.Peer.State == nil {
		return
	}
	addr := pe.Peer.State.NeighborAddress
	est := pe.Peer.State.SessionState == api.PeerState_ESTABLISHED
	s.mu.Lock()
	was := s.up[addr]
	s.up[addr] = est
	s.mu.Unlock()
	switch {
	case est && !was:
		s.log.Info("flowspec session up", "peer", addr)
	case !est && was:
		src := Source(addr)
		switch s.cfg.OnSessionDown {
		case "remove":
			_, _ = s.st.Replace(src, nil)
			s.log.Warn("flowspec session down: peer's rules removed", "peer", addr)
		case "keep":
			s.log.Warn("flowspec session down: peer's rules kept until withdrawn", "peer", addr)
		default:
			until := s.now().Add(s.cfg.HoldTime)
			n := s.st.MarkStale(src, until)
			s.log.Warn("flowspec session down: peer's rules held", "peer", addr, "rules", n, "until", until)
		}
	}
}

func (s *Speaker) path(p *api.Path) {
	peer := p.GetNeighborIp()
	if p.GetNlri() == nil || peer == "" {
		return // end-of-RIB marker or a local path
	}
	nlri, err := apiutil.GetNativeNlri(p)
	if err != nil {
		s.count(ReasonInvalid)
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
		s.count(ReasonInvalid)
		return
	}
	fam := bgp.AfiSafiToRouteFamily(nlri.AFI(), nlri.SAFI())
	id := RuleID(peer, fam, raw)
	src := Source(peer)
	if p.IsWithdraw {
		if err := s.st.Delete(src, id); err == nil {
			s.mu.Lock()
			s.withdrawn++
			s.mu.Unlock()
			s.log.Info("flowspec route withdrawn", "peer", peer, "rule", id, "nlri", nlri.String())
		}
		return
	}
	attrs, err := apiutil.GetNativePathAttributes(p)
	if err != nil {
		s.count(ReasonInvalid)
		s.log.Warn("flowspec route refused", "peer", peer, "reason", ReasonInvalid, "detail", err.Error())
		return
	}
	refuse := func(rf *Refusal) {
		s.count(rf.Reason)
		s.log.Warn("flowspec route refused", "peer", peer, "nlri", nlri.String(), "reason", rf.Reason, "detail", rf.Detail)
		// A route replaced by an unsupported one no longer applies.
		_ = s.st.Delete(src, id)
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
	e, err := s.st.Put(src, r)
	if err != nil && e.Rule.ID == "" {
		s.count(ReasonInvalid)
		s.log.Warn("flowspec route refused by the store", "peer", peer, "rule", id, "err", err)
		return
	}
	s.mu.Lock()
	s.accepted++
	s.mu.Unlock()
	s.log.Info("flowspec route learned", "peer", peer, "rule", id, "match", r.Match.String(), "status", string(e.Status), "reason", e.Reason)
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
