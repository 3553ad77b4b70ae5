package guest

import (
	"fmt"
	"math/bits"
	"net/netip"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/scrubd/scrubd/offload/tcflower"
	"github.com/scrubd/scrubd/swpath/packet"
	"github.com/scrubd/scrubd/swpath/rule"
	"github.com/scrubd/scrubd/swpath/traffic"
)

// labRules are drop rules that flower can express exactly, one flower
// filter each (the capability compiler of offload/ is not used here: the
// point is to check the kernel's matching against rule semantics).
func labRules() []rule.Rule {
	p := netip.MustParsePrefix
	r := func(id string, m rule.Match) rule.Rule { return rule.Rule{ID: id, Action: rule.Drop, Match: m} }
	return []rule.Rule{
		r("dns", rule.Match{Dst: p("198.51.100.0/24"), Proto: []uint8{rule.ProtoUDP}, DstPort: rule.Ranges{{Lo: 53, Hi: 53}}}),
		r("syn", rule.Match{Dst: p("203.0.113.0/25"), Proto: []uint8{rule.ProtoTCP}, HasTCPFlags: true, TCPFlags: rule.TCPFlags{Value: 0x02, Mask: 0x12}}),
		r("ping", rule.Match{Dst: p("192.0.2.0/24"), Proto: []uint8{rule.ProtoICMP}, ICMPType: rule.Ranges{{Lo: 8, Hi: 8}}}),
		r("frags", rule.Match{Src: p("10.0.0.0/8"), Fragment: rule.IsFragment}),
		r("v6udp", rule.Match{Dst: p("2001:db8:1::/48"), Proto: []uint8{rule.ProtoUDP}, SrcPort: rule.Ranges{{Lo: 1024, Hi: 2047}}}),
		r("v6ping", rule.Match{Dst: p("2001:db8:2::/48"), Proto: []uint8{rule.ProtoICMPv6}, ICMPType: rule.Ranges{{Lo: 128, Hi: 128}}, ICMPCode: rule.Ranges{{Lo: 0, Hi: 0}}}),
		r("ef", rule.Match{Dst: p("198.51.100.128/25"), DSCP: 1 << 46}),
		r("v6https", rule.Match{Dst: p("2001:db8::/32"), Proto: []uint8{rule.ProtoTCP}, DstPort: rule.Ranges{{Lo: 443, Hi: 443}}}),
	}
}

// rangeMask returns the value/mask of a range that is one aligned block.
func rangeMask(rs rule.Ranges, width int) (uint16, uint16, error) {
	if len(rs) != 1 {
		return 0, 0, fmt.Errorf("%d ranges", len(rs))
	}
	lo, hi := rs[0].Lo, rs[0].Hi
	n := hi - lo + 1
	if n&(n-1) != 0 || lo%n != 0 {
		return 0, 0, fmt.Errorf("range %v is not one aligned block", rs[0])
	}
	mask := uint32(1)<<width - 1
	mask &^= n - 1
	return uint16(lo), uint16(mask), nil
}

