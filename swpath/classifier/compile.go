package classifier

import (
	"fmt"
	"math/bits"
	"slices"
	"time"

	"github.com/scrubd/scrubd/swpath/rule"
)

// Build parameters.
var (
	// collisionLimit is how many entries a bucket of a merged (coarser)
	// table may hold before an entry needs a table of its own mask.
	collisionLimit = 16
	// addrStep4 and addrStep6 are the grid steps of relaxed prefix lengths.
	// IPv6 takes 8 as IPv4 does: with 16, ClassBench-style sets moved under
	// 2001:db8::/32 relaxed /40-/47 prefixes to /32, which keys nothing but
	// the shared prefix (1.5-1.9x slower on fresh packets at 1k and 10k
	// rules than with 8, interleaved runs).
	addrStep4, addrStep6 = uint8(8), uint8(8)
	// portStep is the grid step of relaxed port prefix lengths.
	portStep = uint8(16)
)

const (
	// maxPortPrefixes is the most prefixes a port field is expanded into;
	// beyond it the field is a range check after the hash hit.
	maxPortPrefixes = 6
	// maxExactPorts: a port field covering at most this many values is
	// expanded into exact ports (all entries then share one mask).
	maxExactPorts = 16
	// maxProtoExpand is the most protocols expanded into entries.
	maxProtoExpand = 4
	// maxEntriesPerRule bounds the cross product of expansions.
	maxEntriesPerRule = 32
)

// key is a packet's lookup key (or an entry's value or mask). misc packs
// family<<40 | proto<<32 | src port<<16 | dst port.
type key struct {
	srcHi, srcLo, dstHi, dstLo, misc uint64
}

func (k key) and(m key) key {
	return key{k.srcHi & m.srcHi, k.srcLo & m.srcLo, k.dstHi & m.dstHi, k.dstLo & m.dstLo, k.misc & m.misc}
}

func keyOf(f *rule.Fields) key {
	return key{f.Src.Hi, f.Src.Lo, f.Dst.Hi, f.Dst.Lo,
		miscWord(f)}
}

// hash5 hashes a key given as its five words (values, so that the lookup
// keeps them in registers); callers take the top bits, and only those are
// mixed well. The destination words are rotated by 32 bits and xored
// into the source words, so an IPv4 key's two addresses (each in the top
// half of its high word) fill one word without overlapping, and the hash
// takes two multiplications: the top bits of a product depend on every
// bit of its input. The lookup hashes every packet into every table of a
// staged set (12 tables at 10k ClassBench-style rules), which made the
// four multiplications of the previous mix a visible share of a lookup.
func hash5(srcHi, srcLo, dstHi, dstLo, misc uint64) uint64 {
	a := srcHi ^ bits.RotateLeft64(dstHi, 32)
	b := misc ^ srcLo ^ bits.RotateLeft64(dstLo, 32)
	return a*0x9E3779B97F4A7C15 ^ b*0xC2B2AE3D27D4EB4F
}

// tuple is the shape of a mask: which fields it keys and how many bits.
type tuple struct {
	fam, proto bool
	src, dst   uint8 // prefix lengths 0..128
	sp, dp     uint8 // port prefix lengths 0..16
}

func (t tuple) mask() key {
	s, d := rule.PrefixMask(int(t.src)), rule.PrefixMask(int(t.dst))
	var misc uint64
	if t.fam {
		misc |= 0xff << 40
	}
	if t.proto {
		misc |= 0xff << 32
	}
	misc |= uint64(portMask(t.sp))<<16 | uint64(portMask(t.dp))
	return key{s.Hi, s.Lo, d.Hi, d.Lo, misc}
}

func portMask(n uint8) uint16 { return uint16(0xffff << (16 - uint(n)) & 0xffff) }

// within reports whether a table of shape t can hold an entry of shape e
// (t keys no bit that e does not).
func (t tuple) within(e tuple) bool {
	return (!t.fam || e.fam) && (!t.proto || e.proto) && t.src <= e.src && t.dst <= e.dst && t.sp <= e.sp && t.dp <= e.dp
}

func (t tuple) weight() int {
	w := int(t.src) + int(t.dst) + int(t.sp) + int(t.dp)
	if t.proto {
		w += 8
	}
	if t.fam {
		w++
	}
	return w
}

