package compile

import (
	"math/bits"
	"slices"

	"github.com/scrubd/scrubd/swpath/rule"
)

// cube is a value/mask pair over a field of some width.
type cube struct{ v, m uint32 }

// norm returns rs sorted and merged, clipped to [0, max]; nil stays nil
// (the whole domain).
func norm(rs rule.Ranges, max uint32) rule.Ranges {
	if rs == nil {
		return nil
	}
	out := rule.Ranges{}
	c := slices.Clone(rs)
	slices.SortFunc(c, func(a, b rule.Range) int {
		if a.Lo != b.Lo {
			if a.Lo < b.Lo {
				return -1
			}
			return 1
		}
		return 0
	})
	for _, r := range c {
		if r.Lo > max || r.Lo > r.Hi {
			continue
		}
		r.Hi = min(r.Hi, max)
		if n := len(out); n > 0 && uint64(r.Lo) <= uint64(out[n-1].Hi)+1 {
			out[n-1].Hi = maxU(out[n-1].Hi, r.Hi)
			continue
		}
		out = append(out, r)
	}
	return out
}

func maxU(a, b uint32) uint32 {
	if a > b {
		return a
	}
	return b
}

// full returns rs, or the whole domain for nil.
func full(rs rule.Ranges, max uint32) rule.Ranges {
	if rs == nil {
		return rule.Ranges{{Lo: 0, Hi: max}}
	}
	return rs
}

// intersect returns a ∩ b of two normalized lists (nil = everything).
func intersect(a, b rule.Ranges) rule.Ranges {
	if a == nil {
		return b
	}
	if b == nil {
		return a
	}
	out := rule.Ranges{}
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		lo, hi := maxU(a[i].Lo, b[j].Lo), min(a[i].Hi, b[j].Hi)
		if lo <= hi {
			out = append(out, rule.Range{Lo: lo, Hi: hi})
		}
		if a[i].Hi < b[j].Hi {
			i++
		} else {
			j++
		}
	}
	return out
}

// subtract returns a \ b of two normalized lists over [0, max].
func subtract(a, b rule.Ranges, max uint32) rule.Ranges {
	a = full(a, max)
	if b == nil {
		return rule.Ranges{}
	}
	out := rule.Ranges{}
	for _, r := range a {
		lo := uint64(r.Lo)
		for _, x := range b {
			if uint64(x.Hi) < lo || x.Lo > r.Hi {
				continue
			}
			if uint64(x.Lo) > lo {
				out = append(out, rule.Range{Lo: uint32(lo), Hi: x.Lo - 1})
			}
			lo = uint64(x.Hi) + 1
		}
		if lo <= uint64(r.Hi) {
			out = append(out, rule.Range{Lo: uint32(lo), Hi: r.Hi})
		}
	}
	return out
}

// prefixes returns the minimal prefix (value/mask) cover of a normalized
// range list over a field of width w bits; nil gives one wildcard cube.
// A single range needs at most 2w-2 prefixes.
func prefixes(rs rule.Ranges, w int) []cube {
	if rs == nil {
		return []cube{{0, 0}}
	}
	fullMask := uint32(1)<<w - 1
	var out []cube
	for _, r := range rs {
		lo, hi := uint64(r.Lo), uint64(r.Hi)
		for lo <= hi {
			// largest aligned block starting at lo that fits in [lo, hi]
			size := uint64(1) << w
			if lo != 0 {
				size = uint64(1) << bits.TrailingZeros64(lo)
			}
			for lo+size-1 > hi {
				size >>= 1
			}
			out = append(out, cube{uint32(lo), fullMask &^ uint32(size-1)})
			lo += size
		}
	}
	return out
}

// coverSet returns a small ternary cover (value/mask cubes over w bits) of
// the values whose bit is set in set (w <= 6): prime implicants by
// Quine-McCluskey, then a greedy cover. A full set gives one wildcard cube.
func coverSet(set uint64, w int) []cube {
	n := uint32(1) << w
	all := uint64(1)<<n - 1
	if n == 64 {
		all = ^uint64(0)
	}
	set &= all
	if set == 0 {
		return nil
	}
	fullMask := n - 1
	// level 0: minterms
	cur := map[cube]bool{}
	for v := uint32(0); v < n; v++ {
		if set&(1<<v) != 0 {
			cur[cube{v, fullMask}] = false
		}
	}
	var primes []cube
	for len(cur) > 0 {
		next := map[cube]bool{}
		keys := make([]cube, 0, len(cur))
		for c := range cur {
			keys = append(keys, c)
		}
		slices.SortFunc(keys, func(a, b cube) int {
			if a.m != b.m {
				return int(a.m) - int(b.m)
			}
			return int(a.v) - int(b.v)
		})
		for i, a := range keys {
			for _, b := range keys[i+1:] {
				if a.m != b.m {
					continue
				}
				d := a.v ^ b.v
				if bits.OnesCount32(d) == 1 {
					next[cube{a.v &^ d, a.m &^ d}] = false
					cur[a], cur[b] = true, true
				}
			}
		}
		for _, c := range keys {
			if !cur[c] {
				primes = append(primes, c)
			}
		}
		cur = next
	}
	covers := func(c cube, v uint32) bool { return v&c.m == c.v }
	left := set
	var out []cube
	for left != 0 {
		best, bestN := -1, 0
		for i, c := range primes {
			k := 0
			for v := uint32(0); v < n; v++ {
				if left&(1<<v) != 0 && covers(c, v) {
					k++
				}
			}
			if k > bestN {
				best, bestN = i, k
			}
		}
		c := primes[best]
		out = append(out, c)
		for v := uint32(0); v < n; v++ {
			if covers(c, v) {
				left &^= 1 << v
			}
		}
	}
	return out
}
