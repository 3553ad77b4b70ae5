// Package netdev looks network devices up by name or index through
// rtnetlink (RTM_GETLINK, with vishvananda/netlink) in the network
// namespace of the calling thread, and reports what the agent needs of
// them: index, name, kind, MTU and link state.
//
// It replaces the standard library's net.InterfaceByName and
// net.InterfaceByIndex in the agent: those answer with the index and flags
// only, and with one error text ("no such network interface") for every
// failure. Here a missing device is an error that names the device and
// wraps ENODEV, and the state carries the kernel's operational state
// (IFLA_OPERSTATE, RFC 2863: up, down, lower-layer-down, ...) besides the
// administrative IFF_UP flag. Names longer than IFNAMSIZ-1 (15) bytes are
// looked up as alternative names (IFLA_ALT_IFNAME, Linux 5.5).
package netdev

import (
	"errors"
	"fmt"
	"net"
	"strconv"

	vnl "github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// Link is a network device as rtnetlink reports it.
type Link struct {
	Index int
	Name  string
	// Kind is the rtnetlink link kind (IFLA_INFO_KIND: "veth", "vlan",
	// "bond", ...), "device" for a device without one (a physical NIC or
	// its representor), or "loopback".
	Kind string
	MTU  int
	// AdminUp is the IFF_UP flag: the device was set up (ip link set up).
	AdminUp bool
	// OperState is the operational state (IFLA_OPERSTATE, RFC 2863) as
	// vishvananda/netlink names it: "up", "down", "lower-layer-down",
	// "dormant", "not-present", "testing" or "unknown" (devices that do
	// not track it, such as lo).
	OperState string
}

// Running reports whether the device passes traffic: administratively up
// and operationally up, or up with an untracked ("unknown") state.
func (l Link) Running() bool {
	return l.AdminUp && (l.OperState == "up" || l.OperState == "unknown")
}

// ByName looks a device up by its name (or alternative name).
func ByName(name string) (Link, error) {
	if name == "" {
		return Link{}, errors.New("netdev: empty device name")
	}
	l, err := vnl.LinkByName(name)
	if err != nil {
		return Link{}, lookupErr(strconv.Quote(name), err)
	}
	return fromAttrs(l), nil
}

// ByIndex looks a device up by its interface index.
func ByIndex(index int) (Link, error) {
	if index <= 0 {
		return Link{}, fmt.Errorf("netdev: interface index %d: must be positive", index)
	}
	l, err := vnl.LinkByIndex(index)
	if err != nil {
		return Link{}, lookupErr("with index "+strconv.Itoa(index), err)
	}
	return fromAttrs(l), nil
}

// Name names an interface index for messages: the device's name, or
// "ifindex N" when no device has that index (any more).
func Name(index int) string { return NameIn(nil, index) }

// NameIn is Name through h, a handle bound to a network namespace
// (vishvananda/netlink's NewHandle or NewHandleAt), so that a client whose
// sockets were opened in another namespace names its devices from there.
// A nil h looks in the calling thread's namespace.
func NameIn(h *vnl.Handle, index int) string {
	if index > 0 {
		var l vnl.Link
		var err error
		if h != nil {
			l, err = h.LinkByIndex(index)
		} else {
			l, err = vnl.LinkByIndex(index)
		}
		if err == nil {
			return l.Attrs().Name
		}
	}
	return "ifindex " + strconv.Itoa(index)
}

// lookupErr turns vishvananda's "Link not found" (its LinkNotFoundError,
// returned for the kernel's ENODEV and for an empty answer) into an error
// that names the device and wraps unix.ENODEV.
func lookupErr(what string, err error) error {
	var nf vnl.LinkNotFoundError
	if errors.As(err, &nf) || errors.Is(err, unix.ENODEV) {
		return fmt.Errorf("netdev: no device %s in this network namespace: %w", what, unix.ENODEV)
	}
	return fmt.Errorf("netdev: look up device %s: %w", what, err)
}

func fromAttrs(l vnl.Link) Link {
	a := l.Attrs()
	out := Link{
		Index:     a.Index,
		Name:      a.Name,
		Kind:      l.Type(),
		MTU:       a.MTU,
		AdminUp:   a.Flags&net.FlagUp != 0,
		OperState: a.OperState.String(),
	}
	if a.Flags&net.FlagLoopback != 0 {
		out.Kind = "loopback"
	}
	return out
}
