package nlerr

import (
	"errors"
	"fmt"
	"testing"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

func TestPredicates(t *testing.T) {
	op := func(errno unix.Errno, msg string) error {
		return &netlink.OpError{Op: "receive", Err: errno, Message: msg}
	}
	tests := []struct {
		name                                         string
		err                                          error
		unsupported, nospace, gone, exists, notfound bool
		qdiscGone                                    bool
	}{
		{name: "nil"},
		{name: "netdevsim skip_sw", err: op(unix.EOPNOTSUPP, "netdevsim: only offload of BPF classifiers supported"), unsupported: true},
		{name: "mlx5 ports non tcp/udp (EINVAL)", err: op(unix.EINVAL, "Only UDP and TCP transports are supported for L4 matching"), unsupported: true},
		{name: "mlx5 unsupported key", err: op(unix.EOPNOTSUPP, "Unsupported key"), unsupported: true},
		{name: "mlx5 firstfrag no text", err: op(unix.EOPNOTSUPP, ""), unsupported: true},
		{name: "mlx5 prio range", err: op(unix.EOPNOTSUPP, "Requested priority is out of supported range"), unsupported: true},
		{name: "plain EINVAL", err: op(unix.EINVAL, "")},
		{name: "table full", err: op(unix.ENOSPC, ""), nospace: true},
		{name: "ENODEV", err: op(unix.ENODEV, ""), gone: true},
		{name: "ENXIO", err: op(unix.ENXIO, ""), gone: true},
		{name: "cannot find device text", err: op(unix.EINVAL, "Cannot find device"), gone: true},
		{name: "exists", err: op(unix.EEXIST, "Filter already exists"), exists: true},
		{name: "not found", err: op(unix.ENOENT, "Filter with specified priority/protocol not found"), notfound: true},
		{name: "qdisc gone", err: op(unix.EINVAL, "Parent Qdisc doesn't exists"), qdiscGone: true},
		{name: "qdisc gone 2", err: op(unix.EINVAL, "Cannot find specified qdisc on specified device"), qdiscGone: true},
		{name: "wrapped typed", err: fmt.Errorf("ctx: %w", Wrap("install", "eth0", "h1", op(unix.ENOSPC, ""))), nospace: true},
		{name: "bare errno", err: unix.EOPNOTSUPP, unsupported: true},
		{name: "non-netlink error", err: errors.New("boom")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := [6]bool{IsUnsupported(tt.err), IsNoSpace(tt.err), IsDeviceGone(tt.err), IsExists(tt.err), IsNotFound(tt.err), IsQdiscGone(tt.err)}
			want := [6]bool{tt.unsupported, tt.nospace, tt.gone, tt.exists, tt.notfound, tt.qdiscGone}
			if got != want {
				t.Fatalf("predicates(unsupported,nospace,gone,exists,notfound,qdiscgone) = %v, want %v for %v", got, want, tt.err)
			}
		})
	}
}

func TestWrapKeepsExtackAndErrno(t *testing.T) {
	src := &netlink.OpError{Op: "receive", Err: unix.EOPNOTSUPP, Message: "netdevsim: only offload of BPF classifiers supported", Offset: 36}
	err := Wrap("install", "eth0", "handle 0x1", src)
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("Wrap returned %T, want *Error", err)
	}
	if e.Op != "install" || e.Dev != "eth0" || e.Rule != "handle 0x1" || e.Errno != unix.EOPNOTSUPP || e.Offset != 36 ||
		e.Extack != "netdevsim: only offload of BPF classifiers supported" {
		t.Fatalf("unexpected fields: %+v", e)
	}
	if !errors.Is(err, unix.EOPNOTSUPP) {
		t.Fatal("errors.Is(err, EOPNOTSUPP) = false")
	}
	want := "install dev eth0 rule handle 0x1: operation not supported (errno 95): netdevsim: only offload of BPF classifiers supported (at offset 36)"
	if got := err.Error(); got != want {
		t.Fatalf("Error() = %q\nwant %q", got, want)
	}
	// Re-wrapping fills only missing fields.
	err2 := Wrap("other", "eth1", "", &Error{Op: "dump", Errno: unix.ENODEV})
	if !errors.As(err2, &e) || e.Op != "dump" || e.Dev != "eth1" || !IsDeviceGone(err2) {
		t.Fatalf("rewrap: %+v", e)
	}
	if Wrap("x", "", "", nil) != nil {
		t.Fatal("Wrap(nil) != nil")
	}
	other := errors.New("socket closed")
	err3 := Wrap("send", "eth0", "", other)
	if !errors.Is(err3, other) || err3.Error() != "send dev eth0: socket closed" {
		t.Fatalf("non-errno wrap: %v", err3)
	}
}
