// Package bgpguard stands between scrubd's FlowSpec peers and the GoBGP
// speaker that runs in scrubd's process, so that no message a peer sends can
// stop the agent.
//
// GoBGP v3 reads each message inside its session goroutine and decodes it
// there (pkg/server/fsm.go, fsmHandler.recvMessageWithError, which calls
// bgp.ParseBGPBody), with no recover anywhere in pkg/server: a message its
// decoder panics on ends the whole process. The guard owns the peers' TCP
// sessions instead, and GoBGP only ever talks to the guard over loopback.
// The guard listens where GoBGP would have listened; a peer's connection is
// joined to a new connection to GoBGP's loopback listener. For a neighbour
// that is not passive, GoBGP still decides when to connect (its finite state
// machine and idle hold, as before): it connects to a loopback listener the
// guard keeps for that neighbour, and the guard connects on to the peer and
// joins the two, or closes GoBGP's connection when the peer cannot be
// reached; after such a failure it dials that peer again only once
// Config.ConnectRetry has passed. Either way the guard relays the
// two byte streams message by message. Before a peer's message goes on, the
// guard decodes it with the same GoBGP call under recover (Check):
//
//   - A message the decoder panics on never reaches GoBGP. The guard sends
//     the peer a NOTIFICATION (UPDATE Message Error, Optional Attribute
//     Error: RFC 4760 section 7, for an MP_REACH_NLRI or MP_UNREACH_NLRI
//     whose NLRI cannot be read), sends GoBGP the same NOTIFICATION as if
//     the peer had sent it, closes both connections, logs the message and
//     counts it for the neighbour. GoBGP then sees an ordinary session
//     reset.
//   - Any other message goes on unchanged, also one the decoder returns an
//     error for: GoBGP handles that itself (a NOTIFICATION, or
//     treat-as-withdraw under RFC 7606), as it would without the guard.
//
// GoBGP listens on a loopback address alone. Each neighbour has a loopback
// address of its own (its alias; all of 127.0.0.0/8 is local on Linux): the
// guard connects to GoBGP from it, and listens on it for GoBGP's connects,
// so GoBGP keeps one peer per neighbour and tells them apart by address as
// before. Whoever configures GoBGP names each neighbour by its alias, with
// the port DialAddr gives as its remote port, and maps the alias back to
// the neighbour's address in what it reports.
//
// Only configured neighbours can connect: a connection from any other address
// is closed at once, as GoBGP closes it. A neighbour has at most two
// connections at a time (the two of a connection collision); more are
// closed at once.
//
// A neighbour that sends such messages again and again would keep its own
// session flapping, and its rules with it (each reset applies
// on_session_down, each new session announces them again). So the guard
// damps it, as RFC 4271 section 8.1.1 allows a speaker to damp a peer's
// oscillations: the first malformed message only resets the session, and
// each further one within strikeMemory of the one before holds the
// neighbour down, for Config.HoldDown after the second and twice as long
// after each one after that, up to 1<<maxHoldDoublings times as long. While
// a neighbour is held down the guard connects to it on no one's behalf and
// answers its connects with a NOTIFICATION, Cease, Connection Rejected (RFC
// 4486 section 3), so no session with it comes up and its rules stay as
// on_session_down left them.
//
// The guard also bounds the routes a session may hold (Config.MaxRoutes):
// GoBGP keeps every route a peer announces, refused or not, so a peer that
// announced millions would take the agent's memory. The guard counts each
// session's routes per address family from the UPDATEs it has decoded
// anyway (MP_REACH_NLRI adds a route, MP_UNREACH_NLRI removes it; a route
// is its NLRI's bytes, as without ADD-PATH); the UPDATE that would take a
// family past the bound never reaches GoBGP. The session is reset with a
// NOTIFICATION, Cease, Maximum Number of Prefixes Reached (RFC 4486
// section 4), to both sides, and the neighbour is held down as above, from
// the first such reset: on its next session it would announce them all
// again. (GoBGP's own prefix limit is not used: after every UPDATE it counts
// the peer's routes by walking all of them, pkg/server/peer.go doPrefixLimit
// and internal/pkg/table AdjRib.Count, so a peer's n routes cost time
// quadratic in n.)
package bgpguard

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math/rand/v2"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/osrg/gobgp/v3/pkg/packet/bgp"
)

