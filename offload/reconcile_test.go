package offload_test

import (
	"context"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/scrubd/scrubd/offload"
	"github.com/scrubd/scrubd/offload/compile"
	"github.com/scrubd/scrubd/offload/sim"
	"github.com/scrubd/scrubd/swpath/rule"
)

var owner = offload.Owner{Chain: 0, PrioLo: 10, PrioHi: 11}

func cfg(caps offload.Capabilities) *compile.Config {
	return &compile.Config{Caps: caps, PrioV4: 10, PrioV6: 11}
}

func dropRule(id, dst string, dport uint32) rule.Rule {
	return rule.Rule{ID: id, Priority: 100, Action: rule.Drop, Match: rule.Match{
		Dst: netip.MustParsePrefix(dst), Proto: []uint8{rule.ProtoUDP},
		DstPort: rule.Ranges{{Lo: dport, Hi: dport}}}}
}

func entriesOf(t *testing.T, c *compile.Config, rs ...rule.Rule) []offload.Entry {
	t.Helper()
	var out []offload.Entry
	for i := range rs {
		res := compile.Rule(c, &rs[i])
		if !res.Offloadable {
			t.Fatalf("rule %s: %s", rs[i].ID, res.Detail)
		}
		out = append(out, res.Entries...)
	}
	return out
}

// foreign returns an OVS-like entry at prio p without scrubd's cookie, and
// two with scrubd's cookie in a chain or at a priority scrubd does not own.
func foreign(p uint16) []offload.Entry {
	m := offload.Match{Family: rule.IPv4, HasProto: true, Proto: rule.ProtoTCP}
	m.Dst, m.DstMask = rule.PrefixAddr(netip.MustParsePrefix("192.0.2.0/24"))
	ovs := offload.Entry{Prio: p, Match: m, Cookie: offload.Cookie{0xaa, 0xbb, 1}}
	other := offload.Entry{Chain: 1, Prio: p, Match: m}
	other.SetCookie(offload.RuleHash("x", &rule.Match{}))
	// scrubd's cookie in chain 0 but at a priority scrubd does not own
	m.Proto = rule.ProtoUDP
	low := offload.Entry{Prio: p, Match: m}
	low.SetCookie(offload.RuleHash("y", &rule.Match{}))
	return []offload.Entry{ovs, other, low}
}

// recorder wraps a backend and checks, after every call that changes the
// device, that the entries in must are all installed.
type recorder struct {
	offload.Backend
	t    *testing.T
	ops  []string
	must []offload.Entry
}

func (r *recorder) check(op string) {
	r.ops = append(r.ops, op)
	d, err := r.Backend.Dump(context.Background())
	if err != nil {
		r.t.Fatal(err)
	}
	for _, m := range r.must {
		if !slices.ContainsFunc(d, func(x offload.Installed) bool { return x.Cookie == m.Cookie && x.Match == m.Match }) {
			r.t.Fatalf("after %v: entry %s of a rule wanted before and after is missing", r.ops, m.Match.String())
		}
	}
}

func (r *recorder) Install(ctx context.Context, es []offload.Entry) ([]offload.Result, error) {
	res, err := r.Backend.Install(ctx, es)
	r.check("install")
	return res, err
}

func (r *recorder) Remove(ctx context.Context, es []offload.Entry) ([]offload.Result, error) {
	res, err := r.Backend.Remove(ctx, es)
	r.check("remove")
	return res, err
}

func TestReconcileRestartKeepsAndNeverWidensTheGap(t *testing.T) {
	ctx := context.Background()
	caps := offload.MLX5(4096)
	nic := sim.New(sim.Config{Caps: caps, Clock: sim.NewFakeClock(time.Unix(0, 0))})
	c := cfg(caps)
	a, b, x := dropRule("a", "203.0.113.0/24", 53), dropRule("b", "198.51.100.0/24", 123), dropRule("x", "2001:db8::/32", 19)
	old := entriesOf(t, c, a, b)
	if res, _ := nic.Install(ctx, append(foreign(1), foreign(4)...)); slices.ContainsFunc(res, func(r offload.Result) bool { return r.Err != nil }) {
		t.Fatal(res)
	}
	rep, err := offload.Reconcile(ctx, nic, owner, old)
	if err != nil || rep.Added != len(old) || rep.Removed != 0 || len(rep.Failed) != 0 {
		t.Fatalf("first reconcile: %+v %v", rep, err)
	}
	// a restarted agent with the same rules changes nothing
	rep, err = offload.Reconcile(ctx, nic, owner, old)
	if err != nil || rep.Kept != len(old) || rep.Added != 0 || rep.Removed != 0 {
		t.Fatalf("restart: %+v %v", rep, err)
	}
	// rule b goes, x comes, a stays: a's entries must be present after
	// every single device operation; x is installed before b is removed.
	rec := &recorder{Backend: nic, t: t, must: entriesOf(t, c, a)}
	want := entriesOf(t, c, a, x)
	rep, err = offload.Reconcile(ctx, rec, owner, want)
	if err != nil || rep.Kept != 1 || rep.Added != 1 || rep.Removed != 1 || len(rep.Failed) != 0 {
		t.Fatalf("change: %+v %v", rep, err)
	}
	if !slices.Equal(rec.ops, []string{"install", "remove"}) {
		t.Fatalf("operations %v, want install before remove", rec.ops)
	}
	d, _ := nic.Dump(ctx)
	var foreignLeft, ours int
	for _, e := range d {
		if owner.Owns(&e.Entry) {
			ours++
			if !slices.ContainsFunc(want, func(w offload.Entry) bool { return w.Cookie == e.Cookie }) {
				t.Errorf("stale entry left: %s", e.Match.String())
			}
		} else {
			foreignLeft++
		}
	}
	if foreignLeft != 6 || ours != len(want) {
		t.Fatalf("after reconcile: %d foreign (want 6), %d ours (want %d)", foreignLeft, ours, len(want))
	}
	// the NIC drops x's traffic and no longer b's
	fx := rule.Fields{Family: rule.IPv6, Proto: rule.ProtoUDP, L4: true, Frag: rule.NotFragment,
		Dst: rule.AddrFrom(netip.MustParseAddr("2001:db8::9")), DstPort: 19}
	fb := rule.Fields{Family: rule.IPv4, Proto: rule.ProtoUDP, L4: true, Frag: rule.NotFragment,
		Dst: rule.AddrFrom(netip.MustParseAddr("198.51.100.1")), DstPort: 123}
	if _, ok := nic.Process(&fx, 64); !ok {
		t.Error("x not dropped")
	}
	if _, ok := nic.Process(&fb, 64); ok {
		t.Error("b still dropped")
	}
}

