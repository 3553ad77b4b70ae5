package hwpath

import (
	"context"
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/scrubd/scrubd/offload"
	"github.com/scrubd/scrubd/offload/compile"
	"github.com/scrubd/scrubd/offload/nlerr"
	"github.com/scrubd/scrubd/offload/tcflower"
	"github.com/scrubd/scrubd/swpath/rule"
	"github.com/scrubd/scrubd/swpath/traffic"
	"golang.org/x/sys/unix"
)

func swCaps() offload.Capabilities {
	c := offload.SoftwareFlower()
	c.Keys &^= offload.KeySCTPPorts
	return c
}

// TestEntriesSurviveTheCodec compiles many random rules for mlx5 and for
// the software flower and checks that every entry converts to a filter
// tcflower validates, encodes and decodes, and that the decoded filter
// converts back to the same entry (match, table, cookie).
func TestEntriesSurviveTheCodec(t *testing.T) {
	b := NewFlowerBackend(FlowerConfig{Ifindex: 7, Flags: tcflower.SkipSW})
	n := 0
	for seed := range uint64(30) {
		s := traffic.RandomRules(seed, 60)
		s.Rules = append(s.Rules, traffic.ClassBenchRules(seed, 60).Rules...)
		for _, caps := range []offload.Capabilities{offload.MLX5(4096), swCaps()} {
			for _, res := range compile.Set(&compile.Config{Caps: caps, PrioV4: 5, PrioV6: 6}, s) {
				for _, e := range res.Entries {
					n++
					e.Handle = uint32(n)
					f, err := b.ToFilter(&e)
					if err != nil {
						t.Fatal(err)
					}
					if err := f.Validate(); err != nil {
						t.Fatalf("%s: %v", e.Match.String(), err)
					}
					raw, err := f.MarshalBinary()
					if err != nil {
						t.Fatal(err)
					}
					var g tcflower.Filter
					if err := g.UnmarshalBinary(raw); err != nil {
						t.Fatal(err)
					}
					back, ok := FromFilter(&g)
					back.RuleID = e.RuleID
					if !ok || back != e {
						t.Fatalf("round trip of %s:\n got %+v\nwant %+v", e.Match.String(), back, e)
					}
				}
			}
		}
	}
	if n < 1000 {
		t.Fatalf("only %d entries", n)
	}
}

func dropRule(id, dst string, dport uint32) rule.Rule {
	return rule.Rule{ID: id, Priority: 100, Action: rule.Drop, Match: rule.Match{
		Dst: netip.MustParsePrefix(dst), Proto: []uint8{rule.ProtoUDP},
		DstPort: rule.Ranges{{Lo: dport, Hi: dport}}}}
}

func entries(t *testing.T, rs ...rule.Rule) []offload.Entry {
	var out []offload.Entry
	for i := range rs {
		res := compile.Rule(&compile.Config{Caps: offload.MLX5(4096), PrioV4: 10, PrioV6: 11}, &rs[i])
		if !res.Offloadable {
			t.Fatal(res.Detail)
		}
		out = append(out, res.Entries...)
	}
	return out
}

func TestReconcileOverFlower(t *testing.T) {
	ctx := context.Background()
	k := &fakeKernel{}
	// OVS's filter at prio 2 (no cookie) and an operator's VLAN filter.
	k.qdisc = true
	ovs := tcflower.Filter{Ifindex: 7, Prio: 2, Protocol: tcflower.ProtoIPv4, Flags: tcflower.SkipHW,
		Key:     tcflower.Key{EthType: tcflower.ProtoIPv4, IPProto: 6},
		Actions: []tcflower.Action{{Kind: "gact", Verdict: tcflower.ActOK}}}
	vlan := tcflower.Filter{Ifindex: 7, Prio: 10, Protocol: tcflower.Proto8021Q, Flags: tcflower.SkipHW,
		Key:     tcflower.Key{EthType: tcflower.Proto8021Q, VLAN: tcflower.VLANKey{ID: 5, HasID: true, EthType: tcflower.ProtoIPv4}},
		Actions: []tcflower.Action{tcflower.Drop(nil)}}
	vlan.Prio = 12
	for _, f := range []tcflower.Filter{ovs, vlan} {
		if _, err := k.add(f); err != nil {
			t.Fatal(err)
		}
	}
	b := NewFlowerBackend(FlowerConfig{Client: k, Ifindex: 7, Dev: "eth0", Caps: swCaps(), Flags: tcflower.SkipHW})
	owner := offload.Owner{PrioLo: 10, PrioHi: 12, Software: true}
	a, c, x := dropRule("a", "203.0.113.0/24", 53), dropRule("c", "198.51.100.0/24", 123), dropRule("x", "2001:db8::/32", 19)
	rep, err := offload.Reconcile(ctx, b, owner, entries(t, a, c))
	if err != nil || rep.Added != 2 || len(rep.Failed) != 0 {
		t.Fatalf("%+v %v", rep, err)
	}
	rep, err = offload.Reconcile(ctx, b, owner, entries(t, a, c))
	if err != nil || rep.Kept != 2 || rep.Added+rep.Removed != 0 {
		t.Fatalf("restart: %+v %v", rep, err)
	}
	rep, err = offload.Reconcile(ctx, b, owner, entries(t, a, x))
	if err != nil || rep.Kept != 1 || rep.Added != 1 || rep.Removed != 1 || len(rep.Failed) != 0 {
		t.Fatalf("change: %+v %v", rep, err)
	}
	d, _ := b.Dump(ctx)
	if len(d) != 4 {
		t.Fatalf("dump: %d filters, want 2 foreign + 2 ours", len(d))
	}
	// OVS deletes the qdisc (and every filter): reconcile re-creates both
	k.filters, k.qdisc = nil, false
	rep, err = offload.Reconcile(ctx, b, owner, entries(t, a, x))
	if err != nil || rep.Added != 2 || !k.qdisc {
		t.Fatalf("after qdisc loss: %+v %v", rep, err)
	}
}

