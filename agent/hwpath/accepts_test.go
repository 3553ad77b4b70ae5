package hwpath

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/scrubd/scrubd/offload"
	"github.com/scrubd/scrubd/offload/compile"
	"github.com/scrubd/scrubd/offload/sim"
	"github.com/scrubd/scrubd/swpath/rule"
	"github.com/scrubd/scrubd/swpath/traffic"
)

// acceptSet is n ClassBench-style drops behind k accept rules, each a /32
// inside the destination (or source) of one of the drops, priority 0;
// every other one for GRE only.
func acceptSet(n, k int) *rule.Set {
	set := traffic.ClassBenchRules(3, n)
	var acc []rule.Rule
	for i := 0; i < k; i++ {
		d := &set.Rules[(i*97+11)%n]
		m := rule.Match{}
		if d.Match.Dst.IsValid() {
			m.Dst = netip.PrefixFrom(d.Match.Dst.Addr(), d.Match.Dst.Addr().BitLen())
		} else {
			m.Src = netip.PrefixFrom(d.Match.Src.Addr(), d.Match.Src.Addr().BitLen())
		}
		if i%2 == 1 {
			m.Proto = []uint8{rule.ProtoGRE} // overlaps only drops of any protocol or GRE
		}
		acc = append(acc, rule.Rule{ID: "acc" + string(rune('a'+i%26)) + string(rune('a'+i/26)), Priority: 0, Action: rule.Accept, Match: m})
	}
	set.Rules = append(acc, set.Rules...)
	return set
}

// The accept rules in use (those that decide before and overlap a drop in
// hardware) are the ones the definition gives, in first-use order, with
// few accept rules (the drops' shields found first) and many (their keys
// first); with few, a set whose drops overlap no accept rule costs no
// per-rule allocation (a key is 7).
func TestAcceptsInUse(t *testing.T) {
	ctx := context.Background()
	partial := false
	for _, k := range []int{2, 8, 40} {
		set := acceptSet(3000, k)
		caps := offload.MLX5(4096)
		clk := sim.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
		p := New(Config{Name: "sim", Compile: compile.Config{Caps: caps, PrioV4: 10, PrioV6: 11, PassPrioV4: 8, PassPrioV6: 9},
			Owner: offload.Owner{Chain: 0, PrioLo: 8, PrioHi: 11}}, sim.New(sim.Config{Caps: caps, Clock: clk}))
		// The drops every other accept rule was made from go in; the
		// other accept rules are in use only if one of those overlaps them.
		installed := 0
		var try []int
		for i := 0; i < k; i += 2 {
			try = append(try, k+(i*97+11)%3000)
		}
		for _, i := range try {
			if p.Install(ctx, &set.Rules[i], set) == nil {
				installed++
			}
		}
		// The definition, from the rules themselves.
		var want []string
		seen := map[string]bool{}
		for i := range set.Rules {
			d := &set.Rules[i]
			if d.Action != rule.Drop || p.rules[p.Key(d)] == nil {
				continue
			}
			for j := range set.Rules {
				a := &set.Rules[j]
				if a.Action == rule.Accept && rule.Before(a, j, d, i) && compile.Overlap(&a.Match, &d.Match) && !seen[a.ID] {
					seen[a.ID] = true
					want = append(want, a.ID)
				}
			}
		}
		var got []string
		for _, a := range p.acceptsInUse(set) {
			got = append(got, a.ID)
		}
		if len(want) < k {
			partial = true
		}
		if len(want) == 0 || len(got) != len(want) {
			t.Fatalf("%d accept rules, %d drops in hardware: in use %v, want %v", k, installed, got, want)
		}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("%d accept rules: in use %v, want %v", k, got, want)
			}
		}
		t.Logf("%d accept rules, %d drops in hardware: %d accept rules in use", k, installed, len(got))
	}
	if !partial {
		t.Fatal("every accept rule was in use in every case: the cases do not tell a rule in use from one that is not")
	}

	// 3000 drops, none overlapping the 2 accept rules (/32s outside
	// every drop): the walk allocates its maps and nothing per rule.
	set := traffic.ClassBenchRules(3, 3000)
	set.Rules = append([]rule.Rule{
		{ID: "a1", Action: rule.Accept, Match: rule.Match{Dst: netip.MustParsePrefix("2001:db8::1/128")}},
		{ID: "a2", Action: rule.Accept, Match: rule.Match{Dst: netip.MustParsePrefix("2001:db8::2/128")}},
	}, set.Rules...)
	p, _, _ := newPath(offload.MLX5(4096), 0)
	p.acceptsInUse(set) // indexes the set
	if n := testing.AllocsPerRun(5, func() { p.acceptsInUse(set) }); n > 10 {
		t.Fatalf("%.0f allocations for 3000 drops overlapping no accept rule; want at most 10", n)
	}
}
