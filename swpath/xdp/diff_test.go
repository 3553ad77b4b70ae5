//go:build linux

package xdp

import (
	"errors"
	"math/rand/v2"
	"net/netip"
	"strconv"
	"testing"

	"github.com/scrubd/scrubd/swpath/rule"
)

// decided runs one frame and returns the action and the counter slot that
// moved (-1 for none).
func decided(t *testing.T, e *Engine, b []byte, nslots uint32) (uint32, int) {
	t.Helper()
	before, err := e.readSlots(nslots)
	if err != nil {
		t.Fatal(err)
	}
	act, err := e.Run(b)
	if err != nil {
		t.Fatal(err)
	}
	after, err := e.readSlots(nslots)
	if err != nil {
		t.Fatal(err)
	}
	slot := -1
	for i := range after {
		if after[i] != before[i] {
			if slot >= 0 {
				t.Fatalf("two slots moved for one frame: %d and %d", slot, i)
			}
			slot = i
			if d := after[i].Bytes - before[i].Bytes; d != uint64(len(b)) || after[i].Packets-before[i].Packets != 1 {
				t.Fatalf("slot %d moved by %d packets %d bytes, want 1 and %d", i, after[i].Packets-before[i].Packets, d, len(b))
			}
		}
	}
	return act, slot
}

// checkSet compares the program with rule.Set.Decide frame by frame.
func checkSet(t *testing.T, e *Engine, s *rule.Set, frames [][]byte) {
	t.Helper()
	if err := e.Replace(s); err != nil {
		var le *LimitError
		if errors.As(err, &le) {
			t.Logf("set refused: %v", err)
			return
		}
		t.Fatal(err)
	}
	hi := uint32(0)
	for _, sl := range e.setSlots {
		hi = max(hi, sl+1)
	}
	for _, b := range frames {
		f := refParse(b)
		want := s.Decide(&f)
		act, slot := decided(t, e, b, hi)
		wantAct, wantSlot := uint32(XDPPass), -1
		if want >= 0 {
			wantSlot = int(e.setSlots[want])
			if s.Rules[want].Action == rule.Drop {
				wantAct = XDPDrop
			}
		}
		if act != wantAct || slot != wantSlot {
			got := "none"
			for i, sl := range e.setSlots {
				if int(sl) == slot {
					got = s.Rules[i].ID + " " + s.Rules[i].Match.String()
				}
			}
			wantID := "none"
			if want >= 0 {
				wantID = s.Rules[want].ID + " " + s.Rules[want].Match.String()
			}
			t.Fatalf("frame %x\nfields %+v\nxdp: action %d rule %s\nref: action %d rule %s", b, f, act, got, wantAct, wantID)
		}
	}
}

func TestDifferentialRandom(t *testing.T) {
	e := newEngine(t, Options{})
	r := rand.New(rand.NewPCG(1, 2))
	sets, perSet := 60, 250
	if testing.Short() {
		sets = 10
	}
	refused := 0
	for i := 0; i < sets; i++ {
		var s rule.Set
		for j, n := 0, 1+r.IntN(40); j < n; j++ {
			s.Rules = append(s.Rules, randRule(r, j))
		}
		frames := make([][]byte, perSet)
		for k := range frames {
			fr := randFrame(r)
			frames[k] = fr.build()
		}
		if _, err := compile(&s, make([]uint32, len(s.Rules))); err != nil {
			refused++
		}
		checkSet(t, e, &s, frames)
	}
	if refused > sets/4 {
		t.Fatalf("%d of %d random sets refused by limits: the test exercises too little", refused, sets)
	}
}

