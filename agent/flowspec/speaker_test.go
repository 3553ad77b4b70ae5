package flowspec

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	api "github.com/osrg/gobgp/v3/api"
	"github.com/osrg/gobgp/v3/pkg/apiutil"
	"github.com/osrg/gobgp/v3/pkg/packet/bgp"
	"github.com/osrg/gobgp/v3/pkg/server"

	"github.com/scrubd/scrubd/agent/store"
	"github.com/scrubd/scrubd/swpath/rule"
)

type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func freePort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// waitFor polls cond (bounded: the sessions run on real sockets).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for i := 0; i < 600; i++ {
		if cond() {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("timed out waiting for %s", what)
}

// peer is a second GoBGP speaker on 127.0.0.2 that announces FlowSpec.
// It is stopped when the test ends.
type peer struct {
	srv *server.BgpServer
}

func startPeer(t *testing.T, agentPort int) *peer {
	srv := newTestServer(t).srv
	ctx := context.Background()
	if err := srv.StartBgp(ctx, &api.StartBgpRequest{Global: &api.Global{Asn: 65000, RouterId: "192.0.2.254", ListenPort: -1}}); err != nil {
		t.Fatal(err)
	}
	p := &api.Peer{Conf: &api.PeerConf{NeighborAddress: "127.0.0.1", PeerAsn: 65010},
		Transport: &api.Transport{RemotePort: uint32(agentPort), LocalAddress: "127.0.0.2"},
		Timers:    &api.Timers{Config: &api.TimersConfig{ConnectRetry: 1}}}
	for _, f := range families {
		p.AfiSafis = append(p.AfiSafis, &api.AfiSafi{Config: &api.AfiSafiConfig{Family: f, Enabled: true}})
	}
	if err := srv.AddPeer(ctx, &api.AddPeerRequest{Peer: p}); err != nil {
		t.Fatal(err)
	}
	return &peer{srv: srv}
}