// Neighbor is one configured peer.
type Neighbor struct {
	Addr netip.Addr
	// Port is the peer's port for the guard's connects (0: 179).
	Port uint16
	// Passive neighbours are never connected to: the guard keeps no
	// listener for GoBGP's connects to them.
	Passive bool
	// Local is the source address of the guard's connects (zero: the
	// kernel's choice).
	Local netip.Addr
	// Alias is the loopback address GoBGP knows this neighbour by.
	Alias netip.Addr
}

// Config configures a guard.
type Config struct {
	// Listen are the addresses ("host:port") peers connect to; none: no
	// listener, the guard only connects.
	Listen []string
	// Upstream is GoBGP's loopback listener (unset: SetUpstream before
	// Run).
	Upstream  netip.AddrPort
	Neighbors []Neighbor
	// ConnectRetry paces the guard's connects to a neighbour after one
	// failed: none for between this and twice this (jitter). GoBGP's
	// connects to the guard in between are closed at once. (GoBGP's own
	// connect loop would not pace them: its connect to the guard succeeds,
	// so it retries after its fixed idle hold.) Zero: no pacing.
	ConnectRetry time.Duration
	// HoldDown is the first hold-down of a neighbour that sent a message
	// GoBGP's decoder panics on twice, or passed MaxRoutes once (see the
	// package doc). Zero: DefaultHoldDown; below zero: no hold-downs.
	HoldDown time.Duration
	// MaxRoutes bounds the routes one session holds in one address family
	// (0: no bound).
	MaxRoutes int
	Log       *slog.Logger
}

// DefaultHoldDown is the first hold-down when Config.HoldDown is zero.
const DefaultHoldDown = 30 * time.Second

// maxHoldDoublings caps a hold-down at 1<<maxHoldDoublings times the first
// (16 minutes with the default), and strikeMemory (in first hold-downs: 64
// minutes with the default) is how long a neighbour's misdeeds are held
// against it: one that comes later counts as its first.
const (
	maxHoldDoublings = 5
	strikeMemory     = 128
)

// notifyCode and notifySubcode are the NOTIFICATION the guard sends for a
// message GoBGP's decoder cannot read: UPDATE Message Error (3), Optional
// Attribute Error (9), as RFC 4760 section 7 has it for an MP_REACH_NLRI or
// MP_UNREACH_NLRI whose NLRI is incorrect (the case the guard exists for).
const (
	notifyCode    = bgp.BGP_ERROR_UPDATE_MESSAGE_ERROR
	notifySubcode = bgp.BGP_ERROR_SUB_OPTIONAL_ATTRIBUTE_ERROR
)

// drainWait bounds how long a connection is read after the guard has
// written its last bytes to it, so a NOTIFICATION is not lost to a reset
// (closing a socket with unread data sends RST), and how long the other
// half of a relay may run after one half ended.
const drainWait = 5 * time.Second

// maxSessions bounds a neighbour's connections at a time: two, the most BGP
// has with one peer (the two sides' connects crossing, resolved by
// collision detection, RFC 4271 section 6.8). More would each hold a
// connection to GoBGP and two goroutines for a neighbour that opens
// connections in a loop.
const maxSessions = 2

// dialTimeout bounds one connect to a neighbour or to GoBGP.
const dialTimeout = 10 * time.Second

// The reasons a connection is refused (Guard.Refused).
const (
	RefusedNotNeighbor = "not_neighbor"     // from an address that is no configured neighbour
	RefusedLimit       = "connection_limit" // the neighbour has maxSessions already
	RefusedHeldDown    = "held_down"        // the neighbour is held down
)

// refusalLogEvery spaces the log lines about refused connections: whoever
// can reach the BGP port can open connections in a loop, and each must not
// cost a log line. One line per reason at most this often, with the count
// of those not logged since the one before.
const refusalLogEvery = 10 * time.Second

// DecodePanic is a message GoBGP's decoder panicked on.
type DecodePanic struct {
	Type  uint8  // the BGP message type
	Value string // what the decoder panicked with
}

