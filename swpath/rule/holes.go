package rule

import (
	"fmt"
	"math/bits"
	"slices"
)

// Holes marks positions of a Set's Rules that are not rules of the set:
// the places of rules removed from a set that is kept in place, so that a
// removal does not copy the whole array (at 100k rules about 30 MB) that
// engines may still be reading. A Holes value is read-only once a Set holds
// it; a new hole is made on a copy (With), a bitmap of one bit a position.
// The nil *Holes has none.
type Holes struct {
	bits []uint64
	n    int
}

// Dead reports whether position i is a hole.
func (h *Holes) Dead(i int) bool {
	if h == nil || i>>6 >= len(h.bits) {
		return false
	}
	return h.bits[i>>6]&(1<<(uint(i)&63)) != 0
}

// Count is the number of holes.
func (h *Holes) Count() int {
	if h == nil {
		return 0
	}
	return h.n
}

// With returns h with the positions more made holes too (a copy: h is not
// written). Positions already holes are counted once.
func (h *Holes) With(more ...int) *Holes {
	if len(more) == 0 {
		return h
	}
	out := &Holes{}
	if h != nil {
		out.bits, out.n = slices.Clone(h.bits), h.n
	}
	for _, i := range more {
		if i < 0 {
			panic(fmt.Sprintf("rule.Holes.With(%d)", i))
		}
		w := i >> 6
		if w >= len(out.bits) {
			out.bits = append(out.bits, make([]uint64, w+1-len(out.bits))...)
		}
		if b := uint64(1) << (uint(i) & 63); out.bits[w]&b == 0 {
			out.bits[w] |= b
			out.n++
		}
	}
	return out
}

// Each calls f for every hole below n, in ascending order.
func (h *Holes) Each(n int, f func(i int)) {
	if h == nil {
		return
	}
	for w, b := range h.bits {
		for b != 0 {
			i := w<<6 | bits.TrailingZeros64(b)
			if i >= n {
				return
			}
			f(i)
			b &= b - 1
		}
	}
}

// Live reports whether position i of s.Rules is a rule of the set (not a
// hole).
func (s *Set) Live(i int) bool { return !s.Holes.Dead(i) }

// Len is the number of rules of the set: its positions less its holes.
func (s *Set) Len() int {
	n := len(s.Rules)
	s.Holes.Each(n, func(int) { n-- })
	return n
}

// Compact returns s when it has no holes, else a new set of its rules
// alone, in order. Code that reads a set's Rules without asking Live
// compacts it first.
func (s *Set) Compact() *Set {
	if s.Holes.Count() == 0 {
		return s
	}
	out := &Set{Rules: make([]Rule, 0, len(s.Rules)-s.Holes.Count())}
	for i := range s.Rules {
		if s.Live(i) {
			out.Rules = append(out.Rules, s.Rules[i])
		}
	}
	return out
}
