package flowspec

import (
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/osrg/gobgp/v3/pkg/packet/bgp"

	"github.com/scrubd/scrubd/agent/flowspec/bgpguard/guardtest"
	"github.com/scrubd/scrubd/agent/store"
)

// rawPeer is a BGP peer written byte by byte (GoBGP would not send a
// malformed UPDATE), iBGP in AS 65010, IPv4 FlowSpec only.
type rawPeer struct {
	t *testing.T
	c net.Conn
}

func (p *rawPeer) send(msg []byte) {
	p.t.Helper()
	if _, err := p.c.Write(msg); err != nil {
		p.t.Fatal(err)
	}
}

func (p *rawPeer) sendMsg(m *bgp.BGPMessage) {
	p.t.Helper()
	b, err := m.Serialize()
	if err != nil {
		p.t.Fatal(err)
	}
	p.send(b)
}

// next reads the next message other than a KEEPALIVE when skipKA; nil at
// the end of the stream.
func (p *rawPeer) next(skipKA bool) *bgp.BGPMessage {
	p.t.Helper()
	for {
		p.c.SetReadDeadline(time.Now().Add(20 * time.Second))
		hdr := make([]byte, bgp.BGP_HEADER_LENGTH)
		if _, err := io.ReadFull(p.c, hdr); err == io.EOF {
			return nil
		} else if err != nil {
			p.t.Fatal(err)
		}
		msg := make([]byte, int(hdr[16])<<8|int(hdr[17]))
		copy(msg, hdr)
		if _, err := io.ReadFull(p.c, msg[bgp.BGP_HEADER_LENGTH:]); err != nil {
			p.t.Fatal(err)
		}
		m, err := bgp.ParseBGPMessage(msg)
		if err != nil {
			p.t.Fatal(err)
		}
		if !skipKA || m.Header.Type != bgp.BGP_MSG_KEEPALIVE {
			return m
		}
	}
}

// expectReset reads a NOTIFICATION of code and subcode, then the end of the
// session.
func (p *rawPeer) expectReset(code, subcode uint8, after string) {
	p.t.Helper()
	m := p.next(true)
	if m == nil || m.Header.Type != bgp.BGP_MSG_NOTIFICATION {
		p.t.Fatalf("%s the peer read %v, want a NOTIFICATION", after, m)
	}
	if n := m.Body.(*bgp.BGPNotification); n.ErrorCode != code || n.ErrorSubcode != subcode {
		p.t.Fatalf("%s: NOTIFICATION %d/%d, want %d/%d", after, n.ErrorCode, n.ErrorSubcode, code, subcode)
	}
	if m := p.next(false); m != nil {
		p.t.Fatalf("after the NOTIFICATION the peer read %v, want the end of the session", m)
	}
}

// dialRaw opens a session from local with the speaker on port and waits
// until the speaker has it established.
func dialRaw(t *testing.T, sp *Speaker, local string, port int) *rawPeer {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}}
	var c net.Conn
	waitFor(t, "the speaker's listener", func() bool {
		var err error
		c, err = d.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		return err == nil
	})
	t.Cleanup(func() { c.Close() })
	p := &rawPeer{t: t, c: c}
	caps := []bgp.ParameterCapabilityInterface{bgp.NewCapMultiProtocol(bgp.RF_FS_IPv4_UC), bgp.NewCapFourOctetASNumber(65010)}
	p.sendMsg(bgp.NewBGPOpenMessage(65010, 90, "192.0.2."+local[strings.LastIndexByte(local, '.')+1:], []bgp.OptionParameterInterface{bgp.NewOptionParameterCapability(caps)}))
	if m := p.next(true); m == nil || m.Header.Type != bgp.BGP_MSG_OPEN {
		t.Fatalf("the speaker answered the OPEN with %v", m)
	}
	p.sendMsg(bgp.NewBGPKeepAliveMessage())
	waitFor(t, "the session", func() bool { return sp.Stats().Sessions[local] })
	return p
}

func dropUpdate(dst string) *bgp.BGPMessage { return dropUpdateLen(dst, 24) }

// dropUpdateLen is an UPDATE with one traffic-rate 0 route to dst/bits.
func dropUpdateLen(dst string, bits uint8) *bgp.BGPMessage {
	return bgp.NewBGPUpdateMessage(nil, []bgp.PathAttributeInterface{bgp.NewPathAttributeOrigin(0), bgp.NewPathAttributeAsPath(nil),
		bgp.NewPathAttributeMpReachNLRI("0.0.0.0", []bgp.AddrPrefixInterface{v4(dst, bits)}),
		bgp.NewPathAttributeExtendedCommunities([]bgp.ExtendedCommunityInterface{bgp.NewTrafficRateExtended(0, 0)})}, nil)
}

