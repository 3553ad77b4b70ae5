package tcflower

import (
	"github.com/mdlayher/netlink"

	"github.com/scrubd/scrubd/offload/nlerr"
)

// QdiscState says which qdisc holds a device's ingress hook.
type QdiscState struct {
	// Kind is "clsact", "ingress" or "" when none is there.
	Kind string
	// Created is true when EnsureQdisc created it in this call.
	Created bool
}

// Qdisc reports the clsact or ingress qdisc of a device ("" if none). OVS
// uses "ingress"; flower filters on ParentIngress work on either.
func (c *Client) Qdisc(ifindex int) (string, error) {
	m := netlink.Message{
		Header: netlink.Header{Type: rtmGetQdisc, Flags: netlink.Request | netlink.Dump},
		Data:   tcmsg{Ifindex: int32(ifindex)}.append(nil),
	}
	c.mu.Lock()
	replies, err := c.conn.Execute(m)
	c.mu.Unlock()
	if err != nil {
		return "", nlerr.Wrap("qdisc-dump", devName(ifindex), "", err)
	}
	for _, r := range replies {
		if r.Header.Type != rtmNewQdisc {
			continue
		}
		h, err := parseTcmsg(r.Data)
		if err != nil || int(h.Ifindex) != ifindex || h.Parent != HandleClsact {
			continue
		}
		ad, err := netlink.NewAttributeDecoder(r.Data[tcmsgLen:])
		if err != nil {
			continue
		}
		for ad.Next() {
			if ad.Type() == tcaKind {
				if k := ad.String(); k == "clsact" || k == "ingress" {
					return k, nil
				}
			}
		}
	}
	return "", nil
}

// EnsureQdisc makes sure the device has a qdisc on its ingress hook:
// an existing clsact or ingress qdisc is kept as it is, otherwise clsact
// is created. Call it at start and whenever filters vanish or an install
// fails with nlerr.IsQdiscGone (OVS deletes the ingress qdisc when it
// restarts). It never deletes anything.
func (c *Client) EnsureQdisc(ifindex int) (QdiscState, error) {
	kind, err := c.Qdisc(ifindex)
	if err != nil || kind != "" {
		return QdiscState{Kind: kind}, err
	}
	ae := netlink.NewAttributeEncoder()
	ae.String(tcaKind, "clsact")
	attrs, err := ae.Encode()
	if err != nil {
		return QdiscState{}, err
	}
	m := netlink.Message{
		Header: netlink.Header{Type: rtmNewQdisc, Flags: netlink.Request | netlink.Acknowledge | netlink.Create | netlink.Excl},
		Data:   append(tcmsg{Ifindex: int32(ifindex), Handle: qdiscHandle, Parent: HandleClsact}.append(nil), attrs...),
	}
	c.mu.Lock()
	_, err = c.conn.Execute(m)
	c.mu.Unlock()
	if err != nil {
		if nlerr.IsExists(err) {
			// Someone created one between our dump and our add.
			kind, err := c.Qdisc(ifindex)
			return QdiscState{Kind: kind}, err
		}
		return QdiscState{}, nlerr.Wrap("qdisc-add clsact", devName(ifindex), "", err)
	}
	return QdiscState{Kind: "clsact", Created: true}, nil
}

// DeleteQdisc removes the clsact qdisc, and with it every filter on the
// device's ingress and egress hooks. Only call it for a qdisc this process
// created (QdiscState.Created), never for one that was there before.
func (c *Client) DeleteQdisc(ifindex int) error {
	m := netlink.Message{
		Header: netlink.Header{Type: rtmDelQdisc, Flags: netlink.Request | netlink.Acknowledge},
		Data:   tcmsg{Ifindex: int32(ifindex), Handle: qdiscHandle, Parent: HandleClsact}.append(nil),
	}
	c.mu.Lock()
	_, err := c.conn.Execute(m)
	c.mu.Unlock()
	return nlerr.Wrap("qdisc-del", devName(ifindex), "", err)
}
