package rule

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"
)

// TestHoles checks a set with holes against the same rules without them:
// its length, its live positions, Index, Compact, and the reference
// decision (Decide) of random packets, whose rule must be the same rule of
// the compacted set. The holes are made one by one with With, each on a
// copy: the earlier bitmaps must not change.
func TestHoles(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var rules []Rule
	for i := range 300 {
		rules = append(rules, Rule{ID: fmt.Sprintf("r%d", i), Priority: uint32(rng.IntN(4)), Action: Action(rng.IntN(2)), Match: randomMatch(rng)})
	}
	var h *Holes
	var dead []int
	var history []*Holes
	for step := range 120 {
		i := rng.IntN(len(rules) + 70) // some past the end: never set
		if i < len(rules) {
			h = h.With(i)
			if !slices.Contains(dead, i) {
				dead = append(dead, i)
			}
		}
		history = append(history, h)
		if h.Count() != len(dead) {
			t.Fatalf("step %d: Count %d, want %d", step, h.Count(), len(dead))
		}
	}
	// The earlier bitmaps kept their holes only.
	for k, old := range history[:len(history)-1] {
		if old.Count() > history[k+1].Count() {
			t.Fatalf("bitmap %d has %d holes, the next %d", k, old.Count(), history[k+1].Count())
		}
	}
	set := &Set{Rules: rules, Holes: h}
	var live []Rule
	var eached []int
	h.Each(len(rules), func(i int) { eached = append(eached, i) })
	slices.Sort(dead)
	if !slices.Equal(eached, dead) {
		t.Fatalf("Each %v, want %v", eached, dead)
	}
	for i := range rules {
		if set.Live(i) == slices.Contains(dead, i) {
			t.Fatalf("Live(%d) = %v, holes %v", i, set.Live(i), dead)
		}
		if set.Live(i) {
			live = append(live, rules[i])
		}
	}
	if set.Len() != len(live) {
		t.Fatalf("Len %d, want %d", set.Len(), len(live))
	}
	c := set.Compact()
	if c.Holes != nil || !slices.EqualFunc(c.Rules, live, func(a, b Rule) bool { return a.ID == b.ID }) {
		t.Fatalf("Compact: %d rules, want the %d live ones", len(c.Rules), len(live))
	}
	if plain := (&Set{Rules: rules}); plain.Compact() != plain {
		t.Fatal("Compact of a set without holes is not the set itself")
	}
	for i := range rules {
		want := -1
		if set.Live(i) {
			want = i
		}
		if got := set.Index(rules[i].ID); got != want && !(want == -1 && got >= 0 && set.Live(got)) {
			t.Fatalf("Index(%s) = %d, want %d", rules[i].ID, got, want)
		}
	}
	// Decide on the set with holes picks the rule Decide on the compacted
	// set picks.
	for range 20000 {
		f := randomFields(rng)
		a, b := set.Decide(&f), c.Decide(&f)
		switch {
		case a < 0 && b < 0:
		case a < 0 || b < 0:
			t.Fatalf("packet %+v: holed set decides %d, compacted %d", f, a, b)
		case rules[a].ID != c.Rules[b].ID:
			t.Fatalf("packet %+v: holed set decides %s, compacted %s", f, rules[a].ID, c.Rules[b].ID)
		case !set.Live(a):
			t.Fatalf("packet %+v: decided by hole %d", f, a)
		}
	}
}

// randomMatch is a match on a few bits of the source and destination
// (10.0.0.0/8, prefixes /8 to /10) and a destination port range, so that
// random packets of randomFields match several rules each.
func randomMatch(rng *rand.Rand) Match {
	pfx := func() netip.Prefix {
		a := netip.AddrFrom4([4]byte{10, byte(rng.IntN(4) << 6), 0, 0})
		return netip.PrefixFrom(a, 8+rng.IntN(3)).Masked()
	}
	lo := uint32(rng.IntN(8))
	return Match{Src: pfx(), Dst: pfx(), Proto: []uint8{6}, DstPort: Ranges{{lo, lo + uint32(rng.IntN(4))}}}
}

// randomFields is a TCP packet within 10.0.0.0/8 to a port below 12.
func randomFields(rng *rand.Rand) Fields {
	return Fields{Family: IPv4, Proto: 6, L4: true, Length: 60, DstPort: uint16(rng.IntN(12)),
		Src: AddrFrom(netip.AddrFrom4([4]byte{10, byte(rng.IntN(256)), 0, 1})),
		Dst: AddrFrom(netip.AddrFrom4([4]byte{10, byte(rng.IntN(256)), 0, 2}))}
}
