package flowspec

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	api "github.com/osrg/gobgp/v3/api"
	"github.com/osrg/gobgp/v3/pkg/apiutil"
	"github.com/osrg/gobgp/v3/pkg/packet/bgp"
	"github.com/osrg/gobgp/v3/pkg/server"

	"github.com/scrubd/scrubd/agent/store"
)

var testAllowed = []netip.Prefix{netip.MustParsePrefix("203.0.113.0/24"), netip.MustParsePrefix("198.51.100.0/24")}

// grPeer is a GoBGP speaker announcing FlowSpec to the agent from local
// (127.0.0.x), dialing to port, optionally with graceful restart
// (restart seconds advertised).
type grPeer struct {
	*testServer
}

// testServer is a GoBGP server for tests whose server loop ends through
// the same hook as the speaker's, so goroutine counts can be compared. It
// is stopped when the test ends, if the test did not stop it before.
type testServer struct {
	t      *testing.T
	srv    *server.BgpServer
	hook   *stopHook
	served chan struct{}
	once   sync.Once
}

func newTestServer(t *testing.T) *testServer {
	p := &testServer{t: t, hook: &stopHook{}, served: make(chan struct{})}
	p.srv = server.NewBgpServer(server.LoggerOption(&logAdapter{l: slog.New(slog.NewTextHandler(io.Discard, nil))}), server.TimingHookOption(p.hook))
	go func() {
		defer close(p.served)
		p.srv.Serve()
	}()
	t.Cleanup(p.stop)
	return p
}

// stop stops the server (its sessions end with a Cease NOTIFICATION) and
// ends its server loop. Nothing else calls into the server meanwhile, so
// the GetBgp after the hook is armed is the loop's last operation. A loop
// that does not end fails the test with every goroutine's stack, instead
// of hanging the test binary.
func (p *testServer) stop() {
	p.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = p.srv.StopBgp(ctx, &api.StopBgpRequest{})
		p.hook.stop.Store(true)
		_, _ = p.srv.GetBgp(ctx, &api.GetBgpRequest{})
		select {
		case <-p.served:
		case <-time.After(30 * time.Second):
			buf := make([]byte, 1<<20)
			p.t.Errorf("a test BGP server's loop did not end in 30 s:\n%s", buf[:runtime.Stack(buf, true)])
		}
	})
}

func startGRPeer(t *testing.T, local string, port int, restart uint32) *grPeer {
	return startLLGRPeer(t, local, port, restart, 0)
}

// startLLGRPeer is startGRPeer that also advertises long-lived graceful
// restart with stale time llst seconds (0: not).
func startLLGRPeer(t *testing.T, local string, port int, restart, llst uint32) *grPeer {
	t.Helper()
	p := &grPeer{newTestServer(t)}
	ctx := context.Background()
	if err := p.srv.StartBgp(ctx, &api.StartBgpRequest{Global: &api.Global{Asn: 65010, RouterId: "192.0.2." + local[strings.LastIndexByte(local, '.')+1:], ListenPort: -1}}); err != nil {
		t.Fatal(err)
	}
	pc := &api.Peer{Conf: &api.PeerConf{NeighborAddress: "127.0.0.1", PeerAsn: 65010},
		Transport: &api.Transport{RemotePort: uint32(port), LocalAddress: local},
		Timers:    &api.Timers{Config: &api.TimersConfig{ConnectRetry: 1}}}
	if restart > 0 {
		pc.GracefulRestart = &api.GracefulRestart{Enabled: true, RestartTime: restart, LonglivedEnabled: llst > 0}
	}
	for _, f := range families {
		a := &api.AfiSafi{Config: &api.AfiSafiConfig{Family: f, Enabled: true}}
		if restart > 0 {
			a.MpGracefulRestart = &api.MpGracefulRestart{Config: &api.MpGracefulRestartConfig{Enabled: true}}
		}
		if llst > 0 {
			a.LongLivedGracefulRestart = &api.LongLivedGracefulRestart{Config: &api.LongLivedGracefulRestartConfig{Enabled: true, RestartTime: llst}}
		}
		pc.AfiSafis = append(pc.AfiSafis, a)
	}
	if err := p.srv.AddPeer(ctx, &api.AddPeerRequest{Peer: pc}); err != nil {
		t.Fatal(err)
	}
	return p
}

