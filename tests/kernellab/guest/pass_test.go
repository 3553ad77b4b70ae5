package guest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/scrubd/scrubd/agent/hwpath"
	"github.com/scrubd/scrubd/offload"
	"github.com/scrubd/scrubd/offload/tcflower"
	"github.com/scrubd/scrubd/swpath/packet"
	"github.com/scrubd/scrubd/swpath/rule"
	"github.com/scrubd/scrubd/swpath/traffic"
)

// TestPassEntriesCountExactly drives the agent's hardware path (hwpath over
// hwpath's flower backend, skip_hw on a veth: the kernel's software flower stands in
// for the NIC) with a SYN-flood drop on a /24 that overlaps two accept
// rules: the BGP session's listen-port rule and a route reflector's source
// rule. The drop goes in whole at priority 10, the accept rules' pass
// entries at priority 8; a catch-all at priority 100 counts what neither
// decides. Frames of five kinds are sent one by one in random order;
// after each one exactly the entry its kind predicts (from the rules'
// semantics, rule.Match.Matches on the parsed frame, first accept then
// drop) must have counted it, read back from the kernel: protected frames
// on their pass entry and never on the drop, the rest of the flood on the
// drop, the rest on the catch-all.
func TestPassEntriesCountExactly(t *testing.T) {
	requireGuest(t)
	ia, ib := vethPair(t, "pss0", "pss1")
	ctx := context.Background()
	c := dial(t)
	if _, err := c.EnsureQdisc(ia); err != nil {
		t.Fatal(err)
	}
	caps := offload.SoftwareFlower()
	be := hwpath.NewFlowerBackend(hwpath.FlowerConfig{Client: c, Ifindex: ia, Dev: "pss0", Caps: caps, Flags: tcflower.SkipHW})
	cc := agentCompile(caps)
	cc.PassPrioV4, cc.PassPrioV6 = 8, 9
	hp := hwpath.New(hwpath.Config{Name: "lab", Compile: cc, Owner: offload.Owner{Chain: agentChain, PrioLo: 8, PrioHi: agentPrioV6, Software: true}}, be)
	set := &rule.Set{Rules: []rule.Rule{
		{ID: "bgp-in", Action: rule.Accept, Match: rule.Match{Src: netip.MustParsePrefix("192.0.2.1/32"), Dst: netip.MustParsePrefix("192.0.2.10/32"),
			Proto: []uint8{rule.ProtoTCP}, DstPort: rule.Ranges{{Lo: 179, Hi: 179}}}},
		{ID: "rr", Action: rule.Accept, Match: rule.Match{Src: netip.MustParsePrefix("192.0.2.254/32")}},
		{ID: "syn", Priority: 500, Action: rule.Drop, Match: rule.Match{Dst: netip.MustParsePrefix("192.0.2.0/24"), Proto: []uint8{rule.ProtoTCP},
			HasTCPFlags: true, TCPFlags: rule.TCPFlags{Value: 0x02, Mask: 0x12}}},
	}}
	if _, err := hp.Compile(&set.Rules[2], set); err != nil {
		t.Fatalf("compile: %v", err)
	}
	if err := hp.Install(ctx, &set.Rules[2], set); err != nil {
		t.Fatalf("install: %v", err)
	}
	const catchPrio = 100
	if _, err := c.Add(tcflower.Filter{Ifindex: ia, Prio: catchPrio, Protocol: tcflower.ProtoAll, Handle: 1, Flags: tcflower.SkipHW,
		Actions: []tcflower.Action{{Kind: "gact", Verdict: tcflower.ActOK, Cookie: []byte("catch-all")}}}); err != nil {
		t.Fatal(err)
	}
	// What the kernel holds: one drop at 10, two pass entries at 8.
	fs, err := c.Dump(tcflower.DumpQuery{Ifindex: ia, AllChain: true})
	if err != nil {
		t.Fatal(err)
	}
	byPrio := map[uint16][]int32{}
	for _, f := range fs {
		byPrio[f.Prio] = append(byPrio[f.Prio], f.Actions[0].Verdict)
	}
	if len(byPrio[8]) != 2 || byPrio[8][0] != tcflower.ActOK || byPrio[8][1] != tcflower.ActOK || len(byPrio[10]) != 1 || byPrio[10][0] != tcflower.ActShot {
		t.Fatalf("filters by priority (verdicts) %v, want two pass at 8 and one drop at 10", byPrio)
	}
	keys := []string{hp.Key(&set.Rules[0]), hp.Key(&set.Rules[1]), hp.Key(&set.Rules[2])}
	names := []string{"bgp-in pass", "rr pass", "syn drop", "catch-all"}
	counts := func() []uint64 {
		st, err := hp.Stats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		out := make([]uint64, 4)
		for i, k := range keys {
			out[i] = st[k].Packets
		}
		fs, err := c.Dump(tcflower.DumpQuery{Ifindex: ia, AllChain: true})
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range fs {
			if f.Prio == catchPrio {
				out[3] += f.Actions[0].Stats.Packets
			}
		}
		return out
	}
	const syn, synack, ack = 0x02, 0x12, 0x10
	kinds := []traffic.Frame{
		{Src: netip.MustParseAddr("192.0.2.1"), Dst: netip.MustParseAddr("192.0.2.10"), SrcPort: 40179, DstPort: 179, TCPFlags: syn},    // the peer opens the session
		{Src: netip.MustParseAddr("192.0.2.254"), Dst: netip.MustParseAddr("192.0.2.20"), SrcPort: 40080, DstPort: 80, TCPFlags: syn},   // the reflector's own SYN
		{Src: netip.MustParseAddr("198.51.100.7"), Dst: netip.MustParseAddr("192.0.2.10"), SrcPort: 40179, DstPort: 179, TCPFlags: syn}, // flood on the BGP port
		{Src: netip.MustParseAddr("198.51.100.8"), Dst: netip.MustParseAddr("192.0.2.30"), SrcPort: 1024, DstPort: 80, TCPFlags: syn},   // flood
		{Src: netip.MustParseAddr("192.0.2.1"), Dst: netip.MustParseAddr("192.0.2.10"), SrcPort: 179, DstPort: 40179, TCPFlags: synack}, // the peer's SYN-ACK
		{Src: netip.MustParseAddr("198.51.100.9"), Dst: netip.MustParseAddr("192.0.2.30"), SrcPort: 443, DstPort: 50000, TCPFlags: ack}, // other TCP
	}
	// predict returns the entry that must count a frame: the first accept
	// rule that matches it (its pass entry), else the drop, else the
	// catch-all.
	predict := func(f *rule.Fields) int {
		for i := range set.Rules {
			if set.Rules[i].Match.Matches(f) {
				return i
			}
		}
		return 3
	}
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	sa := &unix.SockaddrLinklayer{Ifindex: ib}
	rng := rand.New(rand.NewPCG(8, 179))
	before := counts()
	want := make([]uint64, 4)
	const n = 150
	for i := 0; i < n; i++ {
		fr := kinds[rng.IntN(len(kinds))]
		fr.Family, fr.Proto, fr.Size = rule.IPv4, rule.ProtoTCP, 64+rng.IntN(200)
		frame := traffic.AppendFrame(nil, &fr)
		var fl rule.Fields
		if st := packet.Parse(frame, &fl); st != packet.OK {
			t.Fatalf("frame %d: parse %v", i, st)
		}
		w := predict(&fl)
		want[w]++
		after := sendCounted(t, fd, sa, frame, before, counts, fmt.Sprintf("frame %d", i))
		for j := range after {
			if d := after[j] - before[j]; (j == w) != (d == 1) {
				t.Fatalf("frame %d (%+v): %s moved by %d; expected %s", i, fr, names[j], d, names[w])
			}
		}
		before = after
	}
	t.Logf("%d frames: %s %d, %s %d, %s %d, %s %d (counts read back from the kernel)", n,
		names[0], want[0], names[1], want[1], names[2], want[2], names[3], want[3])
	for j, w := range want {
		if w == 0 {
			t.Errorf("no frame for %s: the mix does not exercise it", names[j])
		}
	}
	// Taking the drop out takes its pass entries with it.
	if err := hp.Remove(ctx, keys[2]); err != nil {
		t.Fatal(err)
	}
	fs, err = c.Dump(tcflower.DumpQuery{Ifindex: ia, AllChain: true})
	if err != nil || len(fs) != 1 || fs[0].Prio != catchPrio {
		t.Fatalf("after removing the drop: %d filters (%v), want the catch-all only", len(fs), err)
	}
}
