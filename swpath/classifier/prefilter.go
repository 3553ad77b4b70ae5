package classifier

import "math/bits"

// A prefilter answers, from the top bits of a packet's two addresses alone,
// which hash tables can hold an entry for it, so that a lookup hashes and
// probes only those (the tuple-space analogue of a first cut in a decision
// tree). Every table is filed under the coarsest address key its mask
// covers: the top 16 bits of both addresses when the mask keys at least 16
// bits of each, else of one of them, else the top 8 bits of both, of one,
// or nothing (the table is always a candidate). A table can hold a packet's
// entry only if the packet's key under the table's own kind is one of the
// keys of the table's slots, so the candidate set is never too small.
//
// Kinds 1-4 live in one open-addressing hash from key to a bitmask of
// tables; kinds 5 and 6 (one /8) in two direct arrays. Tables past the 63rd
// share bit 63, which is always set.
type prefilter struct {
	always     uint64 // tables that are candidates for every packet
	kinds      uint8  // bit k: some table is of kind k
	shift      uint8
	bits       uint64 // len(slots)-1
	slots      []pfSlot
	src8, dst8 *[256]uint64
}

type pfSlot struct{ key, mask uint64 }

const (
	pfS16D16 = 1 + iota
	pfS16
	pfD16
	pfS8D8
	pfS8
	pfD8
)

// pfKind returns the prefilter kind of a table mask (0: always probed).
func pfKind(m *key) uint8 {
	s16, d16 := m.srcHi>>48 == 0xffff, m.dstHi>>48 == 0xffff
	s8, d8 := m.srcHi>>56 == 0xff, m.dstHi>>56 == 0xff
	switch {
	case s16 && d16:
		return pfS16D16
	case s16:
		return pfS16
	case d16:
		return pfD16
	case s8 && d8:
		return pfS8D8
	case s8:
		return pfS8
	case d8:
		return pfD8
	}
	return 0
}

// pfKey is the hash key of kinds 1-4 (never 0).
func pfKey(kind uint8, src, dst uint64) uint64 {
	switch kind {
	case pfS16D16:
		return 1<<32 | src>>48<<16 | dst>>48
	case pfS16:
		return 2<<32 | src>>48<<16
	case pfD16:
		return 3<<32 | dst>>48
	}
	return 4<<32 | src>>56<<8 | dst>>56
}

func pfBit(ti int) uint64 { return 1 << min(ti, 63) }

// buildPrefilter files every table of t under its kind.
func (t *Table) buildPrefilter() {
	p := &t.pf
	if len(t.tables) > 63 {
		p.always |= 1 << 63
	}
	n := 0
	for ti := range t.tables {
		if k := pfKind(&t.tables[ti].mask); k >= pfS16D16 && k <= pfS8D8 {
			n += len(t.tables[ti].slots) / 2
		}
	}
	size := 8
	for size < 2*n {
		size <<= 1
	}
	p.slots = make([]pfSlot, size)
	p.bits = uint64(size - 1)
	p.shift = uint8(64 - bits.TrailingZeros(uint(size)))
	for ti := range t.tables {
		ht := &t.tables[ti]
		k := pfKind(&ht.mask)
		bit := pfBit(ti)
		if k == 0 {
			p.always |= bit
			continue
		}
		p.kinds |= 1 << k
		for si := range ht.slots {
			s := &ht.slots[si]
			if s.n == 0 {
				continue
			}
			switch k {
			case pfS8:
				if p.src8 == nil {
					p.src8 = new([256]uint64)
				}
				p.src8[s.srcHi>>56] |= bit
			case pfD8:
				if p.dst8 == nil {
					p.dst8 = new([256]uint64)
				}
				p.dst8[s.dstHi>>56] |= bit
			default:
				key := pfKey(k, s.srcHi, s.dstHi)
				h := key * 0x9E3779B97F4A7C15 >> p.shift
				for p.slots[h].key != 0 && p.slots[h].key != key {
					h = (h + 1) & p.bits
				}
				p.slots[h].key = key
				p.slots[h].mask |= bit
			}
		}
	}
}

// get returns the tables filed under key.
func (p *prefilter) get(key uint64) uint64 {
	for h := key * 0x9E3779B97F4A7C15 >> p.shift; ; h = (h + 1) & p.bits {
		s := &p.slots[h]
		if s.key == key {
			return s.mask
		}
		if s.key == 0 {
			return 0
		}
	}
}

// candidates returns the tables that can hold an entry for a packet with
// these high address words.
func (p *prefilter) candidates(src, dst uint64) uint64 {
	c := p.always
	k := p.kinds
	if k&(1<<pfS16D16) != 0 {
		c |= p.get(pfKey(pfS16D16, src, dst))
	}
	if k&(1<<pfS16) != 0 {
		c |= p.get(pfKey(pfS16, src, dst))
	}
	if k&(1<<pfD16) != 0 {
		c |= p.get(pfKey(pfD16, src, dst))
	}
	if k&(1<<pfS8D8) != 0 {
		c |= p.get(pfKey(pfS8D8, src, dst))
	}
	if p.src8 != nil {
		c |= p.src8[src>>56]
	}
	if p.dst8 != nil {
		c |= p.dst8[dst>>56]
	}
	return c
}
