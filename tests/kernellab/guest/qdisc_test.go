package guest

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/scrubd/scrubd/offload/nlerr"
	"github.com/scrubd/scrubd/offload/tcflower"
)

func tc(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command("/usr/sbin/tc", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("tc %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// TestQdiscRecovery: something else (OVS restarting) deletes the qdisc
// with our filters; installs then fail with a typed error, EnsureQdisc
// notices and recreates it, and the reinstall works.
func TestQdiscRecovery(t *testing.T) {
	requireGuest(t)
	c := dial(t)
	ia, _ := vethPair(t, "qr0", "qr1")
	if _, err := c.EnsureQdisc(ia); err != nil {
		t.Fatal(err)
	}
	fs := labFilters(ia)[:2]
	for _, f := range fs {
		if _, err := c.Add(f); err != nil {
			t.Fatal(err)
		}
	}
	mon, err := tcflower.NewMonitor()
	if err != nil {
		t.Fatal(err)
	}
	defer mon.Close()
	tc(t, "qdisc", "del", "dev", "qr0", "clsact")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ev, err := mon.Next(ctx)
	if err != nil || ev != (tcflower.QdiscEvent{Ifindex: ia, Kind: "clsact", Deleted: true}) {
		t.Fatalf("monitor after qdisc delete: %+v, %v", ev, err)
	}
	kind, err := c.Qdisc(ia)
	if err != nil || kind != "" {
		t.Fatalf("Qdisc after delete = %q, %v", kind, err)
	}
	got, err := c.Dump(tcflower.DumpQuery{Ifindex: ia, AllChain: true})
	if err != nil || len(got) != 0 {
		t.Fatalf("dump without qdisc = %d filters, %v", len(got), err)
	}
	_, err = c.Add(fs[0])
	if err == nil {
		t.Fatal("install without a qdisc succeeded")
	}
	t.Logf("install without qdisc: %v (IsQdiscGone=%v)", err, nlerr.IsQdiscGone(err))
	if !nlerr.IsQdiscGone(err) {
		t.Fatalf("install without qdisc: %v, want IsQdiscGone", err)
	}
	st, err := c.EnsureQdisc(ia)
	if err != nil || !st.Created {
		t.Fatalf("EnsureQdisc after loss = %+v, %v", st, err)
	}
	for _, f := range fs {
		if _, err := c.Add(f); err != nil {
			t.Fatal(err)
		}
	}
	if got, _ := c.Dump(tcflower.DumpQuery{Ifindex: ia, AllChain: true}); len(got) != 2 {
		t.Fatalf("after recovery %d filters, want 2", len(got))
	}
}

// TestExistingIngressQdiscKept: a pre-existing "ingress" qdisc (what OVS
// creates) is used as it is, never replaced or deleted.
func TestExistingIngressQdiscKept(t *testing.T) {
	requireGuest(t)
	c := dial(t)
	ia, _ := vethPair(t, "iq0", "iq1")
	tc(t, "qdisc", "add", "dev", "iq0", "ingress")
	st, err := c.EnsureQdisc(ia)
	if err != nil || st != (tcflower.QdiscState{Kind: "ingress"}) {
		t.Fatalf("EnsureQdisc with ingress present = %+v, %v", st, err)
	}
	f := labFilters(ia)[1]
	if _, err := c.Add(f); err != nil {
		t.Fatalf("install on an ingress qdisc: %v", err)
	}
	if got, err := c.Dump(tcflower.DumpQuery{Ifindex: ia}); err != nil || len(got) != 1 {
		t.Fatalf("dump = %d, %v", len(got), err)
	}
	if out := tc(t, "qdisc", "show", "dev", "iq0"); !strings.Contains(out, "qdisc ingress ffff:") {
		t.Fatalf("ingress qdisc gone:\n%s", out)
	}
}

// TestDeviceGone: once the device is deleted, installs fail with a typed
// "device gone" error, while dumps and the qdisc lookup just come back empty.
func TestDeviceGone(t *testing.T) {
	requireGuest(t)
	c := dial(t)
	ia, _ := vethPair(t, "dg0", "dg1")
	if _, err := c.EnsureQdisc(ia); err != nil {
		t.Fatal(err)
	}
	f := labFilters(ia)[1]
	if _, err := c.Add(f); err != nil {
		t.Fatal(err)
	}
	tcOut := exec.Command("/bin/busybox", "ip", "link", "del", "dg0")
	if out, err := tcOut.CombinedOutput(); err != nil {
		t.Fatalf("ip link del: %v\n%s", err, out)
	}
	f.Handle = 2
	_, err := c.Add(f)
	t.Logf("install on a deleted device: %v", err)
	if !nlerr.IsDeviceGone(err) {
		t.Fatalf("install on a deleted device: %v, want IsDeviceGone", err)
	}
	raw, merr := f.MarshalBinary()
	if merr != nil {
		t.Fatal(merr)
	}
	capture(t, "install-enodev", rawExchange(t, unix.RTM_NEWTFILTER, unix.NLM_F_REQUEST|unix.NLM_F_ACK|unix.NLM_F_CREATE|unix.NLM_F_EXCL, raw))
	got, err := c.Dump(tcflower.DumpQuery{Ifindex: ia, AllChain: true})
	t.Logf("dump of a deleted device: %d filters, %v", len(got), err)
	if err != nil && !nlerr.IsDeviceGone(err) {
		t.Fatalf("dump of a deleted device: %v", err)
	}
	if len(got) != 0 {
		t.Fatalf("dump of a deleted device returned %d filters", len(got))
	}
}