// relax rounds a shape down to a coarse grid so that nearby shapes share a
// table.
func (t tuple) relax(fam rule.Family) tuple {
	step := addrStep4
	if fam == rule.IPv6 {
		step = addrStep6
	}
	r := func(n, step, floor uint8) uint8 {
		if n < floor {
			return 0
		}
		return n - n%step
	}
	t.src, t.dst = r(t.src, step, 8), r(t.dst, step, 8)
	if t.sp != 16 {
		t.sp = r(t.sp, portStep, portStep)
	}
	if t.dp != 16 {
		t.dp = r(t.dp, portStep, portStep)
	}
	return t
}

// Cheap checks done inline after the key matched (entry.flags).
const (
	needPorts uint16 = 1 << iota // f.HasPorts()
	needICMP                     // f.HasICMP()
	chkTCP                       // L4 TCP and flags&mask == value
	chkFrag
	chkDSCP
	chkRes // the residual ranges
	// chkKeyAddr, chkKeyMisc: the entry's own mask is finer than its
	// table's in the address words or in the misc word (family, protocol,
	// ports), so that part of its key is compared after the bucket matched.
	chkKeyAddr
	chkKeyMisc
	chkKeyLo
	// chkPortSpan: the source and destination ports in the entry's own
	// ranges (entry.spLo and spSpan, dpLo and dpSpan), for a rule whose
	// residual would hold at most one range of each and nothing else (see
	// residual.portsOnly).
	chkPortSpan
)

// bentry is one expansion of a rule while the table is built: its rank,
// the checks its key does not cover, and its own value and mask.
type bentry struct {
	rank    uint64 // priority<<32 | the rule's key (rule.Set.Key: its index unless moved)
	rule    int32
	res     int32 // index into Table.res, -1 for none
	flags   uint16
	tcpVal  uint8
	tcpMask uint8
	frag    rule.Frag
	// spLo, spSpan, dpLo, dpSpan: the port ranges of chkPortSpan.
	spLo, spSpan, dpLo, dpSpan uint16
	val                        key
	mask                       key
}

// entry is the lookup's form of a bentry (64 bytes: in an array that
// starts on a cache line, as Go's allocator starts the big ones, one line
// an entry). A bucket scan reads its echeck, and the entry itself only
// for the entry that decides. The address check after a bucket hit
// covers the high 64 bits of each address (all of IPv4) with masks made
// from prefix lengths; IPv6 prefixes longer than 64 bits keep their low
// halves in the rule's residual (chkKeyLo), as does DSCP.
//
// A port range that is not cut into prefixes (rangePrefixes) is checked
// by holds. One range a side, the only kind ClassBench-style sets have
// (a tenth of their entries), lives in the entry (chkPortSpan): in the
// residual it cost holds two more loads, each behind the one before (the
// residual, then the range list), and on a flood of new 5-tuples past
// the processor's caches each missed them. Sets built both ways and
// alternated in one process (Table.DecideBurst over 65,536 fresh
// 5-tuples, thread CPU time, medians of 100 blocks each): 0.98 / 0.93 /
// 0.94 of the time at 1k / 10k / 100k rules, and 0.98 / 0.96 / 0.93 with
// -tags purego; the Direct Verbs engine on the NIC emulator at 10k rules,
// 0.92-0.93 (BENCHMARKS.md).
type entry struct {
	rank           uint64
	srcHi, dstHi   uint64 // the entry's own values of the high address words
	misc, miscMask uint64 // the entry's own value and mask of the misc word
	rule           int32
	res            int32
	flags          uint16
	srcLen, dstLen uint8 // prefix lengths within the high words (0..64)
	tcpVal         uint8
	tcpMask        uint8
	frag           rule.Frag
	// spLo, spSpan, dpLo, dpSpan: the port ranges of chkPortSpan; a port p
	// is in one when p-lo <= span in uint16 arithmetic.
	spLo, spSpan, dpLo, dpSpan uint16
}

