package bgpguard

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/osrg/gobgp/v3/pkg/packet/bgp"

	"github.com/scrubd/scrubd/agent/flowspec/bgpguard/guardtest"
	"github.com/scrubd/scrubd/agent/metrics"
	"github.com/scrubd/scrubd/internal/syncbuf"
)

// crashUpdate is an UPDATE GoBGP's decoder panics on (see the file).
var crashUpdate = guardtest.CrashUpdate()

func header(t *testing.T, msg []byte) *bgp.BGPHeader {
	t.Helper()
	var h bgp.BGPHeader
	if err := h.DecodeFromBytes(msg); err != nil {
		t.Fatal(err)
	}
	return &h
}

// gobgpPanics reports whether GoBGP's decoder, called directly, panics on
// msg: the reference the guard's verdicts are held to.
func gobgpPanics(msg []byte) (panicked bool) {
	defer func() { panicked = recover() != nil }()
	bgp.ParseBGPMessage(msg)
	return false
}

func keepalive() []byte {
	b, _ := bgp.NewBGPKeepAliveMessage().Serialize()
	return b
}

func flowUpdate(t testing.TB) []byte {
	t.Helper()
	nlri := bgp.NewFlowSpecIPv4Unicast([]bgp.FlowSpecComponentInterface{bgp.NewFlowSpecDestinationPrefix(bgp.NewIPAddrPrefix(24, "203.0.113.0"))})
	attrs := []bgp.PathAttributeInterface{bgp.NewPathAttributeOrigin(0), bgp.NewPathAttributeAsPath(nil),
		bgp.NewPathAttributeMpReachNLRI("0.0.0.0", []bgp.AddrPrefixInterface{nlri}),
		bgp.NewPathAttributeExtendedCommunities([]bgp.ExtendedCommunityInterface{bgp.NewTrafficRateExtended(0, 0)})}
	b, err := bgp.NewBGPUpdateMessage(nil, attrs, nil).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func notification() []byte {
	b, _ := bgp.NewBGPNotificationMessage(bgp.BGP_ERROR_UPDATE_MESSAGE_ERROR, bgp.BGP_ERROR_SUB_OPTIONAL_ATTRIBUTE_ERROR, nil).Serialize()
	return b
}

func TestCheck(t *testing.T) {
	if !gobgpPanics(crashUpdate) {
		t.Fatal("GoBGP's decoder no longer panics on the crash UPDATE: the pinned GoBGP changed, see whether the guard is still needed")
	}
	err := Check(header(t, crashUpdate), crashUpdate[19:])
	var dp *DecodePanic
	if !errors.As(err, &dp) || dp.Type != bgp.BGP_MSG_UPDATE {
		t.Fatalf("Check(crash UPDATE) = %v, want a *DecodePanic of type 2", err)
	}

	good := flowUpdate(t)
	// An UPDATE whose attribute length overruns the message: GoBGP returns
	// an error (and answers it itself), it does not panic.
	bad := append([]byte(nil), good...)
	binary.BigEndian.PutUint16(bad[21:], uint16(len(bad)))
	if _, err := bgp.ParseBGPMessage(bad); err == nil {
		t.Fatal("the overrunning UPDATE decodes: the test input is wrong")
	}
	for name, msg := range map[string][]byte{"flowspec update": good, "keepalive": keepalive(), "decode error": bad, "notification": notification()} {
		if gobgpPanics(msg) {
			t.Fatalf("%s: GoBGP's decoder panics", name)
		}
		if err := Check(header(t, msg), msg[19:]); err != nil {
			t.Errorf("Check(%s) = %v, want nil", name, err)
		}
	}
}

// lab is a guard between a fake GoBGP (a loopback listener) and peers.
type lab struct {
	g      *Guard
	up     net.Listener
	cancel func()
	done   chan struct{}
}

const peerAddr = "127.0.0.2"

var alias = netip.MustParseAddr("127.233.0.1")

func startLab(t *testing.T, ns ...Neighbor) *lab {
	t.Helper()
	return startLabWith(t, nil, ns...)
}

// startLabWith starts a guard whose Config set changes first (nil: none).
func startLabWith(t *testing.T, set func(*Config), ns ...Neighbor) *lab {
	t.Helper()
	up, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if ns == nil {
		ns = []Neighbor{{Addr: netip.MustParseAddr(peerAddr), Passive: true, Alias: alias}}
	}
	cfg := Config{Listen: []string{"127.0.0.1:0"}, Upstream: up.Addr().(*net.TCPAddr).AddrPort(), Neighbors: ns}
	if set != nil {
		set(&cfg)
	}
	g, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	l := &lab{g: g, up: up, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(l.done)
		g.Run(ctx)
	}()
	t.Cleanup(func() {
		l.stop(t)
		up.Close()
	})
	return l
}

func (l *lab) stop(t *testing.T) {
	l.cancel()
	select {
	case <-l.done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
}

// dial connects to the guard from local.
func (l *lab) dial(t *testing.T, local string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}}
	c, err := d.Dial("tcp", l.g.Addrs()[0].String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// accept takes the guard's connection to the fake GoBGP.
func (l *lab) accept(t *testing.T, within time.Duration) (net.Conn, error) {
	t.Helper()
	l.up.(*net.TCPListener).SetDeadline(time.Now().Add(within))
	c, err := l.up.Accept()
	if err == nil {
		t.Cleanup(func() { c.Close() })
	}
	return c, err
}

// join opens a session from the neighbour and takes the guard's connection
// to GoBGP, with a KEEPALIVE read through it.
func (l *lab) join(t *testing.T) (peer, up net.Conn) {
	t.Helper()
	peer = l.dial(t, peerAddr)
	peer.Write(keepalive())
	up, err := l.accept(t, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	readN(t, up, 19)
	return peer, up
}

func readN(t *testing.T, c net.Conn, n int) []byte {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	b := make([]byte, n)
	if _, err := io.ReadFull(c, b); err != nil {
		t.Fatalf("reading %d bytes: %v", n, err)
	}
	return b
}

// peerListener listens as an active neighbour does, on peerAddr, and
// returns the port.
func peerListener(t *testing.T) (net.Listener, uint16) {
	t.Helper()
	pl, err := net.Listen("tcp", peerAddr+":0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pl.Close() })
	return pl, uint16(pl.Addr().(*net.TCPAddr).Port)
}

// readNotification reads the guard's NOTIFICATION (UPDATE Message Error,
// Optional Attribute Error) from c.
func readNotification(t *testing.T, c net.Conn, who string) {
	t.Helper()
	note := notification()
	if got := readN(t, c, len(note)); !bytes.Equal(got, note) {
		t.Fatalf("%s read %x, want the NOTIFICATION %x", who, got, note)
	}
}

func expectEOF(t *testing.T, c net.Conn, who string) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	rest, err := io.ReadAll(c)
	if err != nil || len(rest) != 0 {
		t.Fatalf("%s: after the NOTIFICATION: %d more bytes %x, err %v; want end of stream", who, len(rest), rest, err)
	}
}

// Messages go through unchanged both ways, however the peer splits them,
// GoBGP sees the neighbour's alias, and a message GoBGP's decoder panics on
// never reaches GoBGP: both sides get the NOTIFICATION and the session ends.
func TestRelay(t *testing.T) {
	l := startLab(t)
	peer := l.dial(t, peerAddr)
	// The first bytes make the guard connect upstream.
	ka, upd := keepalive(), flowUpdate(t)
	for _, b := range ka {
		if _, err := peer.Write([]byte{b}); err != nil {
			t.Fatal(err)
		}
	}
	up, err := l.accept(t, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if got := up.RemoteAddr().(*net.TCPAddr).AddrPort().Addr(); got != alias {
		t.Fatalf("GoBGP sees the session from %v, want the alias %v", got, alias)
	}
	if _, err := peer.Write(append(append([]byte(nil), upd...), ka...)); err != nil {
		t.Fatal(err)
	}
	want := append(append(append([]byte(nil), ka...), upd...), ka...)
	if got := readN(t, up, len(want)); !bytes.Equal(got, want) {
		t.Fatalf("GoBGP read %x, want %x", got, want)
	}
	// GoBGP to the peer, two messages in one write.
	if _, err := up.Write(append(append([]byte(nil), ka...), upd...)); err != nil {
		t.Fatal(err)
	}
	if got := readN(t, peer, len(ka)+len(upd)); !bytes.Equal(got, append(append([]byte(nil), ka...), upd...)) {
		t.Fatalf("the peer read %x", got)
	}

	// The crash UPDATE, then a KEEPALIVE the guard must not pass either.
	if _, err := peer.Write(append(append([]byte(nil), crashUpdate...), ka...)); err != nil {
		t.Fatal(err)
	}
	readNotification(t, peer, "the peer")
	readNotification(t, up, "GoBGP (and never the crash UPDATE)")
	expectEOF(t, up, "GoBGP")
	up.Close() // as GoBGP closes after a NOTIFICATION
	expectEOF(t, peer, "peer")
	if m := l.g.Malformed(); m[netip.MustParseAddr(peerAddr)] != 1 || len(m) != 1 {
		t.Fatalf("Malformed() = %v, want %s: 1", m, peerAddr)
	}
}

// GoBGP ending the session (its own NOTIFICATION, then close) ends the
// peer's connection after that NOTIFICATION.
func TestUpstreamClose(t *testing.T) {
	l := startLab(t)
	peer, up := l.join(t)
	cease, _ := bgp.NewBGPNotificationMessage(bgp.BGP_ERROR_CEASE, 0, nil).Serialize()
	up.Write(cease)
	up.Close()
	if got := readN(t, peer, len(cease)); !bytes.Equal(got, cease) {
		t.Fatalf("the peer read %x, want %x", got, cease)
	}
	expectEOF(t, peer, "peer")
}

// Connections from an address that is no neighbour are closed, never reach
// GoBGP, and are counted; however many come, they cost one log line per
// refusalLogEvery.
func TestStrangerClosed(t *testing.T) {
	var logs syncbuf.Buffer
	l := startLabWith(t, func(c *Config) { c.Log = slog.New(slog.NewTextHandler(&logs, nil)) })
	const tries = 30
	for range tries {
		c := l.dial(t, "127.0.0.3")
		c.Write(keepalive())
		// Closed unread: an end of stream or a reset.
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		if n, err := c.Read(make([]byte, 64)); n != 0 || !(err == io.EOF || errors.Is(err, syscall.ECONNRESET)) {
			t.Fatalf("stranger read %d bytes, err %v; want the connection closed", n, err)
		}
		c.Close()
	}
	if up, err := l.accept(t, 300*time.Millisecond); err == nil {
		t.Fatalf("GoBGP got a connection from %v for a stranger", up.RemoteAddr())
	}
	if r := l.g.Refused(); r[RefusedNotNeighbor] != tries || len(r) != 1 {
		t.Fatalf("Refused() = %v, want %s: %d", r, RefusedNotNeighbor, tries)
	}
	if n := strings.Count(logs.String(), "not a configured neighbour"); n != 1 {
		t.Fatalf("%d connections from a stranger logged %d lines, want 1:\n%s", tries, n, logs.String())
	}
}

// GoBGP's connect to an active neighbour (to the address DialAddr gives) is
// carried on to the peer, from the neighbour's local address, and joined;
// when the peer cannot be reached GoBGP's connection is closed; Run's end
// closes a live session.
func TestConnectActive(t *testing.T) {
	pl, port := peerListener(t)
	l := startLab(t, Neighbor{Addr: netip.MustParseAddr(peerAddr), Port: port, Local: netip.MustParseAddr("127.0.0.4"), Alias: alias})
	if _, ok := l.g.DialAddr(netip.MustParseAddr("127.0.0.3")); ok {
		t.Fatal("DialAddr of an address that is no neighbour")
	}
	to, ok := l.g.DialAddr(netip.MustParseAddr(peerAddr))
	if !ok || to.Addr() != alias {
		t.Fatalf("DialAddr = %v %v, want the alias %v", to, ok, alias)
	}
	ka := keepalive()
	for round := 0; round < 2; round++ {
		up, err := net.Dial("tcp", to.String()) // as GoBGP connects
		if err != nil {
			t.Fatal(err)
		}
		pl.(*net.TCPListener).SetDeadline(time.Now().Add(10 * time.Second))
		peer, err := pl.Accept()
		if err != nil {
			t.Fatalf("round %d: the guard did not connect on to the peer: %v", round, err)
		}
		if got := peer.RemoteAddr().(*net.TCPAddr).IP.String(); got != "127.0.0.4" {
			t.Fatalf("the guard connected from %s, want the local address 127.0.0.4", got)
		}
		up.Write(ka) // GoBGP's first message reaches the peer
		if got := readN(t, peer, len(ka)); !bytes.Equal(got, ka) {
			t.Fatalf("the peer read %x", got)
		}
		peer.Write(ka)
		if got := readN(t, up, len(ka)); !bytes.Equal(got, ka) {
			t.Fatalf("GoBGP read %x", got)
		}
		if round == 0 {
			peer.Close()
			expectEOF(t, up, "GoBGP")
			up.Close()
			continue
		}
		l.stop(t)
		expectEOF(t, peer, "peer at shutdown")
	}
}

// GoBGP's connect to a neighbour that is down is closed; after that failure
// the guard connects to the neighbour again only once ConnectRetry (to
// twice that) has passed, closing GoBGP's connects in between.
func TestConnectPeerDown(t *testing.T) {
	pl, err := net.Listen("tcp", peerAddr+":0")
	if err != nil {
		t.Fatal(err)
	}
	addr := pl.Addr().String()
	port := uint16(pl.Addr().(*net.TCPAddr).Port)
	pl.Close() // nothing listens there now
	const retry = 500 * time.Millisecond
	l := startLabWith(t, func(c *Config) { c.ConnectRetry = retry }, Neighbor{Addr: netip.MustParseAddr(peerAddr), Port: port, Alias: alias})
	to, _ := l.g.DialAddr(netip.MustParseAddr(peerAddr))
	gobgp := func() net.Conn { // as GoBGP connects
		t.Helper()
		up, err := net.Dial("tcp", to.String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { up.Close() })
		return up
	}
	closed := func(up net.Conn, what string) {
		t.Helper()
		up.SetReadDeadline(time.Now().Add(10 * time.Second))
		if n, err := up.Read(make([]byte, 64)); n != 0 || !(err == io.EOF || errors.Is(err, syscall.ECONNRESET)) {
			t.Fatalf("%s: GoBGP read %d bytes, err %v; want its connection closed", what, n, err)
		}
	}
	t0 := time.Now()
	closed(gobgp(), "neighbour down")
	// The neighbour is back at once, but the guard waits.
	pl, err = net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer pl.Close()
	closed(gobgp(), "within the retry")
	if time.Since(t0) < retry {
		pl.(*net.TCPListener).SetDeadline(time.Now().Add(50 * time.Millisecond))
		if c, err := pl.Accept(); err == nil {
			t.Fatalf("the guard connected to the neighbour from %v within the retry", c.RemoteAddr())
		}
	}
	time.Sleep(2*retry - time.Since(t0))
	up := gobgp()
	pl.(*net.TCPListener).SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := pl.Accept(); err != nil {
		t.Fatalf("after the retry the guard did not connect: %v", err)
	}
	up.Close()
}

func TestNewRefuses(t *testing.T) {
	up := netip.MustParseAddrPort("127.0.0.1:1790")
	a := netip.MustParseAddr(peerAddr)
	for name, c := range map[string]Config{
		"upstream not loopback": {Upstream: netip.MustParseAddrPort("192.0.2.1:179")},
		"alias not loopback":    {Upstream: up, Neighbors: []Neighbor{{Addr: a, Alias: netip.MustParseAddr("192.0.2.1")}}},
		"alias twice": {Upstream: up, Neighbors: []Neighbor{{Addr: a, Alias: alias},
			{Addr: netip.MustParseAddr("127.0.0.3"), Alias: alias}}},
		"neighbour twice": {Upstream: up, Neighbors: []Neighbor{{Addr: a, Alias: alias},
			{Addr: a, Alias: alias.Next()}}},
	} {
		if _, err := New(c); err == nil {
			t.Errorf("%s: New accepted it", name)
		}
	}
}

// BenchmarkCheck is the guard's added cost per message: one more decode of a
// one-route FlowSpec UPDATE (GoBGP then decodes it again).
func BenchmarkCheck(b *testing.B) {
	msg := flowUpdate(b)
	var h bgp.BGPHeader
	if err := h.DecodeFromBytes(msg); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if err := Check(&h, msg[19:]); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/msg")
}

// A neighbour has at most two connections at a time (RFC 4271 collision
// detection's two); a third is closed without reaching GoBGP, and a new one
// is taken once one of the two ends.
func TestConnectionsPerNeighbour(t *testing.T) {
	l := startLab(t)
	var peers, ups []net.Conn
	for range maxSessions {
		c, up := l.join(t)
		peers, ups = append(peers, c), append(ups, up)
	}
	third := l.dial(t, peerAddr)
	third.SetReadDeadline(time.Now().Add(10 * time.Second))
	if n, err := third.Read(make([]byte, 64)); n != 0 || !(err == io.EOF || errors.Is(err, syscall.ECONNRESET)) {
		t.Fatalf("a third connection read %d bytes, err %v; want it closed", n, err)
	}
	if up, err := l.accept(t, 300*time.Millisecond); err == nil {
		t.Fatalf("GoBGP got a third connection from %v", up.RemoteAddr())
	}
	if r := l.g.Refused(); r[RefusedLimit] != 1 || len(r) != 1 {
		t.Fatalf("Refused() = %v, want %s: 1", r, RefusedLimit)
	}
	peers[0].Close()
	expectEOF(t, ups[0], "GoBGP")
	ups[0].Close()
	var fourth net.Conn
	for i := 0; ; i++ { // the guard frees the slot once the relay has ended
		fourth = l.dial(t, peerAddr)
		fourth.Write(keepalive())
		if up, err := l.accept(t, 200*time.Millisecond); err == nil {
			readN(t, up, 19)
			break
		}
		if i == 50 {
			t.Fatal("no new connection taken after one of the two ended")
		}
	}
}

// malformedSession opens a session from the neighbour, sends the crash
// UPDATE and reads the reset on both sides.
func (l *lab) malformedSession(t *testing.T) {
	t.Helper()
	peer, up := l.join(t)
	peer.Write(crashUpdate)
	readNotification(t, peer, "the peer")
	readNotification(t, up, "GoBGP")
	up.Close()
	expectEOF(t, peer, "peer")
	peer.Close() // else the relay waits for it (drainWait) and holds a slot
	l.relaysEnded(t)
}

// relaysEnded waits until the neighbour's relays have ended, so that the
// next connection is not refused for the connection limit.
func (l *lab) relaysEnded(t *testing.T) {
	t.Helper()
	n := l.g.byAddr[netip.MustParseAddr(peerAddr)]
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		n.mu.Lock()
		live := n.live
		n.mu.Unlock()
		if live == 0 {
			return
		}
		if time.Now().After(end) {
			t.Fatalf("%d relays still up", live)
		}
	}
}

// heldFor returns how much longer the neighbour is held down (zero: not).
func (l *lab) heldFor() time.Duration {
	until, ok := l.g.HeldDown()[netip.MustParseAddr(peerAddr)]
	if !ok {
		return 0
	}
	return time.Until(until)
}

// A neighbour that sends malformed messages again is held down, longer each
// time: its connects get a NOTIFICATION (Cease, Connection Rejected) and
// never reach GoBGP until the hold-down ends. The first only resets the
// session.
func TestMalformedHoldDown(t *testing.T) {
	const hold = 400 * time.Millisecond
	l := startLabWith(t, func(c *Config) { c.HoldDown = hold })
	l.malformedSession(t)
	if d := l.heldFor(); d != 0 {
		t.Fatalf("held down for %v after the first malformed message; want no hold-down", d)
	}
	l.malformedSession(t) // the first resets; a session comes up again
	if d := l.heldFor(); d <= hold/2 || d > hold {
		t.Fatalf("after the second malformed message: held down for %v more, want up to %v", d, hold)
	}
	reject, _ := bgp.NewBGPNotificationMessage(bgp.BGP_ERROR_CEASE, bgp.BGP_ERROR_SUB_CONNECTION_REJECTED, nil).Serialize()
	peer := l.dial(t, peerAddr)
	peer.Write(keepalive())
	if got := readN(t, peer, len(reject)); !bytes.Equal(got, reject) {
		t.Fatalf("a held-down neighbour read %x, want Cease, Connection Rejected %x", got, reject)
	}
	expectEOF(t, peer, "held-down peer")
	peer.Close()
	l.relaysEnded(t)
	// The answers count against the connection limit: with two of them
	// still draining, a third connection is closed unanswered.
	var draining []net.Conn
	for range maxSessions {
		c := l.dial(t, peerAddr)
		readN(t, c, len(reject))
		draining = append(draining, c)
	}
	third := l.dial(t, peerAddr)
	third.SetReadDeadline(time.Now().Add(10 * time.Second))
	if b, err := io.ReadAll(third); len(b) != 0 || !(err == nil || errors.Is(err, syscall.ECONNRESET)) {
		t.Fatalf("a third connection while two answers drain read %x, err %v; want it closed unanswered", b, err)
	}
	for _, c := range draining {
		c.Close()
	}
	l.relaysEnded(t)
	if up, err := l.accept(t, 100*time.Millisecond); err == nil {
		t.Fatalf("GoBGP got a connection from %v while the neighbour was held down", up.RemoteAddr())
	}
	time.Sleep(l.heldFor() + 50*time.Millisecond)
	if d := l.heldFor(); d != 0 {
		t.Fatalf("still held down for %v", d)
	}
	l.malformedSession(t) // back after the hold-down; a third earns twice as long
	if d := l.heldFor(); d <= hold*3/2 || d > 2*hold {
		t.Fatalf("after the third malformed message: held down for %v more, want up to %v", d, 2*hold)
	}
	if m := l.g.Malformed()[netip.MustParseAddr(peerAddr)]; m != 3 {
		t.Fatalf("Malformed() counts %d, want 3", m)
	}
	if r := l.g.Refused(); r[RefusedHeldDown] != 4 || len(r) != 1 {
		t.Fatalf("Refused() = %v, want %s: 4", r, RefusedHeldDown)
	}
}

// While an active neighbour is held down, GoBGP's connects to it are closed
// and the guard does not connect to it; after, it does. With hold-downs off
// (HoldDown below zero) nothing is held down.
func TestMalformedHoldDownActive(t *testing.T) {
	pl, port := peerListener(t)
	for _, off := range []bool{false, true} {
		hold := 400 * time.Millisecond
		if off {
			hold = -1
		}
		l := startLabWith(t, func(c *Config) { c.HoldDown = hold }, Neighbor{Addr: netip.MustParseAddr(peerAddr), Port: port, Alias: alias})
		to, _ := l.g.DialAddr(netip.MustParseAddr(peerAddr))
		// session connects as GoBGP does and returns the guard's connection
		// to the peer, or nil when the guard closed GoBGP's connect.
		session := func() (up, peer net.Conn) {
			t.Helper()
			up, err := net.Dial("tcp", to.String())
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { up.Close() })
			pl.(*net.TCPListener).SetDeadline(time.Now().Add(time.Second))
			peer, err = pl.Accept()
			if err != nil {
				return up, nil
			}
			t.Cleanup(func() { peer.Close() })
			return up, peer
		}
		for i := range 2 {
			up, peer := session()
			if peer == nil {
				t.Fatalf("off %v: session %d: the guard did not connect to the neighbour", off, i)
			}
			peer.Write(crashUpdate)
			readNotification(t, up, "GoBGP")
			readNotification(t, peer, "the peer")
			up.Close()
			expectEOF(t, peer, "peer")
			peer.Close()
			l.relaysEnded(t)
		}
		up, peer := session()
		if off {
			if peer == nil || l.heldFor() != 0 {
				t.Fatalf("hold-downs off: held down for %v, and the guard connected: %v", l.heldFor(), peer != nil)
			}
			l.stop(t)
			continue
		}
		if peer != nil {
			t.Fatal("the guard connected to a held-down neighbour")
		}
		expectEOF(t, up, "GoBGP's connect while the neighbour is held down")
		time.Sleep(l.heldFor() + 50*time.Millisecond)
		if _, peer := session(); peer == nil {
			t.Fatal("after the hold-down the guard did not connect to the neighbour")
		}
		l.stop(t)
	}
}

// The metrics package serves one series per refusal reason, named as here.
func TestRefusalReasonsServed(t *testing.T) {
	want := []string{RefusedNotNeighbor, RefusedLimit, RefusedHeldDown}
	if !slices.Equal(metrics.FlowSpecConnRefusals, want) {
		t.Fatalf("metrics.FlowSpecConnRefusals = %v, want %v", metrics.FlowSpecConnRefusals, want)
	}
}

// flowRoutes is an UPDATE that announces (or, withdraw, withdraws) one
// FlowSpec route per destination prefix, IPv4 or IPv6.
func flowRoutes(t *testing.T, withdraw bool, dsts ...string) []byte {
	t.Helper()
	var v4, v6 []bgp.AddrPrefixInterface
	for _, d := range dsts {
		p := netip.MustParsePrefix(d)
		if p.Addr().Is4() {
			v4 = append(v4, bgp.NewFlowSpecIPv4Unicast([]bgp.FlowSpecComponentInterface{bgp.NewFlowSpecDestinationPrefix(bgp.NewIPAddrPrefix(uint8(p.Bits()), p.Addr().String()))}))
		} else {
			v6 = append(v6, bgp.NewFlowSpecIPv6Unicast([]bgp.FlowSpecComponentInterface{bgp.NewFlowSpecDestinationPrefix6(bgp.NewIPv6AddrPrefix(uint8(p.Bits()), p.Addr().String()), 0)}))
		}
	}
	attrs := []bgp.PathAttributeInterface{bgp.NewPathAttributeOrigin(0), bgp.NewPathAttributeAsPath(nil)}
	for _, l := range [][]bgp.AddrPrefixInterface{v4, v6} {
		switch {
		case len(l) == 0:
		case withdraw:
			attrs = append(attrs, bgp.NewPathAttributeMpUnreachNLRI(l))
		case l[0].AFI() == bgp.AFI_IP:
			attrs = append(attrs, bgp.NewPathAttributeMpReachNLRI("0.0.0.0", l))
		default:
			attrs = append(attrs, bgp.NewPathAttributeMpReachNLRI("::", l))
		}
	}
	b, err := bgp.NewBGPUpdateMessage(nil, attrs, nil).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// The guard counts a session's routes per family, announced less
// withdrawn: the UPDATE that takes a family past MaxRoutes never reaches
// GoBGP, both sides read a Cease (Maximum Number of Prefixes Reached), and
// the neighbour is held down from the first.
func TestRouteLimitHoldDown(t *testing.T) {
	const hold = 400 * time.Millisecond
	l := startLabWith(t, func(c *Config) { c.HoldDown, c.MaxRoutes = hold, 2 })
	peer, up := l.join(t)
	for _, u := range [][]byte{
		flowRoutes(t, false, "203.0.113.0/26", "203.0.113.64/26"), // v4: 2
		flowRoutes(t, false, "2001:db8::/48"),                     // v6: 1, its own count
		flowRoutes(t, true, "203.0.113.0/26"),                     // v4: 1
		flowRoutes(t, false, "203.0.113.128/26"),                  // v4: 2
		flowRoutes(t, false, "203.0.113.64/26"),                   // again: still 2
	} {
		peer.Write(u)
		if got := readN(t, up, len(u)); !bytes.Equal(got, u) {
			t.Fatalf("GoBGP read %x, want %x", got, u)
		}
	}
	peer.Write(flowRoutes(t, false, "203.0.113.192/26")) // v4: 3
	cease, _ := bgp.NewBGPNotificationMessage(bgp.BGP_ERROR_CEASE, bgp.BGP_ERROR_SUB_MAXIMUM_NUMBER_OF_PREFIXES_REACHED, nil).Serialize()
	if got := readN(t, peer, len(cease)); !bytes.Equal(got, cease) {
		t.Fatalf("the peer read %x, want the Cease %x", got, cease)
	}
	if got := readN(t, up, len(cease)); !bytes.Equal(got, cease) {
		t.Fatalf("GoBGP read %x, want the Cease %x (and never the third route)", got, cease)
	}
	up.Close()
	expectEOF(t, peer, "peer")
	peer.Close()
	l.relaysEnded(t)
	if n := l.g.RouteLimited()[netip.MustParseAddr(peerAddr)]; n != 1 {
		t.Fatalf("RouteLimited() counts %d, want 1", n)
	}
	if d := l.heldFor(); d <= hold/2 || d > hold {
		t.Fatalf("after the reset: held down for %v more, want up to %v", d, hold)
	}
	// A new session counts from zero.
	time.Sleep(l.heldFor() + 50*time.Millisecond)
	peer, up = l.join(t)
	u := flowRoutes(t, false, "203.0.113.0/26", "203.0.113.64/26")
	peer.Write(u)
	if got := readN(t, up, len(u)); !bytes.Equal(got, u) {
		t.Fatalf("on a new session GoBGP read %x, want %x", got, u)
	}
}