func mustRules(t testing.TB, y string) *rule.Set {
	t.Helper()
	s, err := rule.Parse("test", []byte(y), testNow)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestEdgeCases checks hand-made edge frames against hand-made rules.
func TestEdgeCases(t *testing.T) {
	e := newEngine(t, Options{})
	s := mustRules(t, `
rules:
- {id: udp53, priority: 10, action: drop, match: {proto: udp, dst_port: 53}}
- {id: allow-net, priority: 5, action: accept, match: {src: 192.0.2.0/24}}
- {id: frag, priority: 20, action: drop, match: {fragment: [is-fragment]}}
- {id: syn, priority: 30, action: drop, match: {proto: tcp, tcp_flags: {value: [syn], mask: [syn, ack]}}}
- {id: no-syn-ack, priority: 35, action: drop, match: {proto: tcp, tcp_flags: {value: [], mask: [syn, ack]}}}
- {id: ping6, priority: 40, action: drop, match: {dst: 2001:db8::/32, icmp_type: 128}}
- {id: big, priority: 50, action: drop, match: {length: 1000-65535}}
- {id: ef, priority: 60, action: drop, match: {dscp: [46]}}
- {id: anyport, priority: 70, action: drop, match: {port: [1000-1100, 7000]}}
- {id: ext, priority: 80, action: drop, match: {proto: 60}}
`)
	a4, b4 := netip.MustParseAddr("10.1.2.3"), netip.MustParseAddr("10.9.9.9")
	a6, b6 := netip.MustParseAddr("2001:db8::1"), netip.MustParseAddr("2001:db8::2")
	frames := []frame{
		{src: a4, dst: b4, proto: 17, dport: 53},
		{src: a4, dst: b4, proto: 17, dport: 53, vlans: 1},
		{src: a4, dst: b4, proto: 17, dport: 53, vlans: 2},
		{src: a4, dst: b4, proto: 17, dport: 53, vlans: 3}, // third tag: not IP
		{src: a4, dst: b4, proto: 17, dport: 53, ipOptWords: 10},
		{src: a4, dst: b4, proto: 17, dport: 53, cut: 14 + 20 + 7}, // UDP header cut
		{src: a4, dst: b4, proto: 17, dport: 53, cut: 14 + 19},     // IPv4 header cut
		{src: a4, dst: b4, proto: 17, dport: 53, badVersion: true},
		{src: netip.MustParseAddr("192.0.2.1"), dst: b4, proto: 17, dport: 53},
		{src: a4, dst: b4, proto: 17, dport: 53, fragOff: 10},
		{src: a4, dst: b4, proto: 17, dport: 53, mf: true},
		{src: a4, dst: b4, proto: 6, tcpFlags: rule.SYN},
		{src: a4, dst: b4, proto: 6, tcpFlags: rule.SYN | rule.ACK},
		{src: a4, dst: b4, proto: 6, tcpFlags: rule.SYN, cut: 14 + 20 + 13},
		{src: a4, dst: b4, proto: 6, tcpFlags: rule.FIN | rule.PSH},
		{src: a4, dst: b4, proto: 6, tcpFlags: rule.ACK},
		{src: a4, dst: b4, proto: 6, tcpFlags: 0, cut: 14 + 20 + 13},
		{v6: true, src: a6, dst: b6, proto: 58, sport: 128 << 8},
		{v6: true, src: a6, dst: b6, proto: 1, sport: 128 << 8},
		{v6: true, src: a6, dst: b6, proto: 58, sport: 128 << 8, ext: []uint8{0, 43, 60, 60}},
		{v6: true, src: a6, dst: b6, proto: 58, sport: 128 << 8, ext: []uint8{0, 43, 60, 60, 60}},
		{v6: true, src: a6, dst: b6, proto: 17, dport: 53, ext: []uint8{44}, fragOff: 3},
		{v6: true, src: a6, dst: b6, proto: 17, dport: 53, ext: []uint8{44}, mf: true},
		{v6: true, src: a6, dst: b6, proto: 17, dport: 53, ext: []uint8{0, 60}, cut: 14 + 40 + 20},
		{src: a4, dst: b4, proto: 17, dport: 9, payload: 1200},
		{src: a4, dst: b4, proto: 17, dport: 9, tos: 46 << 2},
		{v6: true, src: a6, dst: b6, proto: 17, dport: 9, tos: 46 << 2},
		{src: a4, dst: b4, proto: 132, sport: 7000, dport: 9},
		{src: a4, dst: b4, proto: 6, sport: 9, dport: 1050},
		{src: a4, dst: b4, proto: 47, sport: 9, dport: 1050},
		{etherType: 0x0806},
		{src: a4, dst: b4, proto: 17, dport: 53, cut: 13},
	}
	var bs [][]byte
	for i := range frames {
		bs = append(bs, frames[i].build())
	}
	checkSet(t, e, s, bs)
	// Every rule decided at least one frame: the edge cases reach them all.
	got, err := e.Counters()
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range got {
		if c.Packets == 0 {
			t.Errorf("rule %s decided no frame", s.Rules[i].ID)
		}
	}
}

// TestDifferentialPortSets: sets made mostly of exact destination port rules
// (the port mask, and with it the program's fast path), some of them with
// conditions the fast path leaves to the general walk (family, length,
// fragments, TCP flags), mixed with random rules before or after them;
// frames mostly to those ports. The program must decide as rule.Set.Decide
// whichever path it takes.
func TestDifferentialPortSets(t *testing.T) {
	e := newEngine(t, Options{})
	r := rand.New(rand.NewPCG(3, 4))
	sets, perSet := 60, 200
	if testing.Short() {
		sets = 10
	}
	fast := 0
	for i := 0; i < sets; i++ {
		var s rule.Set
		for j, n := 0, 1+r.IntN(30); j < n; j++ {
			if r.IntN(5) == 0 {
				s.Rules = append(s.Rules, randRule(r, j))
				continue
			}
			ru := rule.Rule{ID: "p" + strconv.Itoa(j), Priority: pick(r, []uint32{1, 5, 10, rule.DefaultPriority}),
				Action: rule.Action(r.IntN(4) / 3)}
			m := &ru.Match
			if r.IntN(4) != 0 {
				m.Proto = []uint8{pick(r, []uint8{rule.ProtoUDP, rule.ProtoTCP, rule.ProtoSCTP})}
			}
			m.DstPort = rule.Ranges{}
			for k, nk := 0, 1+r.IntN(2); k < nk; k++ {
				p := uint32(pick(r, ports))
				m.DstPort = append(m.DstPort, rule.Range{Lo: p, Hi: p})
			}
			switch r.IntN(8) {
			case 0:
				m.Dst = netip.MustParsePrefix(pick(r, []string{"0.0.0.0/0", "::/0"}))
			case 1:
				m.Length = rule.Ranges{{Lo: 0, Hi: uint32(pick(r, []uint16{60, 80, 100}))}}
			case 2:
				m.Fragment = rule.Frag(1 + r.IntN(31))
			case 3:
				m.HasTCPFlags, m.TCPFlags.Mask, m.TCPFlags.Value = true, 0x12, 0x02
			}
			s.Rules = append(s.Rules, ru)
		}
		frames := make([][]byte, perSet)
		for k := range frames {
			fr := randFrame(r)
			if r.IntN(3) != 0 {
				fr.proto = pick(r, []uint8{rule.ProtoUDP, rule.ProtoTCP})
			}
			frames[k] = fr.build()
		}
		if tb, err := compile(&s, make([]uint32, len(s.Rules))); err == nil && tb.fastBound() != 0 {
			fast++
		}
		checkSet(t, e, &s, frames)
	}
	if fast < sets/3 {
		t.Fatalf("only %d of %d sets lead with the port mask: the fast path is too little exercised", fast, sets)
	}
}
