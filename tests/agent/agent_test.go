// Package agent_test runs the whole agent in-process: rule files, the API,
// a FlowSpec peer on loopback, the simulated NIC as its dataplane, device
// loss, and a restart that reconciles instead of flushing.
package agent_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	api "github.com/osrg/gobgp/v3/api"
	"github.com/osrg/gobgp/v3/pkg/apiutil"
	"github.com/osrg/gobgp/v3/pkg/packet/bgp"
	"github.com/osrg/gobgp/v3/pkg/server"

	agentapi "github.com/scrubd/scrubd/agent/api"
	"github.com/scrubd/scrubd/agent/backend"
	"github.com/scrubd/scrubd/agent/config"
	"github.com/scrubd/scrubd/agent/daemon"
	"github.com/scrubd/scrubd/agent/placement"
	"github.com/scrubd/scrubd/agent/sim"
)

func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	for i := 0; i < 600; i++ { // bounded: at most 30 s
		if cond() {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("timed out waiting for %s", what)
}

func freePort(t testing.TB) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// testConfig is the defaults with a state directory of the test's own, the
// API on a socket there, metrics on a free port, one rule file there holding
// rules, quick polling and placement rounds, the simulated NIC's backend and
// engine unless set picks an engine, then set's changes; it must validate.
func testConfig(t testing.TB, rules string, set func(*config.Config)) config.Config {
	t.Helper()
	dir := t.TempDir()
	file := filepath.Join(dir, "rules.yaml")
	if err := os.WriteFile(file, []byte(rules), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := config.Defaults()
	cfg.StateDir = dir
	cfg.API.Socket = filepath.Join(dir, "api.sock")
	cfg.Metrics.Listen = "127.0.0.1:0"
	cfg.Rules.Files = []string{file}
	cfg.Rules.Poll = 50 * time.Millisecond
	cfg.Place.Interval = 50 * time.Millisecond
	// The tests run on the simulated NIC: backend sim with the dv engine
	// over the NIC emulator, unless the test picks an engine.
	cfg.Software.Engine = ""
	set(&cfg)
	if cfg.Software.Engine == "" {
		cfg.Offload.Backend, cfg.Software.Engine = "sim", "dv"
	}
	if err := cfg.Validate("test", true); err != nil {
		t.Fatal(err)
	}
	return cfg
}

type agent struct {
	d      *daemon.Daemon
	cancel context.CancelFunc
	done   chan error
	reload chan struct{}
}

func start(t testing.TB, cfg *config.Config, n *sim.NIC) *agent {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	a := &agent{cancel: cancel, done: make(chan error, 1), reload: make(chan struct{}, 1)}
	ready := make(chan *daemon.Daemon, 1)
	go func() {
		a.done <- daemon.Run(ctx, cfg, daemon.Options{
			Log:    slog.New(slog.NewTextHandler(io.Discard, nil)),
			Paths:  backend.Sim(n),
			Reload: a.reload,
			Ready:  func(d *daemon.Daemon) { ready <- d },
		})
	}()
	select {
	case a.d = <-ready:
	case err := <-a.done:
		t.Fatalf("daemon: %v", err)
	}
	return a
}

// startOnSim starts an agent with cfg on a new simulated NIC with
// hwEntries hardware entries. Both stop when the test ends, the agent
// first.
func startOnSim(t testing.TB, cfg *config.Config, hwEntries int) (*agent, *sim.NIC) {
	t.Helper()
	n, err := sim.New(sim.Options{HWEntries: hwEntries})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.Close() })
	a := start(t, cfg, n)
	t.Cleanup(func() { a.stop(t) })
	return a, n
}

func (a *agent) stop(t testing.TB) {
	a.cancel()
	if err := <-a.done; err != nil {
		t.Fatal(err)
	}
}

func (a *agent) path(id string) (placement.Path, string) {
	v := a.d.Placer.View()
	for _, r := range v.Rules.All() {
		if r.ID == id {
			return r.Path, r.Reason
		}
	}
	return "", ""
}

type peer struct{ srv *server.BgpServer }

