package guest

import (
	"errors"
	"net/netip"
	"os/exec"
	"sort"
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"

	"github.com/scrubd/scrubd/offload/nlerr"
	"github.com/scrubd/scrubd/offload/tcflower"
)

var addrCmp = cmp.Comparer(func(a, b netip.Addr) bool { return a == b })

// labFilters covers every key the codec writes, with skip_hw, on ifindex.
func labFilters(ifindex int) []tcflower.Filter {
	pfx := func(s string) tcflower.AddrMask { return tcflower.Prefix(netip.MustParsePrefix(s)) }
	v4 := func(h uint32, k tcflower.Key) tcflower.Filter {
		k.EthType = tcflower.ProtoIPv4
		return tcflower.Filter{Ifindex: ifindex, Prio: 10, Protocol: tcflower.ProtoIPv4, Handle: h, Flags: tcflower.SkipHW, Key: k,
			Actions: []tcflower.Action{tcflower.Drop(tcflower.MakeCookie(uint64(h)))}}
	}
	v6 := func(h uint32, k tcflower.Key) tcflower.Filter {
		k.EthType = tcflower.ProtoIPv6
		return tcflower.Filter{Ifindex: ifindex, Prio: 20, Protocol: tcflower.ProtoIPv6, Handle: h, Flags: tcflower.SkipHW, Key: k,
			Actions: []tcflower.Action{tcflower.Drop(tcflower.MakeCookie(uint64(h)))}}
	}
	dscp := tcflower.Key{IPProto: tcflower.IPProtoUDP, Dst: pfx("203.0.113.0/24")}
	dscp.DSCP(46)
	out := []tcflower.Filter{
		v4(1, tcflower.Key{IPProto: tcflower.IPProtoTCP, Src: pfx("10.1.0.0/16"),
			Dst:     tcflower.AddrMask{Addr: netip.MustParseAddr("192.0.0.7"), Mask: netip.MustParseAddr("255.255.0.255")},
			SrcPort: tcflower.PortMask{Port: 0x400, Mask: 0xfc00}, DstPort: tcflower.PortMask{Port: 80, Mask: 0xffff},
			TCPFlags: 0x02, TCPFlagsMask: 0x12}),
		v4(2, tcflower.Key{IPProto: tcflower.IPProtoUDP, DstPort: tcflower.PortMask{Port: 53, Mask: 0xffff}}),
		v4(3, tcflower.Key{IPProto: tcflower.IPProtoICMP, ICMPType: 8, ICMPTypeMask: 0xff, ICMPCode: 0, ICMPCodeMask: 0xff}),
		v4(4, tcflower.Key{IPFlags: tcflower.IPFlagFrag, IPFlagsMask: tcflower.IPFlagFrag | tcflower.IPFlagFirstFrag}),
		v4(5, dscp),
		v6(6, tcflower.Key{IPProto: tcflower.IPProtoUDP, Dst: pfx("2001:db8:1::/48"), SrcPort: tcflower.PortMask{Port: 0x1000, Mask: 0xf000}}),
		v6(7, tcflower.Key{IPProto: tcflower.IPProtoICMPv6, Src: pfx("2001:db8::1/128"), ICMPType: 128, ICMPTypeMask: 0xff}),
		v6(8, tcflower.Key{TOS: 0xb8, TOSMask: 0xfc}),
		{Ifindex: ifindex, Prio: 30, Protocol: tcflower.Proto8021Q, Handle: 9, Flags: tcflower.SkipHW,
			Key: tcflower.Key{EthType: tcflower.Proto8021Q, VLAN: tcflower.VLANKey{ID: 100, HasID: true, Prio: 3, HasPrio: true, EthType: tcflower.ProtoIPv4},
				IPProto: tcflower.IPProtoTCP, Dst: pfx("198.51.100.0/24")},
			Actions: []tcflower.Action{tcflower.Drop(tcflower.MakeCookie(9))}},
	}
	return out
}

// expectRead is what a dump must return for a filter we installed: the
// kernel adds the parent, not_in_hw (skip_hw), the action index and stats.
func expectRead(f tcflower.Filter) tcflower.Filter {
	f.Parent = tcflower.ParentIngress
	f.Flags |= tcflower.NotInHW
	return f
}

// comparable drops what only the kernel decides (action index, counters,
// ages) so that read-back can be compared field by field.
func comparable(fs []tcflower.Filter) []tcflower.Filter {
	out := make([]tcflower.Filter, len(fs))
	for i, f := range fs {
		acts := make([]tcflower.Action, len(f.Actions))
		for j, a := range f.Actions {
			a.Index, a.Stats, a.Times = 0, tcflower.Stats{}, tcflower.Times{}
			acts[j] = a
		}
		f.Actions = acts
		out[i] = f
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Prio != out[j].Prio {
			return out[i].Prio < out[j].Prio
		}
		return out[i].Handle < out[j].Handle
	})
	return out
}