func (p *grPeer) announce(t *testing.T, nlri bgp.AddrPrefixInterface, withdraw bool) {
	(&peer{srv: p.srv}).announce(t, nlri, withdraw, bgp.NewTrafficRateExtended(0, 0))
}

// proxy forwards TCP from a port to the agent's listener, dialing from
// 127.0.0.2 so the agent sees its configured neighbour. cut closes every
// connection without a BGP NOTIFICATION: what the agent sees when the peer
// process is killed.
type proxy struct {
	t      *testing.T
	l      net.Listener
	to     string
	mu     sync.Mutex
	conns  []net.Conn
	closed bool
	wg     sync.WaitGroup
}

func startProxy(t *testing.T, addr, to string) *proxy {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{t: t, l: l, to: to}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}}
			u, err := d.Dial("tcp", to)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			if p.closed {
				// cut ran while this connection was being dialed: it
				// would wait for these copies forever.
				p.mu.Unlock()
				c.Close()
				u.Close()
				return
			}
			p.conns = append(p.conns, c, u)
			p.mu.Unlock()
			p.wg.Add(2)
			go func() { defer p.wg.Done(); _, _ = io.Copy(u, c); u.Close() }()
			go func() { defer p.wg.Done(); _, _ = io.Copy(c, u); c.Close() }()
		}
	}()
	return p
}

func (p *proxy) cut() {
	p.l.Close()
	p.mu.Lock()
	p.closed = true
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
	p.mu.Unlock()
	p.wg.Wait()
}

func rulesBySource(st *store.Store) map[string]store.Entry {
	out := map[string]store.Entry{}
	for _, e := range st.Snapshot().Entries {
		if e.Source == StoreSource {
			out[e.Rule.ID] = e
		}
	}
	return out
}

func dst32(a string) *bgp.FlowSpecIPv4Unicast {
	return v4(a, 32, num(bgp.FLOW_SPEC_TYPE_IP_PROTO, bgp.DEC_NUM_OP_EQ, 17))
}

func startSpeaker(t *testing.T, cfg Config, st *store.Store, now func() time.Time) (*Speaker, func()) {
	t.Helper()
	sp := New(cfg, st, slog.New(slog.NewTextHandler(io.Discard, nil)), now)
	stop, _ := runSpeaker(t, sp)
	return sp, stop
}

// runSpeaker runs sp until stop, which fails the test when Run returned an
// error; ended is closed when Run returns.
func runSpeaker(t *testing.T, sp *Speaker) (stop func(), ended <-chan struct{}) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	var err error
	go func() {
		defer close(done)
		err = sp.Run(ctx)
	}()
	return func() {
		cancel()
		<-done
		if err != nil {
			t.Error(err)
		}
	}, done
}

