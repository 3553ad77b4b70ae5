package hwpath

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"reflect"
	"testing"
	"time"

	"github.com/scrubd/scrubd/offload"
	"github.com/scrubd/scrubd/offload/compile"
	"github.com/scrubd/scrubd/offload/sim"
	"github.com/scrubd/scrubd/swpath/rule"
)

// The capacity the path keeps up to date as entries go in and out is what
// offload.CapacityOf computes from the device's own dump, after every
// install and removal of drops (of varied shapes) and of the pass entries
// of the accept rules they overlap.
func TestCapacityCountsAgreeWithDump(t *testing.T) {
	ctx := context.Background()
	caps := offload.MLX5(4096)
	nic := sim.New(sim.Config{Caps: caps, Clock: sim.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))})
	p := New(Config{Name: "sim", Compile: compile.Config{Caps: caps, PrioV4: 10, PrioV6: 11, PassPrioV4: 8, PassPrioV6: 9},
		Owner: offload.Owner{Chain: 0, PrioLo: 8, PrioHi: 11}}, nic)
	rng := rand.New(rand.NewPCG(7, 7))
	set := &rule.Set{}
	for i := range 4 {
		set.Rules = append(set.Rules, rule.Rule{ID: fmt.Sprint("acc", i), Priority: 1, Action: rule.Accept,
			Match: rule.Match{Src: netip.PrefixFrom(netip.AddrFrom4([4]byte{192, 0, 2, byte(i)}), 32)}})
	}
	for i := range 300 {
		m := rule.Match{Dst: netip.PrefixFrom(netip.AddrFrom4([4]byte{203, 0, byte(i >> 4), byte(i)}), 24+rng.IntN(9))}
		if rng.IntN(2) == 0 {
			m.Proto = []uint8{rule.ProtoUDP}
			m.DstPort = rule.Ranges{{Lo: uint32(rng.IntN(1024)), Hi: uint32(rng.IntN(1024)) + 1024}}
		}
		set.Rules = append(set.Rules, rule.Rule{ID: fmt.Sprint("d", i), Priority: 100, Action: rule.Drop, Match: m})
	}
	check := func(op string) {
		t.Helper()
		got, err := p.capacity(ctx)
		if err != nil {
			t.Fatal(err)
		}
		dump, err := nic.Dump(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var es []offload.Entry
		for _, d := range dump {
			es = append(es, d.Entry)
		}
		if want := offload.CapacityOf(caps, es); !reflect.DeepEqual(got, want) {
			t.Fatalf("after %s: counted %+v, dump gives %+v", op, got, want)
		}
	}
	in := map[string]bool{}
	for step := range 600 {
		d := &set.Rules[4+rng.IntN(300)]
		k := p.Key(d)
		if in[k] && rng.IntN(3) == 0 {
			if err := p.Remove(ctx, k); err != nil {
				t.Fatal(err)
			}
			delete(in, k)
			check(fmt.Sprint("step ", step, ": remove ", d.ID))
			continue
		}
		if !in[k] && p.Install(ctx, d, set) == nil {
			in[k] = true
		}
		check(fmt.Sprint("step ", step, ": install ", d.ID))
	}
	if _, err := p.Installed(ctx); err != nil {
		t.Fatal(err)
	}
	check("reading the device back")
}