// echeck is the part of an entry a bucket scan reads: 32 bytes, two to a
// cache line, in Table.chk beside Table.entries. sd holds 32 bits of the
// entry's source and destination values, sdMask their prefix masks: the
// top 32 bits for IPv4 (all of it), bits 32-63 of the high words for IPv6
// (whose top bits the table's key has covered or the full check covers);
// misc and miscMask are the entry's own. A packet passes when
// (its sd & sdMask) == sd and (its misc & miscMask) == misc; bits 62 and 63
// of miscMask (never set in a packet's misc) then say what is left:
// chkPorts (that the packet has ports) or chkFull (Table.holds on the whole
// entry, which also covers IPv6 prefixes longer than 32 bits).
type echeck struct {
	sd, sdMask, misc, miscMask uint64
}

const (
	chkPortsBit = 1 << 62
	chkFullBit  = 1 << 63
)

// check returns the scan form of e, whose flags are final.
func (e *entry) check() echeck {
	c := echeck{misc: e.misc, miscMask: e.miscMask}
	full := e.flags&^(needPorts|chkKeyAddr|chkKeyMisc) != 0
	if e.miscMask>>40&0xff != 0 && rule.Family(e.misc>>40) == rule.IPv6 {
		// IPv6: the scan compares bits 32-63 of the high words (the top
		// 32 are often one shared prefix, such as 2001:db8::/32), and
		// holds checks the whole words after them when the entry is finer
		// than its table.
		full = full || e.flags&chkKeyAddr != 0
		sm, dm := hiMask(e.srcLen)&0xffffffff, hiMask(e.dstLen)&0xffffffff
		c.sd = (e.srcHi&sm)<<32 | e.dstHi&dm
		c.sdMask = sm<<32 | dm
	} else {
		// IPv4 (prefixes of at most 32 bits) or no prefix.
		sm, dm := hiMask(e.srcLen)>>32, hiMask(e.dstLen)>>32
		c.sd = (e.srcHi>>32&sm)<<32 | e.dstHi>>32&dm
		c.sdMask = sm<<32 | dm
	}
	switch {
	case full:
		c.miscMask |= chkFullBit
	case e.flags&needPorts != 0:
		c.miscMask |= chkPortsBit
	}
	return c
}

// scanSD is a packet's address word for the scan checks (see echeck): the
// top 32 bits of each address for IPv4, bits 32-63 for IPv6.
func scanSD(f *rule.Fields) uint64 {
	sh := 32 * (uint64(f.Family>>1) & 1) // IPv4 (4): 0, IPv6 (6): 32
	return f.Src.Hi<<sh>>32<<32 | f.Dst.Hi<<sh>>32
}

// miscWord returns the key's misc word of a packet: family, protocol and
// both ports, as tables mask and compare it.
func miscWord(f *rule.Fields) uint64 {
	return uint64(f.Family)<<40 | uint64(f.Proto)<<32 | uint64(f.SrcPort)<<16 | uint64(f.DstPort)
}

// hiMask returns the mask of the top n (0..64) bits of a word.
func hiMask(n uint8) uint64 { return ^uint64(0) << (64 - uint(n)) }

// residual holds the conditions of a rule that are neither in its key nor
// in its entry: ranges (chkRes), DSCP (chkDSCP) and the low address halves
// of long IPv6 prefixes (chkKeyLo).
type residual struct {
	dscp                                         uint64
	srcLo, srcLoMask, dstLo, dstLoMask           uint64
	proto                                        []uint8
	srcPort, dstPort, port, itype, icode, length rule.Ranges
}

// portsOnly reports whether what r checks is at most one source port
// range and one destination port range, each within 0-65535: what an
// entry holds itself (chkPortSpan). A range outside it (see inPorts)
// stays in the residual, which compares it whole.
func (r *residual) portsOnly() bool {
	return r.proto == nil && r.port == nil && r.itype == nil && r.icode == nil && r.length == nil &&
		spannable(r.srcPort) && spannable(r.dstPort)
}

func spannable(rs rule.Ranges) bool {
	return len(rs) == 0 || len(rs) == 1 && inPorts(rs[0])
}

// inPorts reports whether r is a range of 16-bit port values. Every rule
// the store holds has only such ranges (rule.Match.CheckBounds); a rule
// built in Go and compiled directly may not.
func inPorts(r rule.Range) bool { return r.Lo <= r.Hi && r.Hi <= rule.MaxPort }

