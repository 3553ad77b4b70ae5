package hwpath

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/scrubd/scrubd/internal/testenv"
	"github.com/scrubd/scrubd/offload/tcflower"
)

// The qdisc watch in a fresh network namespace: deleting the clsact qdisc
// of the offload device reports a loss; creating one does not.
func TestFollowQdiscDelete(t *testing.T) {
	// The client and the monitor open their sockets inside the namespace
	// (testenv.NetNS, vishvananda/netns) and keep working in it from this
	// goroutine, whose thread is in the host's namespace.
	ns := testenv.NewNetNS(t)
	type setup struct {
		cl  *tcflower.Client
		mon *tcflower.Monitor
	}
	var s setup
	err := ns.Do(func() error {
		var err error
		if s.cl, err = tcflower.Dial(); err != nil {
			return err
		}
		s.mon, err = tcflower.NewMonitor()
		return err
	})
	if s.cl != nil {
		defer s.cl.Close()
	}
	if s.mon != nil {
		defer s.mon.Close()
	}
	if err != nil {
		t.Fatal(err)
	}
	// lo is ifindex 1 in a new namespace; a second (foreign) device is not
	// needed: creating the qdisc is the event that must not count.
	host, err := tcflower.Dial() // this goroutine's thread is in the host's namespace
	if err != nil {
		t.Fatal(err)
	}
	defer host.Close()
	hostBefore, err := host.Qdisc(1)
	if errors.Is(err, unix.EOPNOTSUPP) && runtime.GOARCH != "amd64" {
		// qemu-user (the arm64 test pass) does not translate tc rtnetlink
		// messages; the amd64 pass runs this test.
		t.Skipf("tc rtnetlink not translated here (qemu-user?): %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.cl.EnsureQdisc(1); err != nil {
		t.Fatal(err)
	}
	if q, _ := s.cl.Qdisc(1); q != "clsact" {
		t.Fatalf("qdisc in the namespace: %q", q)
	}
	if hostAfter, _ := host.Qdisc(1); hostAfter != hostBefore {
		t.Fatalf("the host's lo changed from %q to %q: the test left its namespace", hostBefore, hostAfter)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	lost := make(chan string, 8)
	done := make(chan error, 1)
	go func() { done <- followQdisc(ctx, s.mon, map[int]string{1: "lo"}, func(r string) { lost <- r }) }()
	if err := s.cl.DeleteQdisc(1); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-lost:
		if !strings.Contains(r, "clsact qdisc on lo deleted") {
			t.Fatalf("reason %q", r)
		}
	case <-ctx.Done():
		t.Fatal("no loss reported after the qdisc was deleted")
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if len(lost) != 0 {
		t.Fatalf("extra reports: %q", <-lost)
	}
}
