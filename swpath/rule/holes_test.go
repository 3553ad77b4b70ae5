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
	var deads [][]int
	for step := range 120 {
		i := rng.IntN(len(rules) + 70) // some past the end: never set
		was := h
		if i < len(rules) {
			h = h.With(i)
			if !slices.Contains(dead, i) {
				dead = append(dead, i)
			}
		}
		history = append(history, h)
		deads = append(deads, slices.Clone(dead))
		if h.Count() != len(dead) {
			t.Fatalf("step %d: Count %d, want %d", step, h.Count(), len(dead))
		}
		// New tells the hole just made, and only it.
		var got []int
		if grew := h.New(was, func(k int) { got = append(got, k) }); !grew {
			t.Fatalf("step %d: New says holes were filled", step)
		}
		if want := []int(nil); i < len(rules) && !was.Dead(i) {
			want = []int{i}
			if !slices.Equal(got, want) {
				t.Fatalf("step %d: New %v, want %v", step, got, want)
			}
			if was.New(h, func(int) { t.Fatalf("step %d: the older bitmap has a hole the newer lacks", step) }) {
				t.Fatalf("step %d: New of the older bitmap says it grew from the newer", step)
			}
		} else if len(got) != 0 {
			t.Fatalf("step %d: New %v, want none", step, got)
		}
	}
	// The earlier bitmaps kept their holes only (With writes copies).
	for k, old := range history {
		for i := range len(rules) + 70 {
			if old.Dead(i) != slices.Contains(deads[k], i) {
				t.Fatalf("bitmap %d: Dead(%d) = %v, its holes %v", k, i, old.Dead(i), deads[k])
			}
		}
	}
	// Blocks: positions far apart (past 4096) and a bitmap grown from nil.
	far := (*Holes)(nil).With(5, 9000, 4096, 4095)
	var got []int
	far.Each(1<<20, func(i int) { got = append(got, i) })
	if !slices.Equal(got, []int{5, 4095, 4096, 9000}) || far.Count() != 4 {
		t.Fatalf("holes %v (%d), want [5 4095 4096 9000]", got, far.Count())
	}
	got = got[:0]
	if !far.With(12000, 5).New(far, func(i int) { got = append(got, i) }) || !slices.Equal(got, []int{12000}) {
		t.Fatalf("New of two blocks on: %v, want [12000]", got)
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
	// A set cut shorter than its holes reach counts those below its end.
	for _, k := range []int{0, 1, 37, len(rules) / 2, slices.Max(dead), slices.Max(dead) + 1, len(rules)} {
		cut := &Set{Rules: rules[:k], Holes: h}
		want := 0
		for i := range k {
			if !slices.Contains(dead, i) {
				want++
			}
		}
		if cut.Len() != want {
			t.Fatalf("Len of the first %d positions %d, want %d", k, cut.Len(), want)
		}
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
