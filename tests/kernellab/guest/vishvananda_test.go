package guest

import (
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/scrubd/scrubd/offload/tcflower"
)

// TestVishvanandaFlowerFlags shows on cls_flower the flag defects of
// vishvananda/netlink v1.3.1's Flower for which offload/tcflower keeps its
// own codec (its package doc lists them): Flower.encode writes
// TCA_FLOWER_FLAGS in network byte order, so on this little-endian guest a
// skip flag arrives as an invalid bit and the kernel refuses the filter,
// while the same filter without flags goes in; Flower.decode swaps the
// skip bits, so a skip_hw filter (installed with our codec, shown by tc
// as skip_hw) reads back as SkipSw.
func TestVishvanandaFlowerFlags(t *testing.T) {
	requireGuest(t)
	c := dial(t)
	ia, _ := vethPair(t, "vf0", "vf1")
	if _, err := c.EnsureQdisc(ia); err != nil {
		t.Fatal(err)
	}
	flower := func(prio uint16, skipHw bool) *netlink.Flower {
		return &netlink.Flower{
			FilterAttrs: netlink.FilterAttrs{LinkIndex: ia, Parent: tcflower.ParentIngress, Priority: prio, Protocol: unix.ETH_P_IP},
			EthType:     unix.ETH_P_IP,
			SkipHw:      skipHw,
			Actions:     []netlink.Action{&netlink.GenericAction{ActionAttrs: netlink.ActionAttrs{Action: netlink.TC_ACT_SHOT}}},
		}
	}
	err := netlink.FilterAdd(flower(40, true))
	t.Logf("vishvananda Flower{SkipHw: true}: %v", err)
	if !errors.Is(err, unix.EINVAL) {
		t.Fatalf("vishvananda FilterAdd with SkipHw = %v; want EINVAL (flags sent as 0x01000000)", err)
	}
	if err := netlink.FilterAdd(flower(41, false)); err != nil {
		t.Fatalf("vishvananda FilterAdd without flags: %v (the filter itself must be valid)", err)
	}

	ours := tcflower.Filter{Ifindex: ia, Prio: 42, Protocol: tcflower.ProtoIPv4, Handle: 1, Flags: tcflower.SkipHW,
		Key:     tcflower.Key{EthType: tcflower.ProtoIPv4, Dst: tcflower.Prefix(netip.MustParsePrefix("192.0.2.0/24"))},
		Actions: []tcflower.Action{tcflower.Drop(tcflower.MakeCookie(42))}}
	if _, err := c.Add(ours); err != nil {
		t.Fatal(err)
	}
	if out := tc(t, "filter", "show", "dev", "vf0", "ingress", "prio", "42"); !strings.Contains(out, "skip_hw") {
		t.Fatalf("tc does not show our filter as skip_hw:\n%s", out)
	}
	link, err := netlink.LinkByIndex(ia)
	if err != nil {
		t.Fatal(err)
	}
	fs, err := netlink.FilterList(link, tcflower.ParentIngress)
	if err != nil {
		t.Fatal(err)
	}
	var seen bool
	for _, f := range fs {
		fl, ok := f.(*netlink.Flower)
		if !ok || fl.Priority != 42 || fl.Handle == 0 {
			continue
		}
		seen = true
		t.Logf("vishvananda reads our skip_hw filter as SkipHw=%v SkipSw=%v", fl.SkipHw, fl.SkipSw)
		if fl.SkipHw || !fl.SkipSw {
			t.Fatalf("vishvananda decoded skip_hw as SkipHw=%v SkipSw=%v; the package doc says it swaps them", fl.SkipHw, fl.SkipSw)
		}
	}
	if !seen {
		t.Fatalf("vishvananda FilterList shows no flower filter at prio 42 (%d filters)", len(fs))
	}
}
