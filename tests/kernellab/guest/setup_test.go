package guest

import (
	"fmt"
	"net"
	"os"
	"testing"

	"github.com/vishvananda/netlink"

	"github.com/scrubd/scrubd/offload/tcflower"
)

func requireGuest(t testing.TB) {
	t.Helper()
	if os.Getenv("SCRUBD_KERNELLAB_GUEST") != "1" {
		t.Skip("runs only inside the kernel lab guest (go test ./tests/kernellab boots it); the host kernel has no cls_flower")
	}
}

// vethPair creates a veth pair a<->b with IPv6 disabled (so the kernel
// sends no neighbour discovery or MLD of its own through the filters), up,
// and deletes it at cleanup. Frames written to b arrive on a's ingress.
func vethPair(t testing.TB, a, b string) (ia, ib int) {
	t.Helper()
	la := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: a}, PeerName: b}
	if err := netlink.LinkAdd(la); err != nil {
		t.Fatalf("veth add %s/%s: %v", a, b, err)
	}
	t.Cleanup(func() { _ = netlink.LinkDel(la) })
	for _, n := range []string{a, b} {
		if err := os.WriteFile(fmt.Sprintf("/proc/sys/net/ipv6/conf/%s/disable_ipv6", n), []byte("1"), 0o644); err != nil {
			t.Fatalf("disable ipv6 on %s: %v", n, err)
		}
		l, err := netlink.LinkByName(n)
		if err != nil {
			t.Fatal(err)
		}
		if err := netlink.LinkSetUp(l); err != nil {
			t.Fatalf("up %s: %v", n, err)
		}
	}
	x, err := net.InterfaceByName(a)
	if err != nil {
		t.Fatal(err)
	}
	y, err := net.InterfaceByName(b)
	if err != nil {
		t.Fatal(err)
	}
	return x.Index, y.Index
}

func dial(t testing.TB) *tcflower.Client {
	t.Helper()
	c, err := tcflower.Dial()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}
