package compile

import (
	"math/rand/v2"
	"testing"

	"github.com/scrubd/scrubd/offload"
	"github.com/scrubd/scrubd/swpath/rule"
)

// TestSetNeverDropsWhatTheSetPasses builds random small rule sets with
// accept and drop rules, compiles them, and checks over the edge packet
// space of each set that whenever a hardware entry drops a packet, the
// reference decision (rule.Set.Decide over the whole set) drops it too.
// It also checks that every drop the reference makes by a rule placed in
// hardware is dropped by that rule's entries (nothing is lost).
func TestSetNeverDropsWhatTheSetPasses(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	var hwDrops, allowRefusals, splits int
	for set := range 400 {
		n := 2 + r.IntN(5)
		s := &rule.Set{}
		for i := range n {
			s.Rules = append(s.Rules, randRule(r, set*10+i))
		}
		for _, cfg := range []*Config{mlx5Cfg(), flowerCfg()} {
			res := Set(cfg, s)
			var hw []offload.Entry
			for i := range res {
				if res[i].Offloadable {
					hw = append(hw, res[i].Entries...)
				}
				if res[i].Reason == ReasonAllowList {
					allowRefusals++
				}
				if len(res[i].SplitBy) > 0 {
					splits++
				}
			}
			sp := newSpace(uint64(set), s.Rules)
			for range 1500 {
				f := sp.packet()
				d := s.Decide(&f)
				if entriesMatch(hw, &f) {
					hwDrops++
					if d < 0 || s.Rules[d].Action != rule.Drop {
						t.Fatalf("set %d: hardware drops %+v but the set decides %d\nrules: %v", set, f, d, ruleStrings(s))
					}
				}
				for i := range res {
					if res[i].Offloadable && entriesMatch(res[i].Entries, &f) != wantHW(s, &res[i], i, &f) {
						t.Fatalf("set %d: rule %s (split by %v) inexact on %+v", set, s.Rules[i].ID, res[i].SplitBy, f)
					}
				}
				if d >= 0 && res[d].Offloadable && !entriesMatch(res[d].Entries, &f) {
					t.Fatalf("set %d: rule %s decides %+v but its entries miss it", set, s.Rules[d].ID, f)
				}
			}
		}
	}
	t.Logf("hardware drops checked: %d; allow-list refusals: %d; splits: %d", hwDrops, allowRefusals, splits)
	if hwDrops == 0 || allowRefusals == 0 || splits == 0 {
		t.Fatal("the test exercised nothing")
	}
}

func ruleStrings(s *rule.Set) []string {
	var out []string
	for _, r := range s.Rules {
		out = append(out, r.ID+" "+r.Action.String()+" "+r.Match.String())
	}
	return out
}

// TestOverlapSound checks that Overlap never says "disjoint" for two rules
// some packet matches both of.
func TestOverlapSound(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	var both, disjoint int
	for i := range 3000 {
		a, b := randRule(r, 2*i), randRule(r, 2*i+1)
		ov := Overlap(&a.Match, &b.Match)
		if !ov {
			disjoint++
		}
		sp := newSpace(uint64(i), []rule.Rule{a, b})
		for range 300 {
			f := sp.packet()
			if a.Match.Matches(&f) && b.Match.Matches(&f) {
				both++
				if !ov {
					t.Fatalf("Overlap(%s, %s) = false, but %+v matches both", a.Match.String(), b.Match.String(), f)
				}
			}
		}
	}
	if both == 0 || disjoint == 0 {
		t.Fatalf("degenerate test: %d shared packets, %d disjoint pairs", both, disjoint)
	}
}

func TestAllowListKeepsDropInSoftware(t *testing.T) {
	s := &rule.Set{Rules: []rule.Rule{
		parseOne(t, `{id: ok-dns, priority: 10, action: accept, match: {src: 192.0.2.53/32, proto: udp, src_port: "53"}}`),
		parseOne(t, `{id: dns-amp, priority: 100, action: drop, match: {proto: udp, src_port: "53"}}`),
		parseOne(t, `{id: syn, priority: 100, action: drop, match: {proto: tcp, dst_port: "80", tcp_flags: {value: [syn], mask: [syn, ack]}}}`),
		parseOne(t, `{id: late-accept, priority: 200, action: accept, match: {proto: tcp}}`),
	}}
	res := Set(mlx5Cfg(), s)
	if res[1].Reason != ReasonAllowList || res[1].Offloadable {
		t.Errorf("dns-amp: %v %s, want allow-list refusal", res[1].Reason, res[1].Detail)
	}
	if !res[2].Offloadable {
		t.Errorf("syn: %v %s, want offloaded (the overlapping accept decides later)", res[2].Reason, res[2].Detail)
	}
	if res[0].Reason != ReasonAccept || res[3].Reason != ReasonAccept {
		t.Errorf("accept rules: %v %v", res[0].Reason, res[3].Reason)
	}
}

