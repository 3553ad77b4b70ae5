//go:build linux

package xdp

import (
	"math/rand/v2"
	"net"
	"net/netip"
	"strconv"
	"testing"

	"github.com/scrubd/scrubd/swpath/rule"
	"github.com/scrubd/scrubd/swpath/traffic"
)

// maxList is the longest list of entries sharing a masked tuple.
func maxList(tb *tables) int {
	n := 0
	for _, c := range tb.keys {
		n = max(n, int(c.N))
	}
	return n
}

// walkCost models the program's walk over IPv4 frames in Go (masks in
// order while one can beat the best rank, a lookup of the masked tuple,
// the list in rank order until an entry's rule matches) and returns mask
// steps, tuples found and entries looked at, per frame.
func walkCost(tb *tables, s *rule.Set, slots []uint32, frames [][]byte) (steps, found, ents float64) {
	bySlot := map[uint32]int{}
	for i, sl := range slots {
		bySlot[sl] = i
	}
	for _, fr := range frames {
		f := refParse(fr)
		var pt tuple
		pt[0], pt[1] = 4, fr[23]
		if f.HasPorts() {
			copy(pt[2:6], fr[34:38])
		}
		copy(pt[8:12], fr[26:30])
		copy(pt[24:28], fr[30:34])
		best := rankNone
		for mi, m := range tb.masks {
			if m.BestRank >= best {
				break
			}
			steps++
			if m.Kind == kindPort {
				continue
			}
			var k tuple
			for i := range k {
				k[i] = pt[i] & m.M[i]
			}
			k.setMaskID(uint8(mi))
			c, ok := tb.keys[k]
			if !ok {
				continue
			}
			found++
			for ei := c.Head; ei != rankNone; ei = tb.ents[ei].Next {
				e := &tb.ents[ei]
				if e.Rank >= best {
					break
				}
				ents++
				if s.Rules[bySlot[e.Rule]].Match.Matches(&f) {
					best = e.Rank
					break
				}
			}
		}
	}
	n := float64(len(frames))
	return steps / n, found / n, ents / n
}

// TestRefineShortensLists: rules nested under one /16 pair (ClassBench's
// shape) share coarse masked tuples; refinement puts the entries beyond
// refineAt under finer masks, so no list is longer than the coarse pass's
// and the 10k set's longest goes from 63 entries to a handful, and the
// entries a walk looks at per frame (walkCost on the fresh ring's frames)
// drop by more than half.
func TestRefineShortensLists(t *testing.T) {
	mac := net.HardwareAddr{2, 0, 0, 0, 0, 1}
	for _, n := range []int{1000, 10000} {
		s := traffic.ClassBenchRules(uint64(n), n)
		coarse, err := compileWith(s, slotsFor(s), 0)
		if err != nil {
			t.Fatal(err)
		}
		tb, err := compile(s, slotsFor(s))
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%d rules: coarse %d masks, longest list %d; refined %d masks (%d new), longest list %d",
			n, len(coarse.masks), maxList(coarse), len(tb.masks), tb.fine, maxList(tb))
		if tb.fine == 0 || len(tb.masks) > MaxMasks || maxList(tb) > 8 || maxList(tb) >= maxList(coarse) {
			t.Fatalf("%d rules: refinement did not shorten the lists", n)
		}
		if len(tb.ents) != len(coarse.ents) {
			t.Fatalf("%d entries refined, %d coarse: refinement changed the expansion", len(tb.ents), len(coarse.ents))
		}
		if n < 10000 || testing.Short() {
			continue
		}
		frames, _ := freshRing(t, s, 4096, mac, mac)
		cs, cf, ce := walkCost(coarse, s, slotsFor(s), frames)
		rs, rf, re := walkCost(tb, s, slotsFor(s), frames)
		t.Logf("per frame, coarse: %.1f mask steps, %.2f tuples found, %.2f entries; refined: %.1f, %.2f, %.2f", cs, cf, ce, rs, rf, re)
		if re > ce/2 {
			t.Fatalf("refined walks look at %.2f entries per frame, coarse %.2f", re, ce)
		}
	}
}