func (e *DecodePanic) Error() string {
	return fmt.Sprintf("GoBGP's decoder panics on this BGP message (type %d): %s", e.Type, e.Value)
}

// Check decodes one BGP message (the header's fields and the body after the
// 19-byte header) as GoBGP's session goroutine does: bgp.ParseBGPBody, then
// bgp.ValidateBGPMessage (pkg/server/fsm.go, recvMessageWithError). It
// returns a *DecodePanic when either panics, and nil otherwise, also when
// they return an error: GoBGP answers those itself.
//
// GoBGP decodes with no marshalling options unless ADD-PATH was negotiated
// (fsm.go sets fsm.marshallingOptions from the ADD-PATH capability, with the
// modes both sides enabled); scrubd enables ADD-PATH for no family, so every
// negotiated mode is none and decoding is the same as with none.
func Check(h *bgp.BGPHeader, body []byte) error {
	_, err := decode(h, body)
	return err
}

// decode is Check that also returns the message GoBGP will read (nil when
// it returns an error for it).
func decode(h *bgp.BGPHeader, body []byte) (m *bgp.BGPMessage, err error) {
	defer func() {
		if r := recover(); r != nil {
			m, err = nil, &DecodePanic{Type: h.Type, Value: fmt.Sprint(r)}
		}
	}()
	m, perr := bgp.ParseBGPBody(h, body)
	if perr != nil {
		return nil, nil
	}
	if bgp.ValidateBGPMessage(m) != nil {
		return nil, nil
	}
	return m, nil
}

// updateOf returns m's UPDATE (false: m is none, or nil).
func updateOf(m *bgp.BGPMessage) (*bgp.BGPUpdate, bool) {
	if m == nil {
		return nil, false
	}
	u, ok := m.Body.(*bgp.BGPUpdate)
	return u, ok
}

// routeSet is one session's routes, by address family: each a route's NLRI
// bytes. An UPDATE GoBGP's decoder returns an error for is not counted; if
// GoBGP treats it as a withdrawal (RFC 7606), routes it withdraws stay
// counted here, so the count errs high, never low.
type routeSet map[bgp.RouteFamily]map[string]struct{}

// update applies an UPDATE to s and returns the first family that it takes
// past max routes, if any.
func (s routeSet) update(u *bgp.BGPUpdate, max int) (bgp.RouteFamily, bool) {
	for _, a := range u.PathAttributes {
		switch a := a.(type) {
		case *bgp.PathAttributeMpUnreachNLRI:
			set := s[bgp.AfiSafiToRouteFamily(a.AFI, a.SAFI)]
			for _, p := range a.Value {
				if k, err := p.Serialize(); err == nil {
					delete(set, string(k))
				}
			}
		case *bgp.PathAttributeMpReachNLRI:
			rf := bgp.AfiSafiToRouteFamily(a.AFI, a.SAFI)
			set := s[rf]
			if set == nil {
				set = map[string]struct{}{}
				s[rf] = set
			}
			for _, p := range a.Value {
				if k, err := p.Serialize(); err == nil {
					set[string(k)] = struct{}{}
				}
			}
			if len(set) > max {
				return rf, true
			}
		}
	}
	return 0, false
}

// Guard relays sessions between peers and GoBGP; New binds its listeners,
// Run serves them.
type Guard struct {
	cfg    Config
	log    *slog.Logger
	lns    []net.Listener
	byAddr map[netip.Addr]*neighbor

	mu        sync.Mutex
	conns     map[net.Conn]struct{} // every open connection, closed on shutdown
	closing   bool
	malformed map[netip.Addr]uint64
	limited   map[netip.Addr]uint64 // sessions reset for Config.MaxRoutes
	refused   map[string]uint64     // connections refused, by reason
	logged    map[string]time.Time  // by reason: the last refusal logged
	unlogged  map[string]uint64     // by reason: refusals since, not logged
}

type neighbor struct {
	Neighbor
	dial net.Listener // GoBGP's connects to this neighbour (nil: passive)
	mu   sync.Mutex
	live int       // relays up
	next time.Time // no connect to the neighbour before this (one failed)
	// strikes counts the malformed messages in a row (each within
	// strikeMemory of the one before), the last at struck; no session
	// with the neighbour before heldUntil.
	strikes   int
	struck    time.Time
	heldUntil time.Time
}

