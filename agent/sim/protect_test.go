package sim_test

import (
	"context"
	"io"
	"log/slog"
	"net/netip"
	"testing"
	"time"

	"github.com/scrubd/scrubd/agent/config"
	"github.com/scrubd/scrubd/agent/daemon"
	"github.com/scrubd/scrubd/agent/placement"
	"github.com/scrubd/scrubd/agent/sim"
	"github.com/scrubd/scrubd/agent/store"
	"github.com/scrubd/scrubd/swpath/rule"
)

func fields(proto uint8, src, dst string, sp, dp uint16, flags uint8, frame int) rule.Fields {
	return rule.Fields{Family: rule.IPv4, Proto: proto, L4: true, Frag: rule.NotFragment, SrcPort: sp, DstPort: dp, TCPFlags: flags,
		Src: rule.AddrFrom(netip.MustParseAddr(src)), Dst: rule.AddrFrom(netip.MustParseAddr(dst)), Length: uint32(frame - 18)}
}

// TestFlowSpecFloodKeepsHardware: with FlowSpec on (a route reflector as
// BGP neighbour, the protect list the daemon builds from the config), a
// 60 Mpps SYN flood of 64 B frames dropped by a FlowSpec rule goes to
// hardware, and the BGP session's packets still pass, counted in hardware
// on the pass entries where the drop overlaps them. Three layouts: this
// host's address outside the attacked prefix (the session's rules and the
// drop share no packet), inside it (the session's own SYNs match the
// drop), and the reflector protected with direction both as the runbook
// describes (its probes to the victim match the drop). Expected
// figures are the flows' own: every flood packet dropped in hardware,
// none in software, no out-of-buffer loss, every protected packet passed.
func TestFlowSpecFloodKeepsHardware(t *testing.T) {
	const rr = "192.0.2.254"
	const syn, ack = 0x02, 0x10
	for _, tc := range []struct {
		name    string
		local   string
		protect []config.Protect
		extra   []sim.Flow // protected flows the drop's match also covers
		pass    int        // pass entries expected on the device
	}{
		// The session's rules do not touch a drop on another prefix: no
		// pass entry is needed at all.
		{name: "local address elsewhere", local: "198.51.100.1", pass: 0},
		{name: "local address in the attacked prefix", local: "203.0.113.1",
			extra: []sim.Flow{{Name: "bgp open to us", Fields: fields(rule.ProtoTCP, rr, "203.0.113.1", 40179, 179, syn, 64), Frame: 64, PPS: 2000, Protected: true}},
			pass:  2},
		{name: "reflector protected both", local: "198.51.100.1",
			protect: []config.Protect{{Prefix: rr, Direction: "both", Note: "route reflector"}},
			extra:   []sim.Flow{{Name: "reflector probe to the victim", Fields: fields(rule.ProtoTCP, rr, "203.0.113.20", 40080, 80, syn, 64), Frame: 64, PPS: 2000, Protected: true}},
			pass:    1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := config.Defaults()
			cfg.Protect = tc.protect
			cfg.FlowSpec.Enabled, cfg.FlowSpec.ListenAddress = true, tc.local
			cfg.FlowSpec.Neighbors = []config.Neighbor{{Address: rr, ASN: 65000}}
			pl, err := daemon.ProtectList(&cfg)
			if err != nil {
				t.Fatal(err)
			}
			flows := append([]sim.Flow{
				{Name: "syn-flood 64B", Fields: fields(rule.ProtoTCP, "198.18.1.1", "203.0.113.20", 1024, 80, syn, 64), Frame: 64, PPS: 60e6, Vary: 64},
				{Name: "bgp session", Fields: fields(rule.ProtoTCP, rr, tc.local, 179, 50179, ack, 128), Frame: 128, PPS: 2000, Protected: true},
				{Name: "legit https 594B", Fields: fields(rule.ProtoTCP, "198.19.0.1", "203.0.113.80", 50000, 443, ack, 594), Frame: 594, PPS: 4e6, Vary: 256},
			}, tc.extra...)
			start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			n, err := sim.New(sim.Options{Start: start, Scale: 2000, Flows: flows})
			if err != nil {
				t.Fatal(err)
			}
			defer n.Close()
			st := store.New(pl, n.Now)
			p := placement.New(placement.Config{HighWater: 0.8, LowWater: 0.5, MinDwell: 3 * time.Second, CyclesPerPacket: 297},
				n.HW(), n.SW(), slog.New(slog.NewTextHandler(io.Discard, nil)), n.Now)
			ctx := context.Background()
			r, err := rule.ParseRule("bgp", []byte(`{id: fs-syn, priority: 500, action: drop, match: {dst: 203.0.113.0/24, proto: tcp, tcp_flags: {value: [syn], mask: [syn, ack]}}}`), start)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := st.Put("bgp:"+rr, r); err != nil {
				t.Fatal(err)
			}
			snap := st.Snapshot()
			n.SetReference(&snap.Set)
			p.Apply(ctx, snap)
			for i := 1; i <= 100; i++ { // 10 simulated seconds
				n.Step(100 * time.Millisecond)
				if i%10 == 0 {
					p.Tick(ctx)
				}
			}
			n.Idle(2 * time.Second)
			p.Tick(ctx)
			var rv placement.RuleView
			for _, x := range p.View().Rules.All() {
				if x.ID == "fs-syn" {
					rv = x
				}
			}
			if rv.Path != placement.HW {
				t.Fatalf("fs-syn on %s (%s), want hw", rv.Path, rv.Reason)
			}
			stats := map[string]sim.FlowStats{}
			for _, f := range n.Stats() {
				stats[f.Name] = f
				if f.OverDrop != 0 || f.OOB != 0 {
					t.Errorf("%s: over-drop %d, out-of-buffer %d", f.Name, f.OverDrop, f.OOB)
				}
			}
			fl := stats["syn-flood 64B"]
			if fl.Sent == 0 || fl.HWDropped != fl.Sent || fl.SWDropped != 0 {
				t.Errorf("flood: sent %d, hw %d, sw %d: want all in hardware", fl.Sent, fl.HWDropped, fl.SWDropped)
			}
			if rv.HW.Packets != fl.HWDropped {
				t.Errorf("rule's hardware counter %d, flow's hardware drops %d", rv.HW.Packets, fl.HWDropped)
			}
			if d := n.ProtectedDrops(); d != 0 {
				t.Errorf("%d protected packets dropped", d)
			}
			var protectedSent, throughPass uint64
			for _, f := range flows {
				s := stats[f.Name]
				if f.Protected {
					if s.Sent == 0 || s.Passed != s.Sent {
						t.Errorf("%s: sent %d, passed %d", f.Name, s.Sent, s.Passed)
					}
					protectedSent += s.Sent
				}
			}
			// On the device: the drop and its pass entries. Every protected
			// packet met a pass entry in hardware (the session's own: the
			// listen-port and the neighbour-port rule; the reflector's: its
			// source rule), counted in real (unscaled) packets.
			dump, err := n.Device().Dump(ctx)
			if err != nil {
				t.Fatal(err)
			}
			pass := 0
			for _, e := range dump {
				if e.Pass {
					pass++
				}
			}
			if pass != tc.pass {
				t.Errorf("%d pass entries on the device, want %d", pass, tc.pass)
			}
			cs, _ := n.Device().Stats(ctx)
			for _, c := range cs {
				if c.Prio == 8 {
					throughPass += c.Packets
				}
			}
			want := protectedSent / uint64(n.Scale())
			if tc.pass == 0 {
				want = 0 // nothing to except: the protected packets meet no entry
			}
			if throughPass != want {
				t.Errorf("pass entries counted %d packets, the covered protected flows sent %d", throughPass, want)
			}
			t.Logf("flood %d hw-dropped of %d sent; %d pass entries counted %d real packets", fl.HWDropped, fl.Sent, pass, throughPass)
		})
	}
}

