package hwpath

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/scrubd/scrubd/agent/dataplane"
	"github.com/scrubd/scrubd/offload"
	"github.com/scrubd/scrubd/offload/compile"
	"github.com/scrubd/scrubd/offload/sim"
	"github.com/scrubd/scrubd/swpath/rule"
)

func parse(t *testing.T, y string) *rule.Set {
	t.Helper()
	s, err := rule.Parse("t", []byte(y), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func newPath(caps offload.Capabilities, maxMasks int) (*Path, *sim.NIC, *sim.FakeClock) {
	clk := sim.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	nic := sim.New(sim.Config{Caps: caps, Clock: clk})
	p := New(Config{Name: "sim", Compile: compile.Config{Caps: caps, PrioV4: 10, PrioV6: 11},
		Owner: offload.Owner{Chain: 0, PrioLo: 10, PrioHi: 11}, MaxMasks: maxMasks}, nic)
	return p, nic, clk
}

func udpTo(dst string, sport, dport uint16) *rule.Fields {
	return &rule.Fields{Family: rule.IPv4, Proto: rule.ProtoUDP, L4: true, Frag: rule.NotFragment, SrcPort: sport, DstPort: dport,
		Src: rule.AddrFrom(netip.MustParseAddr("198.18.0.1")), Dst: rule.AddrFrom(netip.MustParseAddr(dst)), Length: 100}
}

func TestInstallCountRemoveReconcile(t *testing.T) {
	p, nic, clk := newPath(offload.MLX5(16), 0)
	set := parse(t, `rules:
  - {id: mgmt, priority: 0, action: accept, match: {dst: 192.0.2.10/32}}
  - {id: dns, action: drop, match: {dst: 203.0.113.0/24, proto: udp, src_port: "53"}}
  - {id: wide, action: drop, match: {dst: 192.0.2.0/24, proto: udp}}
  - {id: len, action: drop, match: {length: "0-60"}}
  - {id: sctp, action: drop, match: {proto: sctp, dst_port: "9"}}
  - {id: ranges, action: drop, match: {dst: 198.51.100.0/24, proto: udp, dst_port: "1000-2000"}}
`)
	ctx := context.Background()
	kinds := map[string]dataplane.Kind{}
	for i := range set.Rules {
		r := &set.Rules[i]
		if r.Action != rule.Drop {
			continue
		}
		if _, err := p.Compile(r, set); err != nil {
			kinds[r.ID] = dataplane.KindOf(err)
		}
	}
	if kinds["wide"] != dataplane.KindAcceptOverlap || kinds["len"] != dataplane.KindUnsupported || kinds["sctp"] != dataplane.KindUnsupported || len(kinds) != 3 {
		t.Fatalf("kinds %v", kinds)
	}
	c, _ := p.Compile(&set.Rules[5], set)
	if c.Entries != 8 { // 1000-2000 is 8 value/mask pairs
		t.Fatalf("ranges cost %+v", c)
	}
	for _, i := range []int{1, 5} {
		if err := p.Install(ctx, &set.Rules[i], set); err != nil {
			t.Fatal(err)
		}
	}
	b, _ := p.Budget(ctx)
	if b.UsedEntries != 9 || b.MaxEntries != 16 {
		t.Fatalf("budget %+v", b)
	}
	// Packets through the simulated NIC are counted on the rule's key.
	for i := 0; i < 5; i++ {
		if _, drop := nic.Process(udpTo("203.0.113.9", 53, 4000), 128); !drop {
			t.Fatal("dns packet not dropped in hardware")
		}
	}
	if _, drop := nic.Process(udpTo("192.0.2.10", 53, 4000), 128); drop {
		t.Fatal("hardware dropped protected traffic")
	}
	if _, drop := nic.Process(udpTo("198.51.100.1", 5, 1500), 1000); !drop {
		t.Fatal("range packet not dropped")
	}
	clk.Advance(2 * time.Second)
	st, err := p.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := st[p.Key(&set.Rules[1])]; got.Packets != 5 || got.Bytes != 640 {
		t.Fatalf("dns counters %+v", got)
	}
	// Table full: the 8 entries of another range rule do not fit in 7.
	more := parse(t, "rules:\n  - {id: r2, action: drop, match: {dst: 198.51.100.0/24, proto: udp, src_port: \"1000-2000\"}}\n")
	if err := p.Install(ctx, &more.Rules[0], more); dataplane.KindOf(err) != dataplane.KindTableFull {
		t.Fatalf("full: %v", err)
	}
	// A restarted agent finds its rules by key and can remove them.
	p2 := New(p.cfg, nic)
	keys, err := p2.Installed(ctx)
	if err != nil || len(keys) != 2 {
		t.Fatalf("installed %v %v", keys, err)
	}
	if err := p2.Remove(ctx, p.Key(&set.Rules[5])); err != nil {
		t.Fatal(err)
	}
	if b, _ := p2.Budget(ctx); b.UsedEntries != 1 {
		t.Fatalf("after remove %+v", b)
	}
	// Device gone.
	nic.SetGone(true)
	if err := p2.Install(ctx, &set.Rules[5], set); dataplane.KindOf(err) != dataplane.KindDeviceGone {
		t.Fatalf("gone: %v", err)
	}
}

func TestMaskBudget(t *testing.T) {
	p, _, _ := newPath(offload.MLX5(1000), 1)
	set := parse(t, `rules:
  - {id: a, action: drop, match: {dst: 203.0.113.0/24}}
  - {id: b, action: drop, match: {dst: 198.51.100.0/24}}
  - {id: c, action: drop, match: {dst: 198.51.100.7/32}}
`)
	ctx := context.Background()
	for i := 0; i < 2; i++ {
		if err := p.Install(ctx, &set.Rules[i], set); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Install(ctx, &set.Rules[2], set); dataplane.KindOf(err) != dataplane.KindMaskBudget {
		t.Fatalf("mask budget: %v", err)
	}
}

// After the device lost its entries (a deleted qdisc), Installed forgets
// them: they count against no budget, and the rule installs again.
func TestInstalledForgetsFlushedRules(t *testing.T) {
	p, nic, _ := newPath(offload.MLX5(4), 0)
	set := parse(t, `rules:
  - {id: dns, action: drop, match: {dst: 203.0.113.0/24, proto: udp, src_port: "53"}}
  - {id: ntp, action: drop, match: {dst: 203.0.113.0/24, proto: udp, src_port: "123"}}
`)
	ctx := context.Background()
	for i := range set.Rules {
		if err := p.Install(ctx, &set.Rules[i], set); err != nil {
			t.Fatal(err)
		}
	}
	if b, _ := p.Budget(ctx); b.UsedEntries != 2 {
		t.Fatalf("budget %+v", b)
	}
	nic.Flush()
	keys, err := p.Installed(ctx)
	if err != nil || len(keys) != 0 {
		t.Fatalf("installed after flush: %v %v", keys, err)
	}
	if b, _ := p.Budget(ctx); b.UsedEntries != 0 {
		t.Fatalf("flushed entries still counted: %+v", b)
	}
	if err := p.Install(ctx, &set.Rules[0], set); err != nil {
		t.Fatal(err)
	}
	if _, hit := nic.Process(udpTo("203.0.113.5", 53, 4000), 100); !hit {
		t.Fatal("reinstalled rule does not drop")
	}
	if keys, _ := p.Installed(ctx); len(keys) != 1 || keys[0] != p.Key(&set.Rules[0]) {
		t.Fatalf("installed %v", keys)
	}
}
