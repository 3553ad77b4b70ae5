package agent_test

import (
	"context"
	"errors"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/osrg/gobgp/v3/pkg/packet/bgp"

	agentapi "github.com/scrubd/scrubd/agent/api"
	"github.com/scrubd/scrubd/agent/config"
)

func apiCode(err error) int {
	var ae *agentapi.APIError
	if errors.As(err, &ae) {
		return ae.Code
	}
	return 0
}

// A rule means what it says, through the daemon: the rule guard refuses
// drop rules that cover too much from the API and the rule file (FlowSpec:
// TestAgentFlowSpecRoutesGuarded), a rule without action or match is
// refused, and
// a rule file emptied at run time (0 bytes, or cut after "rules:") is
// refused and counted while its rules stay in force.
func TestAgentRefusesRulesThatWiden(t *testing.T) {
	cfg := testConfig(t, "rules:\n  - {id: file-a, action: drop, match: {dst: 203.0.113.0/24, proto: udp, src_port: \"53\"}}\n", func(c *config.Config) {
		c.Place.MinDwell = 0
		c.Software.CyclesPerPacket = 297
	})
	rules := cfg.Rules.Files[0]
	a, _ := startOnSim(t, &cfg, 50)
	waitFor(t, "file rule in force", func() bool { p, _ := a.path("file-a"); return p != "" })

	// The API.
	c := agentapi.NewUnixClient(cfg.API.Socket)
	ctx := context.Background()
	for _, tc := range []struct {
		body string
		code int
		msg  string
	}{
		{`{id: api-all, action: drop, match: {dst: 0.0.0.0/0, proto: udp}}`, http.StatusUnprocessableEntity, `match.dst "0.0.0.0/0": too broad`},
		{`{id: api-noaddr, action: drop, match: {proto: udp, dst_port: 53}}`, http.StatusUnprocessableEntity, "too broad"},
		{`{id: api-v6, action: drop, match: {dst: "::/0"}}`, http.StatusUnprocessableEntity, "too broad"},
		{`{id: api-everything, action: drop, match: all}`, http.StatusUnprocessableEntity, "allow_match_all"},
		{`{id: api-x}`, http.StatusBadRequest, "action: required"},
		{`{id: api-nomatch, action: drop}`, http.StatusBadRequest, "no match condition"},
	} {
		_, err := c.Add(ctx, []byte(tc.body))
		if apiCode(err) != tc.code || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("POST %s: %v; want %d and %q", tc.body, err, tc.code, tc.msg)
		}
	}
	if _, err := c.Add(ctx, []byte(`{id: api-blocklist, action: drop, match: {src: 198.51.100.0/24}}`)); err != nil {
		t.Fatalf("source blocklist entry refused: %v", err)
	}
	list, err := c.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range list {
		if strings.HasPrefix(r.Rule.ID, "api-") && r.Rule.ID != "api-blocklist" {
			t.Errorf("refused rule %s listed: %+v", r.Rule.ID, r)
		}
	}

	// The rule file: too broad, emptied, cut short. Each refused and
	// counted; file-a stays in force throughout.
	for _, tc := range []struct{ body, err string }{
		{"rules:\n  - {id: file-all, action: drop, match: {dst: 0.0.0.0/0}}\n", `rule "file-all": match.dst "0.0.0.0/0": too broad`},
		{"", "rules: empty file"},
		{"rules:\n", "rules: empty value"},
		{"rules:\n  - id: only-one\n    action: drop\n", `rule "only-one": match: no match condition`},
		{"rules:\n  - id: x\n", `rule "x": action: required`},
	} {
		before := a.d.Files.Status()[0].Refusals
		if err := os.WriteFile(rules, []byte(tc.body), 0o644); err != nil {
			t.Fatal(err)
		}
		a.reload <- struct{}{}
		// (The poller may also see os.WriteFile's truncation: refused too.)
		waitFor(t, "refusal: "+tc.err, func() bool {
			s := a.d.Files.Status()[0]
			return s.Refusals > before && strings.Contains(s.Err, tc.err)
		})
		if p, _ := a.path("file-a"); p == "" {
			t.Fatalf("after %q: file-a no longer in force", tc.body)
		}
		for _, id := range []string{"file-all", "only-one", "x"} {
			if p, _ := a.path(id); p != "" {
				t.Fatalf("after %q: refused rule %s placed on %s", tc.body, id, p)
			}
		}
	}
	// Said on purpose, the file empties.
	if err := os.WriteFile(rules, []byte("rules: []\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	a.reload <- struct{}{}
	waitFor(t, "rules: [] applied", func() bool { p, _ := a.path("file-a"); return p == "" })
}

// FlowSpec routes over a BGP session: outside flowspec.allowed_destinations
// (or without a destination prefix) refused; inside it but broader than the
// operator's guard (rules.guard.min_prefix_v4 raised to 28) refused as too
// broad; a /28 inside learned and placed.
func TestAgentFlowSpecRoutesGuarded(t *testing.T) {
	bgpPort := freePort(t)
	cfg := testConfig(t, "rules: []\n", func(c *config.Config) {
		c.Place.MinDwell = 0
		c.Software.CyclesPerPacket = 297
		c.Rules.Guard.MinPrefixV4 = 28
		fs := &c.FlowSpec // the defaults, then these
		fs.Enabled, fs.ASN, fs.RouterID, fs.ListenPort, fs.ListenAddress = true, 65010, "192.0.2.10", int32(bgpPort), "127.0.0.1"
		fs.Neighbors = []config.Neighbor{{Address: "127.0.0.2", ASN: 65000, Passive: true}}
		fs.OnSessionDown, fs.HoldTime, fs.Priority = "hold", time.Hour, 500
		fs.AllowedDestinations = []string{"203.0.113.0/24"}
	})
	pr := startPeer(t, bgpPort)
	a, _ := startOnSim(t, &cfg, 50)
	waitFor(t, "BGP session", func() bool { return a.d.Speaker.Stats().Sessions["127.0.0.2"] })
	udp := bgp.NewFlowSpecComponent(bgp.FLOW_SPEC_TYPE_IP_PROTO, []*bgp.FlowSpecComponentItem{bgp.NewFlowSpecComponentItem(bgp.DEC_NUM_OP_EQ|bgp.DEC_NUM_OP_END, 17)})
	dst := func(bits uint8, p string) bgp.AddrPrefixInterface {
		return bgp.NewFlowSpecIPv4Unicast([]bgp.FlowSpecComponentInterface{bgp.NewFlowSpecDestinationPrefix(bgp.NewIPAddrPrefix(bits, p)), udp})
	}
	pr.route(t, bgp.NewFlowSpecIPv4Unicast([]bgp.FlowSpecComponentInterface{udp}), false) // no destination: 0.0.0.0/0
	pr.route(t, dst(24, "198.51.100.0"), false)                                           // not ours
	pr.route(t, dst(24, "203.0.113.0"), false)                                            // ours, broader than /28
	pr.route(t, dst(28, "203.0.113.16"), false)                                           // ours, /28
	var learned []string
	waitFor(t, "two routes outside allowed_destinations, one too broad, one learned", func() bool {
		st := a.d.Speaker.Stats()
		learned = learned[:0]
		for _, r := range a.d.Placer.View().Rules.All() {
			if strings.HasPrefix(r.ID, "fs-") && r.Path != "" {
				learned = append(learned, r.ID)
			}
		}
		return st.Refused["destination_not_allowed"] == 2 && st.Refused["too_broad"] == 1 && len(learned) == 1
	})
	e, ok := a.d.Store.Get(learned[0])
	if !ok || e.Rule.Match.Dst.String() != "203.0.113.16/28" {
		t.Fatalf("learned rule %+v", e)
	}
}