// TestRefineWithinMaskBudget: a set that needs 245 coarse masks, every
// shape, plus rules that crowd one coarse tuple, still compiles: refined
// masks take only what MaxMasks leaves, and the rest stay in their list.
func TestRefineWithinMaskBudget(t *testing.T) {
	s := masksSet(1 << 20)
	for shape := 0; shape < 8; shape++ {
		s.Rules = append(s.Rules, rule.Rule{ID: "any" + strconv.Itoa(shape), Match: shapeMatch(shape)})
	}
	// 200 rules under 10.1.0.0/16 -> 10.2.0.0/16, each with its own /24
	// pair: one coarse tuple; refined, many /24 masks... of which there is
	// only one shape per prefix-length pair, so spread the lengths too.
	for i := range 200 {
		sl, dl := 16+8*(i%3), 16+8*(i/3%3)
		src := netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 1, byte(i), byte(i)}), sl).Masked()
		dst := netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 2, byte(i), byte(i)}), dl).Masked()
		m := shapeMatch(i % 8)
		m.Src, m.Dst = src, dst
		s.Rules = append(s.Rules, rule.Rule{ID: "crowd" + strconv.Itoa(i), Match: m})
	}
	coarse, err := compileWith(s, slotsFor(s), 0)
	if err != nil {
		t.Fatal(err)
	}
	tb, err := compile(s, slotsFor(s))
	if err != nil {
		t.Fatalf("refinement broke a set that fits with coarse masks: %v", err)
	}
	t.Logf("coarse %d masks (%d entries in long lists), refined %d masks (%d new)", len(coarse.masks), coarse.refined, len(tb.masks), tb.fine)
	if len(coarse.masks) != 245 || coarse.refined == 0 || tb.fine == 0 || tb.fine > MaxMasks-245 || len(tb.masks) > MaxMasks {
		t.Fatal("the budget was not used as it should")
	}
}

// TestDifferentialRefined: refined sets decide as rule.Set.Decide: a
// ClassBench-style set whose lists get refined, with mixed priorities and
// accept rules (ranks interleave across coarse and refined masks), on
// frames aimed at its rules and random ones.
func TestDifferentialRefined(t *testing.T) {
	e := newEngine(t, Options{})
	s := traffic.ClassBenchRules(21, 2000)
	r := rand.New(rand.NewPCG(21, 22))
	for i := range s.Rules {
		s.Rules[i].Priority = uint32(1 + r.IntN(4))
		if r.IntN(4) == 0 {
			s.Rules[i].Action = rule.Accept
		}
	}
	tb, err := compile(s, slotsFor(s))
	if err != nil {
		t.Fatal(err)
	}
	if tb.fine == 0 {
		t.Fatal("the set was not refined: the test exercises too little")
	}
	n := 3000
	if testing.Short() {
		n = 600
	}
	frames := traffic.NewGenerator(traffic.Config{Seed: 23, Rules: s, RuleFraction: 0.9, IPv6Fraction: 0.05, Sizes: traffic.Fixed(64)}).Frames(n)
	checkSet(t, e, s, frames)
}

// TestClassBenchSetsLoad: what loads. The rules live in maps, so the rule
// count never reaches the verifier; the program is verified once, at New.
// ClassBench-style sets of 1k and 10k rules load with the default
// MaxRules, 100k with MaxRules 100000 (skipped with -short), and each
// decides a frame a rule of it drops as rule.Set.Decide does.
func TestClassBenchSetsLoad(t *testing.T) {
	sizes := []int{1000, 10000, 100000}
	if testing.Short() {
		sizes = sizes[:2]
	}
	mac := net.HardwareAddr{2, 0, 0, 0, 0, 1}
	for _, n := range sizes {
		s := traffic.ClassBenchRules(uint64(n), n)
		e := newEngine(t, Options{MaxRules: max(n, DefaultMaxRules)})
		if err := e.Replace(s); err != nil {
			t.Fatalf("%d rules: %v", n, err)
		}
		info, err := e.Program().Info()
		if err != nil {
			t.Fatal(err)
		}
		insns, _ := info.VerifiedInstructions()
		tb, err := compile(s, slotsFor(s))
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%d rules: loaded; %d masks, %d tuples, %d entries, longest list %d; verifier processed %d instructions",
			n, len(tb.masks), len(tb.keys), len(tb.ents), maxList(tb), insns)
		frames, drops := freshRing(t, s, 64, mac, mac)
		for i, fr := range frames {
			want := uint32(XDPPass)
			if drops[i] {
				want = XDPDrop
			}
			if act, err := e.Run(fr); err != nil || act != want {
				t.Fatalf("%d rules, frame %d: action %d (%v), want %d", n, i, act, err, want)
			}
		}
		e.Close()
	}
}
