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
	var hwDrops, allowRefusals int
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
				if d >= 0 && res[d].Offloadable && !entriesMatch(res[d].Entries, &f) {
					t.Fatalf("set %d: rule %s decides %+v but its entries miss it", set, s.Rules[d].ID, f)
				}
			}
		}
	}
	t.Logf("hardware drops checked: %d; allow-list refusals: %d", hwDrops, allowRefusals)
	if hwDrops == 0 || allowRefusals == 0 {
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