func TestReconcileRetriesAfterFreeingSpace(t *testing.T) {
	ctx := context.Background()
	caps := offload.MLX5(4)
	caps.InsertRate = 0
	nic := sim.New(sim.Config{Caps: caps, Clock: sim.NewFakeClock(time.Unix(0, 0))})
	c := cfg(caps)
	var olds, news []rule.Rule
	for i := range 4 {
		olds = append(olds, dropRule("o"+string(rune('a'+i)), "203.0.113.0/24", uint32(100+i)))
		news = append(news, dropRule("n"+string(rune('a'+i)), "203.0.113.0/24", uint32(200+i)))
	}
	if rep, err := offload.Reconcile(ctx, nic, owner, entriesOf(t, c, olds...)); err != nil || rep.Added != 4 {
		t.Fatalf("%+v %v", rep, err)
	}
	rep, err := offload.Reconcile(ctx, nic, owner, entriesOf(t, c, news[:3]...))
	if err != nil || rep.Added != 3 || rep.Removed != 4 || len(rep.Failed) != 0 {
		t.Fatalf("full table: %+v %v", rep, err)
	}
	// more wanted than fit: the excess is reported, not lost silently
	rep, err = offload.Reconcile(ctx, nic, owner, entriesOf(t, c, append(news, olds...)...))
	if err != nil || len(rep.Failed) != 4 || !offload.IsNoSpace(rep.Failed[0].Err) || len(rep.Installed) != 4 {
		t.Fatalf("over capacity: %+v %v", rep, err)
	}
}

func TestReconcileRefusesEntriesItWouldNotRecognise(t *testing.T) {
	nic := sim.New(sim.Config{Clock: sim.NewFakeClock(time.Unix(0, 0))})
	e := entriesOf(t, &compile.Config{Caps: offload.MLX5(4096), PrioV4: 3, PrioV6: 3}, dropRule("a", "10.0.0.0/8", 53))
	if _, err := offload.Reconcile(context.Background(), nic, owner, e); err == nil {
		t.Fatal("entries outside the owner's priorities accepted")
	}
}

func TestReconcileDeviceGone(t *testing.T) {
	nic := sim.New(sim.Config{Clock: sim.NewFakeClock(time.Unix(0, 0))})
	nic.SetGone(true)
	_, err := offload.Reconcile(context.Background(), nic, owner, nil)
	if !offload.IsDeviceGone(err) {
		t.Fatalf("%v", err)
	}
}

func TestCapacityOf(t *testing.T) {
	c := cfg(offload.MLX5(100))
	es := entriesOf(t, c, dropRule("a", "203.0.113.0/24", 53), dropRule("b", "198.51.100.0/25", 53), dropRule("x", "2001:db8::/32", 19))
	cp := offload.CapacityOf(offload.MLX5(100), es)
	if cp.Entries != 3 || cp.FreeEntries() != 97 || len(cp.Tables) != 2 || cp.Tables[0].Masks != 2 || cp.FreeMasks(offload.Table{Prio: 10}) != 13 {
		t.Fatalf("%+v", cp)
	}
}

// TestReconcileAfterFlush: OVS restarting deletes the ingress qdisc and with
// it every filter; the next reconcile puts all wanted entries back.
func TestReconcileAfterFlush(t *testing.T) {
	ctx := context.Background()
	caps := offload.MLX5(4096)
	nic := sim.New(sim.Config{Caps: caps, Clock: sim.NewFakeClock(time.Unix(0, 0))})
	want := entriesOf(t, cfg(caps), dropRule("a", "203.0.113.0/24", 53), dropRule("b", "2001:db8::/32", 19))
	if _, err := offload.Reconcile(ctx, nic, owner, want); err != nil {
		t.Fatal(err)
	}
	nic.Flush()
	rep, err := offload.Reconcile(ctx, nic, owner, want)
	if err != nil || rep.Added != len(want) || rep.Kept != 0 {
		t.Fatalf("%+v %v", rep, err)
	}
	if c := nic.Capacity(); c.Entries != len(want) {
		t.Fatalf("%+v", c)
	}
}
