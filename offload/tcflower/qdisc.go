package tcflower

import (
	"errors"

	vnl "github.com/vishvananda/netlink"

	"github.com/scrubd/scrubd/offload/nlerr"
)

// QdiscState says which qdisc holds a device's ingress hook.
type QdiscState struct {
	// Kind is "clsact", "ingress" or "" when none is there.
	Kind string
	// Created is true when EnsureQdisc created it in this call.
	Created bool
}

// The qdisc requests go through vishvananda/netlink (QdiscList, QdiscAdd,
// QdiscDel on a Handle opened with the Client, in the same network
// namespace as its filter socket). One difference from the filter
// requests: vishvananda v1.3.1 turns NETLINK_EXT_ACK on only for the
// one-off sockets of its package-level functions
// (nl.EnableErrorMessageReporting), never for a Handle's, so a failed
// qdisc request carries the kernel's errno without its extack text.

// dumpRetries is how often a qdisc dump is repeated when the kernel marks
// it interrupted (NLM_F_DUMP_INTR: the device list changed meanwhile).
const dumpRetries = 3

// Qdisc reports the clsact or ingress qdisc of a device ("" if none). OVS
// uses "ingress"; flower filters on ParentIngress work on either.
func (c *Client) Qdisc(ifindex int) (string, error) {
	rt, err := c.route()
	if err != nil {
		return "", nlerr.Wrap("qdisc-dump", c.devName(ifindex), "", err)
	}
	link := &vnl.Device{LinkAttrs: vnl.LinkAttrs{Index: ifindex}}
	var qs []vnl.Qdisc
	for try := 1; ; try++ {
		qs, err = rt.QdiscList(link)
		if !errors.Is(err, vnl.ErrDumpInterrupted) || try == dumpRetries {
			break
		}
	}
	if err != nil {
		return "", nlerr.Wrap("qdisc-dump", c.devName(ifindex), "", err)
	}
	for _, q := range qs {
		a := q.Attrs()
		if a.LinkIndex != ifindex || a.Parent != HandleClsact {
			continue
		}
		if k := q.Type(); k == "clsact" || k == "ingress" {
			return k, nil
		}
	}
	return "", nil
}

// clsact is the qdisc EnsureQdisc creates and DeleteQdisc removes.
func clsact(ifindex int) *vnl.Clsact {
	return &vnl.Clsact{QdiscAttrs: vnl.QdiscAttrs{LinkIndex: ifindex, Handle: qdiscHandle, Parent: HandleClsact}}
}

// EnsureQdisc makes sure the device has a qdisc on its ingress hook:
// an existing clsact or ingress qdisc is kept as it is, otherwise clsact
// is created (NLM_F_CREATE|NLM_F_EXCL). Call it at start and whenever
// filters vanish or an install fails with nlerr.IsQdiscGone (OVS deletes
// the ingress qdisc when it restarts). It never deletes anything.
func (c *Client) EnsureQdisc(ifindex int) (QdiscState, error) {
	kind, err := c.Qdisc(ifindex)
	if err != nil || kind != "" {
		return QdiscState{Kind: kind}, err
	}
	rt, err := c.route()
	if err != nil {
		return QdiscState{}, nlerr.Wrap("qdisc-add clsact", c.devName(ifindex), "", err)
	}
	if err := rt.QdiscAdd(clsact(ifindex)); err != nil {
		if nlerr.IsExists(err) {
			// Someone created one between our dump and our add.
			kind, err := c.Qdisc(ifindex)
			return QdiscState{Kind: kind}, err
		}
		return QdiscState{}, nlerr.Wrap("qdisc-add clsact", c.devName(ifindex), "", err)
	}
	return QdiscState{Kind: "clsact", Created: true}, nil
}

// DeleteQdisc removes the clsact qdisc, and with it every filter on the
// device's ingress and egress hooks. Only call it for a qdisc this process
// created (QdiscState.Created), never for one that was there before.
func (c *Client) DeleteQdisc(ifindex int) error {
	rt, err := c.route()
	if err == nil {
		err = rt.QdiscDel(clsact(ifindex))
	}
	return nlerr.Wrap("qdisc-del", c.devName(ifindex), "", err)
}
