package testenv

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// NetNS is a named network namespace made for one test (vishvananda/netns:
// unshare(CLONE_NEWNET) and a bind mount under /run/netns, so that
// `ip -n NAME` and `tc -n NAME` see it too).
type NetNS struct {
	Name   string
	Handle netns.NsHandle
}

var netnsSeq atomic.Uint32

// NewNetNS creates a named network namespace, removed when the test ends.
// Where namespaces cannot be made (not root: EPERM; qemu-user: ENOSYS or
// EINVAL) it skips, or fails under CI (MissingUnderEmulation).
func NewNetNS(t testing.TB) *NetNS {
	t.Helper()
	name := fmt.Sprintf("scrubd-t%d-%d", os.Getpid(), netnsSeq.Add(1))
	type made struct {
		h   netns.NsHandle
		err error
	}
	ch := make(chan made, 1)
	go func() {
		// NewNamed moves this thread into the new namespace; the thread is
		// never unlocked, so Go retires it when the goroutine ends.
		runtime.LockOSThread()
		h, err := netns.NewNamed(name)
		ch <- made{h, err}
	}()
	m := <-ch
	if m.err != nil {
		_ = os.Remove("/run/netns/" + name)
		if errors.Is(m.err, unix.EPERM) || errors.Is(m.err, unix.ENOSYS) || errors.Is(m.err, unix.EINVAL) || errors.Is(m.err, os.ErrPermission) {
			MissingUnderEmulation(t, "cannot create a network namespace: %v", m.err)
		}
		t.Fatalf("create network namespace %s: %v", name, m.err)
	}
	n := &NetNS{Name: name, Handle: m.h}
	t.Cleanup(func() {
		_ = n.Handle.Close()
		if err := netns.DeleteNamed(name); err != nil {
			t.Errorf("delete network namespace %s: %v", name, err)
		}
	})
	return n
}

// Do runs fn on an OS thread inside the namespace and returns its error.
// Sockets fn opens stay in the namespace after it returns, whatever thread
// later uses them. fn runs on another goroutine: it must not call
// t.Fatal; it returns an error instead.
func (n *NetNS) Do(fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		// Never unlocked: the thread, which changed namespace, is retired
		// when this goroutine ends instead of being reused.
		runtime.LockOSThread()
		if err := netns.Set(n.Handle); err != nil {
			errc <- fmt.Errorf("enter network namespace %s: %w", n.Name, err)
			return
		}
		errc <- fn()
	}()
	return <-errc
}
