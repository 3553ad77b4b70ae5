package xdp

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"sort"

	"github.com/scrubd/scrubd/swpath/rule"
)

// Limits of the XDP program. The first three are compiled into bpf/scrub.c
// (MAX_MASKS, MAX_CHAIN, NR) and must change there too.
const (
	// MaxMasks is how many distinct masks one packet lookup walks. Prefix
	// lengths in masks are rounded down (to 16 bits for IPv4, 32 for IPv6)
	// and the exact prefix is checked in the entry (tuple merging), so no set
	// needs more than 245 coarse masks (TestMasksBounded); finer masks for
	// crowded lists (refineAt) take only what is left under MaxMasks
	// (TestRefineWithinMaskBudget). The check stays in compile in case the
	// steps change.
	MaxMasks = 256
	// MaxChain is how many entries may share one masked tuple (a list
	// walked in rank order).
	MaxChain = 1024
	// RangesPerEntry is how many ranges of one field an entry holds; a
	// rule with more is split into several entries.
	RangesPerEntry = 4
	// MaxEntriesPerRule bounds the expansion of one rule (product of its
	// protocols, exact ports and range chunks).
	MaxEntriesPerRule = 256
	// MaxExactPorts is how many single ports of one field are put into the
	// hash key (one entry each) rather than checked as ranges.
	MaxExactPorts = 16
	// DefaultMaxRules is the default size of the per-rule counter map, and
	// so the most rules a set may hold.
	DefaultMaxRules = 16384
)

const rankNone = ^uint32(0)

// Bits of ent.Need, as NEED_* in bpf/scrub.c.
const (
	needPorts = 1
	needTCP   = 2
	needICMP  = 4
	needPfx   = 8
	needProto = 16  // port mask: Proto must equal the packet's
	needV4    = 32  // port mask: IPv4 only
	needV6    = 64  // port mask: IPv6 only
	needAny   = 128 // some residual condition at all
)

// Mask kinds, as KIND_* in bpf/scrub.c.
const (
	kindHash = 0
	kindPort = 1
)

// LimitError is a rule set refused because one rule exceeds a limit of the
// XDP program. The whole set is refused; the engine keeps the set in force.
type LimitError struct {
	RuleID string // the rule that does not fit
	Limit  string // name of the limit, e.g. "MaxMasks"
	Max    int    // the limit's value
	Need   int    // what the rule would need
	Reason string
}

func (e *LimitError) Error() string {
	return fmt.Sprintf("xdp: rule %q exceeds %s (%d > %d): %s", e.RuleID, e.Limit, e.Need, e.Max, e.Reason)
}

// tuple is struct tuple: the masked part of a packet, bytes in network order.
// Layout: fam, proto, sport[2], dport[2], mask id, pad, src[16], dst[16].
type tuple [40]byte

func (t *tuple) setMaskID(id uint8) { t[6] = id }

// maskVal is struct mask.
type maskVal struct {
	M        tuple
	BestRank uint32
	Kind     uint32
}

// candsVal is a list of entries through entVal.Next: its head and length.
// The kernel's keys map holds the head entry itself.
type candsVal struct {
	Head, N uint32
}

type range16 struct{ Lo, Hi uint16 }
type range32 struct{ Lo, Hi uint32 }

// entVal is struct ent; every field is explicit, no implicit padding.
type entVal struct {
	Rule, Rank                                  uint32
	Action, Need                                uint8
	NSport, NDport, NPort, NItype, NIcode, NLen uint8
	TCPVal, TCPMask, Frag, Proto                uint8
	Next                                        uint32
	DSCP                                        uint64
	Sport, Dport, Port, Itype, Icode            [RangesPerEntry]range16
	Len                                         [RangesPerEntry]range32
	SrcM, SrcV, DstM, DstV                      [16]byte
}

// Sizes of the kernel structs, as the program's maps declare them
// (TestStructSizes compares them with the loaded spec).
const (
	tupleSize = 40
	maskSize  = 48
	entSize   = 208
	pentSize  = 16
)

