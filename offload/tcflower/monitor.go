package tcflower

import (
	"context"
	"time"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/scrubd/scrubd/offload/nlerr"
)

// QdiscEvent is a clsact/ingress qdisc appearing or disappearing.
type QdiscEvent struct {
	Ifindex int
	Kind    string // "clsact" or "ingress"
	Deleted bool   // RTM_DELQDISC (false: RTM_NEWQDISC)
}

// Monitor reports qdisc changes from the rtnetlink TC multicast group, so
// a backend learns at once that something (OVS restarting) deleted the
// qdisc holding its filters. It starts no goroutine. It stays on
// mdlayher/netlink: vishvananda/netlink v1.3.1 has no subscription to this
// group (see the package doc).
//
// Deleting the device itself takes its qdisc and filters with it without
// an RTM_DELQDISC (seen with tc monitor on Linux 6.18): that shows only as
// the link's RTM_DELLINK, which vishvananda's LinkSubscribe reports, and
// not here.
type Monitor struct {
	conn *netlink.Conn
	buf  []QdiscEvent
}

// rtmgrpTC is the legacy group bit of RTNLGRP_TC (4).
const rtmgrpTC = 1 << (4 - 1)

// NewMonitor joins the TC group.
func NewMonitor() (*Monitor, error) {
	c, err := netlink.Dial(unix.NETLINK_ROUTE, &netlink.Config{Groups: rtmgrpTC})
	if err != nil {
		return nil, nlerr.Wrap("monitor dial", "", "", err)
	}
	return NewMonitorConn(c), nil
}

// NewMonitorConn uses an existing connection already in the group (tests).
func NewMonitorConn(c *netlink.Conn) *Monitor { return &Monitor{conn: c} }

// Close closes the socket.
func (m *Monitor) Close() error { return m.conn.Close() }

// Next blocks until the next clsact/ingress qdisc event or until ctx ends.
// Filter notifications and other qdiscs are skipped.
func (m *Monitor) Next(ctx context.Context) (QdiscEvent, error) {
	for len(m.buf) == 0 {
		if err := ctx.Err(); err != nil {
			return QdiscEvent{}, err
		}
		stop := context.AfterFunc(ctx, func() { _ = m.conn.SetReadDeadline(time.Now()) })
		msgs, err := m.conn.Receive()
		stop()
		if err != nil {
			if ctx.Err() != nil {
				_ = m.conn.SetReadDeadline(time.Time{})
				return QdiscEvent{}, ctx.Err()
			}
			// ENOBUFS means events were lost: the caller re-checks its
			// devices with Client.Qdisc and goes on calling Next.
			return QdiscEvent{}, nlerr.Wrap("monitor receive", "", "", err)
		}
		for _, msg := range msgs {
			if ev, ok := parseQdiscEvent(msg); ok {
				m.buf = append(m.buf, ev)
			}
		}
	}
	ev := m.buf[0]
	m.buf = m.buf[1:]
	return ev, nil
}

func parseQdiscEvent(msg netlink.Message) (QdiscEvent, bool) {
	if msg.Header.Type != rtmNewQdisc && msg.Header.Type != rtmDelQdisc {
		return QdiscEvent{}, false
	}
	h, err := parseTcmsg(msg.Data)
	if err != nil || h.Parent != HandleClsact {
		return QdiscEvent{}, false
	}
	ad, err := netlink.NewAttributeDecoder(msg.Data[tcmsgLen:])
	if err != nil {
		return QdiscEvent{}, false
	}
	for ad.Next() {
		if ad.Type() == tcaKind {
			if k := ad.String(); k == "clsact" || k == "ingress" {
				return QdiscEvent{Ifindex: int(h.Ifindex), Kind: k, Deleted: msg.Header.Type == rtmDelQdisc}, true
			}
		}
	}
	return QdiscEvent{}, false
}
