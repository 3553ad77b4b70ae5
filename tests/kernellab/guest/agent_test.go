package guest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"

	"github.com/scrubd/scrubd/agent/dataplane"
	"github.com/scrubd/scrubd/agent/hwpath"
	"github.com/scrubd/scrubd/agent/placement"
	"github.com/scrubd/scrubd/agent/store"
	"github.com/scrubd/scrubd/offload"
	"github.com/scrubd/scrubd/offload/compile"
	"github.com/scrubd/scrubd/offload/nlerr"
	"github.com/scrubd/scrubd/offload/tcflower"
	"github.com/scrubd/scrubd/swpath/rule"
)

// The agent's production table layout (agent/hwpath/flower.go): chain 0, IPv4
// entries at priority 10, IPv6 at 11.
const (
	agentChain  = 0
	agentPrioV4 = 10
	agentPrioV6 = 11
)

func agentCompile(caps offload.Capabilities) compile.Config {
	return compile.Config{Caps: caps, Chain: agentChain, PrioV4: agentPrioV4, PrioV6: agentPrioV6}
}

// recSW is a minimal software path for the placer: it keeps the rule set it
// was last given (what a real engine would enforce).
type recSW struct {
	set  *rule.Set
	sets int
}

func (s *recSW) Name() string { return "recorded" }
func (s *recSW) SetRules(set *rule.Set) error {
	c := *set
	c.Rules = append([]rule.Rule(nil), set.Rules...)
	s.set, s.sets = &c, s.sets+1
	return nil
}
func (s *recSW) Stats() dataplane.SWStats {
	return dataplane.SWStats{}
}
func (s *recSW) Capacity() (int, float64) { return 1, 1e9 }

func dropRule(id string, prio uint32, dst string, proto uint8, port uint32) rule.Rule {
	m := rule.Match{Dst: netip.MustParsePrefix(dst)}
	if proto != 0 {
		m.Proto = []uint8{proto}
	}
	if port != 0 {
		m.DstPort = rule.Ranges{{Lo: port, Hi: port}}
	}
	return rule.Rule{ID: id, Priority: prio, Action: rule.Drop, Match: m}
}

// repString summarises a reconcile report (counts and failures).
func repString(r offload.ReconcileReport) string {
	s := fmt.Sprintf("kept %d added %d removed %d", r.Kept, r.Added, r.Removed)
	for _, f := range r.Failed {
		s += fmt.Sprintf("; failed %s: %v", f.Entry.Cookie, f.Err)
	}
	return s
}

// ourFilters returns the filters with scrubd's 16-byte cookie and the rest.
func ourFilters(fs []tcflower.Filter) (ours, others []tcflower.Filter) {
	for _, f := range fs {
		e, _ := hwpath.FromFilter(&f)
		if e.Cookie.Ours() {
			ours = append(ours, f)
		} else {
			others = append(others, f)
		}
	}
	return ours, others
}