// ctr is struct ctr.
type ctr struct{ Packets, Bytes uint64 }

// rctr is struct rctr: a rule's counter by the action it decided with
// (rule.Action: 0 drop, 1 accept).
type rctr struct{ By [2]ctr }

// tables is one compiled generation.
type tables struct {
	masks []maskVal // sorted by BestRank, at most MaxMasks
	keys  map[tuple]candsVal
	ports map[uint16]candsVal // the port mask's lists, by destination port
	ents  []entVal
	// fine is how many masks were created for refined entries; refined
	// (coarse pass) how many entries went into a list of refineAt or more.
	fine, refined int
}

// portMask reports whether m is an exact destination port and nothing else
// but family and protocol, which the port mask's entries check themselves.
func portMask(m *tuple) bool {
	if m[0] != 0 && m[0] != 0xff || m[1] != 0 && m[1] != 0xff || m[4] != 0xff || m[5] != 0xff {
		return false
	}
	for i, b := range m {
		if i > 5 && b != 0 || i == 2 && b != 0 || i == 3 && b != 0 {
			return false
		}
	}
	return true
}

// fastAlone is the fast path bound of a set whose only mask is the port
// mask (FAST_ALONE).
const fastAlone = 1<<31 - 1

// fastBound is, when the first mask is the port mask, the best rank of the
// next mask (fastAlone when there is none), below which a port entry decides
// without the walk (peFastTCP, peFastUDP); 0 (no fast path) otherwise.
func (t *tables) fastBound() uint32 {
	switch {
	case len(t.masks) == 0 || t.masks[0].Kind != kindPort:
		return 0
	case len(t.masks) == 1:
		return fastAlone
	default:
		return min(t.masks[1].BestRank, fastAlone-1)
	}
}

// pentVal is struct pent: a port mask list head in short form.
type pentVal struct {
	Rule, Rank, Ent            uint32
	Action, Need, Proto, Flags uint8
}

// Bits of pentVal.Flags, as PE_* in bpf/scrub.c.
const (
	peValid   = 1
	peFull    = 2
	peFastTCP = 4
	pePass    = 8
	peFastUDP = 16
)

// portHeads returns the port mask's heads of every destination port, with
// peFastTCP, peFastUDP and pePass set from fastBound (see PE_FAST_TCP in
// bpf/scrub.c).
func (t *tables) portHeads() []pentVal {
	out := make([]pentVal, 1<<16)
	b := t.fastBound()
	for port := range out {
		c, ok := t.ports[uint16(port)]
		if !ok {
			if b == fastAlone {
				out[port].Flags = pePass
			}
			continue
		}
		v := t.pent(c.Head)
		if b != 0 && v.Flags&peFull == 0 && v.Rank < b && v.Need&needV6 == 0 {
			switch {
			case v.Need&needProto == 0:
				v.Flags |= peFastTCP | peFastUDP
			case v.Proto == rule.ProtoTCP:
				v.Flags |= peFastTCP
			case v.Proto == rule.ProtoUDP:
				v.Flags |= peFastUDP
			}
		}
		out[port] = v
	}
	return out
}

// pent returns the short form of entry ei.
func (t *tables) pent(ei uint32) pentVal {
	e := &t.ents[ei]
	v := pentVal{Rule: e.Rule, Rank: e.Rank, Ent: ei, Action: e.Action, Need: e.Need, Proto: e.Proto,
		Flags: peValid}
	rest := *e
	rest.Need &^= needPorts | needProto | needV4 | needV6 | needAny
	if rest.hasResidual() {
		v.Flags |= peFull
	}
	return v
}

// hasResidual reports whether e checks anything beyond its masked tuple.
func (e *entVal) hasResidual() bool {
	return e.Need != 0 || e.NSport != 0 || e.NDport != 0 || e.NPort != 0 || e.NItype != 0 || e.NIcode != 0 ||
		e.NLen != 0 || e.Frag != 0 || e.DSCP != 0
}

// proto is one expansion under construction.
type proto struct {
	key, mask tuple
	e         entVal
}

