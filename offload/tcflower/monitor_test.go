package tcflower

import (
	"context"
	"testing"
	"time"

	"github.com/mdlayher/netlink"
	"github.com/mdlayher/netlink/nltest"
)

func TestMonitorReportsQdiscEvents(t *testing.T) {
	qd := func(typ netlink.HeaderType, ifindex int32, kind string, parent uint32) netlink.Message {
		ae := netlink.NewAttributeEncoder()
		ae.String(tcaKind, kind)
		a, _ := ae.Encode()
		return netlink.Message{Header: netlink.Header{Type: typ}, Data: append(tcmsg{Ifindex: ifindex, Handle: qdiscHandle, Parent: parent}.append(nil), a...)}
	}
	filterNote := netlink.Message{Header: netlink.Header{Type: rtmDelFilter}, Data: tcmsg{Ifindex: 5}.append(nil)}
	batches := [][]netlink.Message{
		{filterNote, qd(rtmDelQdisc, 5, "fq_codel", 0xFFFFFFFF)},
		{qd(rtmDelQdisc, 5, "ingress", HandleClsact), qd(rtmNewQdisc, 5, "clsact", HandleClsact)},
	}
	c := nltest.Dial(func(req []netlink.Message) ([]netlink.Message, error) {
		if len(batches) == 0 {
			time.Sleep(time.Millisecond)
			return nil, nil
		}
		b := batches[0]
		batches = batches[1:]
		return b, nil
	})
	m := NewMonitorConn(c)
	defer m.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	want := []QdiscEvent{{Ifindex: 5, Kind: "ingress", Deleted: true}, {Ifindex: 5, Kind: "clsact"}}
	for _, w := range want {
		ev, err := m.Next(ctx)
		if err != nil || ev != w {
			t.Fatalf("Next = %+v, %v; want %+v", ev, err, w)
		}
	}
	done, cancelDone := context.WithCancel(context.Background())
	cancelDone()
	if _, err := m.Next(done); err != context.Canceled {
		t.Fatalf("Next on a cancelled context: %v", err)
	}
}