// TestNewAcceptRuleExceptedInHardware: an accept rule that arrives while a
// drop it overlaps is in hardware gets its pass entry before the drop is
// re-checked: the drop stays in hardware, and from that Apply on the
// accepted packets pass on the device while the rest are dropped. When the
// accept rule goes, its pass entry goes too.
func TestNewAcceptRuleExceptedInHardware(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	n, err := sim.New(sim.Options{Start: start, Scale: 1000, Flows: []sim.Flow{
		{Name: "udp", Fields: fields(rule.ProtoUDP, "198.18.2.1", "203.0.113.30", 40000, 1500, 0, 64), Frame: 64, PPS: 1e6}}})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	st := store.New(nil, n.Now)
	p := placement.New(placement.Config{HighWater: 0.8, CyclesPerPacket: 297}, n.HW(), n.SW(), slog.New(slog.NewTextHandler(io.Discard, nil)), n.Now)
	ctx := context.Background()
	put := func(y string) {
		r, err := rule.ParseRule("api", []byte(y), start)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.Put("api", r); err != nil {
			t.Fatal(err)
		}
		p.Apply(ctx, st.Snapshot())
	}
	put(`{id: flood, action: drop, match: {dst: 203.0.113.0/24, proto: udp}}`)
	resolver := fields(rule.ProtoUDP, "198.51.100.53", "203.0.113.5", 53, 40000, 0, 128)
	other := fields(rule.ProtoUDP, "198.51.100.54", "203.0.113.5", 53, 40000, 0, 128)
	if _, drop := n.Device().Process(&resolver, 128); !drop {
		t.Fatal("before the accept rule: the resolver's packet is not dropped in hardware")
	}
	put(`{id: resolver, priority: 0, action: accept, match: {src: 198.51.100.53/32, proto: udp, src_port: "53"}}`)
	for _, x := range p.View().Rules.All() {
		if x.ID == "flood" && x.Path != placement.HW {
			t.Fatalf("flood on %s (%s) after the accept rule came, want hw", x.Path, x.Reason)
		}
	}
	if h, drop := n.Device().Process(&resolver, 128); drop || !h.Pass {
		t.Fatalf("after the accept rule: drop %v pass %v, want passed by its pass entry", drop, h.Pass)
	}
	if _, drop := n.Device().Process(&other, 128); !drop {
		t.Fatal("another source's packet is not dropped")
	}
	if err := st.Delete("api", "resolver"); err != nil {
		t.Fatal(err)
	}
	p.Apply(ctx, st.Snapshot())
	if h, drop := n.Device().Process(&resolver, 128); !drop || h.Pass {
		t.Fatalf("after the accept rule went: drop %v pass %v, want dropped", drop, h.Pass)
	}
}