func addrBytes(a rule.Addr) [16]byte {
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], a.Hi)
	binary.BigEndian.PutUint64(b[8:], a.Lo)
	return b
}

// quantum is the prefix-length step of masks for p's family at refinement
// level lvl (0: the coarse step; each level halves it, see refineAt).
func quantum(p netip.Prefix, lvl int) int {
	if p.Addr().Is4() {
		return 16 >> lvl
	}
	return 32 >> lvl
}

// Tuple merging with a bound on list length (TupleMerge, Daly and Torng,
// "TupleMerge: Building Online Packet Classifiers by Omitting Bits", 2017):
// an entry goes under the coarse mask (prefixes rounded down to 16 or 32
// bits) unless the list of its masked tuple already holds refineAt
// entries; then under the next finer mask (steps of 8 or 16 bits), and so
// on to refineLevels-1. A lookup walks each list it hits entry by entry,
// tens of ns each; a mask whose Bloom bit is clear costs a few. Rules
// nested under one /16 pair (ClassBench's sets at 10k rules: lists of up
// to 63) made the walk of lists most of the cost of the general path.
const (
	refineAt     = 2
	refineLevels = 2
)

// singles reports whether every range of rs is one value.
func singles(rs rule.Ranges) bool {
	for _, r := range rs {
		if r.Lo != r.Hi {
			return false
		}
	}
	return true
}

func chunks(rs rule.Ranges) []rule.Ranges {
	var out []rule.Ranges
	for i := 0; i < len(rs); i += RangesPerEntry {
		out = append(out, rs[i:min(i+RangesPerEntry, len(rs))])
	}
	return out
}

func put16(dst *[RangesPerEntry]range16, n *uint8, rs rule.Ranges) {
	*n = uint8(len(rs))
	for i, r := range rs {
		dst[i] = range16{uint16(r.Lo), uint16(r.Hi)}
	}
}