// An UPDATE that GoBGP's own decoder panics on (in GoBGP's session
// goroutine, which has no recover: without the guard the process ends)
// resets that session with a NOTIFICATION, is counted, and leaves the agent
// serving: the rule the peer announced before is held as the session-down
// policy says, and another neighbour's session works. (GoBGP itself refuses
// the reset peer's connections for its idle hold time after a reset, 30 s by
// default, as it would without the guard.)
func TestMalformedUpdateResetsSession(t *testing.T) {
	clk := &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	st := store.New(nil, clk.now)
	port := freePort(t)
	sp, stop := startSpeaker(t, Config{ASN: 65010, RouterID: "192.0.2.10", ListenPort: int32(port), ListenAddresses: []string{"127.0.0.1"},
		Neighbors:     []Neighbor{{Address: "127.0.0.2", ASN: 65010, Passive: true}, {Address: "127.0.0.3", ASN: 65010, Passive: true}},
		OnSessionDown: "hold", HoldTime: time.Minute, Allowed: testAllowed}, st, clk.now)
	defer stop()

	p := dialRaw(t, sp, "127.0.0.2", port)
	p.sendMsg(dropUpdate("203.0.113.0"))
	waitFor(t, "the rule", func() bool { return len(bgpRules(st)) == 1 })

	p.send(guardtest.CrashUpdate())
	p.expectReset(bgp.BGP_ERROR_UPDATE_MESSAGE_ERROR, bgp.BGP_ERROR_SUB_OPTIONAL_ATTRIBUTE_ERROR, "after the malformed UPDATE")
	waitFor(t, "the session down", func() bool { return !sp.Stats().Sessions["127.0.0.2"] })
	s := sp.Stats()
	if s.Malformed["127.0.0.2"] != 1 || len(s.Malformed) != 1 {
		t.Fatalf("Stats().Malformed = %v, want 127.0.0.2: 1", s.Malformed)
	}
	rules := bgpRules(st)
	if len(rules) != 1 || s.Stale != 1 {
		t.Fatalf("after the reset: %d rules, %d stale; want the one rule, held as stale", len(rules), s.Stale)
	}

	// The agent still serves: the other neighbour's session comes up and
	// its route becomes a rule beside the held one.
	q := dialRaw(t, sp, "127.0.0.3", port)
	q.sendMsg(dropUpdate("198.51.100.0"))
	waitFor(t, "the second rule", func() bool { return len(bgpRules(st)) == 2 })
	if s := sp.Stats(); s.Accepted != 2 || s.Stale != 1 || s.Malformed["127.0.0.2"] != 1 || s.Malformed["127.0.0.3"] != 0 {
		t.Fatalf("accepted %d, stale %d, malformed %v; want 2, 1 and 127.0.0.2: 1", s.Accepted, s.Stale, s.Malformed)
	}
}

// A loopback port picked for GoBGP but taken before GoBGP listens on it
// (the pick listens and closes) is picked again, and the speaker serves.
func TestStartPicksPortAgain(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	st := store.New(nil, time.Now)
	port := freePort(t)
	sp := New(Config{ASN: 65010, RouterID: "192.0.2.10", ListenPort: int32(port), ListenAddresses: []string{"127.0.0.1"},
		Neighbors: []Neighbor{{Address: "127.0.0.2", ASN: 65010, Passive: true}}, Allowed: testAllowed},
		st, slog.New(slog.NewTextHandler(io.Discard, nil)), time.Now)
	var mu sync.Mutex
	var picks []uint16
	sp.pickPort = func() (uint16, error) {
		mu.Lock()
		defer mu.Unlock()
		p := uint16(taken.Addr().(*net.TCPAddr).Port)
		if len(picks) > 0 {
			var err error
			if p, err = pickLoopbackPort(); err != nil {
				return 0, err
			}
		}
		picks = append(picks, p)
		return p, nil
	}
	stop, ended := runSpeaker(t, sp)
	defer stop()
	select {
	case <-ended:
		t.Fatal("Run ended") // stop reports its error
	case <-time.After(500 * time.Millisecond):
	}
	p := dialRaw(t, sp, "127.0.0.2", port)
	p.sendMsg(dropUpdate("203.0.113.0"))
	waitFor(t, "the rule", func() bool { return len(bgpRules(st)) == 1 })
	mu.Lock()
	defer mu.Unlock()
	if len(picks) != 2 {
		t.Fatalf("picked ports %v, want the taken one, then another", picks)
	}
}

// A neighbour that announces more routes than MaxRoutes in a family has its
// session reset by GoBGP (Cease, Maximum Number of Prefixes Reached), is
// counted and held down; the rules of its first routes are held as the
// session-down policy says.
func TestRouteLimit(t *testing.T) {
	st := store.New(nil, time.Now)
	port := freePort(t)
	sp, stop := startSpeaker(t, Config{ASN: 65010, RouterID: "192.0.2.10", ListenPort: int32(port), ListenAddresses: []string{"127.0.0.1"},
		Neighbors: []Neighbor{{Address: "127.0.0.2", ASN: 65010, Passive: true}}, MaxRoutes: 3,
		OnSessionDown: "hold", HoldTime: time.Minute, Allowed: testAllowed}, st, time.Now)
	defer stop()
	p := dialRaw(t, sp, "127.0.0.2", port)
	for i := range 3 {
		p.sendMsg(dropUpdateLen(fmt.Sprintf("203.0.113.%d", i+1), 32))
	}
	waitFor(t, "three rules", func() bool { return len(bgpRules(st)) == 3 })
	p.sendMsg(dropUpdateLen("203.0.113.4", 32))
	p.expectReset(bgp.BGP_ERROR_CEASE, bgp.BGP_ERROR_SUB_MAXIMUM_NUMBER_OF_PREFIXES_REACHED, "after the fourth route")
	waitFor(t, "the session down", func() bool { return !sp.Stats().Sessions["127.0.0.2"] })
	s := sp.Stats()
	if s.RouteLimited["127.0.0.2"] != 1 || s.HeldDown["127.0.0.2"].IsZero() {
		t.Fatalf("route-limit resets %v, held down %v; want 127.0.0.2 counted once and held down", s.RouteLimited, s.HeldDown)
	}
	if n := len(bgpRules(st)); n != 3 || s.Stale != 3 {
		t.Fatalf("after the reset: %d rules, %d stale; want the first three, held as stale", n, s.Stale)
	}
}