func TestErrorsKeepExtack(t *testing.T) {
	ctx := context.Background()
	k := &fakeKernel{refuse: func(f *tcflower.Filter) error {
		if f.Key.DstPort.Port == 53 {
			return nlerr.New("install", "eth0", f.ID(), unix.EOPNOTSUPP, "mlx5_core: Unsupported key", 0)
		}
		return nlerr.New("install", "eth0", f.ID(), unix.ENOSPC, "", 0)
	}}
	b := NewFlowerBackend(FlowerConfig{Client: k, Ifindex: 7, Dev: "eth0", Caps: offload.MLX5(4096), Flags: tcflower.SkipSW})
	res, err := b.Install(ctx, entries(t, dropRule("a", "203.0.113.0/24", 53), dropRule("b", "203.0.113.0/24", 54)))
	if err != nil {
		t.Fatal(err)
	}
	var ee *offload.EntryError
	if !offload.IsUnsupported(res[0].Err) || !errors.As(res[0].Err, &ee) || ee.Extack != "mlx5_core: Unsupported key" || !errors.Is(res[0].Err, unix.EOPNOTSUPP) {
		t.Errorf("unsupported: %v", res[0].Err)
	}
	if !offload.IsNoSpace(res[1].Err) {
		t.Errorf("no space: %v", res[1].Err)
	}
	k.gone = true
	if _, err := b.Install(ctx, entries(t, dropRule("a", "203.0.113.0/24", 53))); !offload.IsDeviceGone(err) {
		t.Errorf("gone: %v", err)
	}
	if _, err := b.Dump(ctx); !offload.IsDeviceGone(err) {
		t.Errorf("gone dump: %v", err)
	}
}

type statsClient struct {
	fakeKernel
	fs []tcflower.Filter
}

func (s *statsClient) Dump(q tcflower.DumpQuery) ([]tcflower.Filter, error) { return s.fs, nil }

func TestStatsHardwareOrSoftware(t *testing.T) {
	now := time.Unix(1000, 0)
	e := entries(t, dropRule("a", "203.0.113.0/24", 53))[0]
	f, _ := NewFlowerBackend(FlowerConfig{Ifindex: 7}).ToFilter(&e)
	f.Handle = 9
	f.Actions[0].Stats = tcflower.Stats{Packets: 10, Bytes: 1000, HWPackets: 7, HWBytes: 700, Present: true}
	f.Actions[0].Times.LastUse = 250 // 2.5 s ago
	c := &statsClient{fs: []tcflower.Filter{f}}
	for _, tt := range []struct {
		flags tcflower.Flags
		pkts  uint64
	}{{tcflower.SkipSW, 7}, {tcflower.SkipHW, 10}} {
		b := NewFlowerBackend(FlowerConfig{Client: c, Ifindex: 7, Flags: tt.flags, Now: func() time.Time { return now }})
		st, err := b.Stats(context.Background())
		if err != nil || len(st) != 1 || st[0].Packets != tt.pkts || st[0].Cookie != e.Cookie || st[0].Handle != 9 ||
			!st[0].LastUsed.Equal(now.Add(-2500*time.Millisecond)) {
			t.Errorf("flags %v: %+v %v", tt.flags, st, err)
		}
	}
}

func TestProtocolAllSharesOnePriority(t *testing.T) {
	k := &fakeKernel{}
	b := NewFlowerBackend(FlowerConfig{Client: k, Ifindex: 7, Caps: swCaps(), Flags: tcflower.SkipHW, ProtocolAll: true})
	rs := []rule.Rule{dropRule("a", "203.0.113.0/24", 53), dropRule("x", "2001:db8::/32", 19)}
	var es []offload.Entry
	for i := range rs {
		res := compile.Rule(&compile.Config{Caps: swCaps(), PrioV4: 3, PrioV6: 3}, &rs[i])
		es = append(es, res.Entries...)
	}
	res, err := b.Install(context.Background(), es)
	if err != nil || res[0].Err != nil || res[1].Err != nil {
		t.Fatalf("%v %+v", err, res)
	}
	// without ProtocolAll the second family at the same priority is refused
	k2 := &fakeKernel{}
	b2 := NewFlowerBackend(FlowerConfig{Client: k2, Ifindex: 7, Caps: swCaps(), Flags: tcflower.SkipHW})
	res, _ = b2.Install(context.Background(), es)
	if res[0].Err != nil || res[1].Err == nil {
		t.Fatalf("%+v", res)
	}
	d, _ := b.Dump(context.Background())
	if len(d) != 2 || d[0].Match != es[0].Match || d[1].Match != es[1].Match {
		t.Fatalf("dump %+v", d)
	}
}
