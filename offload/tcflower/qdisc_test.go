package tcflower

import (
	"context"
	"errors"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/scrubd/scrubd/internal/netdev"
	"github.com/scrubd/scrubd/internal/testenv"
	"github.com/scrubd/scrubd/offload/nlerr"
)

// qdiscLab is a veth pair (q0, q1) in a fresh network namespace with a
// Client and a Monitor opened inside it. tc, run with -n, reads back what
// the kernel holds.
type qdiscLab struct {
	ns       *testenv.NetNS
	c        *Client
	mon      *Monitor
	ia, ib   int // ifindex of q0, q1
	tcBinary string
}

func newQdiscLab(t *testing.T) *qdiscLab {
	t.Helper()
	tcBin, err := exec.LookPath("tc")
	if err != nil {
		testenv.Missing(t, "iproute2 (tc) not installed: %v", err)
	}
	l := &qdiscLab{ns: testenv.NewNetNS(t), tcBinary: tcBin}
	l.run(t, "ip", "link", "add", "q0", "type", "veth", "peer", "name", "q1")
	err = l.ns.Do(func() error {
		a, err := netdev.ByName("q0")
		if err != nil {
			return err
		}
		b, err := netdev.ByName("q1")
		if err != nil {
			return err
		}
		l.ia, l.ib = a.Index, b.Index
		if l.c, err = Dial(); err != nil {
			return err
		}
		l.mon, err = NewMonitor()
		return err
	})
	if l.c != nil {
		t.Cleanup(func() { l.c.Close() })
	}
	if l.mon != nil {
		t.Cleanup(func() { l.mon.Close() })
	}
	if err != nil {
		t.Fatal(err)
	}
	// qemu-user (the arm64 pass) does not translate tc rtnetlink messages.
	if _, err := l.c.Qdisc(l.ia); errors.Is(err, unix.EOPNOTSUPP) && runtime.GOARCH != "amd64" {
		testenv.MissingUnderEmulation(t, "tc rtnetlink not translated here: %v", err)
	}
	return l
}