// portSpan returns the low end and span of rs (at most one range), every
// port for none.
func portSpan(rs rule.Ranges) (lo, span uint16) {
	if len(rs) == 0 {
		return 0, 0xffff
	}
	return uint16(rs[0].Lo), uint16(rs[0].Hi - rs[0].Lo)
}

func (r *residual) holds(f *rule.Fields) bool {
	if r.proto != nil && !slices.Contains(r.proto, f.Proto) {
		return false
	}
	if r.srcPort != nil && !r.srcPort.Contains(uint32(f.SrcPort)) {
		return false
	}
	if r.dstPort != nil && !r.dstPort.Contains(uint32(f.DstPort)) {
		return false
	}
	if r.port != nil && !r.port.Contains(uint32(f.SrcPort)) && !r.port.Contains(uint32(f.DstPort)) {
		return false
	}
	if r.itype != nil && !r.itype.Contains(uint32(f.ICMPType)) {
		return false
	}
	if r.icode != nil && !r.icode.Contains(uint32(f.ICMPCode)) {
		return false
	}
	if r.length != nil && !r.length.Contains(f.Length) {
		return false
	}
	return true
}

// slot is one bucket of a hash table: its key, and where its entries sit,
// contiguously and in decision order, in Table.entries. n == 0 marks an empty
// slot. Key and position share the slot so that a probe reads one line.
type slot struct {
	srcHi, srcLo, dstHi, dstLo, misc uint64
	first, n                         uint32
	// rank and rule of the slot's first (best) entry, and whether it
	// decides without reading the entry: quickAny (it checks nothing after
	// the key), quickPorts (only that the packet has ports), or 0 (read
	// the entries). A probe that hits such a slot reads one cache line.
	rank  uint64
	rule  int32
	quick uint16
	_     [2]byte
}

// slot.quick values.
const (
	quickAny   = 1
	quickPorts = 2
)

// bloomShift: the filter has 1<<bloomShift bits per slot.
const bloomShift = 3

// hashTable is one mask's hash table with linear probing. A one-hash Bloom
// filter (8 bits per slot, small enough to stay in L1 for a few tables)
// answers most misses without touching the slots.
type hashTable struct {
	mask  key
	best  uint64 // rank of the best entry
	shift uint8  // 64 - log2(filter bits): the hash's top bits index the filter
	bits  uint64 // len(slots)-1
	bloom []uint64
	slots []slot
	shape tuple
}

// Table is a compiled rule set. It is immutable and safe for concurrent use.
type Table struct {
	set     *rule.Set
	tables  []hashTable
	entries []entry
	chk     []echeck // by entry: what a bucket scan reads
	res     []residual
	verdict []Verdict // by rule index
	// verdictAt is verdict indexed by rule index + 1: verdictAt[0] is Pass
	// (no rule decided). verdict is its tail.
	verdictAt []Verdict
	// slot maps a rule index to its counter slot (set by a Classifier).
	// A hole's entry is noSlot, or, after a removal in place (inplace.go),
	// the stale slot of the rule removed there, which may since be
	// another rule's: read it for rules of the set only.
	slot []uint32
	// live is how many rules the set has: its positions less its holes.
	live int
	// prio is each rule's priority by rule index, for Patch (set by a
	// Classifier: Swap, Patch, a fold).
	prio   []uint32
	nslots int
	gen    uint64 // generation in its Classifier (0: not published by one)
	build  time.Duration
	used   used // fields any rule looks at
	pf     prefilter
	// burstWalk: bursts take the per-packet walk rather than the staged
	// lookup (small sets, see walkPrefilterMax).
	burstWalk bool
	// plain: no entry checks more after its hash hit than that the packet
	// has ports (flags 0 or needPorts), so no lookup calls holds.
	plain bool
	// cacheW0, cacheW1 mask the flow-cache key to the used fields.
	cacheW0, cacheW1 uint64
	// tr: the decision trees, when the set decides with them rather than
	// with the hash tables (see useTrees); nil otherwise. With the trees,
	// tables, entries, chk and pf are not built (res is: the trees' entries
	// use it).
	tr *trees
	// ntables is how many hash tables the set's entries make (len(tables)
	// when they are built); with the trees, counted only up to
	// minCacheTables.
	ntables int
	// pt: the table is a patch over another (Classifier.Patch, patch.go);
	// tr, tables, entries and pf are then not built.
	pt *patch
	// tail: slot, prio and verdictAt have room past their length, which a
	// table patched in place with appends may claim (inplace.go); nil when
	// they have none to give (then it copies them).
	tail *byRuleTail
}