// TestAgentNetdevsimFallsBackToSoftware drives the production stack
// (hwpath's flower backend with skip_sw, hwpath, placement) against netdevsim, whose
// driver refuses every flower filter in hardware: the drop rule must end up
// in the software path with the driver's extack as the reason, and nothing
// of scrubd's may stay on the device.
func TestAgentNetdevsimFallsBackToSoftware(t *testing.T) {
	requireNetdevsim(t)
	writeSys(t, "/sys/bus/netdevsim/new_device", "11 1")
	t.Cleanup(func() { _ = os.WriteFile("/sys/bus/netdevsim/del_device", []byte("11"), 0o200) })
	pf := nsimNetdevs(t, "11")[0]
	pfIdx := ifindexOf(t, pf)
	c := dial(t)
	ctx := context.Background()

	// Someone else's filter on the device (software, another priority).
	if _, err := c.EnsureQdisc(pfIdx); err != nil {
		t.Fatal(err)
	}
	foreign := labFilters(pfIdx)[1] // udp dport 53, skip_hw, prio 10
	foreign.Prio, foreign.Handle = 5, 7
	foreign.Actions = []tcflower.Action{tcflower.Drop([]byte("ovs-ufid-000002"))}
	if _, err := c.Add(foreign); err != nil {
		t.Fatalf("foreign filter: %v", err)
	}
	before, err := c.Dump(tcflower.DumpQuery{Ifindex: pfIdx, AllChain: true})
	if err != nil || len(before) != 1 {
		t.Fatalf("dump before = %d filters, %v", len(before), err)
	}

	caps := offload.MLX5(0)
	be := hwpath.NewFlowerBackend(hwpath.FlowerConfig{Client: c, Ifindex: pfIdx, Dev: pf, Caps: caps, Flags: tcflower.SkipSW})
	hw := hwpath.New(hwpath.Config{Name: "tcflower:" + pf, Compile: agentCompile(caps),
		Owner: offload.Owner{Chain: agentChain, PrioLo: agentPrioV4, PrioHi: agentPrioV6}}, be)
	r := dropRule("dns-amp", 100, "198.51.100.0/24", rule.ProtoUDP, 53)
	set := rule.Set{Rules: []rule.Rule{r}}

	// The compiler finds it offloadable; the device refuses it.
	if cost, err := hw.Compile(&set.Rules[0], &set); err != nil || cost.Entries != 1 {
		t.Fatalf("compile: %+v %v; want 1 entry", cost, err)
	}
	err = hw.Install(ctx, &set.Rules[0], &set)
	if err == nil {
		t.Fatal("skip_sw install on netdevsim succeeded")
	}
	t.Logf("hwpath install: %v", err)
	var he *dataplane.HWError
	var ee *offload.EntryError
	var ne *nlerr.Error
	if !errors.As(err, &he) || he.Kind != dataplane.KindUnsupported || he.Rule != r.ID || !strings.Contains(he.Detail, nsimExtack) {
		t.Fatalf("hwpath error %#v: want HWError unsupported with the extack", he)
	}
	if !errors.As(err, &ee) || ee.Kind != offload.KindUnsupported || ee.Errno != unix.EOPNOTSUPP || !strings.Contains(ee.Extack, nsimExtack) || ee.Dev != pf || ee.Op != "install" {
		t.Fatalf("entry error %#v: want EOPNOTSUPP with extack %q on %s", ee, nsimExtack, pf)
	}
	if !errors.As(err, &ne) || ne.Errno != unix.EOPNOTSUPP || !strings.Contains(ne.Extack, nsimExtack) || ne.Dev != pf {
		t.Fatalf("netlink error %#v: want EOPNOTSUPP with extack", ne)
	}
	if !errors.Is(err, unix.EOPNOTSUPP) || !offload.IsUnsupported(err) || !nlerr.IsUnsupported(err) {
		t.Fatalf("error chain %v: not EOPNOTSUPP/unsupported", err)
	}

	// The placer: reconcile (dumps the device, finds nothing of ours), then
	// offload first, refused, software.
	sw := &recSW{}
	p := placement.New(placement.Config{MinDwell: time.Second}, hw, sw, slog.New(slog.NewTextHandler(io.Discard, nil)), time.Now)
	if err := p.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	p.Apply(ctx, store.Snapshot{Version: 1, Set: set})
	v := p.View()
	if v.Rules.Len() != 1 {
		t.Fatalf("view rules %+v", v.Rules)
	}
	rv := v.Rules.At(0)
	t.Logf("placement: %s -> %s: %s", rv.ID, rv.Path, rv.Reason)
	if rv.ID != r.ID || rv.Path != placement.SW || !strings.Contains(rv.Reason, nsimExtack) || !strings.Contains(rv.Reason, "unsupported") {
		t.Fatalf("placement %+v: want software with the driver's extack %q", rv, nsimExtack)
	}
	if !v.HWUp || v.HWFailures[dataplane.KindUnsupported] == 0 {
		t.Fatalf("hw up %v failures %v: want up, an unsupported failure counted", v.HWUp, v.HWFailures)
	}
	var last *placement.Decision
	for i := range v.Decisions {
		if v.Decisions[i].Rule == r.ID {
			last = &v.Decisions[i]
		}
	}
	if last == nil || last.To != placement.SW || !strings.Contains(last.Reason, nsimExtack) {
		t.Fatalf("decisions %+v: want the rule recorded to software with the extack", v.Decisions)
	}
	// The software path enforces it: it holds the rule, and the rule drops
	// a packet it matches by the shared semantics.
	if sw.set == nil || sw.set.Index(r.ID) < 0 {
		t.Fatalf("software set %+v lacks %s", sw.set, r.ID)
	}
	fl := rule.Fields{Family: rule.IPv4, Proto: rule.ProtoUDP, L4: true, Frag: rule.NotFragment, SrcPort: 4444, DstPort: 53,
		Src: rule.AddrFrom(netip.MustParseAddr("192.0.2.1")), Dst: rule.AddrFrom(netip.MustParseAddr("198.51.100.9"))}
	sr := sw.set.Rules[sw.set.Index(r.ID)]
	if sr.Action != rule.Drop || !sr.Match.Matches(&fl) {
		t.Fatalf("software rule %+v does not drop %+v", sr, fl)
	}

	// Nothing of ours on the device; the foreign filter untouched.
	after, err := c.Dump(tcflower.DumpQuery{Ifindex: pfIdx, AllChain: true})
	if err != nil {
		t.Fatal(err)
	}
	ours, others := ourFilters(after)
	if len(ours) != 0 {
		t.Fatalf("scrubd filters left on %s: %+v", pf, ours)
	}
	if d := cmp.Diff(comparable(before), comparable(others), addrCmp); d != "" {
		t.Fatalf("foreign filter changed (-before +after):\n%s", d)
	}
	if keys, err := hw.Installed(ctx); err != nil || len(keys) != 0 {
		t.Fatalf("hwpath installed = %v, %v; want none", keys, err)
	}
}

