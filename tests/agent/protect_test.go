package agent_test

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/osrg/gobgp/v3/pkg/packet/bgp"

	"github.com/scrubd/scrubd/agent/config"
	"github.com/scrubd/scrubd/agent/placement"
	"github.com/scrubd/scrubd/swpath/rule"
)

// TestReflectorProtectedFlowSpecInHardware: an agent whose route reflector
// is protected with direction both, as the runbook describes, receives 900
// IPv4 FlowSpec routes over a BGP session; every one of them is placed in
// hardware (each overlaps the reflector's source rule), behind one pass
// entry for the reflector's traffic. On the simulated NIC a packet from the
// reflector to a victim passes, the same packet from anyone else is
// dropped, and the session's own packets meet no drop.
func TestReflectorProtectedFlowSpecInHardware(t *testing.T) {
	const routes = 900
	bgpPort := freePort(t)
	cfg := testConfig(t, "rules: []\n", func(c *config.Config) {
		c.Place.MinDwell = 0
		c.Software.CyclesPerPacket = 297
		c.Protect = []config.Protect{{Prefix: "127.0.0.2", Direction: "both", Note: "route reflector"}}
		fs := &c.FlowSpec
		fs.Enabled, fs.ASN, fs.RouterID, fs.ListenPort, fs.ListenAddress = true, 65010, "192.0.2.10", int32(bgpPort), "127.0.0.1"
		fs.Neighbors = []config.Neighbor{{Address: "127.0.0.2", ASN: 65000, Passive: true}}
		fs.HoldTime, fs.AllowedDestinations = time.Hour, []string{"198.18.0.0/15"}
	})
	pr := startPeer(t, bgpPort)
	a, n := startOnSim(t, &cfg, 2000)
	waitFor(t, "BGP session", func() bool { return a.d.Speaker.Stats().Sessions["127.0.0.2"] })
	victim := func(i int) string { return fmt.Sprintf("198.18.%d.%d", i/200, 1+i%200) }
	for i := range routes {
		pr.route(t, bgp.NewFlowSpecIPv4Unicast([]bgp.FlowSpecComponentInterface{
			bgp.NewFlowSpecDestinationPrefix(bgp.NewIPAddrPrefix(32, victim(i))),
			bgp.NewFlowSpecComponent(bgp.FLOW_SPEC_TYPE_IP_PROTO, []*bgp.FlowSpecComponentItem{bgp.NewFlowSpecComponentItem(bgp.DEC_NUM_OP_EQ|bgp.DEC_NUM_OP_END, 6)}),
		}), false)
	}
	count := func() (hw, sw int, why string) {
		for _, r := range a.d.Placer.View().Rules.All() {
			if !strings.HasPrefix(r.ID, "fs-") {
				continue
			}
			switch r.Path {
			case placement.HW:
				hw++
			case placement.SW:
				sw++
				why = r.Reason
			}
		}
		return
	}
	for i := 0; ; i++ { // bounded: at most 60 s
		hw, sw, why := count()
		if hw == routes {
			break
		}
		if i == 1200 {
			t.Fatalf("%d of %d FlowSpec rules in hardware, %d in software (%s)", hw, routes, sw, why)
		}
		time.Sleep(50 * time.Millisecond)
	}
	ctx := context.Background()
	dump, err := n.Device().Dump(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var pass, drops int
	for _, e := range dump {
		if e.Pass {
			pass++
			if e.Match.Src.Netip(rule.IPv4) != netip.MustParseAddr("127.0.0.2") || e.Match.DstMask != (rule.Addr{}) {
				t.Errorf("pass entry %s, want the reflector's source", e.Match.String())
			}
		} else {
			drops++
		}
	}
	if pass != 1 || drops != routes {
		t.Fatalf("device: %d pass entries and %d drops, want 1 and %d", pass, drops, routes)
	}
	tcpSeg := func(src, dst string, sport, dport uint16) *rule.Fields {
		return &rule.Fields{Family: rule.IPv4, Proto: rule.ProtoTCP, L4: true, Frag: rule.NotFragment, SrcPort: sport, DstPort: dport, TCPFlags: 0x02,
			Src: rule.AddrFrom(netip.MustParseAddr(src)), Dst: rule.AddrFrom(netip.MustParseAddr(dst)), Length: 46}
	}
	for _, i := range []int{0, routes / 2, routes - 1} {
		if h, drop := n.Device().Process(tcpSeg("127.0.0.2", victim(i), 40000, 80), 64); drop || !h.Pass {
			t.Errorf("reflector to %s: drop %v pass %v, want passed by the pass entry", victim(i), drop, h.Pass)
		}
		if _, drop := n.Device().Process(tcpSeg("192.0.2.50", victim(i), 40000, 80), 64); !drop {
			t.Errorf("attacker to %s: not dropped in hardware", victim(i))
		}
	}
	if h, drop := n.Device().Process(tcpSeg("127.0.0.2", "127.0.0.1", 40000, uint16(bgpPort)), 64); drop || h.Handle != 0 && !h.Pass {
		t.Errorf("the BGP session's packet: drop %v hit %+v", drop, h)
	}
}
