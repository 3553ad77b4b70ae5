package xdp

import (
	"net/netip"
	"testing"

	"github.com/scrubd/scrubd/swpath/packet"
	"github.com/scrubd/scrubd/swpath/rule"
	"github.com/scrubd/scrubd/swpath/traffic"
)

// TestCountersAddUpAcrossMatchChange runs frames through the program
// (BPF_PROG_TEST_RUN) over five sets: one rule's match changes under the
// same id and a rule is added; the match changes again and a rule is
// removed; a rule is added (a new slot: a removed rule's slot is reused
// only one replacement later); a rule is added that takes the removed
// rule's slot. Each rule's counter equals what rule.Set.Decide gives its id
// over every set it was in (the engine keeps a rule's counter slot by id,
// and a reused slot starts from zero), the drop rules' counters add up to
// what they dropped, and the engine's Dropped total is everything the
// reference dropped, the removed rule's drops included (moved into the
// verdict counters when its slot is reused). A placer reading these
// counters must therefore keep its last reading across such a change
// (agent/placement's TestCountersAddUpAcrossMatchChange).
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
	set3 := &rule.Set{Rules: []rule.Rule{ // drop-flood changes again, drop-ssh goes
		set1.Rules[0],
		{ID: "drop-flood", Priority: 10, Action: rule.Drop, Match: rule.Match{Dst: pfx("198.51.100.0/24"), Proto: []uint8{rule.ProtoUDP}, DstPort: rule.Ranges{{Lo: 0, Hi: 40000}}}},
		set2.Rules[3],
	}}
	set4 := &rule.Set{Rules: append(append([]rule.Rule(nil), set3.Rules...),
		rule.Rule{ID: "drop-late", Priority: 40, Action: rule.Drop, Match: rule.Match{Proto: []uint8{rule.ProtoTCP}}})}
	set5 := &rule.Set{Rules: append(append([]rule.Rule(nil), set4.Rules...), // takes drop-ssh's slot
		rule.Rule{ID: "drop-reuse", Priority: 50, Action: rule.Drop, Match: rule.Match{Proto: []uint8{rule.ProtoUDP}}})}
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
		cs, err := e.Counters()
		if err != nil {
			t.Fatal(err)
		}
		var sum, wantSum uint64
		for i, r := range set.Rules {
			if cs[i].Packets != want[r.ID] {
				t.Errorf("after set %d: rule %s: engine counted %d, reference %d over the sets it was in", seed, r.ID, cs[i].Packets, want[r.ID])
			}
			if r.Action == rule.Drop {
				sum += cs[i].Packets
				wantSum += want[r.ID]
			}
		}
		v, err := e.Verdicts()
		if err != nil {
			t.Fatal(err)
		}
		if sum != wantSum || v[Dropped].Packets != wantDropped {
			t.Errorf("after set %d: drop rules' counters sum to %d, reference %d; engine Dropped %d, reference %d (the removed rule's drops included)", seed, sum, wantSum, v[Dropped].Packets, wantDropped)
		}
	}
	run(set1, 1)
	run(set2, 2)
	ssh := want["drop-ssh"]
	e.mu.Lock()
	sshSlot := e.slots["drop-ssh"]
	e.mu.Unlock()
	run(set3, 3)
	run(set4, 4)
	run(set5, 5)
	if want["drop-flood"] == 0 || want["keep"] == 0 || want["drop-new"] == 0 || ssh == 0 || want["drop-late"] == 0 || want["drop-reuse"] == 0 {
		t.Fatalf("degenerate traffic: %v", want)
	}
	e.mu.Lock()
	reused := e.slots["drop-reuse"]
	e.mu.Unlock()
	if reused != sshSlot {
		t.Fatalf("drop-reuse has slot %d, drop-ssh had %d: a removed rule's slot is to be reused exactly one replacement after the one that freed it (here by drop-reuse in set 5)", reused, sshSlot)
	}
}
