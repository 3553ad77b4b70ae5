package xdp

import (
	"net/netip"
	"testing"

	"github.com/scrubd/scrubd/swpath/packet"
	"github.com/scrubd/scrubd/swpath/rule"
	"github.com/scrubd/scrubd/swpath/traffic"
)

// TestCountersAddUpAcrossMatchChange runs frames through the program
// (BPF_PROG_TEST_RUN), changes one rule's match under the same id, adds a
// rule, and runs more: each rule's counter equals what rule.Set.Decide
// gives it over both phases (the engine keeps a rule's counter slot by
// id), and the drop rules' counters add up to the engine's Dropped total.
// A placer reading these counters must therefore keep its last reading
// across such a change (agent/placement's TestCountersAddUpAcrossMatchChange).
func TestCountersAddUpAcrossMatchChange(t *testing.T) {
	e := newEngine(t, Options{})
	pfx := netip.MustParsePrefix
	set1 := &rule.Set{Rules: []rule.Rule{
		{ID: "keep", Priority: 5, Action: rule.Accept, Match: rule.Match{Src: pfx("192.0.2.7/32")}},
		{ID: "drop-flood", Priority: 10, Action: rule.Drop, Match: rule.Match{Dst: pfx("198.51.100.0/24"), Proto: []uint8{rule.ProtoUDP}}},
		{ID: "drop-ssh", Priority: 20, Action: rule.Drop, Match: rule.Match{Proto: []uint8{rule.ProtoTCP}, DstPort: rule.Ranges{{Lo: 22, Hi: 22}}}},
	}}
	set2 := &rule.Set{Rules: []rule.Rule{
		set1.Rules[0],
		{ID: "drop-flood", Priority: 10, Action: rule.Drop, Match: rule.Match{Dst: pfx("198.51.100.0/25"), Proto: []uint8{rule.ProtoUDP}}},
		set1.Rules[2],
		{ID: "drop-new", Priority: 30, Action: rule.Drop, Match: rule.Match{Dst: pfx("203.0.113.0/24")}},
	}}
	want := map[string]uint64{}
	var wantDropped uint64
	run := func(set *rule.Set, seed uint64) {
		if err := e.Replace(set); err != nil {
			t.Fatal(err)
		}
		var f rule.Fields
		for _, b := range traffic.NewGenerator(traffic.Config{Seed: seed, Rules: set, RuleFraction: 0.8}).Frames(600) {
			if _, err := e.Run(b); err != nil {
				t.Fatal(err)
			}
			packet.Parse(b, &f)
			if d := set.Decide(&f); d >= 0 {
				want[set.Rules[d].ID]++
				if set.Rules[d].Action == rule.Drop {
					wantDropped++
				}
			}
		}
	}
	run(set1, 1)
	run(set2, 2)
	cs, err := e.Counters()
	if err != nil {
		t.Fatal(err)
	}
	var sum uint64
	for i, r := range set2.Rules {
		if cs[i].Packets != want[r.ID] {
			t.Errorf("rule %s: engine counted %d, reference %d over both sets", r.ID, cs[i].Packets, want[r.ID])
		}
		if r.Action == rule.Drop {
			sum += cs[i].Packets
		}
	}
	v, err := e.Verdicts()
	if err != nil {
		t.Fatal(err)
	}
	if sum != v[Dropped].Packets || sum != wantDropped {
		t.Errorf("drop rules' counters sum to %d; engine Dropped %d; reference %d", sum, v[Dropped].Packets, wantDropped)
	}
	if want["drop-flood"] == 0 || want["keep"] == 0 || want["drop-new"] == 0 {
		t.Fatalf("degenerate traffic: %v", want)
	}
}