func startPeer(t testing.TB, agentPort int) *peer {
	srv := server.NewBgpServer()
	go srv.Serve()
	ctx := context.Background()
	if err := srv.StartBgp(ctx, &api.StartBgpRequest{Global: &api.Global{Asn: 65000, RouterId: "192.0.2.254", ListenPort: -1}}); err != nil {
		t.Fatal(err)
	}
	p := &api.Peer{Conf: &api.PeerConf{NeighborAddress: "127.0.0.1", PeerAsn: 65010},
		Transport: &api.Transport{RemotePort: uint32(agentPort), LocalAddress: "127.0.0.2"},
		Timers:    &api.Timers{Config: &api.TimersConfig{ConnectRetry: 1}}}
	for _, afi := range []api.Family_Afi{api.Family_AFI_IP, api.Family_AFI_IP6} {
		p.AfiSafis = append(p.AfiSafis, &api.AfiSafi{Config: &api.AfiSafiConfig{Family: &api.Family{Afi: afi, Safi: api.Family_SAFI_FLOW_SPEC_UNICAST}, Enabled: true}})
	}
	if err := srv.AddPeer(ctx, &api.AddPeerRequest{Peer: p}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.StopBgp(context.Background(), &api.StopBgpRequest{}) })
	return &peer{srv: srv}
}

