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
// it; a new hole is made on a copy (With). The nil *Holes has none.
//
// The bitmap is in blocks of holesBlock bits, and a copy shares the blocks
// it does not change: With copies the block index (a pointer per 4096
// positions, 25 at 100k rules) and the blocks it writes (512 bytes each),
// not the whole bitmap, and New compares blocks by pointer first, so that
// telling the holes a removal added costs what the removal touched.
type Holes struct {
	blocks []*holesBlock
	n      int
	end    int // one past the last hole
}

// holesWords is the length of a block in 64-bit words.
const holesWords = 64

// holesBlock is holesWords*64 positions of a bitmap.
type holesBlock [holesWords]uint64

// Dead reports whether position i is a hole.
func (h *Holes) Dead(i int) bool {
	if h == nil || i < 0 {
		return false
	}
	b := i >> 12
	if b >= len(h.blocks) || h.blocks[b] == nil {
		return false
	}
	return h.blocks[b][(i>>6)&(holesWords-1)]&(1<<(uint(i)&63)) != 0
}

// Count is the number of holes.
func (h *Holes) Count() int {
	if h == nil {
		return 0
	}
	return h.n
}

// With returns h with the positions more made holes too (a copy: h is not
// written, and the copy shares the blocks more does not touch). Positions
// already holes are counted once.
func (h *Holes) With(more ...int) *Holes {
	if len(more) == 0 {
		return h
	}
	out := &Holes{}
	if h != nil {
		out.blocks, out.n, out.end = slices.Clone(h.blocks), h.n, h.end
	}
	var own []*holesBlock // blocks already copied for out
	for _, i := range more {
		if i < 0 {
			panic(fmt.Sprintf("rule.Holes.With(%d)", i))
		}
		b := i >> 12
		if b >= len(out.blocks) {
			out.blocks = append(out.blocks, make([]*holesBlock, b+1-len(out.blocks))...)
		}
		blk := out.blocks[b]
		if !slices.Contains(own, blk) || blk == nil {
			c := new(holesBlock)
			if blk != nil {
				*c = *blk
			}
			out.blocks[b], blk = c, c
			own = append(own, c)
		}
		w, bit := (i>>6)&(holesWords-1), uint64(1)<<(uint(i)&63)
		if blk[w]&bit == 0 {
			blk[w] |= bit
			out.n++
			out.end = max(out.end, i+1)
		}
	}
	return out
}

// Each calls f for every hole below n, in ascending order.
func (h *Holes) Each(n int, f func(i int)) {
	if h == nil {
		return
	}
	for b, blk := range h.blocks {
		if blk == nil {
			continue
		}
		for w, x := range blk {
			for x != 0 {
				i := b<<12 | w<<6 | bits.TrailingZeros64(x)
				if i >= n {
					return
				}
				f(i)
				x &= x - 1
			}
		}
	}
}

// New calls f, in ascending order, for every hole of h that is not a hole
// of old, and reports whether every hole of old is one of h (h is old with
// holes added). Blocks h shares with old are skipped unread: for an h made
// from old by With, the cost is a pointer per 4096 positions and the
// blocks With wrote.
func (h *Holes) New(old *Holes, f func(i int)) (grew bool) {
	grew = true
	var hb, ob []*holesBlock
	if h != nil {
		hb = h.blocks
	}
	if old != nil {
		ob = old.blocks
	}
	for b := range max(len(hb), len(ob)) {
		var x, y *holesBlock
		if b < len(hb) {
			x = hb[b]
		}
		if b < len(ob) {
			y = ob[b]
		}
		if x == y {
			continue
		}
		for w := range holesWords {
			var xw, yw uint64
			if x != nil {
				xw = x[w]
			}
			if y != nil {
				yw = y[w]
			}
			if yw&^xw != 0 {
				grew = false
			}
			for d := xw &^ yw; d != 0; d &= d - 1 {
				f(b<<12 | w<<6 | bits.TrailingZeros64(d))
			}
		}
	}
	return grew
}

// Live reports whether position i of s.Rules is a rule of the set (not a
// hole).
func (s *Set) Live(i int) bool { return !s.Holes.Dead(i) }

// Len is the number of rules of the set: its positions less its holes.
// Its holes are all positions of Rules unless Rules was cut shorter than
// they reach; then those below its length are counted.
func (s *Set) Len() int {
	n := len(s.Rules)
	if s.Holes == nil || s.Holes.end <= n {
		return n - s.Holes.Count()
	}
	s.Holes.Each(n, func(int) { n-- })
	return n
}

// Compact returns s when it has no holes and moves nothing (Order), else a
// new set of its rules alone, in decision order (by key). Code that reads a
// set's Rules without asking Live and Key compacts it first.
func (s *Set) Compact() *Set {
	if s.Holes.Count() == 0 && s.Order.Moved() == 0 {
		return s
	}
	out := &Set{Rules: make([]Rule, 0, s.Len())}
	s.Ordered(func(i int) { out.Rules = append(out.Rules, s.Rules[i]) })
	return out
}