// Set returns the rule set the table was compiled from. It must not be
// modified.
func (t *Table) Set() *rule.Set { return t.set }

// noSlot is Table.slot of a hole (but for a removal in place's, see
// Table.slot): a position of the set's Rules that is not a rule of the
// set (rule.Holes), which never decides a packet and has no counter.
const noSlot = ^uint32(0)

// Stats describes a compiled table.
type Stats struct {
	Rules     int           // rules of the set (its holes not counted)
	Entries   int           // rule expansions stored
	Tuples    int           // hash tables (masks) built; 0 when the trees decide
	Trees     int           // decision trees built; 0 when the hash tables decide
	Residuals int           // entries with range checks after the hit
	Bytes     int           // memory of the lookup structures
	Build     time.Duration // time Compile took
}

// Stats reports the table's size. Entries counts the entries of the
// lookup built: the hash tables' or the trees'.
func (t *Table) Stats() Stats {
	if t.pt != nil {
		return t.patchStats()
	}
	st := Stats{Rules: t.live, Entries: len(t.entries), Tuples: len(t.tables), Residuals: len(t.res),
		Build: t.build, Bytes: t.memBytes()}
	if t.tr != nil {
		st.Entries, st.Trees = len(t.tr.ents), len(t.tr.t)
	}
	return st
}

type portPrefix struct {
	val uint16
	len uint8
}

// rangePrefixes returns prefixes that exactly cover rs: exact ports when rs
// holds at most maxExactPorts values, else the fewest prefixes per range,
// or ok == false when that takes more than limit prefixes. A range that
// is not within 0-65535 (see inPorts) is never cut, ok == false: cut into
// 16-bit values it would wrap round, and the residual compares it whole.
func rangePrefixes(rs rule.Ranges, limit int) (out []portPrefix, ok bool) {
	total := 0
	for _, r := range rs {
		if !inPorts(r) {
			return nil, false
		}
		total += int(r.Hi-r.Lo) + 1
	}
	if total <= maxExactPorts {
		for _, r := range rs {
			for v := r.Lo; v <= r.Hi; v++ {
				out = append(out, portPrefix{uint16(v), 16})
			}
		}
		return out, true
	}
	for _, r := range rs {
		lo, hi := r.Lo, r.Hi
		for lo <= hi {
			// Largest aligned block at lo that stays within hi.
			size := uint32(1) << 16
			if lo != 0 {
				size = uint32(1) << bits.TrailingZeros32(lo)
			}
			for lo+size-1 > hi {
				size >>= 1
			}
			out = append(out, portPrefix{uint16(lo), uint8(16 - bits.TrailingZeros32(size))})
			if len(out) > limit {
				return nil, false
			}
			lo += size
			if lo == 0 || lo > 0xffff {
				break
			}
		}
	}
	return out, true
}

type protoKey struct {
	val  uint8
	keyd bool
}

