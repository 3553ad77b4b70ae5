package hwpath

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/scrubd/scrubd/offload"
)

// The hardware counters read every placement tick: while no counter moved
// the path returns the map it returned last (and the simulated NIC's
// scaled path its scaled copy: no map and no key per entry a tick); once a
// packet is counted, a new map with it, the maps returned before left as
// they were. Scaled scales a map of its own: the path's (which it may
// return again) is never written.
func TestStatsReturnsTheLastMapWhileNothingMoved(t *testing.T) {
	p, nic, clk := newPath(offload.MLX5(16), 0)
	set := parse(t, "rules:\n  - {id: dns, action: drop, match: {dst: 203.0.113.0/24, proto: udp, src_port: \"53\"}}\n")
	ctx := context.Background()
	if err := p.Install(ctx, &set.Rules[0], set); err != nil {
		t.Fatal(err)
	}
	s := &Scaled{HW: p, Scale: 10}
	key := p.Key(&set.Rules[0])
	clk.Advance(2 * time.Second)
	a, _ := p.Stats(ctx)
	sa, _ := s.Stats(ctx)
	clk.Advance(2 * time.Second)
	b, _ := p.Stats(ctx)
	sb, _ := s.Stats(ctx)
	same := func(x, y any) bool { return reflect.ValueOf(x).Pointer() == reflect.ValueOf(y).Pointer() }
	if !same(a, b) || !same(sa, sb) || len(a) != 1 {
		t.Fatalf("nothing moved: a new map (path %v, scaled %v, %d keys)", !same(a, b), !same(sa, sb), len(a))
	}
	if _, drop := nic.Process(udpTo("203.0.113.9", 53, 4000), 128); !drop {
		t.Fatal("packet not dropped in hardware")
	}
	clk.Advance(2 * time.Second)
	c, _ := p.Stats(ctx)
	sc, _ := s.Stats(ctx)
	if same(a, c) || c[key].Packets != 1 || c[key].Bytes != 128 || sc[key].Packets != 10 || sc[key].Bytes != 1280 {
		t.Fatalf("after a packet: path %+v, scaled %+v", c[key], sc[key])
	}
	if a[key].Packets != 0 || sa[key].Packets != 0 {
		t.Fatalf("a map returned before changed: path %+v, scaled %+v", a[key], sa[key])
	}
	sd, _ := s.Stats(ctx)
	if d, _ := p.Stats(ctx); d[key].Packets != 1 || sd[key].Packets != 10 {
		t.Fatalf("read again: path %+v (scaled in place?), scaled %+v", d[key], sd[key])
	}
}