// run runs an iproute2 command in the lab's namespace.
func (l *qdiscLab) run(t *testing.T, cmd string, args ...string) string {
	t.Helper()
	if cmd == "tc" {
		cmd = l.tcBinary
	}
	out, err := exec.Command(cmd, append([]string{"-n", l.ns.Name}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s -n %s %s: %v\n%s", cmd, l.ns.Name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// shows reports whether `tc qdisc show dev` lists the qdisc kind with the
// handle both clsact and ingress take (ffff:, parent ffff:fff1).
func (l *qdiscLab) shows(t *testing.T, dev, kind string) bool {
	t.Helper()
	return strings.Contains(l.run(t, "tc", "qdisc", "show", "dev", dev), "qdisc "+kind+" ffff: parent ffff:fff1")
}

// EnsureQdisc, Qdisc and DeleteQdisc against a real kernel, each step
// read back with tc: a bare device gets clsact, an existing clsact or an
// ingress qdisc (what OVS makes) is kept, the delete removes it, and a
// device that is not there is a typed error naming it. The Client was
// opened inside the namespace and is used from this goroutine's thread,
// which is not: its requests must still land in the namespace.
func TestQdiscReadBack(t *testing.T) {
	l := newQdiscLab(t)
	if l.shows(t, "q0", "clsact") || l.shows(t, "q1", "ingress") {
		t.Fatal("a fresh veth already has an ingress hook qdisc")
	}
	if k, err := l.c.Qdisc(l.ia); err != nil || k != "" {
		t.Fatalf("Qdisc(q0) on a bare veth = %q, %v", k, err)
	}

	st, err := l.c.EnsureQdisc(l.ia)
	if err != nil || st != (QdiscState{Kind: "clsact", Created: true}) {
		t.Fatalf("EnsureQdisc(q0) on a bare veth = %+v, %v; want clsact created", st, err)
	}
	if !l.shows(t, "q0", "clsact") {
		t.Fatalf("tc shows no clsact on q0 after EnsureQdisc:\n%s", l.run(t, "tc", "qdisc", "show", "dev", "q0"))
	}
	if st, err = l.c.EnsureQdisc(l.ia); err != nil || st != (QdiscState{Kind: "clsact"}) {
		t.Fatalf("second EnsureQdisc(q0) = %+v, %v; want the clsact kept", st, err)
	}

	l.run(t, "tc", "qdisc", "add", "dev", "q1", "ingress")
	if st, err = l.c.EnsureQdisc(l.ib); err != nil || st != (QdiscState{Kind: "ingress"}) {
		t.Fatalf("EnsureQdisc(q1) with ingress there = %+v, %v; want it kept", st, err)
	}
	if !l.shows(t, "q1", "ingress") || l.shows(t, "q1", "clsact") {
		t.Fatalf("q1 after EnsureQdisc:\n%s", l.run(t, "tc", "qdisc", "show", "dev", "q1"))
	}

	if err := l.c.DeleteQdisc(l.ia); err != nil {
		t.Fatal(err)
	}
	if l.shows(t, "q0", "clsact") {
		t.Fatal("tc still shows clsact on q0 after DeleteQdisc")
	}
	if k, err := l.c.Qdisc(l.ia); err != nil || k != "" {
		t.Fatalf("Qdisc(q0) after the delete = %q, %v", k, err)
	}
	// Once deleted, the ingress hook holds the noop qdisc (handle 0): the
	// request naming handle ffff: is refused by net/sched/sch_api.c
	// tc_get_qdisc ("Invalid handle", EINVAL), and names q0 from the
	// namespace although this thread is outside it.
	if err = l.c.DeleteQdisc(l.ia); !errors.Is(err, unix.EINVAL) || !strings.Contains(err.Error(), "dev q0:") {
		t.Fatalf("DeleteQdisc of a missing clsact = %v; want EINVAL naming q0", err)
	}

	const gone = 4242
	st, err = l.c.EnsureQdisc(gone)
	if !nlerr.IsDeviceGone(err) || !strings.Contains(err.Error(), "ifindex 4242") {
		t.Fatalf("EnsureQdisc(ifindex %d) = %+v, %v; want a device-gone error naming it", gone, st, err)
	}
}

// The monitor, opened inside the namespace, reports what tc does to the
// ingress hook qdiscs there, and nothing for other qdiscs.
func TestMonitorReadsKernelEvents(t *testing.T) {
	l := newQdiscLab(t)
	next := func(step string, want QdiscEvent) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		ev, err := l.mon.Next(ctx)
		if err != nil || ev != want {
			t.Fatalf("%s: Next = %+v, %v; want %+v", step, ev, err, want)
		}
	}
	l.run(t, "tc", "qdisc", "add", "dev", "q0", "root", "pfifo")
	l.run(t, "tc", "qdisc", "add", "dev", "q0", "clsact")
	next("tc qdisc add clsact", QdiscEvent{Ifindex: l.ia, Kind: "clsact"})
	l.run(t, "tc", "qdisc", "add", "dev", "q1", "ingress")
	next("tc qdisc add ingress", QdiscEvent{Ifindex: l.ib, Kind: "ingress"})
	l.run(t, "tc", "qdisc", "del", "dev", "q0", "root")
	l.run(t, "tc", "qdisc", "del", "dev", "q0", "clsact")
	next("tc qdisc del clsact", QdiscEvent{Ifindex: l.ia, Kind: "clsact", Deleted: true})
	l.run(t, "tc", "qdisc", "del", "dev", "q1", "ingress")
	next("tc qdisc del ingress", QdiscEvent{Ifindex: l.ib, Kind: "ingress", Deleted: true})

	// Deleting a device with its clsact sends no RTM_DELQDISC (what the
	// Monitor's doc says): the next event is the one that follows.
	l.run(t, "tc", "qdisc", "add", "dev", "q0", "clsact")
	next("tc qdisc add clsact again", QdiscEvent{Ifindex: l.ia, Kind: "clsact"})
	l.run(t, "ip", "link", "add", "r0", "type", "veth", "peer", "name", "r1")
	var r0 netdev.Link
	if err := l.ns.Do(func() (err error) { r0, err = netdev.ByName("r0"); return err }); err != nil {
		t.Fatal(err)
	}
	l.run(t, "ip", "link", "del", "q0")
	l.run(t, "tc", "qdisc", "add", "dev", "r0", "clsact")
	next("after ip link del q0", QdiscEvent{Ifindex: r0.Index, Kind: "clsact"})
}