// expand turns rule i, whose key in its set's decision order is key
// (rule.Set.Key), into entries and, when needed, a residual.
func (t *Table) expand(i, key int, r *rule.Rule) []bentry {
	m := &r.Match
	base := bentry{rank: uint64(r.Priority)<<32 | uint64(key), rule: int32(i), res: -1}
	var bt tuple
	fam := m.Family()
	if fam != rule.FamilyAny {
		bt.fam = true
		base.val.misc |= uint64(fam) << 40
	}
	if m.Src.IsValid() {
		a, _ := rule.PrefixAddr(m.Src)
		base.val.srcHi, base.val.srcLo = a.Hi, a.Lo
		bt.src = uint8(m.Src.Bits())
	}
	if m.Dst.IsValid() {
		a, _ := rule.PrefixAddr(m.Dst)
		base.val.dstHi, base.val.dstLo = a.Hi, a.Lo
		bt.dst = uint8(m.Dst.Bits())
	}
	var res residual
	hasRes := false
	protos := []protoKey{{}}
	if m.Proto != nil {
		if len(m.Proto) <= maxProtoExpand {
			protos = protos[:0]
			for _, p := range m.Proto {
				protos = append(protos, protoKey{p, true})
			}
		} else {
			res.proto, hasRes = m.Proto, true
		}
	}
	if m.SrcPort != nil || m.DstPort != nil || m.Port != nil {
		base.flags |= needPorts
	}
	if m.HasTCPFlags {
		base.flags |= chkTCP
		base.tcpVal, base.tcpMask = m.TCPFlags.Value, m.TCPFlags.Mask
	}
	if m.ICMPType != nil || m.ICMPCode != nil {
		base.flags |= needICMP
	}
	if m.Fragment != 0 {
		base.flags |= chkFrag
		base.frag = m.Fragment
	}
	if m.DSCP != 0 {
		base.flags |= chkDSCP
		res.dscp = m.DSCP
	}
	if m.Src.IsValid() && m.Src.Bits() > 64 {
		_, mk := rule.PrefixAddr(m.Src)
		res.srcLo, res.srcLoMask = base.val.srcLo&mk.Lo, mk.Lo
	}
	if m.Dst.IsValid() && m.Dst.Bits() > 64 {
		_, mk := rule.PrefixAddr(m.Dst)
		res.dstLo, res.dstLoMask = base.val.dstLo&mk.Lo, mk.Lo
	}
	if m.Port != nil {
		res.port, hasRes = m.Port, true
	}
	if m.ICMPType != nil {
		res.itype, hasRes = m.ICMPType, true
	}
	if m.ICMPCode != nil {
		res.icode, hasRes = m.ICMPCode, true
	}
	if m.Length != nil {
		res.length, hasRes = m.Length, true
	}
	sps := []portPrefix{{}}
	if m.SrcPort != nil {
		if p, ok := rangePrefixes(m.SrcPort, maxPortPrefixes); ok {
			sps = p
		} else {
			res.srcPort, hasRes = m.SrcPort, true
		}
	}
	dps := []portPrefix{{}}
	if m.DstPort != nil {
		if p, ok := rangePrefixes(m.DstPort, maxPortPrefixes); ok {
			dps = p
		} else {
			res.dstPort, hasRes = m.DstPort, true
		}
	}
	for len(protos)*len(sps)*len(dps) > maxEntriesPerRule {
		if len(sps) >= len(dps) {
			sps, res.srcPort = []portPrefix{{}}, m.SrcPort
		} else {
			dps, res.dstPort = []portPrefix{{}}, m.DstPort
		}
		hasRes = true
	}
	if hasRes && res.portsOnly() {
		base.flags |= chkPortSpan
		base.spLo, base.spSpan = portSpan(res.srcPort)
		base.dpLo, base.dpSpan = portSpan(res.dstPort)
		hasRes, res.srcPort, res.dstPort = false, nil, nil
	}
	if hasRes {
		base.flags |= chkRes
	}
	if hasRes || res.dscp != 0 || res.srcLoMask != 0 || res.dstLoMask != 0 {
		base.res = int32(len(t.res))
		t.res = append(t.res, res)
	}
	out := make([]bentry, 0, len(protos)*len(sps)*len(dps))
	for _, p := range protos {
		for _, sp := range sps {
			for _, dp := range dps {
				e := base
				sh := bt
				if p.keyd {
					sh.proto = true
					e.val.misc |= uint64(p.val) << 32
				}
				sh.sp, sh.dp = sp.len, dp.len
				e.val.misc |= uint64(sp.val)<<16 | uint64(dp.val)
				e.mask = sh.mask()
				e.val = e.val.and(e.mask)
				out = append(out, e)
			}
		}
	}
	return out
}

// compact returns the lookup form of e.
func (e *bentry) compact() entry {
	return entry{
		rank: e.rank, srcHi: e.val.srcHi, dstHi: e.val.dstHi, misc: e.val.misc, miscMask: e.mask.misc,
		rule: e.rule, res: e.res, flags: e.flags,
		srcLen: uint8(bits.LeadingZeros64(^e.mask.srcHi)), dstLen: uint8(bits.LeadingZeros64(^e.mask.dstHi)),
		tcpVal: e.tcpVal, tcpMask: e.tcpMask, frag: e.frag,
		spLo: e.spLo, spSpan: e.spSpan, dpLo: e.dpLo, dpSpan: e.dpSpan,
	}
}

