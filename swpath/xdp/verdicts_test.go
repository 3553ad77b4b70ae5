//go:build linux

package xdp

import (
	"net"
	"testing"

	"github.com/scrubd/scrubd/swpath/rule"
)

// TestVerdictsAcrossSlotReuse: the program counts a packet a rule decides
// only in the rule's counter (by action); the Dropped and Accepted verdicts
// must still keep every such packet when the rule is removed, when its slot
// is handed to a new rule (retired into the verdict map), when a kept rule
// changes its action, and across a restart on the same pins.
func TestVerdictsAcrossSlotReuse(t *testing.T) {
	pin := bpffs(t)
	mac := net.HardwareAddr{2, 0, 0, 0, 0, 1}
	frame := func(port uint16) []byte { return benchFrame(mac, mac, port) }
	r := func(id string, port uint32, a rule.Action) rule.Rule {
		return rule.Rule{ID: id, Priority: rule.DefaultPriority, Action: a,
			Match: rule.Match{Proto: []uint8{rule.ProtoUDP}, DstPort: rule.Ranges{{Lo: port, Hi: port}}}}
	}
	e := newEngine(t, Options{PinPath: pin})
	send := func(port uint16, n int, want uint32) {
		t.Helper()
		for i := 0; i < n; i++ {
			if act, err := e.Run(frame(port)); err != nil || act != want {
				t.Fatalf("port %d: action %d, %v; want %d", port, act, err, want)
			}
		}
	}
	check := func(step string, drop, accept, pass uint64) {
		t.Helper()
		v, err := e.Verdicts()
		if err != nil {
			t.Fatal(err)
		}
		if v[Dropped].Packets != drop || v[Accepted].Packets != accept || v[Passed].Packets != pass ||
			v[Dropped].Bytes != drop*60 || v[Accepted].Bytes != accept*60 {
			t.Fatalf("%s: verdicts %+v; want dropped %d, accepted %d, passed %d (60-byte frames)", step, v, drop, accept, pass)
		}
	}
	set := func(rs ...rule.Rule) {
		t.Helper()
		if err := e.Replace(&rule.Set{Rules: rs}); err != nil {
			t.Fatal(err)
		}
	}
	set(r("a", 1000, rule.Drop), r("b", 2000, rule.Accept))
	send(1000, 7, XDPDrop)
	send(2000, 3, XDPPass)
	send(3000, 2, XDPPass)
	check("first set", 7, 3, 2)

	set(r("b", 2000, rule.Drop)) // a removed (slot pending), b changes action
	send(2000, 4, XDPDrop)
	check("a removed, b drops", 11, 3, 2)
	if c, err := e.Counters(); err != nil || c[0].Packets != 7 {
		t.Fatalf("counter of b (kept across its action change) = %+v, %v; want 7 packets", c, err)
	}

	set(r("b", 2000, rule.Drop), r("x", 4000, rule.Accept))
	set(r("b", 2000, rule.Drop), r("x", 4000, rule.Accept), r("c", 5000, rule.Accept)) // c reuses a's slot
	if c, err := e.Counters(); err != nil || c[2].Packets != 0 {
		t.Fatalf("counters %+v, %v: rule c in a reused slot must start at 0", c, err)
	}
	check("a's slot reused", 11, 3, 2)
	send(5000, 5, XDPPass)
	check("c accepts", 11, 8, 2)

	// A new agent on the same pins (the old one's fds closed) sees the
	// same totals, and slot reuse after the restart keeps them.
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	e = newEngine(t, Options{PinPath: pin})
	check("after restart", 11, 8, 2)
	set(r("y", 6000, rule.Drop)) // b, x, c pending
	set(r("y", 6000, rule.Drop)) // their slots free
	set(r("y", 6000, rule.Drop), r("z", 7000, rule.Drop), r("w", 8000, rule.Drop), r("v", 9000, rule.Drop))
	if len(e.free) != 0 || e.next != 4 {
		t.Fatalf("after reusing b's, x's and c's slots: free %v, next %d; want none free, next 4", e.free, e.next)
	}
	check("slots reused after restart", 11, 8, 2)
	send(9000, 1, XDPDrop)
	check("v drops", 12, 8, 2)
	if err := e.Unpin(); err != nil {
		t.Fatal(err)
	}
}