// toFlower maps the lab rules one to one; it refuses anything it cannot
// express exactly.
func toFlower(r rule.Rule, ifindex int, prio uint16, id uint64) (tcflower.Filter, error) {
	m := r.Match
	proto := tcflower.ProtoIPv4
	if m.Family() == rule.IPv6 {
		proto = tcflower.ProtoIPv6
	}
	k := tcflower.Key{EthType: proto}
	if m.Src.IsValid() {
		k.Src = tcflower.Prefix(m.Src)
	}
	if m.Dst.IsValid() {
		k.Dst = tcflower.Prefix(m.Dst)
	}
	if len(m.Proto) > 1 || m.Port != nil || m.Length != nil {
		return tcflower.Filter{}, fmt.Errorf("rule %s: not expressible one-to-one", r.ID)
	}
	if len(m.Proto) == 1 {
		k.IPProto = m.Proto[0]
	}
	var err error
	if m.SrcPort != nil {
		if k.SrcPort.Port, k.SrcPort.Mask, err = rangeMask(m.SrcPort, 16); err != nil {
			return tcflower.Filter{}, err
		}
	}
	if m.DstPort != nil {
		if k.DstPort.Port, k.DstPort.Mask, err = rangeMask(m.DstPort, 16); err != nil {
			return tcflower.Filter{}, err
		}
	}
	if m.ICMPType != nil {
		var v, mk uint16
		if v, mk, err = rangeMask(m.ICMPType, 8); err != nil {
			return tcflower.Filter{}, err
		}
		k.ICMPType, k.ICMPTypeMask = uint8(v), uint8(mk)
	}
	if m.ICMPCode != nil {
		var v, mk uint16
		if v, mk, err = rangeMask(m.ICMPCode, 8); err != nil {
			return tcflower.Filter{}, err
		}
		k.ICMPCode, k.ICMPCodeMask = uint8(v), uint8(mk)
	}
	if m.HasTCPFlags {
		k.TCPFlags, k.TCPFlagsMask = uint16(m.TCPFlags.Value), uint16(m.TCPFlags.Mask)
	}
	switch m.Fragment {
	case 0:
	case rule.IsFragment:
		// rule: fragment offset != 0. flower "frag" is any fragment (MF or
		// offset), "firstfrag" offset 0: offset != 0 is frag and not firstfrag.
		k.IPFlags, k.IPFlagsMask = tcflower.IPFlagFrag, tcflower.IPFlagFrag|tcflower.IPFlagFirstFrag
	default:
		return tcflower.Filter{}, fmt.Errorf("rule %s: fragment %v", r.ID, m.Fragment)
	}
	if m.DSCP != 0 {
		if bits.OnesCount64(m.DSCP) != 1 {
			return tcflower.Filter{}, fmt.Errorf("rule %s: several DSCP values", r.ID)
		}
		k.DSCP(uint8(bits.TrailingZeros64(m.DSCP)))
	}
	return tcflower.Filter{Ifindex: ifindex, Prio: prio, Protocol: proto, Handle: 1, Flags: tcflower.SkipHW, Key: k,
		Actions: []tcflower.Action{tcflower.Drop(tcflower.MakeCookie(id))}}, nil
}

// flowerView is what cls_flower's dissector sees of a packet: fl_classify
// calls skb_flow_dissect without FLOW_DISSECTOR_F_PARSE_1ST_FRAG, so the
// L4 header of a first fragment (IPv4 MF=1 offset 0, or an IPv6 fragment
// header with offset 0) is not read and ports, TCP flags and ICMP
// type/code conditions cannot hold for it, while rule semantics read it.
func flowerView(f rule.Fields) rule.Fields {
	if f.Frag&rule.FirstFragment != 0 {
		f.L4 = false
	}
	return f
}

func firstMatch(rs []rule.Rule, f *rule.Fields) int {
	for i := range rs {
		if rs[i].Match.Matches(f) {
			return i
		}
	}
	return -1
}