func shapeOf(e *bentry) tuple {
	return tuple{
		fam:   e.mask.misc>>40&0xff != 0,
		proto: e.mask.misc>>32&0xff != 0,
		src:   uint8(rule.Addr{Hi: e.mask.srcHi, Lo: e.mask.srcLo}.PrefixLen()),
		dst:   uint8(rule.Addr{Hi: e.mask.dstHi, Lo: e.mask.dstLo}.PrefixLen()),
		sp:    uint8(bits.LeadingZeros16(^uint16(e.mask.misc >> 16))),
		dp:    uint8(bits.LeadingZeros16(^uint16(e.mask.misc))),
	}
}

type buildTable struct {
	shape   tuple
	mask    key
	buckets map[key][]int // entry indexes, in rank order
	order   []key         // bucket keys in first-insert order
}

// smallTableKeys: tables of at most this many keys get slots enough for
// every key to sit in its home slot (see Compile).
const smallTableKeys = 32

// homesDistinct reports whether keys have distinct home slots in a hash
// table of n (at most 64*smallTableKeys) slots.
func homesDistinct(keys []key, n int) bool {
	shift := uint(64 - bits.TrailingZeros(uint(n<<bloomShift)))
	var seen [smallTableKeys]uint64 // a bit per slot
	for _, k := range keys {
		h := hash5(k.srcHi, k.srcLo, k.dstHi, k.dstLo, k.misc) >> shift >> bloomShift
		if seen[h/64]&(1<<(h%64)) != 0 {
			return false
		}
		seen[h/64] |= 1 << (h % 64)
	}
	return true
}

// Compile builds the lookup table for set. The set must not be modified
// afterwards. It fails only on a set too large to index (2^31 rules).
// The set's holes (rule.Holes) have no entries: they never decide, and
// every rule keeps its index in Rules. A rule decides at its key
// (rule.Set.Key: its index unless a change in place moved it, rule.Order)
// and a lookup's result is its index.
func Compile(set *rule.Set) (*Table, error) { return compile(set, treesAuto) }

// Which lookup compile builds: the decision trees when useTrees says so,
// always when they can be built, or never (tests and benchmarks compare).
const (
	treesAuto = iota
	treesForce
	treesOff
)