// The same route from two route reflectors is one rule (its id does not
// name the peer); it stays while either announces it.
func TestTwoReflectorsOneRule(t *testing.T) {
	clk := &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	st := store.New(nil, clk.now)
	port := freePort(t)
	// Both peers start before the speaker (GoBGP's StartBgp writes
	// package-level options).
	a := startGRPeer(t, "127.0.0.2", port, 0)
	defer a.stop()
	b := startGRPeer(t, "127.0.0.3", port, 0)
	defer b.stop()
	sp, stop := startSpeaker(t, Config{ASN: 65010, RouterID: "192.0.2.10", ListenPort: int32(port), ListenAddresses: []string{"127.0.0.1"},
		Neighbors:     []Neighbor{{Address: "127.0.0.2", ASN: 65010, Passive: true}, {Address: "127.0.0.3", ASN: 65010, Passive: true}},
		OnSessionDown: "hold", HoldTime: time.Minute, Allowed: testAllowed}, st, clk.now)
	defer stop()
	waitFor(t, "both sessions", func() bool { s := sp.Stats().Sessions; return s["127.0.0.2"] && s["127.0.0.3"] })
	r := dst32("203.0.113.7")
	a.announce(t, r, false)
	b.announce(t, r, false)
	waitFor(t, "two announcements", func() bool { return sp.Stats().Accepted == 2 })
	rs := rulesBySource(st)
	if len(rs) != 1 {
		t.Fatalf("%d rules for one route from two peers", len(rs))
	}
	var id string
	var added time.Time
	for k, e := range rs {
		id, added = k, e.Added
	}
	// The id is the hash of the family and the NLRI alone (hand-built
	// NLRI bytes: destination 203.0.113.7/32, protocol = 17).
	want := RuleID(bgp.RF_FS_IPv4_UC, []byte{9, 1, 32, 203, 0, 113, 7, 3, 0x81, 17})
	if id != want {
		t.Fatalf("rule id %s, want %s (family and NLRI only)", id, want)
	}
	clk.add(time.Second)
	a.announce(t, r, true)
	waitFor(t, "withdraw from a", func() bool { return sp.Stats().Withdrawn == 0 && rulesBySource(st)[id].Rule.ID == id })
	time.Sleep(300 * time.Millisecond) // a withdraw that removed the rule would show by now
	if e, ok := rulesBySource(st)[id]; !ok || !e.Added.Equal(added) || !e.StaleAt.IsZero() {
		t.Fatalf("rule after one of two peers withdrew: %+v %v", e, ok)
	}
	// Announced again by a: the same entry (same Added), not a new rule.
	a.announce(t, r, false)
	waitFor(t, "re-announce", func() bool { return sp.Stats().Accepted == 3 })
	if e := rulesBySource(st)[id]; !e.Added.Equal(added) {
		t.Fatalf("re-announced route made a new entry: added %v, first %v", e.Added, added)
	}
	a.announce(t, r, true)
	b.announce(t, r, true)
	waitFor(t, "withdrawn by both", func() bool { return len(rulesBySource(st)) == 0 })
}

// A route reflector restarting (killed: no NOTIFICATION) with graceful
// restart: its rules stay in force, stale, for the restart time it
// advertised; what it announces again is refreshed in place; its
// End-of-RIB sweeps the rest.
func TestGracefulRestartKeepsThenSweeps(t *testing.T) {
	clk := &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	st := store.New(nil, clk.now)
	port, pport := freePort(t), freePort(t)
	pr := startProxy(t, "127.0.0.1:"+itoa(pport), "127.0.0.1:"+itoa(port))
	rr := startGRPeer(t, "127.0.0.3", pport, 90)
	sp, stop := startSpeaker(t, Config{ASN: 65010, RouterID: "192.0.2.10", ListenPort: int32(port), ListenAddresses: []string{"127.0.0.1"},
		Neighbors:     []Neighbor{{Address: "127.0.0.2", ASN: 65010, Passive: true}},
		OnSessionDown: "hold", HoldTime: 5 * time.Second, Allowed: testAllowed,
		GracefulRestart: GracefulRestart{Enabled: true, RestartTime: 30 * time.Second}}, st, clk.now)
	defer stop()
	waitFor(t, "session", func() bool { return sp.Stats().Sessions["127.0.0.2"] })
	routes := []*bgp.FlowSpecIPv4Unicast{dst32("203.0.113.1"), dst32("203.0.113.2"), dst32("203.0.113.3")}
	for _, r := range routes {
		rr.announce(t, r, false)
	}
	waitFor(t, "three rules", func() bool { return len(rulesBySource(st)) == 3 })
	before := rulesBySource(st)

	// Killed: the connection closes, no NOTIFICATION.
	pr.cut()
	rr.stop()
	waitFor(t, "session down", func() bool { return !sp.Stats().Sessions["127.0.0.2"] })
	waitFor(t, "rules marked stale", func() bool { return sp.Stats().Stale == 3 })
	for id, e := range rulesBySource(st) {
		// The peer's restart time (90 s), not the hold time (5 s).
		if want := clk.now().Add(90 * time.Second); !e.StaleAt.Equal(want) || !e.Added.Equal(before[id].Added) {
			t.Fatalf("rule %s during the restart: stale at %v (want %v), added %v", id, e.StaleAt, want, e.Added)
		}
	}
	clk.add(80 * time.Second)
	if g := st.Sweep(); len(g) != 0 {
		t.Fatalf("rules removed within the restart time: %v", g)
	}

	// Back, announcing two of the three; its End-of-RIB sweeps the third.
	pr = startProxy(t, "127.0.0.1:"+itoa(pport), "127.0.0.1:"+itoa(port))
	defer pr.cut()
	rr = startGRPeer(t, "127.0.0.3", pport, 90)
	defer rr.stop()
	rr.announce(t, routes[0], false)
	rr.announce(t, routes[1], false)
	waitFor(t, "End-of-RIB sweep", func() bool { return sp.Stats().Swept == 1 })
	after := rulesBySource(st)
	if len(after) != 2 {
		t.Fatalf("%d rules after End-of-RIB, want 2", len(after))
	}
	for id, e := range after {
		if !e.StaleAt.IsZero() || !e.Added.Equal(before[id].Added) {
			t.Fatalf("rule %s after the restart: stale at %v, added %v (first %v)", id, e.StaleAt, e.Added, before[id].Added)
		}
	}
	if sp.Stats().Stale != 0 {
		t.Fatalf("stale rules after End-of-RIB: %d", sp.Stats().Stale)
	}
}