// New checks cfg and binds the listeners, so that a port in use is an error
// before anything starts.
func New(cfg Config) (*Guard, error) {
	if cfg.Upstream.IsValid() {
		if err := checkUpstream(cfg.Upstream); err != nil {
			return nil, err
		}
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.HoldDown == 0 {
		cfg.HoldDown = DefaultHoldDown
	}
	g := &Guard{cfg: cfg, log: cfg.Log, byAddr: map[netip.Addr]*neighbor{}, conns: map[net.Conn]struct{}{}, malformed: map[netip.Addr]uint64{}, limited: map[netip.Addr]uint64{},
		refused: map[string]uint64{}, logged: map[string]time.Time{}, unlogged: map[string]uint64{}}
	aliases := map[netip.Addr]bool{}
	for _, n := range cfg.Neighbors {
		switch {
		case !n.Addr.IsValid():
			return nil, errors.New("bgpguard: a neighbour without an address")
		case g.byAddr[n.Addr.Unmap()] != nil:
			return nil, fmt.Errorf("bgpguard: neighbour %v: configured twice", n.Addr)
		case !n.Alias.Is4() || !n.Alias.IsLoopback() || aliases[n.Alias]:
			return nil, fmt.Errorf("bgpguard: neighbour %v: alias %v must be an IPv4 loopback address of its own", n.Addr, n.Alias)
		}
		aliases[n.Alias] = true
		g.byAddr[n.Addr.Unmap()] = &neighbor{Neighbor: n}
	}
	for _, a := range cfg.Listen {
		ln, err := net.Listen("tcp", a)
		if err != nil {
			g.Close()
			return nil, fmt.Errorf("bgpguard: listening on %s: %w", a, err)
		}
		g.lns = append(g.lns, ln)
	}
	for _, n := range g.byAddr {
		if n.Passive {
			continue
		}
		ln, err := net.Listen("tcp", netip.AddrPortFrom(n.Alias, 0).String())
		if err != nil {
			g.Close()
			return nil, fmt.Errorf("bgpguard: listening for GoBGP's connects to %v on %v: %w", n.Addr, n.Alias, err)
		}
		n.dial = ln
	}
	return g, nil
}

// checkUpstream refuses an upstream that is not a loopback address and
// port.
func checkUpstream(ap netip.AddrPort) error {
	if !ap.IsValid() || !ap.Addr().IsLoopback() {
		return fmt.Errorf("bgpguard: upstream %v: must be a loopback address and port", ap)
	}
	return nil
}

// SetUpstream sets GoBGP's loopback listener, once it listens; call it
// before Run.
func (g *Guard) SetUpstream(ap netip.AddrPort) {
	g.cfg.Upstream = ap
}

// Close closes the listeners of a guard that never ran. (Run closes them
// itself when its context ends.)
func (g *Guard) Close() {
	for _, l := range g.lns {
		l.Close()
	}
	for _, n := range g.byAddr {
		if n.dial != nil {
			n.dial.Close()
		}
	}
}

// DialAddr is where GoBGP connects to reach the neighbour at addr (its
// alias and the port the guard listens on there); false for a passive
// neighbour or an address that is no neighbour.
func (g *Guard) DialAddr(addr netip.Addr) (netip.AddrPort, bool) {
	n := g.byAddr[addr.Unmap()]
	if n == nil || n.dial == nil {
		return netip.AddrPort{}, false
	}
	return n.dial.Addr().(*net.TCPAddr).AddrPort(), true
}

// Addrs returns the addresses the guard listens on.
func (g *Guard) Addrs() []net.Addr {
	out := make([]net.Addr, len(g.lns))
	for i, l := range g.lns {
		out[i] = l.Addr()
	}
	return out
}

// Malformed returns, per neighbour, how many messages the guard kept from
// GoBGP because its decoder panicked on them.
func (g *Guard) Malformed() map[netip.Addr]uint64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return maps.Clone(g.malformed)
}

// RouteLimited returns, per neighbour, how many of its sessions the guard
// reset for announcing more routes than Config.MaxRoutes in a family.
func (g *Guard) RouteLimited() map[netip.Addr]uint64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return maps.Clone(g.limited)
}

