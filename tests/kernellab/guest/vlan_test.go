package guest

import (
	"net/netip"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/scrubd/scrubd/offload/tcflower"
	"github.com/scrubd/scrubd/swpath/packet"
	"github.com/scrubd/scrubd/swpath/rule"
	"github.com/scrubd/scrubd/swpath/traffic"
)

// TestFlowerVLANTaggedTraffic checks how a flower drop entry sees VLAN-
// tagged frames, against rule semantics (swpath/packet skips up to two
// tags). Two filters with the same key: one with filter protocol ip, one
// with protocol all plus eth_type ip; both "continue" so each counts
// independently.
//
// On veth, the receive path moves the outer tag into skb metadata before tc
// ingress (skb_vlan_untag), and tcf_classify compares the filter protocol
// with skb_protocol(skb, false), which is the tag's TPID: a "protocol ip"
// filter therefore never sees tagged frames, while "protocol all" +
// eth_type ip matches on the dissected inner protocol, for any number of
// tags (rule semantics give up after two).
func TestFlowerVLANTaggedTraffic(t *testing.T) {
	requireGuest(t)
	c := dial(t)
	ia, ib := vethPair(t, "vl0", "vl1")
	if _, err := c.EnsureQdisc(ia); err != nil {
		t.Fatal(err)
	}
	key := tcflower.Key{EthType: tcflower.ProtoIPv4, IPProto: tcflower.IPProtoUDP,
		Dst: tcflower.Prefix(netip.MustParsePrefix("198.51.100.0/24")), DstPort: tcflower.PortMask{Port: 53, Mask: 0xffff}}
	cont := func(cookie string) []tcflower.Action {
		return []tcflower.Action{{Kind: "gact", Verdict: -1, Cookie: []byte(cookie)}} // TC_ACT_UNSPEC: continue
	}
	ops := []tcflower.Op{
		{Kind: tcflower.OpAdd, Filter: tcflower.Filter{Ifindex: ia, Prio: 1, Protocol: tcflower.ProtoIPv4, Handle: 1, Flags: tcflower.SkipHW, Key: key, Actions: cont("proto-ip")}},
		{Kind: tcflower.OpAdd, Filter: tcflower.Filter{Ifindex: ia, Prio: 2, Protocol: tcflower.ProtoAll, Handle: 1, Flags: tcflower.SkipHW, Key: key, Actions: cont("proto-all")}},
		{Kind: tcflower.OpAdd, Filter: tcflower.Filter{Ifindex: ia, Prio: 3, Protocol: tcflower.ProtoAll, Handle: 1, Flags: tcflower.SkipHW, Actions: cont("every")}},
	}
	for i, r := range c.Batch(ops, tcflower.BatchOptions{}) {
		if r.Err != nil {
			t.Fatalf("install %d: %v", i, r.Err)
		}
	}
	m := rule.Match{Dst: netip.MustParsePrefix("198.51.100.0/24"), Proto: []uint8{rule.ProtoUDP}, DstPort: rule.Ranges{{Lo: 53, Hi: 53}}}
	counts := func() (ip, all, every uint64) {
		fs, err := c.Dump(tcflower.DumpQuery{Ifindex: ia, AllChain: true})
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range fs {
			n := f.Actions[0].Stats.Packets
			switch string(f.Actions[0].Cookie) {
			case "proto-ip":
				ip = n
			case "proto-all":
				all = n
			case "every":
				every = n
			}
		}
		return
	}
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	sa := &unix.SockaddrLinklayer{Ifindex: ib}

	cases := []struct {
		name string
		tags []uint16
		// Observed on Linux 6.1 (veth): does each filter count the frame?
		wantIP, wantAll bool
	}{
		{"untagged", nil, true, true},
		{"802.1Q", []uint16{0x8100}, false, true},
		{"802.1ad", []uint16{0x88a8}, false, true},
		{"QinQ", []uint16{0x88a8, 0x8100}, false, true},
		// Rule semantics stop at two tags (a third makes the frame non-IP,
		// so it passes); the flow dissector skips further tags and still
		// finds the IP header: flower drops more than the rules here.
		{"3 tags", []uint16{0x88a8, 0x8100, 0x8100}, false, true},
	}
	for _, tc := range cases {
		for _, dport := range []uint16{53, 54} {
			fr := traffic.Frame{Tags: tc.tags, Family: rule.IPv4, Src: netip.MustParseAddr("192.0.2.1"), Dst: netip.MustParseAddr("198.51.100.7"),
				Proto: rule.ProtoUDP, SrcPort: 1234, DstPort: dport, Size: 100}
			frame := traffic.AppendFrame(nil, &fr)
			var fl rule.Fields
			packet.Parse(frame, &fl)
			sem := m.Matches(&fl)
			ip0, all0, ev0 := counts()
			if err := unix.Sendto(fd, frame, 0, sa); err != nil {
				t.Fatal(err)
			}
			deadline := time.Now().Add(3 * time.Second)
			var ip1, all1, ev1 uint64
			for {
				ip1, all1, ev1 = counts()
				if ev1 > ev0 || time.Now().After(deadline) {
					break
				}
				time.Sleep(time.Millisecond)
			}
			if ev1 != ev0+1 {
				t.Fatalf("%s dport %d: catch-all moved by %d", tc.name, dport, ev1-ev0)
			}
			gotIP, gotAll := ip1 > ip0, all1 > all0
			t.Logf("%-8s dport %d: rule semantics %v, flower protocol ip %v, protocol all+eth_type ip %v", tc.name, dport, sem, gotIP, gotAll)
			wantIP, wantAll := tc.wantIP && dport == 53, tc.wantAll && dport == 53
			if gotIP != wantIP || gotAll != wantAll {
				t.Errorf("%s dport %d: protocol ip counted %v (want %v), protocol all counted %v (want %v)", tc.name, dport, gotIP, wantIP, gotAll, wantAll)
			}
			if len(tc.tags) > 2 {
				if gotAll && sem {
					t.Errorf("%s: rule semantics now match a frame with %d tags", tc.name, len(tc.tags))
				}
				continue
			}
			if gotAll != sem {
				t.Errorf("%s dport %d: protocol all+eth_type ip (%v) differs from rule semantics (%v)", tc.name, dport, gotAll, sem)
			}
		}
	}
}