// expand returns the entries of one rule, before mask ids are known. A rule
// that can never match (an empty list) yields none.
func expand(r *rule.Rule, slot, rank uint32, lvl int) ([]proto, error) {
	m := &r.Match
	for _, rs := range []rule.Ranges{m.SrcPort, m.DstPort, m.Port, m.ICMPType, m.ICMPCode, m.Length} {
		if rs != nil && len(rs) == 0 {
			return nil, nil
		}
	}
	if m.Proto != nil && len(m.Proto) == 0 {
		return nil, nil
	}
	var base proto
	base.e.Rule, base.e.Rank, base.e.Action = slot, rank, uint8(r.Action)
	if fam := m.Family(); fam != rule.FamilyAny {
		base.key[0], base.mask[0] = byte(fam), 0xff
	}
	// The key holds each prefix rounded down to a multiple of 16 (IPv4) or
	// 32 (IPv6) bits (halved per refinement level lvl), the entry the exact
	// prefix: rules with nearby prefix lengths share a mask.
	full := [16]byte{}
	for i := range full {
		full[i] = 0xff
	}
	base.e.SrcM, base.e.DstM = full, full // checked only with needPfx
	for _, pf := range []struct {
		p      netip.Prefix
		off    int
		em, ev *[16]byte
	}{{m.Src, 8, &base.e.SrcM, &base.e.SrcV}, {m.Dst, 24, &base.e.DstM, &base.e.DstV}} {
		if !pf.p.IsValid() {
			*pf.em = [16]byte{}
			continue
		}
		a, mk := rule.PrefixAddr(pf.p)
		ab, mb := addrBytes(a), addrBytes(mk)
		*pf.em, *pf.ev = mb, ab
		q := quantum(pf.p, lvl)
		bits := pf.p.Bits() / q * q
		qb := addrBytes(rule.PrefixMask(bits))
		if bits != pf.p.Bits() {
			base.e.Need |= needPfx
		}
		for i := 0; i < 16; i++ {
			base.key[pf.off+i] = ab[i] & qb[i]
			base.mask[pf.off+i] = qb[i]
		}
	}
	if base.e.Need&needPfx == 0 {
		base.e.SrcM, base.e.DstM = [16]byte{}, [16]byte{}
	}
	if m.SrcPort != nil || m.DstPort != nil || m.Port != nil {
		base.e.Need |= needPorts
	}
	if m.HasTCPFlags {
		base.e.Need |= needTCP
		base.e.TCPVal, base.e.TCPMask = m.TCPFlags.Value, m.TCPFlags.Mask
	}
	if m.ICMPType != nil || m.ICMPCode != nil {
		base.e.Need |= needICMP
	}
	base.e.Frag = uint8(m.Fragment)
	base.e.DSCP = m.DSCP

	out := []proto{base}
	// product applies one dimension's alternatives to every expansion so far.
	product := func(alts []func(*proto)) error {
		if len(alts) == 0 {
			return nil
		}
		if len(out)*len(alts) > MaxEntriesPerRule {
			return &LimitError{RuleID: r.ID, Limit: "MaxEntriesPerRule", Max: MaxEntriesPerRule, Need: len(out) * len(alts),
				Reason: "protocols x exact ports x range chunks (" + m.String() + ")"}
		}
		next := make([]proto, 0, len(out)*len(alts))
		for _, p := range out {
			for _, f := range alts {
				q := p
				f(&q)
				next = append(next, q)
			}
		}
		out = next
		return nil
	}
	var alts []func(*proto)
	for _, pr := range m.Proto {
		alts = append(alts, func(p *proto) { p.key[1], p.mask[1] = pr, 0xff })
	}
	if err := product(alts); err != nil {
		return nil, err
	}
	// exactPorts puts single ports into the key at byte offset off.
	exactPorts := func(rs rule.Ranges, off int) []func(*proto) {
		var a []func(*proto)
		for _, x := range rs {
			a = append(a, func(p *proto) {
				binary.BigEndian.PutUint16(p.key[off:], uint16(x.Lo))
				p.mask[off], p.mask[off+1] = 0xff, 0xff
			})
		}
		return a
	}
	rangeAlts := func(rs rule.Ranges, set func(*entVal, rule.Ranges)) []func(*proto) {
		var a []func(*proto)
		for _, c := range chunks(rs) {
			a = append(a, func(p *proto) { set(&p.e, c) })
		}
		return a
	}
	steps := [][]func(*proto){}
	if m.SrcPort != nil && singles(m.SrcPort) && len(m.SrcPort) <= MaxExactPorts {
		steps = append(steps, exactPorts(m.SrcPort, 2))
	} else {
		steps = append(steps, rangeAlts(m.SrcPort, func(e *entVal, c rule.Ranges) { put16(&e.Sport, &e.NSport, c) }))
	}
	if m.DstPort != nil && singles(m.DstPort) && len(m.DstPort) <= MaxExactPorts {
		steps = append(steps, exactPorts(m.DstPort, 4))
	} else {
		steps = append(steps, rangeAlts(m.DstPort, func(e *entVal, c rule.Ranges) { put16(&e.Dport, &e.NDport, c) }))
	}
	if m.Port != nil && m.SrcPort == nil && m.DstPort == nil && singles(m.Port) && len(m.Port) <= MaxExactPorts {
		// Either port: one entry with the source port in the key and one
		// with the destination port.
		steps = append(steps, append(exactPorts(m.Port, 2), exactPorts(m.Port, 4)...))
	} else {
		steps = append(steps, rangeAlts(m.Port, func(e *entVal, c rule.Ranges) { put16(&e.Port, &e.NPort, c) }))
	}
	steps = append(steps,
		rangeAlts(m.ICMPType, func(e *entVal, c rule.Ranges) { put16(&e.Itype, &e.NItype, c) }),
		rangeAlts(m.ICMPCode, func(e *entVal, c rule.Ranges) { put16(&e.Icode, &e.NIcode, c) }),
		rangeAlts(m.Length, func(e *entVal, c rule.Ranges) {
			e.NLen = uint8(len(c))
			for i, x := range c {
				e.Len[i] = range32{x.Lo, x.Hi}
			}
		}))
	for _, s := range steps {
		if err := product(s); err != nil {
			return nil, err
		}
	}
	for i := range out {
		for j := range out[i].key {
			out[i].key[j] &= out[i].mask[j]
		}
	}
	return out, nil
}