// Refused returns how many connections the guard refused, by reason
// (RefusedNotNeighbor, RefusedLimit, RefusedHeldDown).
func (g *Guard) Refused() map[string]uint64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return maps.Clone(g.refused)
}

// refusal counts a refused connection and logs it at level, unless one of
// the same reason was logged within refusalLogEvery: then the next line
// says how many went unlogged.
func (g *Guard) refusal(reason string, level slog.Level, msg string, args ...any) {
	g.mu.Lock()
	g.refused[reason]++
	now := time.Now()
	if now.Sub(g.logged[reason]) < refusalLogEvery {
		g.unlogged[reason]++
		g.mu.Unlock()
		return
	}
	g.logged[reason] = now
	n := g.unlogged[reason]
	g.unlogged[reason] = 0
	g.mu.Unlock()
	if n > 0 {
		args = append(args, "refused_unlogged_since_last_line", n)
	}
	g.log.Log(context.Background(), level, msg, args...)
}

// HeldDown returns the neighbours held down now (for malformed messages,
// or for Config.MaxRoutes), each with when its hold-down ends.
func (g *Guard) HeldDown() map[netip.Addr]time.Time {
	out := map[netip.Addr]time.Time{}
	for a, n := range g.byAddr {
		if end := g.held(n); !end.IsZero() {
			out[a] = end
		}
	}
	return out
}

// Run accepts and connects sessions until ctx ends, then closes the
// listeners and every connection and returns once every goroutine it
// started has ended.
func (g *Guard) Run(ctx context.Context) error {
	if err := checkUpstream(g.cfg.Upstream); err != nil {
		g.Close()
		return err
	}
	var wg sync.WaitGroup
	for _, ln := range g.lns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			g.serve(ctx, ln, &wg, g.takePeer(ctx))
		}()
	}
	for _, n := range g.byAddr {
		if n.dial == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			g.serve(ctx, n.dial, &wg, g.takeGoBGP(ctx, n))
		}()
	}
	<-ctx.Done()
	g.mu.Lock()
	g.closing = true
	for c := range g.conns {
		c.Close()
	}
	g.mu.Unlock()
	g.Close()
	wg.Wait()
	return nil
}

// track registers c for shutdown; it reports false (and closes c) once the
// guard is shutting down.
func (g *Guard) track(c net.Conn) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closing {
		c.Close()
		return false
	}
	g.conns[c] = struct{}{}
	return true
}

func (g *Guard) untrack(c net.Conn) {
	g.mu.Lock()
	delete(g.conns, c)
	g.mu.Unlock()
	c.Close()
}

// serve accepts connections on ln until ctx ends. take runs on the
// accepting goroutine and returns what to do with the connection on a new
// one (nil: nothing, take closed it).
func (g *Guard) serve(ctx context.Context, ln net.Listener, wg *sync.WaitGroup, take func(net.Conn) func()) {
	for {
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			g.log.Warn("flowspec guard: accept failed", "listen", ln.Addr().String(), "err", err)
			select {
			case <-ctx.Done():
				return
			case <-time.After(100 * time.Millisecond):
			}
			continue
		}
		if work := take(c); work != nil {
			wg.Add(1)
			go func() {
				defer wg.Done()
				work()
			}()
		}
	}
}

// takePeer takes a peer's connection: one from a configured neighbour with
// room for it is joined to GoBGP.
func (g *Guard) takePeer(ctx context.Context) func(net.Conn) func() {
	return func(c net.Conn) func() {
		from := c.RemoteAddr().(*net.TCPAddr).AddrPort().Addr().Unmap()
		n := g.byAddr[from]
		if n == nil {
			g.refusal(RefusedNotNeighbor, slog.LevelWarn, "flowspec guard: connection from an address that is not a configured neighbour closed", "from", from.String())
			c.Close()
			return nil
		}
		if until := g.held(n); !until.IsZero() {
			g.refusal(RefusedHeldDown, slog.LevelInfo, "flowspec guard: connection from a held-down neighbour refused", "peer", n.Addr.String(), "held_until", until.Format(time.RFC3339))
			if !g.tryTake(n) { // the answer's drain counts against the limit too
				c.Close()
				return nil
			}
			return func() {
				defer g.release(n)
				g.refuse(c)
			}
		}
		if !g.take(n) {
			c.Close()
			return nil
		}
		return func() {
			defer g.release(n)
			g.relayIn(ctx, n, c)
		}
	}
}