// A session lost with a NOTIFICATION (the peer stopped on purpose) is not
// a graceful restart: the hold time applies.
func TestNotificationIsNotGraceful(t *testing.T) {
	clk := &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	st := store.New(nil, clk.now)
	port := freePort(t)
	rr := startGRPeer(t, "127.0.0.2", port, 90)
	sp, stop := startSpeaker(t, Config{ASN: 65010, RouterID: "192.0.2.10", ListenPort: int32(port), ListenAddresses: []string{"127.0.0.1"},
		Neighbors:     []Neighbor{{Address: "127.0.0.2", ASN: 65010, Passive: true}},
		OnSessionDown: "hold", HoldTime: 5 * time.Second, Allowed: testAllowed,
		GracefulRestart: GracefulRestart{Enabled: true, RestartTime: 30 * time.Second}}, st, clk.now)
	defer stop()
	waitFor(t, "session", func() bool { return sp.Stats().Sessions["127.0.0.2"] })
	rr.announce(t, dst32("203.0.113.9"), false)
	waitFor(t, "rule", func() bool { return len(rulesBySource(st)) == 1 })
	rr.stop() // Cease NOTIFICATION
	waitFor(t, "stale", func() bool { return sp.Stats().Stale == 1 })
	for _, e := range rulesBySource(st) {
		if want := clk.now().Add(5 * time.Second); !e.StaleAt.Equal(want) {
			t.Fatalf("stale at %v, want the hold time %v", e.StaleAt, want)
		}
	}
}