func (p *peer) route(t testing.TB, nlri bgp.AddrPrefixInterface, withdraw bool) {
	t.Helper()
	attrs := []bgp.PathAttributeInterface{bgp.NewPathAttributeOrigin(0),
		bgp.NewPathAttributeMpReachNLRI("0.0.0.0", []bgp.AddrPrefixInterface{nlri}),
		bgp.NewPathAttributeExtendedCommunities([]bgp.ExtendedCommunityInterface{bgp.NewTrafficRateExtended(0, 0)})}
	path, err := apiutil.NewPath(nlri, withdraw, attrs, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if withdraw {
		err = p.srv.DeletePath(context.Background(), &api.DeletePathRequest{TableType: api.TableType_GLOBAL, Path: path})
	} else {
		_, err = p.srv.AddPath(context.Background(), &api.AddPathRequest{TableType: api.TableType_GLOBAL, Path: path})
	}
	if err != nil {
		t.Fatal(err)
	}
}

func TestAgentEndToEnd(t *testing.T) {
	bgpPort := freePort(t)
	const goodRules = "rules:\n  - {id: file-a, action: drop, match: {dst: 203.0.113.0/24, proto: udp, src_port: \"53\"}}\n  - {id: file-len, action: drop, match: {dst: 198.51.100.0/24, length: \"0-100\"}}\n"
	cfg := testConfig(t, goodRules, func(c *config.Config) {
		c.Place.MinDwell = 0
		c.Software.CyclesPerPacket = 297
		c.Protect = []config.Protect{{Prefix: "192.0.2.1/32", Note: "mgmt"}}
		c.FlowSpec = config.FlowSpec{Enabled: true, ASN: 65010, RouterID: "192.0.2.10", ListenPort: int32(bgpPort), ListenAddress: "127.0.0.1",
			Neighbors: []config.Neighbor{{Address: "127.0.0.2", ASN: 65000, Passive: true}}, OnSessionDown: "hold", HoldTime: time.Hour, Priority: 500,
			AllowedDestinations: []string{"203.0.113.0/24"}}
		d := config.Defaults().FlowSpec // what the literal leaves out keeps its default
		c.FlowSpec.ConnectRetry, c.FlowSpec.GracefulRestart, c.FlowSpec.MaxRoutes = d.ConnectRetry, d.GracefulRestart, d.MaxRoutes
	})
	rules := cfg.Rules.Files[0]
	n, err := sim.New(sim.Options{HWEntries: 50})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	// GoBGP's StartBgp writes package-level options: the peer starts before
	// the agent's speaker so the two starts are ordered (no data race); it
	// keeps trying to connect until the agent listens.
	pr := startPeer(t, bgpPort)
	a := start(t, &cfg, n)

	// Rule files: one rule to hardware, the length rule to software.
	waitFor(t, "file rules placed", func() bool {
		p1, _ := a.path("file-a")
		p2, _ := a.path("file-len")
		return p1 == placement.HW && p2 == placement.SW
	})
	// API.
	c := agentapi.NewUnixClient(cfg.API.Socket)
	ctx := context.Background()
	if _, err := c.Add(ctx, []byte(`{id: api-gre, action: drop, match: {dst: 203.0.113.60/32, proto: gre}}`)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "API rule in hardware", func() bool { p, _ := a.path("api-gre"); return p == placement.HW })
	if _, err := c.Add(ctx, []byte(`{id: kill-mgmt, action: drop, match: {dst: 192.0.2.1/32}}`)); err == nil {
		t.Fatal("rule dropping only protected traffic accepted")
	}
	list, err := c.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var sawHW bool
	for _, r := range list {
		if r.Rule.ID == "api-gre" && r.Path == "hw" && strings.Contains(r.Placement, "offload first") {
			sawHW = true
		}
	}
	if !sawHW {
		t.Fatalf("API list lacks placement: %+v", list)
	}

	// FlowSpec: a route appears as a hardware rule, withdraw removes it.
	waitFor(t, "BGP session", func() bool { return a.d.Speaker.Stats().Sessions["127.0.0.2"] })
	nlri := bgp.NewFlowSpecIPv4Unicast([]bgp.FlowSpecComponentInterface{
		bgp.NewFlowSpecDestinationPrefix(bgp.NewIPAddrPrefix(32, "203.0.113.99")),
		bgp.NewFlowSpecComponent(bgp.FLOW_SPEC_TYPE_IP_PROTO, []*bgp.FlowSpecComponentItem{bgp.NewFlowSpecComponentItem(bgp.DEC_NUM_OP_EQ|bgp.DEC_NUM_OP_END, 17)}),
	})
	pr.route(t, nlri, false)
	var fsID string
	waitFor(t, "FlowSpec rule in hardware", func() bool {
		for _, r := range a.d.Placer.View().Rules.All() {
			if strings.HasPrefix(r.ID, "fs-") && r.Path == placement.HW {
				fsID = r.ID
				return true
			}
		}
		return false
	})
	// The device goes away: every rule is enforced in software.
	n.Device().SetGone(true)
	waitFor(t, "evacuation to software", func() bool {
		for _, id := range []string{"file-a", "api-gre", fsID} {
			if p, _ := a.path(id); p != placement.SW {
				return false
			}
		}
		return true
	})
	n.Device().SetGone(false)
	n.Device().Flush() // it came back empty
	waitFor(t, "back in hardware", func() bool { p, _ := a.path(fsID); return p == placement.HW })
	pr.route(t, nlri, true)
	waitFor(t, "withdrawn", func() bool { p, _ := a.path(fsID); return p == "" })

	// A bad rule file is refused whole; the rules in force stay.
	if err := os.WriteFile(rules, []byte("rules:\n  - {id: file-a, action: explode}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	a.reload <- struct{}{}
	waitFor(t, "refusal recorded", func() bool { return a.d.Files.Status()[0].Err != "" })
	if p, _ := a.path("file-a"); p != placement.HW {
		t.Fatalf("file-a gone after a bad reload: %q", p)
	}

	// Metrics serve.
	resp, err := (&httpGetter{}).get("http://" + a.d.HTTPAddr + "/metrics")
	if err != nil || !strings.Contains(resp, `scrubd_rule_placement{path="hw",rule="file-a"} 1`) {
		t.Fatalf("metrics: %v\n%s", err, resp)
	}
	// The API's and FlowSpec's rules were saved, without a failure.
	if !strings.Contains(resp, "\nscrubd_state_save_failures_total 0\n") || strings.Contains(resp, `scrubd_state_writes_total{kind="whole"} 0`) ||
		!strings.Contains(resp, `scrubd_state_writes_total{kind="whole"} `) {
		t.Fatalf("state metrics: want saves and no failure:\n%s", resp)
	}

	// Restart: hardware keeps its entries; the next start adopts them.
	// (A start validates the rule files as config check does, so the
	// file is good again first.)
	if err := os.WriteFile(rules, []byte(goodRules), 0o644); err != nil {
		t.Fatal(err)
	}
	a.stop(t)
	dump, err := n.Device().Dump(ctx)
	if err != nil || len(dump) == 0 {
		t.Fatalf("hardware flushed on shutdown: %d entries, %v", len(dump), err)
	}
	before := len(dump)
	b := start(t, &cfg, n)
	defer b.stop(t)
	defer func() {
		if t.Failed() {
			for _, r := range b.d.Placer.View().Rules.All() {
				t.Logf("%s %s %s", r.ID, r.Path, r.Reason)
			}
		}
	}()
	waitFor(t, "rules adopted after restart", func() bool {
		p1, why1 := b.path("file-a")
		p2, why2 := b.path("api-gre")
		return p1 == placement.HW && p2 == placement.HW && strings.Contains(why1, "adopted") && strings.Contains(why2, "adopted")
	})
	dump, _ = n.Device().Dump(ctx)
	if len(dump) != before {
		t.Fatalf("hardware entries %d after restart, %d before", len(dump), before)
	}
	fmt.Fprintln(io.Discard, before)
}