func (p *peer) announce(t *testing.T, nlri bgp.AddrPrefixInterface, withdraw bool, ecs ...bgp.ExtendedCommunityInterface) {
	t.Helper()
	nh := "0.0.0.0"
	if _, ok := nlri.(*bgp.FlowSpecIPv6Unicast); ok {
		nh = "::"
	}
	attrs := []bgp.PathAttributeInterface{bgp.NewPathAttributeOrigin(0), bgp.NewPathAttributeMpReachNLRI(nh, []bgp.AddrPrefixInterface{nlri})}
	if len(ecs) > 0 {
		attrs = append(attrs, bgp.NewPathAttributeExtendedCommunities(ecs))
	}
	path, err := apiutil.NewPath(nlri, withdraw, attrs, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if withdraw {
		if err := p.srv.DeletePath(context.Background(), &api.DeletePathRequest{TableType: api.TableType_GLOBAL, Path: path}); err != nil {
			t.Fatal(err)
		}
		return
	}
	if _, err := p.srv.AddPath(context.Background(), &api.AddPathRequest{TableType: api.TableType_GLOBAL, Path: path}); err != nil {
		t.Fatal(err)
	}
}

func v4(dst string, bits uint8, comps ...bgp.FlowSpecComponentInterface) *bgp.FlowSpecIPv4Unicast {
	return bgp.NewFlowSpecIPv4Unicast(append([]bgp.FlowSpecComponentInterface{bgp.NewFlowSpecDestinationPrefix(bgp.NewIPAddrPrefix(bits, dst))}, comps...))
}

func num(typ bgp.BGPFlowSpecType, op uint8, v uint64) *bgp.FlowSpecComponent {
	return bgp.NewFlowSpecComponent(typ, []*bgp.FlowSpecComponentItem{bgp.NewFlowSpecComponentItem(op|bgp.DEC_NUM_OP_END, v)})
}

func bgpRules(st *store.Store) map[string]store.Entry {
	out := map[string]store.Entry{}
	for _, e := range st.Snapshot().Entries {
		if e.Source == StoreSource {
			out[e.Rule.ID] = e
		}
	}
	return out
}

func TestSpeakerWithPeer(t *testing.T) {
	clk := &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	st := store.New(nil, clk.now)
	port := freePort(t)
	sp := New(Config{ASN: 65010, RouterID: "192.0.2.10", ListenPort: int32(port), ListenAddresses: []string{"127.0.0.1"},
		Neighbors:     []Neighbor{{Address: "127.0.0.2", ASN: 65000, Passive: true}},
		OnSessionDown: "hold", HoldTime: 5 * time.Minute,
		Allowed: []netip.Prefix{netip.MustParsePrefix("203.0.113.0/24"), netip.MustParsePrefix("198.51.100.0/22"), netip.MustParsePrefix("2001:db8::/32")}},
		st, slog.New(slog.NewTextHandler(io.Discard, nil)), clk.now)
	// GoBGP's StartBgp writes package-level options: the peer starts
	// first, so its start happens before the speaker's (no data race
	// between two servers in one process).
	pr := startPeer(t, port)
	stop, _ := runSpeaker(t, sp)
	defer stop()
	waitFor(t, "session up", func() bool { return sp.Stats().Sessions["127.0.0.2"] })

	discard := bgp.NewTrafficRateExtended(0, 0)
	dns := v4("203.0.113.0", 24, num(bgp.FLOW_SPEC_TYPE_IP_PROTO, bgp.DEC_NUM_OP_EQ, 17), num(bgp.FLOW_SPEC_TYPE_SRC_PORT, bgp.DEC_NUM_OP_EQ, 53))
	pr.announce(t, dns, false, discard)
	v6 := bgp.NewFlowSpecIPv6Unicast([]bgp.FlowSpecComponentInterface{
		bgp.NewFlowSpecDestinationPrefix6(bgp.NewIPv6AddrPrefix(32, "2001:db8::"), 0),
		num(bgp.FLOW_SPEC_TYPE_IP_PROTO, bgp.DEC_NUM_OP_EQ, 6),
		num(bgp.FLOW_SPEC_TYPE_DST_PORT, bgp.DEC_NUM_OP_EQ, 80),
	})
	pr.announce(t, v6, false, discard)
	// Unsupported: a redirect and a rate limit. Refused and counted; the
	// session stays up and the other rules stay.
	pr.announce(t, v4("198.51.100.0", 24), false, bgp.NewRedirectTwoOctetAsSpecificExtended(65000, 100))
	pr.announce(t, v4("198.51.101.0", 24), false, bgp.NewTrafficRateExtended(0, 1000))
	waitFor(t, "two rules and two refusals", func() bool {
		return len(bgpRules(st)) == 2 && sp.Stats().Refused[ReasonAction] == 2
	})
	if !sp.Stats().Sessions["127.0.0.2"] {
		t.Fatal("session reset by an unsupported update")
	}
	var dnsID string
	for id, e := range bgpRules(st) {
		m := e.Rule.Match
		if m.Dst.String() == "203.0.113.0/24" {
			dnsID = id
			if len(m.Proto) != 1 || m.Proto[0] != 17 || len(m.SrcPort) != 1 || m.SrcPort[0] != (rule.Range{Lo: 53, Hi: 53}) || e.Rule.Action != rule.Drop {
				t.Fatalf("dns rule %s", m.String())
			}
		} else if m.Dst.String() != "2001:db8::/32" || len(m.DstPort) != 1 {
			t.Fatalf("v6 rule %s", m.String())
		}
	}
	// Withdraw removes.
	pr.announce(t, dns, true)
	waitFor(t, "withdraw", func() bool { _, ok := bgpRules(st)[dnsID]; return !ok && len(bgpRules(st)) == 1 })
	// Session down: rules held for the hold time, then swept.
	if err := pr.srv.StopBgp(context.Background(), &api.StopBgpRequest{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "session down", func() bool { return !sp.Stats().Sessions["127.0.0.2"] })
	waitFor(t, "stale mark", func() bool {
		for _, e := range bgpRules(st) {
			return !e.StaleAt.IsZero()
		}
		return false
	})
	clk.add(4 * time.Minute)
	if g := st.Sweep(); len(g) != 0 {
		t.Fatalf("swept before hold time: %v", g)
	}
	clk.add(time.Minute)
	if g := st.Sweep(); len(g) != 1 {
		t.Fatalf("sweep after hold: %d", len(g))
	}
}