// refuse answers a held-down neighbour's connect: a NOTIFICATION (Cease,
// Connection Rejected), then the connection closes.
func (g *Guard) refuse(c net.Conn) {
	if !g.track(c) {
		return
	}
	defer g.untrack(c)
	c.SetDeadline(time.Now().Add(drainWait))
	if _, err := c.Write(notifyMessage(bgp.BGP_ERROR_CEASE, bgp.BGP_ERROR_SUB_CONNECTION_REJECTED)); err != nil {
		return
	}
	halfClose(c)
	io.Copy(io.Discard, c)
}

// takeGoBGP takes GoBGP's connect to neighbour n: the guard connects to the
// peer and joins the two. When the peer cannot be reached, or was not a
// moment ago (Config.ConnectRetry), GoBGP's connection is closed, and GoBGP
// tries again as its finite state machine says (idle hold, connect retry).
func (g *Guard) takeGoBGP(ctx context.Context, n *neighbor) func(net.Conn) func() {
	port := n.Port
	if port == 0 {
		port = 179
	}
	to := netip.AddrPortFrom(n.Addr, port).String()
	d := net.Dialer{Timeout: dialTimeout}
	if n.Local.IsValid() {
		d.LocalAddr = &net.TCPAddr{IP: n.Local.AsSlice()}
	}
	return func(up net.Conn) func() {
		if !up.RemoteAddr().(*net.TCPAddr).AddrPort().Addr().Unmap().IsLoopback() || !g.dialDue(n) || !g.take(n) {
			up.Close()
			return nil
		}
		return func() {
			defer g.release(n)
			if !g.track(up) {
				return
			}
			defer g.untrack(up)
			peer, err := d.DialContext(ctx, "tcp", to)
			g.dialed(n, err)
			if err != nil {
				if ctx.Err() == nil {
					g.log.Debug("flowspec guard: connect to neighbour failed", "peer", n.Addr.String(), "to", to, "err", err)
				}
				return
			}
			if !g.track(peer) {
				return
			}
			defer g.untrack(peer)
			g.relay(n, peer, up)
		}
	}
}

// dialDue reports whether the guard may connect to n now: not within
// Config.ConnectRetry of a failed connect, nor while n is held down.
func (g *Guard) dialDue(n *neighbor) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	now := time.Now()
	return !now.Before(n.next) && !now.Before(n.heldUntil)
}

// held returns when n's hold-down ends, or zero when n is not held down.
func (g *Guard) held(n *neighbor) time.Time {
	n.mu.Lock()
	defer n.mu.Unlock()
	if time.Now().Before(n.heldUntil) {
		return n.heldUntil
	}
	return time.Time{}
}

// strike records a misdeed of n's (a malformed message, or a session reset
// for the prefix limit) and returns the hold-down it earns: none for the
// first free of them in a row (within strikeMemory of each other), then
// Config.HoldDown, doubling with each, up to maxHoldDoublings times; none
// at all with damping off.
func (g *Guard) strike(n *neighbor, free int) time.Duration {
	base := g.cfg.HoldDown
	if base < 0 {
		return 0
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	now := time.Now()
	if n.strikes > 0 && now.Sub(n.struck) > strikeMemory*base {
		n.strikes = 0
	}
	n.strikes++
	n.struck = now
	if n.strikes <= free {
		return 0
	}
	hold := base << min(n.strikes-free-1, maxHoldDoublings)
	n.heldUntil = now.Add(hold)
	return hold
}

// dialed records a connect to n: after a failure the next waits
// ConnectRetry to twice that.
func (g *Guard) dialed(n *neighbor, err error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.next = time.Time{}
	if err != nil && g.cfg.ConnectRetry > 0 {
		n.next = time.Now().Add(g.cfg.ConnectRetry + rand.N(g.cfg.ConnectRetry))
	}
}

// take counts a new connection of n's, or logs and reports false when n has
// maxSessions already.
func (g *Guard) take(n *neighbor) bool {
	if !g.tryTake(n) {
		g.refusal(RefusedLimit, slog.LevelWarn, "flowspec guard: neighbour already has the connections BGP allows; a new one closed", "peer", n.Addr.String(), "open", maxSessions)
		return false
	}
	return true
}

// tryTake is take without the count and the log line.
func (g *Guard) tryTake(n *neighbor) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.live >= maxSessions {
		return false
	}
	n.live++
	return true
}