// TestAgentReconcileSoftwareFlower runs offload.Reconcile through
// hwpath's flower backend (skip_hw, Owner.Software) on a veth: a fresh install, a
// restart with the same wanted set that changes nothing, and a restart
// with one rule fewer that removes only that rule's entries. Foreign
// filters (another cookie in our priority, our cookie in another
// priority) are never touched.
func TestAgentReconcileSoftwareFlower(t *testing.T) {
	requireGuest(t)
	ia, _ := vethPair(t, "scra0", "scrb0")
	ctx := context.Background()
	caps := offload.SoftwareFlower()
	cc := agentCompile(caps)
	owner := offload.Owner{Chain: agentChain, PrioLo: agentPrioV4, PrioHi: agentPrioV6, Software: true}
	rules := []rule.Rule{
		dropRule("a-dns", 100, "198.51.100.0/24", rule.ProtoUDP, 53),
		dropRule("b-ports", 100, "203.0.113.0/24", rule.ProtoTCP, 0),
		dropRule("c-v6", 100, "2001:db8:7::/48", rule.ProtoUDP, 0),
	}
	rules[1].Match.DstPort = rule.Ranges{{Lo: 1000, Hi: 2000}} // 8 entries
	entriesOf := func(rs []rule.Rule) []offload.Entry {
		var out []offload.Entry
		for i := range rs {
			res := compile.Rule(&cc, &rs[i])
			if !res.Offloadable {
				t.Fatalf("rule %s not offloadable: %s", rs[i].ID, res.Detail)
			}
			out = append(out, res.Entries...)
		}
		return out
	}
	wanted := entriesOf(rules)
	if len(wanted) != 10 {
		t.Fatalf("compiled %d entries, want 10 (1 + 8 + 1)", len(wanted))
	}

	// Foreign: another cookie in our table, and a scrubd-looking cookie in
	// a priority scrubd does not own.
	c := dial(t)
	if _, err := c.EnsureQdisc(ia); err != nil {
		t.Fatal(err)
	}
	be0 := hwpath.NewFlowerBackend(hwpath.FlowerConfig{Client: c, Ifindex: ia, Dev: "scra0", Caps: caps, Flags: tcflower.SkipHW})
	f1 := labFilters(ia)[1]
	f1.Prio, f1.Handle = agentPrioV4, 900
	f1.Actions = []tcflower.Action{tcflower.Drop([]byte("ovs-ufid-000003"))}
	f2, err := be0.ToFilter(&wanted[0])
	if err != nil {
		t.Fatal(err)
	}
	f2.Prio, f2.Handle = 40, 901
	for _, f := range []tcflower.Filter{f1, f2} {
		if _, err := c.Add(f); err != nil {
			t.Fatalf("foreign %s: %v", f.ID(), err)
		}
	}
	foreignBefore, err := c.Dump(tcflower.DumpQuery{Ifindex: ia, AllChain: true})
	if err != nil || len(foreignBefore) != 2 {
		t.Fatalf("foreign dump = %d, %v", len(foreignBefore), err)
	}

	// readBack dumps through the backend: our entries by cookie, and the
	// raw foreign filters.
	readBack := func(b *hwpath.FlowerBackend) (map[offload.Cookie]offload.Installed, []tcflower.Filter) {
		t.Helper()
		d, err := b.Dump(ctx)
		if err != nil {
			t.Fatal(err)
		}
		ours := map[offload.Cookie]offload.Installed{}
		for _, x := range d {
			if owner.Owns(&x.Entry) {
				if _, dup := ours[x.Cookie]; dup {
					t.Fatalf("cookie %s installed twice", x.Cookie)
				}
				ours[x.Cookie] = x
			}
		}
		fs, err := c.Dump(tcflower.DumpQuery{Ifindex: ia, AllChain: true})
		if err != nil {
			t.Fatal(err)
		}
		var others []tcflower.Filter
		for _, f := range fs {
			e, _ := hwpath.FromFilter(&f)
			if !owner.Owns(&e) {
				others = append(others, f)
			}
		}
		if len(ours)+len(others) != len(fs) {
			t.Fatalf("dump: %d ours + %d others != %d filters", len(ours), len(others), len(fs))
		}
		return ours, others
	}
	checkForeign := func(step string, others []tcflower.Filter) {
		t.Helper()
		if d := cmp.Diff(comparable(foreignBefore), comparable(others), addrCmp); d != "" {
			t.Fatalf("%s: foreign filters changed (-before +after):\n%s", step, d)
		}
	}
	checkWanted := func(step string, got map[offload.Cookie]offload.Installed, want []offload.Entry) {
		t.Helper()
		if len(got) != len(want) {
			t.Fatalf("%s: %d entries of ours installed, want %d", step, len(got), len(want))
		}
		for _, w := range want {
			g, ok := got[w.Cookie]
			if !ok {
				t.Fatalf("%s: entry %s (%s) missing", step, w.Cookie, w.Match.String())
			}
			wm := w.Match
			wm.Normalize()
			if g.Table() != w.Table() || g.Match != wm || !g.NotInHW || g.InHW {
				t.Fatalf("%s: entry %s read back %+v, want table %v match %s not_in_hw", step, w.Cookie, g, w.Table(), wm.String())
			}
		}
	}

	// First start: everything added.
	rep, err := offload.Reconcile(ctx, be0, owner, wanted)
	if err != nil || len(rep.Failed) > 0 || rep.Added != 10 || rep.Kept != 0 || rep.Removed != 0 {
		t.Fatalf("first reconcile %s, %v; want 10 added", repString(rep), err)
	}
	t.Logf("reconcile, first start: %s", repString(rep))
	got1, others := readBack(be0)
	checkWanted("first", got1, wanted)
	checkForeign("first", others)

	// Restart (new client, new backend) with the same wanted set: nothing
	// changes, handles included.
	c2 := dial(t)
	be1 := hwpath.NewFlowerBackend(hwpath.FlowerConfig{Client: c2, Ifindex: ia, Dev: "scra0", Caps: caps, Flags: tcflower.SkipHW})
	rep, err = offload.Reconcile(ctx, be1, owner, wanted)
	if err != nil || len(rep.Failed) > 0 || rep.Added != 0 || rep.Kept != 10 || rep.Removed != 0 {
		t.Fatalf("restart reconcile %s, %v; want 10 kept, nothing else", repString(rep), err)
	}
	t.Logf("reconcile, restart, same set: %s", repString(rep))
	got2, others := readBack(be1)
	if d := cmp.Diff(got1, got2); d != "" {
		t.Fatalf("restart changed installed entries (-before +after):\n%s", d)
	}
	checkForeign("restart", others)
	for _, e := range rep.Installed {
		if e.Handle == 0 || got1[e.Cookie].Handle != e.Handle {
			t.Fatalf("restart: kept entry %s handle %d, installed %d", e.Cookie, e.Handle, got1[e.Cookie].Handle)
		}
	}

	// Restart with b-ports dropped from the wanted set: only its 8 entries go.
	keep := entriesOf([]rule.Rule{rules[0], rules[2]})
	rep, err = offload.Reconcile(ctx, be1, owner, keep)
	if err != nil || len(rep.Failed) > 0 || rep.Added != 0 || rep.Kept != 2 || rep.Removed != 8 {
		t.Fatalf("reconcile without b-ports %s, %v; want 2 kept, 8 removed", repString(rep), err)
	}
	t.Logf("reconcile, restart without b-ports: %s", repString(rep))
	got3, others := readBack(be1)
	checkWanted("removal", got3, keep)
	for ck, x := range got3 {
		if got1[ck].Handle != x.Handle {
			t.Fatalf("removal: kept entry %s moved from handle %d to %d", ck, got1[ck].Handle, x.Handle)
		}
	}
	checkForeign("removal", others)

	// Empty wanted set: ours gone, foreign still there.
	rep, err = offload.Reconcile(ctx, be1, owner, nil)
	if err != nil || len(rep.Failed) > 0 || rep.Removed != 2 {
		t.Fatalf("reconcile to empty %s, %v; want 2 removed", repString(rep), err)
	}
	t.Logf("reconcile, empty set: %s", repString(rep))
	got4, others := readBack(be1)
	if len(got4) != 0 {
		t.Fatalf("entries left after empty reconcile: %+v", got4)
	}
	checkForeign("empty", others)
}