// order returns the rule indexes of s in deciding order (rule.Before).
func order(s *rule.Set) []int {
	idx := make([]int, len(s.Rules))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool {
		return rule.Before(&s.Rules[idx[a]], s.Key(idx[a]), &s.Rules[idx[b]], s.Key(idx[b]))
	})
	return idx
}

// compile turns s into tables; slots[i] is the counter slot of s.Rules[i].
// Lists are refined (refineAt) with any masks left under MaxMasks. When
// that runs out of masks, finer masks may have taken slots that the set's
// coarse masks need: then a pass with coarse masks only counts those, and
// refinement gets only the masks they leave, so that every set that fits
// with coarse masks fits refined (TestRefineWithinMaskBudget).
func compile(s *rule.Set, slots []uint32) (*tables, error) {
	t, err := compileWith(s, slots, MaxMasks)
	var le *LimitError
	if err == nil || !errors.As(err, &le) || le.Limit != "MaxMasks" {
		return t, err
	}
	coarse, err := compileWith(s, slots, 0)
	if err != nil {
		return nil, err
	}
	return compileWith(s, slots, MaxMasks-len(coarse.masks))
}

// compileWith compiles s creating at most budget masks for refined entries
// (0: coarse masks only; refined then counts the entries that the refined
// pass would have moved).
func compileWith(s *rule.Set, slots []uint32, budget int) (*tables, error) {
	t := &tables{keys: map[tuple]candsVal{}, ports: map[uint16]candsVal{}}
	maskID := map[tuple]int{}
	tail := map[tuple]uint32{}
	portID := -1
	portTail := map[uint16]uint32{}
	var levels [refineLevels][]proto
	for rank, i := range order(s) {
		r := &s.Rules[i]
		ps, err := expand(r, slots[i], uint32(rank), 0)
		if err != nil {
			return nil, err
		}
		for lvl := 1; lvl < refineLevels; lvl++ {
			levels[lvl] = nil
		}
		for pi, p := range ps {
			// The finest level whose list is still short, or whose new mask
			// the budget allows, from the coarse one down.
			for lvl := 1; lvl < refineLevels && !portMask(&p.mask); lvl++ {
				id, ok := maskID[p.mask]
				k := p.key
				k.setMaskID(uint8(id))
				if !ok || int(t.keys[k].N) < refineAt {
					break
				}
				if budget == 0 {
					t.refined++
					break
				}
				if levels[lvl] == nil {
					if levels[lvl], err = expand(r, slots[i], uint32(rank), lvl); err != nil {
						return nil, err
					}
				}
				fine := levels[lvl][pi]
				if _, ok := maskID[fine.mask]; !ok && t.fine == budget {
					break
				}
				if fine.mask == p.mask {
					break // no finer prefix to take
				}
				p = fine
				if _, ok := maskID[p.mask]; !ok {
					t.fine++
				}
			}
			if portMask(&p.mask) {
				if portID < 0 {
					if len(t.masks) == MaxMasks {
						return nil, &LimitError{RuleID: r.ID, Limit: "MaxMasks", Max: MaxMasks, Need: MaxMasks + 1,
							Reason: "distinct combinations of family, prefix lengths, protocol and exact ports"}
					}
					portID = len(t.masks)
					t.masks = append(t.masks, maskVal{BestRank: uint32(rank), Kind: kindPort})
				}
				if p.mask[1] != 0 {
					p.e.Need |= needProto
					p.e.Proto = p.key[1]
				}
				switch {
				case p.mask[0] != 0 && p.key[0] == 4:
					p.e.Need |= needV4
				case p.mask[0] != 0 && p.key[0] == 6:
					p.e.Need |= needV6
				}
				dport := binary.BigEndian.Uint16(p.key[4:])
				c, ok := t.ports[dport]
				if int(c.N) == MaxChain {
					return nil, &LimitError{RuleID: r.ID, Limit: "MaxChain", Max: MaxChain, Need: MaxChain + 1,
						Reason: fmt.Sprintf("too many rules share destination port %d", dport)}
				}
				ei := t.add(p.e, &c, ok, portTail[dport])
				portTail[dport] = ei
				t.ports[dport] = c
				continue
			}
			id, ok := maskID[p.mask]
			if !ok {
				if len(t.masks) == MaxMasks {
					return nil, &LimitError{RuleID: r.ID, Limit: "MaxMasks", Max: MaxMasks, Need: MaxMasks + 1,
						Reason: "distinct combinations of family, prefix lengths, protocol and exact ports"}
				}
				id = len(t.masks)
				maskID[p.mask] = id
				// Rules come in rank order, so the first entry of a mask
				// carries its best rank and masks stay sorted.
				t.masks = append(t.masks, maskVal{M: p.mask, BestRank: uint32(rank)})
			}
			k := p.key
			k.setMaskID(uint8(id))
			c, ok := t.keys[k]
			if int(c.N) == MaxChain {
				return nil, &LimitError{RuleID: r.ID, Limit: "MaxChain", Max: MaxChain, Need: MaxChain + 1,
					Reason: "too many rules share the masked tuple " + p.describe()}
			}
			tail[k] = t.add(p.e, &c, ok, tail[k])
			t.keys[k] = c
		}
	}
	for i := range t.ents {
		if t.ents[i].hasResidual() {
			t.ents[i].Need |= needAny
		}
	}
	return t, nil
}

