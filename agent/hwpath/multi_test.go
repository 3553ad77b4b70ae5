package hwpath

import (
	"context"
	"testing"
	"time"

	"github.com/scrubd/scrubd/agent/dataplane"
	"github.com/scrubd/scrubd/offload"
	"github.com/scrubd/scrubd/offload/compile"
	"github.com/scrubd/scrubd/offload/sim"
)

// Two uplinks, one rule set: every rule lands in both tables, counts from
// both, comes back on both after one lost its entries, and a rule one
// table refuses is in neither.
func TestMultiDevice(t *testing.T) {
	clk := sim.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	p0 := sim.New(sim.Config{Caps: offload.MLX5(16), Clock: clk, Dev: "p0"})
	p1 := sim.New(sim.Config{Caps: offload.MLX5(2), Clock: clk, Dev: "p1"})
	m := NewMulti([]string{"p0", "p1"}, []offload.Backend{p0, p1})
	ctx := context.Background()
	caps, err := m.Capabilities(ctx)
	if err != nil || caps.MaxEntries != 2 || caps.InsertRate != offload.RateDMFS/2 {
		t.Fatalf("capabilities %+v %v", caps, err)
	}
	p := New(Config{Name: "multi", Compile: compile.Config{Caps: caps, PrioV4: 10, PrioV6: 11},
		Owner: offload.Owner{Chain: 0, PrioLo: 10, PrioHi: 11}}, m)
	set := parse(t, `rules:
  - {id: dns, action: drop, match: {dst: 203.0.113.0/24, proto: udp, src_port: "53"}}
  - {id: ntp, action: drop, match: {dst: 203.0.113.0/24, proto: udp, src_port: "123"}}
  - {id: gre, action: drop, match: {dst: 198.51.100.1/32, proto: gre}}
`)
	dns, ntp, gre := &set.Rules[0], &set.Rules[1], &set.Rules[2]
	if err := p.Install(ctx, dns, set); err != nil {
		t.Fatal(err)
	}
	if err := p.Install(ctx, ntp, set); err != nil {
		t.Fatal(err)
	}
	// p1 is full: gre goes nowhere, and p0 keeps nothing of it.
	if err := p.Install(ctx, gre, set); dataplane.KindOf(err) != dataplane.KindTableFull {
		t.Fatalf("third rule on a 2-entry p1: %v", err)
	}
	for _, d := range []*sim.NIC{p0, p1} {
		if dump, _ := d.Dump(ctx); len(dump) != 2 {
			t.Fatalf("entries %d", len(dump))
		}
	}
	// Both uplinks drop and count.
	for _, d := range []*sim.NIC{p0, p1} {
		for i := 0; i < 3; i++ {
			if _, hit := d.Process(udpTo("203.0.113.9", 53, 999), 100); !hit {
				t.Fatal("dns not dropped")
			}
		}
	}
	clk.Advance(2 * time.Second)
	st, err := p.Stats(ctx)
	if err != nil || st[p.Key(dns)].Packets != 6 || st[p.Key(dns)].Bytes != 600 {
		t.Fatalf("stats %+v %v", st, err)
	}
	// p1 loses its table (its qdisc deleted): both rules read as missing,
	// and installing them again completes p1 while p0 keeps its copy.
	p1.Flush()
	keys, err := p.Installed(ctx)
	if err != nil || len(keys) != 0 {
		t.Fatalf("installed after p1 lost its entries: %v %v", keys, err)
	}
	for _, r := range []int{0, 1} {
		if err := p.Install(ctx, &set.Rules[r], set); err != nil {
			t.Fatalf("reinstall %s: %v", set.Rules[r].ID, err)
		}
	}
	if keys, _ := p.Installed(ctx); len(keys) != 2 {
		t.Fatalf("installed after reinstall: %v", keys)
	}
	for _, d := range []*sim.NIC{p0, p1} {
		if _, hit := d.Process(udpTo("203.0.113.9", 123, 999), 100); !hit {
			t.Fatal("ntp not dropped after reinstall")
		}
		if dump, _ := d.Dump(ctx); len(dump) != 2 {
			t.Fatalf("entries %d after reinstall", len(dump))
		}
	}
	// Remove takes it out of both.
	if err := p.Remove(ctx, p.Key(dns)); err != nil {
		t.Fatal(err)
	}
	for _, d := range []*sim.NIC{p0, p1} {
		if _, hit := d.Process(udpTo("203.0.113.9", 53, 999), 100); hit {
			t.Fatal("removed rule still drops")
		}
	}
	// A gone device fails the batch and leaves the other table unchanged.
	p1.SetGone(true)
	if err := p.Install(ctx, dns, set); dataplane.KindOf(err) != dataplane.KindDeviceGone {
		t.Fatalf("install with p1 gone: %v", err)
	}
	if dump, _ := p0.Dump(ctx); len(dump) != 1 {
		t.Fatalf("p0 entries %d, want ntp's only", len(dump))
	}
	// A device refusing an entry (p1 full) leaves it in neither: Multi
	// takes it back out of p0.
	p1.SetGone(false) // back, empty
	cr, _, err := p.compile(gre, set)
	if err != nil {
		t.Fatal(err)
	}
	filler, _, err := p.compile(dns, set)
	if err != nil {
		t.Fatal(err)
	}
	ntpEntries, _, err := p.compile(ntp, set)
	if err != nil {
		t.Fatal(err)
	}
	if rs, err := p1.Install(ctx, append(filler.Entries, ntpEntries.Entries...)); err != nil || rs[0].Err != nil || rs[1].Err != nil {
		t.Fatalf("filling p1: %v %+v", err, rs)
	}
	rs, err := m.Install(ctx, cr.Entries)
	if err != nil || len(rs) != 1 || !offload.IsNoSpace(rs[0].Err) {
		t.Fatalf("install into a full p1: %v %+v", err, rs)
	}
	if dump, _ := p0.Dump(ctx); len(dump) != 1 {
		t.Fatalf("p0 kept %d entries, want ntp's only", len(dump))
	}
}