func TestRangePrefixes(t *testing.T) {
	for _, tt := range []struct {
		lo, hi uint32
		want   int
	}{{1000, 2000, 8}, {0, 65535, 1}, {1, 65534, 30}, {80, 80, 1}, {1024, 65535, 6}, {0, 1023, 1}} {
		cs := prefixes(rule.Ranges{{Lo: tt.lo, Hi: tt.hi}}, 16)
		if len(cs) != tt.want {
			t.Errorf("%d-%d: %d prefixes, want %d", tt.lo, tt.hi, len(cs), tt.want)
		}
		// exact cover, no overlap
		for v := uint32(0); v <= 0xffff; v++ {
			n := 0
			for _, c := range cs {
				if v&c.m == c.v {
					n++
				}
			}
			in := v >= tt.lo && v <= tt.hi
			if (in && n != 1) || (!in && n != 0) {
				t.Fatalf("%d-%d: value %d covered %d times", tt.lo, tt.hi, v, n)
			}
		}
	}
}

func TestCoverSet(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 9))
	for range 2000 {
		set := r.Uint64() & r.Uint64()
		if r.IntN(4) == 0 {
			set = ^uint64(0)
		}
		cs := coverSet(set, 6)
		for v := uint32(0); v < 64; v++ {
			in := set&(1<<v) != 0
			hit := false
			for _, c := range cs {
				if v&c.m == c.v {
					hit = true
				}
			}
			if in != hit {
				t.Fatalf("set %x: value %d in=%v covered=%v by %v", set, v, in, hit, cs)
			}
		}
		if set == ^uint64(0) && (len(cs) != 1 || cs[0].m != 0) {
			t.Fatalf("full set: %v", cs)
		}
	}
}

func TestSplitAroundAccept(t *testing.T) {
	for _, tt := range []struct {
		accept, drop string
		entries      int
	}{
		{`{id: acc, priority: 10, action: accept, match: {dst: 203.0.113.53/32, proto: udp}}`,
			`{id: drop, priority: 100, action: drop, match: {dst: 203.0.113.0/24, proto: udp}}`, 8},
		{`{id: acc, priority: 10, action: accept, match: {proto: udp, src_port: "53", dst_port: "1000-2000"}}`,
			`{id: drop, priority: 100, action: drop, match: {dst: 198.51.100.0/24, proto: udp, dst_port: "1000-2000"}}`, 16 * 8},
		{`{id: acc, priority: 10, action: accept, match: {dst: 192.0.2.0/24, dscp: [46]}}`,
			`{id: drop, priority: 100, action: drop, match: {dst: 192.0.2.0/24, dscp: [46, 48]}}`, 1},
		{`{id: acc, priority: 10, action: accept, match: {proto: [tcp]}}`,
			`{id: drop, priority: 100, action: drop, match: {dst: "2001:db8::/32", proto: [tcp, udp, gre]}}`, 2},
		{`{id: acc, priority: 10, action: accept, match: {proto: icmp, icmp_type: "3"}}`,
			`{id: drop, priority: 100, action: drop, match: {proto: icmp, icmp_type: "3-8"}}`, 2},
	} {
		s := &rule.Set{Rules: []rule.Rule{parseOne(t, tt.accept), parseOne(t, tt.drop)}}
		res := Set(mlx5Cfg(), s)
		r := res[1]
		if !r.Offloadable || len(r.SplitBy) != 1 || r.SplitBy[0] != "acc" || len(r.Entries) != tt.entries {
			t.Errorf("%s: offloadable %v (%s) split by %v, %d entries; want split into %d",
				tt.drop, r.Offloadable, r.Detail, r.SplitBy, len(r.Entries), tt.entries)
			continue
		}
		sp := newSpace(1, s.Rules)
		for range 30000 {
			f := sp.packet()
			if entriesMatch(r.Entries, &f) != wantHW(s, &r, 1, &f) {
				t.Fatalf("%s inexact on %+v", tt.drop, f)
			}
		}
	}
	// an accept covering the whole drop rule leaves nothing for hardware
	s := &rule.Set{Rules: []rule.Rule{
		parseOne(t, `{id: acc, priority: 10, action: accept, match: {dst: 10.0.0.0/8}}`),
		parseOne(t, `{id: drop, priority: 100, action: drop, match: {dst: 10.1.0.0/16, proto: udp}}`)}}
	if r := Set(mlx5Cfg(), s)[1]; r.Offloadable || r.Reason != ReasonAllowList {
		t.Errorf("shadowed drop: %v %s", r.Reason, r.Detail)
	}
}