func compile(set *rule.Set, mode int) (*Table, error) {
	start := time.Now()
	if len(set.Rules) >= 1<<31 {
		return nil, fmt.Errorf("classifier: %d rules: too many", len(set.Rules))
	}
	// The arrays by rule index with room to grow in place (Swap gives
	// them a byRuleTail).
	room := byRuleRoom(len(set.Rules))
	t := &Table{set: set, verdictAt: make([]Verdict, len(set.Rules)+1, room+1), slot: make([]uint32, len(set.Rules), room), nslots: len(set.Rules)}
	t.verdict = t.verdictAt[1:]
	var all []bentry
	for i := range set.Rules {
		if !set.Live(i) {
			// A hole (rule.Holes): no entry, no counter slot; its index
			// stays, as every rule's does.
			t.slot[i] = noSlot
			continue
		}
		t.live++
		r := &set.Rules[i]
		t.slot[i] = uint32(i)
		t.verdict[i] = Drop
		if r.Action == rule.Accept {
			t.verdict[i] = Accept
		}
		all = append(all, t.expand(i, set.Key(i), r)...)
		t.used.add(&r.Match)
	}
	slices.SortStableFunc(all, func(a, b bentry) int {
		switch {
		case a.rank < b.rank:
			return -1
		case a.rank > b.rank:
			return 1
		}
		return 0
	})
	var tr *trees
	if mode != treesOff {
		tr = t.buildTrees(all)
	}
	// The entries' hash tables. When the trees decide, the tables are only
	// counted (useTrees and the flow cache look at how many there are), and
	// only until there are minCacheTables of them: none is filled.
	counting := tr != nil && mode == treesForce
	var bts []*buildTable
	for ei := range all {
		if tr != nil && mode == treesAuto && len(bts) >= minCacheTables {
			counting = true
			break
		}
		e := &all[ei]
		sh := shapeOf(e)
		var dest *buildTable
		bestW := -1
		for _, bt := range bts {
			if !bt.shape.within(sh) {
				continue
			}
			w := bt.shape.weight()
			if w <= bestW {
				continue
			}
			if bt.shape != sh && len(bt.buckets[e.val.and(bt.mask)]) >= collisionLimit {
				continue
			}
			dest, bestW = bt, w
		}
		if dest == nil {
			rs := sh.relax(rule.Family(e.val.misc >> 40))
			for _, bt := range bts {
				if bt.shape == rs {
					rs = sh // the relaxed table is full here: use the exact shape
					break
				}
			}
			dest = &buildTable{shape: rs, mask: rs.mask(), buckets: map[key][]int{}}
			bts = append(bts, dest)
		}
		if dest.mask.misc != e.mask.misc {
			e.flags |= chkKeyMisc
		}
		if dest.mask.srcHi != e.mask.srcHi || dest.mask.dstHi != e.mask.dstHi {
			e.flags |= chkKeyAddr
		}
		if dest.mask.srcLo != e.mask.srcLo || dest.mask.dstLo != e.mask.dstLo {
			e.flags |= chkKeyLo // the residual holds the low halves
		}
		k := e.val.and(dest.mask)
		if _, ok := dest.buckets[k]; !ok {
			dest.order = append(dest.order, k)
		}
		dest.buckets[k] = append(dest.buckets[k], ei)
	}
	t.ntables = len(bts)
	t.cacheW0, t.cacheW1 = t.used.cacheMasks()
	if counting || (tr != nil && useTrees(len(bts))) {
		t.tr = tr
		t.build = time.Since(start)
		return t, nil
	}
	for _, bt := range bts {
		n := 8 // slots; the filter has n<<bloomShift bits, at least one word
		for n < 2*len(bt.order) {
			n <<= 1
		}
		// A small table (a few rules' keys, such as a set of port rules)
		// grows until every key sits in its home slot, up to 16 slots a
		// key (past that keys may still share one): then no lookup walks a
		// chain, whichever keys the hash happens to put together (with the
		// five amplification-port rules of the source workload, one key
		// displaced by another cost 0.2 slot reads per packet).
		for len(bt.order) <= smallTableKeys && n < 16*len(bt.order) && !homesDistinct(bt.order, n) {
			n <<= 1
		}
		ht := hashTable{mask: bt.mask, shape: bt.shape, best: ^uint64(0), slots: make([]slot, n),
			bits: uint64(n - 1), bloom: make([]uint64, n<<bloomShift/64),
			shift: uint8(64 - bits.TrailingZeros(uint(n<<bloomShift)))}
		for _, k := range bt.order {
			idx := bt.buckets[k]
			s := slot{srcHi: k.srcHi, srcLo: k.srcLo, dstHi: k.dstHi, dstLo: k.dstLo, misc: k.misc,
				first: uint32(len(t.entries)), n: uint32(len(idx))}
			e0 := &all[idx[0]]
			s.rank, s.rule = e0.rank, e0.rule
			switch e0.flags {
			case 0:
				s.quick = quickAny
			case needPorts:
				s.quick = quickPorts
			}
			for _, ei := range idx {
				t.entries = append(t.entries, all[ei].compact())
				if all[ei].rank < ht.best {
					ht.best = all[ei].rank
				}
			}
			b := hash5(k.srcHi, k.srcLo, k.dstHi, k.dstLo, k.misc) >> ht.shift
			ht.bloom[b/64] |= 1 << (b % 64)
			h := b >> bloomShift
			for ht.slots[h].n != 0 {
				h = (h + 1) & ht.bits
			}
			ht.slots[h] = s
		}
		t.tables = append(t.tables, ht)
	}
	// Tables were created in rank order, so best is already ascending; sort
	// anyway so pruning never depends on that.
	slices.SortStableFunc(t.tables, func(a, b hashTable) int {
		switch {
		case a.best < b.best:
			return -1
		case a.best > b.best:
			return 1
		}
		return 0
	})
	t.chk = make([]echeck, len(t.entries))
	for i := range t.entries {
		t.chk[i] = t.entries[i].check()
	}
	t.plain = true
	for i := range t.entries {
		if t.entries[i].flags&^needPorts != 0 {
			t.plain = false
		}
	}
	t.buildPrefilter()
	t.burstWalk = t.pf.hashBytes() <= walkPrefilterMax
	t.build = time.Since(start)
	return t, nil
}