// Run leaves no goroutine behind: GoBGP's server loop included.
func TestRunLeavesNoGoroutine(t *testing.T) {
	base := runtime.NumGoroutine()
	st := store.New(nil, time.Now)
	port := freePort(t)
	rr := startGRPeer(t, "127.0.0.2", port, 30)
	sp, stop := startSpeaker(t, Config{ASN: 65010, RouterID: "192.0.2.10", ListenPort: int32(port), ListenAddresses: []string{"127.0.0.1"},
		Neighbors: []Neighbor{{Address: "127.0.0.2", ASN: 65010, Passive: true},
			// An active neighbour nobody answers: its connect loop runs.
			{Address: "127.0.0.9", ASN: 65010, Port: uint32(freePort(t))}},
		OnSessionDown: "hold", HoldTime: time.Minute, Allowed: testAllowed, ConnectRetry: time.Second,
		GracefulRestart: GracefulRestart{Enabled: true, RestartTime: 30 * time.Second, LongLivedStaleTime: time.Minute}}, st, time.Now)
	waitFor(t, "session", func() bool { return sp.Stats().Sessions["127.0.0.2"] })
	rr.announce(t, dst32("203.0.113.5"), false)
	waitFor(t, "rule", func() bool { return len(rulesBySource(st)) == 1 })
	if runtime.NumGoroutine() <= base+5 {
		t.Fatalf("only %d goroutines while running (base %d): the count cannot show a leak", runtime.NumGoroutine(), base)
	}
	stop()
	rr.stop()
	for i := 0; i < 100 && runtime.NumGoroutine() > base; i++ {
		time.Sleep(50 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > base {
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		t.Fatalf("%d goroutines left after shutdown (base %d):\n%s", n, base, buf)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

// The capabilities the agent sends, as the peer decodes them from its OPEN:
// graceful restart (RFC 4724) with the configured restart time for both
// FlowSpec families, and long-lived graceful restart (RFC 9494) with the
// configured stale time. The rules of a restarting peer that advertised
// long-lived graceful restart too are kept for its restart time plus the
// lesser of the two stale times.
func TestCapabilitiesAndLongLivedHold(t *testing.T) {
	clk := &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	st := store.New(nil, clk.now)
	port, pport := freePort(t), freePort(t)
	pr := startProxy(t, "127.0.0.1:"+itoa(pport), "127.0.0.1:"+itoa(port))
	rr := startLLGRPeer(t, "127.0.0.3", pport, 90, 1800)
	defer rr.stop()
	sp, stop := startSpeaker(t, Config{ASN: 65010, RouterID: "192.0.2.10", ListenPort: int32(port), ListenAddresses: []string{"127.0.0.1"},
		Neighbors:     []Neighbor{{Address: "127.0.0.2", ASN: 65010, Passive: true}},
		OnSessionDown: "hold", HoldTime: 5 * time.Second, Allowed: testAllowed,
		GracefulRestart: GracefulRestart{Enabled: true, RestartTime: 45 * time.Second, LongLivedStaleTime: time.Hour}}, st, clk.now)
	defer stop()
	waitFor(t, "session", func() bool { return sp.Stats().Sessions["127.0.0.2"] })
	var caps []bgp.ParameterCapabilityInterface
	err := rr.srv.ListPeer(context.Background(), &api.ListPeerRequest{Address: "127.0.0.1"}, func(p *api.Peer) {
		c, err := apiutil.UnmarshalCapabilities(p.GetState().GetRemoteCap())
		if err != nil {
			t.Error(err)
		}
		caps = c
	})
	if err != nil {
		t.Fatal(err)
	}
	fams := map[bgp.RouteFamily]bool{bgp.RF_FS_IPv4_UC: true, bgp.RF_FS_IPv6_UC: true}
	var gr, llgr bool
	for _, c := range caps {
		switch c := c.(type) {
		case *bgp.CapGracefulRestart:
			got := map[bgp.RouteFamily]bool{}
			for _, tu := range c.Tuples {
				got[bgp.AfiSafiToRouteFamily(tu.AFI, tu.SAFI)] = true
			}
			gr = c.Time == 45 && len(got) == 2 && got[bgp.RF_FS_IPv4_UC] && got[bgp.RF_FS_IPv6_UC]
		case *bgp.CapLongLivedGracefulRestart:
			llgr = len(c.Tuples) == 2
			for _, tu := range c.Tuples {
				llgr = llgr && tu.RestartTime == 3600 && fams[bgp.AfiSafiToRouteFamily(tu.AFI, tu.SAFI)]
			}
		}
	}
	if !gr || !llgr {
		t.Fatalf("capabilities the peer received: %+v (graceful restart as configured %v, long-lived %v)", caps, gr, llgr)
	}
	rr.announce(t, dst32("203.0.113.4"), false)
	waitFor(t, "rule", func() bool { return len(rulesBySource(st)) == 1 })
	pr.cut()
	waitFor(t, "stale", func() bool { return sp.Stats().Stale == 1 })
	for _, e := range rulesBySource(st) {
		// 90 s (the peer's restart time) + 1800 s (the peer's long-lived
		// stale time, less than the agent's hour).
		if want := clk.now().Add(90*time.Second + 1800*time.Second); !e.StaleAt.Equal(want) {
			t.Fatalf("stale at %v, want %v", e.StaleAt, want)
		}
	}
}