func (g *Guard) release(n *neighbor) {
	n.mu.Lock()
	n.live--
	n.mu.Unlock()
}

// relayIn joins a peer's connection to a new connection to GoBGP from n's
// alias and relays the session until either side ends it.
func (g *Guard) relayIn(ctx context.Context, n *neighbor, peer net.Conn) {
	if !g.track(peer) {
		return
	}
	defer g.untrack(peer)
	d := net.Dialer{Timeout: dialTimeout, LocalAddr: &net.TCPAddr{IP: n.Alias.AsSlice()}}
	up, err := d.DialContext(ctx, "tcp", g.cfg.Upstream.String())
	if err != nil {
		if ctx.Err() == nil {
			g.log.Error("flowspec guard: cannot reach the BGP speaker; peer's connection closed", "peer", n.Addr.String(), "err", err)
		}
		return
	}
	if !g.track(up) {
		return
	}
	defer g.untrack(up)
	g.relay(n, peer, up)
}

// relay relays the session between peer and up (GoBGP's side) until either
// side ends it. The caller closes both.
func (g *Guard) relay(n *neighbor, peer, up net.Conn) {
	var peerW sync.Mutex // the two halves both write to the peer
	done := make(chan struct{})
	go func() {
		defer close(done)
		// GoBGP to the peer: whole messages, so the guard's own
		// NOTIFICATION never lands inside one.
		copyMessages(peer, up, &peerW)
		halfClose(peer)
		// GoBGP ended the session (after its own NOTIFICATION, if any):
		// a peer that neither closes nor sends is not waited for.
		peer.SetReadDeadline(time.Now().Add(drainWait))
	}()
	g.fromPeer(n, peer, up, &peerW)
	halfClose(up)
	peer.SetReadDeadline(time.Now().Add(drainWait))
	up.SetReadDeadline(time.Now().Add(drainWait))
	<-done
	// Read what the peer still sends until it closes (or drainWait), so a
	// close with unread data does not reset the connection before the peer
	// has read the last message.
	io.Copy(io.Discard, peer)
}

// fromPeer relays the peer's messages to GoBGP, each checked first, until
// the peer ends the session, an I/O error, or a message GoBGP's decoder
// cannot read.
func (g *Guard) fromPeer(n *neighbor, peer, up net.Conn, peerW *sync.Mutex) {
	buf := make([]byte, 1<<16)
	routes := routeSet{}
	for {
		msg, h, framed, err := readMessage(peer, buf)
		if err != nil {
			return
		}
		if !framed {
			// No length to frame by: GoBGP reads the same header, answers
			// it with a NOTIFICATION and closes.
			up.Write(msg)
			return
		}
		m, err := decode(&h, msg[bgp.BGP_HEADER_LENGTH:])
		if err != nil {
			g.reject(n, peer, up, peerW, msg, err)
			return
		}
		if u, ok := updateOf(m); ok && g.cfg.MaxRoutes > 0 {
			if rf, over := routes.update(u, g.cfg.MaxRoutes); over {
				g.overLimit(n, rf, peer, up, peerW)
				return
			}
		}
		if _, err := up.Write(msg); err != nil {
			return
		}
	}
}

