// Package nlerr gives netlink failures from the offload backends one typed
// error, Error, that keeps the kernel's errno and its extended-ack message
// (text and attribute offset), and the predicates callers use instead of
// matching strings: IsUnsupported, IsNoSpace, IsDeviceGone, IsExists,
// IsNotFound.
//
// Each predicate lists the errno values and the extack texts it was written
// against, with the kernel or driver they come from.
package nlerr

import (
	"errors"
	"fmt"
	"strings"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// Error is a failed netlink operation on a device, optionally about one rule.
type Error struct {
	Op     string     // operation: "install", "replace", "delete", "dump", "qdisc-add", ...
	Dev    string     // device name or "ifindex N"
	Rule   string     // rule identity (handle, cookie, rule id); empty when not about one rule
	Errno  unix.Errno // kernel errno; 0 when the failure was not an errno (then Err is set)
	Extack string     // kernel extended-ack message, as sent
	Offset int        // extack attribute offset into the request, 0 if none
	Err    error      // non-errno cause (socket failure, short message), nil otherwise
}

// Error formats the operation, device, rule, errno and extack.
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.Op)
	if e.Dev != "" {
		b.WriteString(" dev ")
		b.WriteString(e.Dev)
	}
	if e.Rule != "" {
		b.WriteString(" rule ")
		b.WriteString(e.Rule)
	}
	b.WriteString(": ")
	switch {
	case e.Errno != 0:
		b.WriteString(e.Errno.Error())
		fmt.Fprintf(&b, " (errno %d)", int(e.Errno))
	case e.Err != nil:
		b.WriteString(e.Err.Error())
	default:
		b.WriteString("unknown error")
	}
	if e.Extack != "" {
		b.WriteString(": ")
		b.WriteString(e.Extack)
		if e.Offset != 0 {
			fmt.Fprintf(&b, " (at offset %d)", e.Offset)
		}
	}
	return b.String()
}

// Unwrap returns the errno (so errors.Is(err, unix.EOPNOTSUPP) works) or,
// for non-errno failures, the underlying cause.
func (e *Error) Unwrap() error {
	if e.Errno != 0 {
		return e.Errno
	}
	return e.Err
}

// Wrap converts err (typically a *netlink.OpError from mdlayher/netlink)
// into an *Error naming op, dev and rule. nil stays nil. An *Error passed in
// gets the missing op/dev/rule filled and is returned as a copy.
func Wrap(op, dev, rule string, err error) error {
	if err == nil {
		return nil
	}
	var ne *Error
	if errors.As(err, &ne) {
		c := *ne
		if c.Op == "" {
			c.Op = op
		}
		if c.Dev == "" {
			c.Dev = dev
		}
		if c.Rule == "" {
			c.Rule = rule
		}
		return &c
	}
	e := &Error{Op: op, Dev: dev, Rule: rule}
	var oe *netlink.OpError
	if errors.As(err, &oe) {
		e.Extack = oe.Message
		e.Offset = oe.Offset
		err = oe.Err
	}
	var en unix.Errno
	if errors.As(err, &en) {
		e.Errno = en
	} else {
		e.Err = err
	}
	return e
}

// New builds an *Error from an errno and extack text, as decoded from a
// netlink ACK by the caller.
func New(op, dev, rule string, errno unix.Errno, extack string, offset int) *Error {
	return &Error{Op: op, Dev: dev, Rule: rule, Errno: errno, Extack: extack, Offset: offset}
}

func parts(err error) (unix.Errno, string, bool) {
	if err == nil {
		return 0, "", false
	}
	var ne *Error
	if errors.As(err, &ne) {
		return ne.Errno, ne.Extack, true
	}
	var oe *netlink.OpError
	msg := ""
	if errors.As(err, &oe) {
		msg = oe.Message
	}
	var en unix.Errno
	if errors.As(err, &en) {
		return en, msg, true
	}
	return 0, msg, msg != ""
}

// unsupportedText are extack fragments (lower-cased) that mean "this device
// or driver cannot do what was asked", whatever the errno:
//   - "only offload of bpf classifiers supported": netdevsim 6.1
//     (nsim_bpf_setup_tc_block_cb), EOPNOTSUPP, seen in the kernel lab.
//   - "unsupported key", "is not supported", "not supported": mlx5 en_tc.c
//     __parse_cls_flower / parse_tc_*_actions (EOPNOTSUPP), and
//     "Only UDP and TCP transports are supported for L4 matching" (EINVAL).
//   - "out of supported range": mlx5 chain/prio limits (EOPNOTSUPP).
var unsupportedText = []string{
	"only offload of bpf classifiers supported",
	"unsupported key",
	"not supported",
	"are supported for",
	"out of supported range",
}

// IsUnsupported reports whether err says the device/driver cannot hold the
// requested match or action: errno EOPNOTSUPP (== ENOTSUP on Linux), or an
// extack text from the list above (mlx5 returns EINVAL for "Only UDP and TCP
// transports are supported for L4 matching").
func IsUnsupported(err error) bool {
	errno, msg, ok := parts(err)
	if !ok {
		return false
	}
	if errno == unix.EOPNOTSUPP {
		return true
	}
	m := strings.ToLower(msg)
	for _, s := range unsupportedText {
		if strings.Contains(m, s) {
			return true
		}
	}
	return false
}

// IsNoSpace reports a full hardware table: ENOSPC (mlx5 fs_core
// alloc_auto_flow_group when no flow group or entry is left).
func IsNoSpace(err error) bool {
	errno, _, _ := parts(err)
	return errno == unix.ENOSPC
}

// IsDeviceGone reports that the device vanished: ENODEV (rtnetlink
// "Cannot find device"/__dev_get_by_index failed), ENXIO (device lookup in
// some drivers) or the tc core's extack for a missing ifindex.
func IsDeviceGone(err error) bool {
	errno, msg, _ := parts(err)
	if errno == unix.ENODEV || errno == unix.ENXIO {
		return true
	}
	return strings.Contains(strings.ToLower(msg), "cannot find device")
}

// IsExists reports EEXIST: a filter with this handle (or a qdisc of this
// kind) is already there and NLM_F_EXCL was set.
func IsExists(err error) bool {
	errno, _, _ := parts(err)
	return errno == unix.EEXIST
}

// IsNotFound reports ENOENT: the filter, chain or priority asked for does
// not exist (tc core "Filter with specified priority/protocol not found",
// "Specified filter handle not found").
func IsNotFound(err error) bool {
	errno, _, _ := parts(err)
	return errno == unix.ENOENT
}

// IsQdiscGone reports that the classifier's qdisc/block is missing: tc
// core returns EINVAL with "Cannot find specified qdisc on specified device"
// (or "Parent Qdisc doesn't exists", kernel 6.1 tcf_block_find) when the
// clsact/ingress qdisc was deleted, e.g. by an OVS restart.
func IsQdiscGone(err error) bool {
	_, msg, _ := parts(err)
	m := strings.ToLower(msg)
	return strings.Contains(m, "cannot find specified qdisc") ||
		strings.Contains(m, "parent qdisc doesn't exists") ||
		strings.Contains(m, "qdisc doesn't exist")
}