func dumpAll(t *testing.T, c *tcflower.Client, ifindex int) []tcflower.Filter {
	t.Helper()
	got, err := c.Dump(tcflower.DumpQuery{Ifindex: ifindex, AllChain: true})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func TestFlowerLifecycle(t *testing.T) {
	requireGuest(t)
	c := dial(t)
	ia, _ := vethPair(t, "lc0", "lc1")

	st, err := c.EnsureQdisc(ia)
	if err != nil || st != (tcflower.QdiscState{Kind: "clsact", Created: true}) {
		t.Fatalf("EnsureQdisc on a bare veth = %+v, %v; want clsact created", st, err)
	}
	if st, err = c.EnsureQdisc(ia); err != nil || st != (tcflower.QdiscState{Kind: "clsact"}) {
		t.Fatalf("second EnsureQdisc = %+v, %v; want existing clsact kept", st, err)
	}

	// Install: one batch, echo on.
	want := labFilters(ia)
	ops := make([]tcflower.Op, len(want))
	for i, f := range want {
		ops[i] = tcflower.Op{Kind: tcflower.OpAdd, Filter: f}
	}
	for i, r := range c.Batch(ops, tcflower.BatchOptions{Echo: true, Window: 4}) {
		if r.Err != nil {
			t.Fatalf("install %s: %v", want[i].ID(), r.Err)
		}
		if r.Warning != "" {
			t.Logf("install %s: warning %q", want[i].ID(), r.Warning)
		}
		if diff := cmp.Diff(comparable([]tcflower.Filter{expectRead(want[i])}), comparable([]tcflower.Filter{r.Filter}), addrCmp); diff != "" {
			t.Errorf("echo of %s differs (-sent +echo):\n%s", want[i].ID(), diff)
		}
	}
	exp := make([]tcflower.Filter, len(want))
	for i, f := range want {
		exp[i] = expectRead(f)
	}
	got := dumpAll(t, c, ia)
	if diff := cmp.Diff(comparable(exp), comparable(got), addrCmp); diff != "" {
		t.Fatalf("dump after install differs (-sent +kernel):\n%s", diff)
	}
	for _, f := range got {
		if f.InHWCount != 0 || f.Flags&tcflower.InHW != 0 || !f.Actions[0].Stats.Present || f.Actions[0].Index == 0 {
			t.Errorf("%s: in_hw_count %d flags %v stats %+v index %d", f.ID(), f.InHWCount, f.Flags, f.Actions[0].Stats, f.Actions[0].Index)
		}
	}
	t.Logf("installed and read back %d filters field by field", len(got))

	// Exclusive add of a taken handle is EEXIST.
	if _, err := c.Add(want[1]); !nlerr.IsExists(err) {
		t.Fatalf("re-adding handle 2: %v, want EEXIST", err)
	}
	// Get one.
	g, err := c.Get(tcflower.Filter{Ifindex: ia, Prio: 10, Protocol: tcflower.ProtoIPv4, Handle: 3})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(comparable([]tcflower.Filter{exp[2]}), comparable([]tcflower.Filter{g}), addrCmp); diff != "" {
		t.Fatalf("get handle 3 (-want +got):\n%s", diff)
	}

	// Update in place: same handle, new key with the same mask.
	upd := want[1]
	upd.Key.DstPort = tcflower.PortMask{Port: 5353, Mask: 0xffff}
	// A new mask cannot replace in place (fl_check_assign_mask: EINVAL).
	wider := want[1]
	wider.Key.DstPort = tcflower.PortMask{Port: 0x1100, Mask: 0xff00}
	if wider.Key.MaskEqual(want[1].Key) {
		t.Fatal("MaskEqual ignores the port mask")
	}
	_, err = c.Replace(wider)
	t.Logf("replace with a different mask: %v", err)
	var rne *nlerr.Error
	if !errors.As(err, &rne) || rne.Errno != unix.EINVAL {
		t.Fatalf("replace with a different mask: %v, want EINVAL", err)
	}
	if !upd.Key.MaskEqual(want[1].Key) {
		t.Fatal("MaskEqual: same mask reported different")
	}
	echo, err := c.Replace(upd)
	if err != nil {
		t.Fatal(err)
	}
	if echo.Handle != 2 || echo.Key.DstPort != upd.Key.DstPort {
		t.Fatalf("replace echo %+v", echo)
	}
	exp[1] = expectRead(upd)
	if diff := cmp.Diff(comparable(exp), comparable(dumpAll(t, c, ia)), addrCmp); diff != "" {
		t.Fatalf("dump after replace (-want +kernel):\n%s", diff)
	}

	// Kernel-allocated handle, read back through the echo.
	auto := want[2]
	auto.Handle, auto.Prio = 0, 11
	auto.Actions = []tcflower.Action{tcflower.Drop(tcflower.MakeCookie(42))}
	ae, err := c.Add(auto)
	if err != nil || ae.Handle == 0 || ae.Prio != 11 {
		t.Fatalf("auto-handle add: %+v %v", ae, err)
	}

	// Someone else's filters: a gact drop with a foreign cookie and a tc-made one.
	foreign := want[0]
	foreign.Handle = 100
	foreign.Actions = []tcflower.Action{tcflower.Drop([]byte("ovs-ufid-000001"))}
	// cls_flower refuses a second filter with the same key and mask in one
	// chain/prio (fl_ht_insert_unique: EEXIST, no extack), whoever owns it.
	if _, err := c.Add(foreign); !nlerr.IsExists(err) {
		t.Fatalf("same key under another handle: %v, want EEXIST", err)
	} else {
		t.Logf("same key under another handle: %v", err)
	}
	foreign.Key.DstPort.Port = 8080
	if _, err := c.Add(foreign); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("/usr/sbin/tc", "filter", "add", "dev", "lc0", "ingress", "protocol", "ip", "pref", "5", "handle", "7",
		"flower", "skip_hw", "ip_proto", "udp", "action", "drop").CombinedOutput(); err != nil {
		t.Fatalf("tc filter add: %v\n%s", err, out)
	}

	// Reconcile-like pass: wanted = filters 1,2(updated),4,5 plus a new 10;
	// keep what matches, replace what differs, delete our stale ones, add
	// the missing, and never touch foreign filters.
	wanted := map[uint64]tcflower.Filter{}
	ef := want[4]
	ef.Key.DSCP(10) // same mask: replaced in place
	for _, f := range []tcflower.Filter{want[0], upd, want[3], ef} {
		wanted[uint64(f.Handle)] = f
	}
	newF := want[2]
	newF.Handle = 10
	newF.Key.ICMPType = 13
	newF.Actions = []tcflower.Action{tcflower.Drop(tcflower.MakeCookie(10))}
	wanted[10] = newF
	var rops []tcflower.Op
	seen := map[uint64]bool{}
	for _, f := range dumpAll(t, c, ia) {
		id, ours := f.OwnedID()
		if !ours {
			continue
		}
		w, ok := wanted[id]
		switch {
		case !ok:
			rops = append(rops, tcflower.Op{Kind: tcflower.OpDelete, Filter: f})
		case cmp.Diff(comparable([]tcflower.Filter{expectRead(w)}), comparable([]tcflower.Filter{f}), addrCmp) != "":
			if !w.Key.MaskEqual(f.Key) || w.Prio != f.Prio {
				t.Fatalf("reconcile test expects same-mask updates only: %s", w.ID())
			}
			rops = append(rops, tcflower.Op{Kind: tcflower.OpReplace, Filter: w})
			seen[id] = true
		default:
			seen[id] = true
		}
	}
	for id, w := range wanted {
		if !seen[id] {
			rops = append(rops, tcflower.Op{Kind: tcflower.OpAdd, Filter: w})
		}
	}
	for i, r := range c.Batch(rops, tcflower.BatchOptions{}) {
		if r.Err != nil {
			t.Fatalf("reconcile op %d (%v %s): %v", i, rops[i].Kind, rops[i].Filter.ID(), r.Err)
		}
	}
	var ours, others []tcflower.Filter
	for _, f := range dumpAll(t, c, ia) {
		if _, ok := f.OwnedID(); ok {
			ours = append(ours, f)
		} else {
			others = append(others, f)
		}
	}
	var wantOurs []tcflower.Filter
	for _, w := range wanted {
		wantOurs = append(wantOurs, expectRead(w))
	}
	if diff := cmp.Diff(comparable(wantOurs), comparable(ours), addrCmp); diff != "" {
		t.Fatalf("after reconcile our filters differ (-wanted +kernel):\n%s", diff)
	}
	if len(others) != 2 {
		t.Fatalf("foreign filters after reconcile: %d, want 2 (cookie ovs + tc-made)", len(others))
	}
	t.Logf("reconcile: %d ops; %d own filters as wanted; %d foreign untouched", len(rops), len(ours), len(others))

	// Remove ours.
	var dops []tcflower.Op
	for _, f := range ours {
		dops = append(dops, tcflower.Op{Kind: tcflower.OpDelete, Filter: f})
	}
	for _, r := range c.Batch(dops, tcflower.BatchOptions{}) {
		if r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	if left := dumpAll(t, c, ia); len(left) != 2 {
		t.Fatalf("after delete %d filters left, want the 2 foreign", len(left))
	}
	// Deleting again: ENOENT, typed.
	err = c.Delete(ours[0])
	var ne *nlerr.Error
	if !errors.As(err, &ne) || ne.Errno == 0 {
		t.Fatalf("second delete of %s: %v, want a typed errno", ours[0].ID(), err)
	}
	t.Logf("second delete of %s: %v", ours[0].ID(), err)
}