// add appends e at the tail of list c (entries come in rank order), tail
// being the list's last entry when c is not new, and returns e's index.
func (t *tables) add(e entVal, c *candsVal, exists bool, tail uint32) uint32 {
	ei := uint32(len(t.ents))
	e.Next = rankNone
	if !exists {
		c.Head = ei
	} else {
		t.ents[tail].Next = ei
	}
	c.N++
	t.ents = append(t.ents, e)
	return ei
}

func (p *proto) describe() string {
	return fmt.Sprintf("fam=%d proto=%d sport=%d dport=%d", p.key[0], p.key[1],
		binary.BigEndian.Uint16(p.key[2:]), binary.BigEndian.Uint16(p.key[4:]))
}

// The Bloom filter over the keys (BLOOM_LOG2, BLOOM_WORDS in bpf/scrub.c):
// one bit per key, so the program skips the hash lookup of a mask whose bit
// is clear.
const (
	bloomLog2  = 20
	bloomWords = 1 << (bloomLog2 - 6)
)

// bloomMul are bloom_idx's multipliers, one per 8-byte word of a tuple.
var bloomMul = [5]uint64{0x9e3779b97f4a7c15, 0xc2b2ae3d27d4eb4f, 0x165667b19e3779f9, 0xd6e8feb86659fd93, 0xff51afd7ed558ccd}

// bloomIndex is bloom_idx: a multiply-shift hash of the five words of k as
// they lie in memory (so native byte order, as the program loads them).
func bloomIndex(k *tuple) uint32 {
	var h uint64
	for i, m := range bloomMul {
		h += binary.NativeEndian.Uint64(k[8*i:]) * m
	}
	return uint32(h >> (64 - bloomLog2))
}

// bloom returns the Bloom filter of t's keys.
func (t *tables) bloom() []uint64 {
	b := make([]uint64, bloomWords)
	for k := range t.keys {
		i := bloomIndex(&k)
		b[i>>6] |= 1 << (i & 63)
	}
	return b
}

// maskArray returns the full MaxMasks array with unused slots ending the walk.
func (t *tables) maskArray() [MaxMasks]maskVal {
	var out [MaxMasks]maskVal
	for i := range out {
		out[i].BestRank = rankNone
	}
	copy(out[:], t.masks)
	return out
}