// TestFlowerCountsMatchRuleSemantics replays generated traffic through a
// veth and checks, packet by packet, that exactly the filter that rule
// semantics (swpath/rule over swpath/packet) predict counted the packet.
func TestFlowerCountsMatchRuleSemantics(t *testing.T) {
	requireGuest(t)
	c := dial(t)
	ia, ib := vethPair(t, "tr0", "tr1")
	if _, err := c.EnsureQdisc(ia); err != nil {
		t.Fatal(err)
	}
	rules := labRules()
	var ops []tcflower.Op
	for i, r := range rules {
		f, err := toFlower(r, ia, uint16(i+1), uint64(i))
		if err != nil {
			t.Fatal(err)
		}
		ops = append(ops, tcflower.Op{Kind: tcflower.OpAdd, Filter: f})
	}
	// Catch-all at the end so every frame is counted somewhere: flower
	// with no key, protocol all, gact pass, no scrubd cookie.
	const catchPrio = 100
	ops = append(ops, tcflower.Op{Kind: tcflower.OpAdd, Filter: tcflower.Filter{Ifindex: ia, Prio: catchPrio, Protocol: tcflower.ProtoAll, Handle: 1,
		Flags: tcflower.SkipHW, Actions: []tcflower.Action{{Kind: "gact", Verdict: tcflower.ActOK, Cookie: []byte("catch-all")}}}})
	for i, r := range c.Batch(ops, tcflower.BatchOptions{}) {
		if r.Err != nil {
			t.Fatalf("install %d: %v", i, r.Err)
		}
	}
	counts := func() []uint64 {
		fs, err := c.Dump(tcflower.DumpQuery{Ifindex: ia, AllChain: true})
		if err != nil {
			t.Fatal(err)
		}
		out := make([]uint64, len(rules)+1)
		for _, f := range fs {
			if f.Prio == catchPrio {
				out[len(rules)] += f.Actions[0].Stats.Packets
				continue
			}
			id, ok := f.OwnedID()
			if !ok || id >= uint64(len(rules)) {
				t.Fatalf("unexpected filter %s", f.ID())
			}
			out[id] += f.Actions[0].Stats.Packets
			if f.Actions[0].Stats.HWPackets != 0 {
				t.Fatalf("skip_hw filter %s has hardware packets", f.ID())
			}
		}
		return out
	}

	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	sa := &unix.SockaddrLinklayer{Ifindex: ib}

	gen := traffic.NewGenerator(traffic.Config{Seed: 6, Rules: &rule.Set{Rules: rules}, RuleFraction: 0.75, Sizes: traffic.Sizes{Min: 64, Max: 1518}})
	const n = 400
	before := counts()
	var diverged, dropped int
	perRule := make([]int, len(rules)+1)
	for i := 0; i < n; i++ {
		frame := gen.Next(nil)
		var fl rule.Fields
		st := packet.Parse(frame, &fl)
		want := firstMatch(rules, &fl)
		fv := flowerView(fl)
		wantFlower := firstMatch(rules, &fv)
		if want != wantFlower {
			diverged++
			t.Logf("packet %d: rule semantics pick %d, flower cannot (first fragment, L4 condition): %+v", i, want, fl)
		}
		if wantFlower < 0 {
			wantFlower = len(rules) // catch-all
		} else {
			dropped++
		}
		after := sendCounted(t, fd, sa, frame, before, counts, fmt.Sprintf("packet %d (%s, %d bytes)", i, st, len(frame)))
		for j := range after {
			d := after[j] - before[j]
			if (j == wantFlower) != (d == 1) {
				name := "catch-all"
				if j < len(rules) {
					name = rules[j].ID
				}
				t.Fatalf("packet %d: filter %q moved by %d; expected filter index %d\nfields %+v\nframe % x", i, name, d, wantFlower, fl, frame)
			}
		}
		perRule[wantFlower]++
		before = after
	}
	t.Logf("%d packets: %d counted by drop filters, %d by the catch-all, %d first fragments where flower and rule semantics differ; per rule %v",
		n, dropped, n-dropped, diverged, perRule)
	for i, r := range rules {
		if perRule[i] == 0 {
			t.Errorf("rule %s never hit: the traffic does not exercise it", r.ID)
		}
	}
}

// sendCounted sends frame on the packet socket fd and waits, up to 3 s, for
// the filter counters read by counts to move from before; their sum must
// move by exactly one (the frame counted once, by one filter). It returns
// the counters after. what names the frame in a failure.
func sendCounted(t *testing.T, fd int, sa unix.Sockaddr, frame []byte, before []uint64, counts func() []uint64, what string) []uint64 {
	t.Helper()
	if err := unix.Sendto(fd, frame, 0, sa); err != nil {
		t.Fatalf("%s: sendto: %v", what, err)
	}
	deadline := time.Now().Add(3 * time.Second)
	for {
		after := counts()
		var db, da uint64
		for j := range after {
			db += before[j]
			da += after[j]
		}
		if da > db || time.Now().After(deadline) {
			if da != db+1 {
				t.Fatalf("%s: counters moved by %d, want 1", what, int64(da-db))
			}
			return after
		}
		time.Sleep(time.Millisecond)
	}
}