// reject answers a message GoBGP's decoder cannot read: a NOTIFICATION to
// both sides, then the relay closes.
func (g *Guard) reject(n *neighbor, peer, up net.Conn, peerW *sync.Mutex, msg []byte, err error) {
	g.mu.Lock()
	g.malformed[n.Addr]++
	g.mu.Unlock()
	shown := msg
	if len(shown) > 256 {
		shown = shown[:256]
	}
	g.log.Error("flowspec guard: a peer sent a BGP message that GoBGP's decoder panics on; it was kept from GoBGP and the session is reset with a NOTIFICATION (UPDATE Message Error, Optional Attribute Error)",
		"peer", n.Addr.String(), "type", msg[18], "length", len(msg), "err", err.Error(), "message_hex", hex.EncodeToString(shown))
	if hold := g.strike(n, 1); hold > 0 {
		g.log.Warn("flowspec guard: neighbour held down: it sent malformed messages again, and no session with it comes up until the hold-down ends",
			"peer", n.Addr.String(), "hold", hold.String(), "until", time.Now().Add(hold).Format(time.RFC3339))
	}
	notifyBoth(peer, up, peerW, notifyCode, notifySubcode)
}

// overLimit answers an UPDATE that takes family rf of n's session past
// Config.MaxRoutes: it never reaches GoBGP; both sides get a NOTIFICATION
// (Cease, Maximum Number of Prefixes Reached), then the relay closes, and n
// is held down.
func (g *Guard) overLimit(n *neighbor, rf bgp.RouteFamily, peer, up net.Conn, peerW *sync.Mutex) {
	g.mu.Lock()
	g.limited[n.Addr]++
	g.mu.Unlock()
	args := []any{"peer", n.Addr.String(), "family", rf.String(), "max_routes", g.cfg.MaxRoutes}
	if hold := g.strike(n, 0); hold > 0 {
		args = append(args, "held_down_for", hold.String(), "until", time.Now().Add(hold).Format(time.RFC3339))
	}
	g.log.Warn("flowspec guard: a neighbour announced more routes than flowspec.max_routes allows in one address family; the session is reset with a NOTIFICATION (Cease, Maximum Number of Prefixes Reached)", args...)
	notifyBoth(peer, up, peerW, bgp.BGP_ERROR_CEASE, bgp.BGP_ERROR_SUB_MAXIMUM_NUMBER_OF_PREFIXES_REACHED)
}

// notifyMessage is a NOTIFICATION message with no data. (Serializing one
// cannot fail: it has no fields that can be out of range.)
func notifyMessage(code, subcode uint8) []byte {
	b, _ := bgp.NewBGPNotificationMessage(code, subcode, nil).Serialize()
	return b
}

// notifyBoth sends a NOTIFICATION to the peer and to GoBGP (as if the peer
// had sent it).
func notifyBoth(peer, up net.Conn, peerW *sync.Mutex, code, subcode uint8) {
	note := notifyMessage(code, subcode)
	peerW.Lock()
	peer.SetWriteDeadline(time.Now().Add(drainWait))
	peer.Write(note)
	peerW.Unlock()
	up.SetWriteDeadline(time.Now().Add(drainWait))
	up.Write(note)
}

// readMessage reads one BGP message from c into buf (64 KiB, the most a
// header's length can name). A header GoBGP's decoder refuses has no length
// to frame by: readMessage returns the 19 header bytes alone, framed false.
func readMessage(c net.Conn, buf []byte) (msg []byte, h bgp.BGPHeader, framed bool, err error) {
	if _, err := io.ReadFull(c, buf[:bgp.BGP_HEADER_LENGTH]); err != nil {
		return nil, h, false, err
	}
	if h.DecodeFromBytes(buf[:bgp.BGP_HEADER_LENGTH]) != nil {
		return buf[:bgp.BGP_HEADER_LENGTH], h, false, nil
	}
	msg = buf[:h.Len]
	if _, err := io.ReadFull(c, msg[bgp.BGP_HEADER_LENGTH:]); err != nil {
		return nil, h, false, err
	}
	return msg, h, true, nil
}

// copyMessages writes src's messages to dst whole, each under mu.
func copyMessages(dst, src net.Conn, mu *sync.Mutex) {
	buf := make([]byte, 1<<16)
	for {
		msg, _, _, err := readMessage(src, buf)
		if err != nil {
			return
		}
		mu.Lock()
		_, err = dst.Write(msg)
		mu.Unlock()
		if err != nil {
			return
		}
	}
}

// halfClose ends the writes to c (a FIN), leaving its reads open.
func halfClose(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		tc.CloseWrite()
		return
	}
	c.Close()
}
