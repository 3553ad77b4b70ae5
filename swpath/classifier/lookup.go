package classifier

import (
	"math/bits"

	"github.com/scrubd/scrubd/swpath/rule"
)

// Verdict is what happens to a packet.
type Verdict uint8

const (
	// Pass: no rule matched.
	Pass Verdict = iota
	// Drop: a drop rule decided.
	Drop
	// Accept: an accept (allow-list) rule decided; the packet passes.
	Accept
)

func (v Verdict) String() string {
	switch v {
	case Pass:
		return "pass"
	case Drop:
		return "drop"
	case Accept:
		return "accept"
	}
	return "verdict(?)"
}

const noRank = ^uint64(0)

// holds reports whether the conditions of e that its bucket did not check
// hold for f.
func (t *Table) holds(e *entry, f *rule.Fields, misc uint64) bool {
	if e.flags&chkKeyMisc != 0 && misc&e.miscMask != e.misc {
		return false
	}
	if e.flags&chkKeyAddr != 0 && (f.Src.Hi&hiMask(e.srcLen) != e.srcHi || f.Dst.Hi&hiMask(e.dstLen) != e.dstHi) {
		return false
	}
	if e.flags&chkKeyLo != 0 {
		r := &t.res[e.res]
		if f.Src.Lo&r.srcLoMask != r.srcLo || f.Dst.Lo&r.dstLoMask != r.dstLo {
			return false
		}
	}
	if e.flags&needPorts != 0 && !f.HasPorts() {
		return false
	}
	if e.flags&needICMP != 0 && !f.HasICMP() {
		return false
	}
	if e.flags&chkTCP != 0 && (!f.L4 || f.Proto != rule.ProtoTCP || f.TCPFlags&e.tcpMask != e.tcpVal) {
		return false
	}
	if e.flags&chkFrag != 0 && e.frag&f.Frag == 0 {
		return false
	}
	if e.flags&chkDSCP != 0 && t.res[e.res].dscp&(1<<(f.DSCP&63)) == 0 {
		return false
	}
	if e.flags&chkPortSpan != 0 && (f.SrcPort-e.spLo > e.spSpan || f.DstPort-e.dpLo > e.dpSpan) {
		return false
	}
	if e.flags&chkRes != 0 && !t.res[e.res].holds(f) {
		return false
	}
	return true
}

// scanSlot returns the rank and rule of the first entry of slot s that
// holds for f (entries are in rank order, so it is the slot's best), or
// noRank and -1. sd and misc are scanSD(f) and miscWord(f).
func (t *Table) scanSlot(s *slot, f *rule.Fields, sd, misc uint64) (uint64, int32) {
	cs := t.chk[s.first : s.first+s.n]
	for i := range cs {
		c := &cs[i]
		if sd&c.sdMask != c.sd || misc&c.miscMask != c.misc {
			continue
		}
		e := &t.entries[s.first+uint32(i)]
		if c.miscMask >= chkPortsBit {
			if c.miscMask&chkFullBit != 0 {
				if !t.holds(e, f, misc) {
					continue
				}
			} else if !f.HasPorts() {
				continue
			}
		}
		return e.rank, e.rule
	}
	return noRank, -1
}

// lookup returns the rule of the deciding entry (-1 when none) and how
// many hash tables it probed. The key stays in five locals so
// that the compiler keeps it in registers.
func (t *Table) lookup(f *rule.Fields) (int32, int) {
	if t.tr != nil {
		if t.tr.vec {
			return t.treeLookupVec(f)
		}
		return t.treeLookup(f)
	}
	if t.pt != nil {
		return t.patchLookup(f)
	}
	return t.tssLookup(f)
}

// tssLookup is lookup with the hash tables.
func (t *Table) tssLookup(f *rule.Fields) (int32, int) {
	if f.Family == 0 {
		return -1, 0
	}
	s0, s1, d0, d1 := f.Src.Hi, f.Src.Lo, f.Dst.Hi, f.Dst.Lo
	misc := miscWord(f)
	best, bestRule := noRank, int32(-1)
	probes := 0
	sd := scanSD(f)
	tables := t.tables
	// Walk the candidate tables in order, by their bits; bit 63 stands for
	// every table from the 63rd on.
	next := 63
	for c := t.pf.candidates(s0, d0); c != 0; {
		ti := bits.TrailingZeros64(c)
		if ti < 63 {
			c &= c - 1
		} else {
			ti = next
			if next++; next >= len(tables) {
				c = 0
			}
		}
		ht := &tables[ti]
		if ht.best >= best {
			break // tables are in best-rank order: none left can win
		}
		probes++
		m0, m1, m2, m3, m4 := s0&ht.mask.srcHi, s1&ht.mask.srcLo, d0&ht.mask.dstHi, d1&ht.mask.dstLo, misc&ht.mask.misc
		b := hash5(m0, m1, m2, m3, m4) >> ht.shift
		if ht.bloom[b/64]&(1<<(b%64)) == 0 {
			continue
		}
		slots := ht.slots
		for h := b >> bloomShift; ; h = (h + 1) & ht.bits {
			s := &slots[h]
			if s.n == 0 {
				break
			}
			if s.srcHi != m0 || s.dstHi != m2 || s.misc != m4 || s.srcLo != m1 || s.dstLo != m3 {
				continue
			}
			if s.rank >= best {
				break // the slot's best entry cannot win
			}
			if s.quick == quickAny || (s.quick == quickPorts && f.HasPorts()) {
				best, bestRule = s.rank, s.rule
				break
			}
			if r, ru := t.scanSlot(s, f, sd, misc); r < best {
				best, bestRule = r, ru
			}
			break
		}
	}
	return bestRule, probes
}

// Decide returns the index of the deciding rule for f in the compiled set,
// or -1 when no rule matches (the packet passes). It agrees with
// (*rule.Set).Decide.
func (t *Table) Decide(f *rule.Fields) int {
	if tr := t.tr; tr != nil && tr.vec {
		best, _ := t.vecEntry(f)
		return int(tr.vecRule(best))
	}
	r, _ := t.lookup(f)
	return int(r)
}

// Probes returns how many hash tables a lookup of f probes.
func (t *Table) Probes(f *rule.Fields) int {
	_, n := t.lookup(f)
	return n
}

// Verdict returns the verdict of rule index i (-1: Pass).
func (t *Table) Verdict(i int) Verdict {
	if i < 0 {
		return Pass
	}
	return t.verdict[i]
}

// DecideBurst writes into out[i] the deciding rule index of fs[i] (-1 for
// none) and returns the total number of hash tables probed. out must be at
// least as long as fs.
func (t *Table) DecideBurst(fs []rule.Fields, out []int32) int {
	out = out[:len(fs)]
	if t.tr != nil {
		return t.treeBurst(fs, out, nil)
	}
	if t.pt != nil {
		return t.patchBurst(fs, out, nil, nil)
	}
	if len(t.tables) == 1 {
		return t.decideSingle(fs, out)
	}
	if t.burstWalk {
		return t.decideStaged(fs, out, nil) // the walk needs no scratch
	}
	var jobs [stagedJobs]stagedProbe
	return t.decideStaged(fs, out, jobs[:])
}

// decideBurst is DecideBurst with the staged lookup's scratch supplied (a
// Worker's), so that it is not cleared on every call.
func (t *Table) decideBurst(fs []rule.Fields, out []int32, jobs []stagedProbe, tree *treeScratch) int {
	if t.tr != nil {
		return t.treeBurst(fs, out, tree)
	}
	if t.pt != nil {
		return t.patchBurst(fs, out, jobs, tree)
	}
	if len(t.tables) == 1 {
		return t.decideSingle(fs, out[:len(fs)])
	}
	return t.decideStaged(fs, out, jobs)
}

// decideChunks is the previous burst lookup (table by table over chunks of
// maxChunk packets), kept for side-by-side benchmarks.
func (t *Table) decideChunks(fs []rule.Fields, out []int32) int {
	out = out[:len(fs)]
	probes := 0
	for len(fs) > 0 {
		n := min(len(fs), maxChunk)
		probes += t.decideChunk(fs[:n], out[:n])
		fs, out = fs[n:], out[n:]
	}
	return probes
}

// maxChunk is how many packets decideChunk takes at once.
const maxChunk = 256

// decideChunk decides up to maxChunk packets table by table rather than
// packet by packet: the probes of different packets into one table do not
// depend on each other, so the processor overlaps their cache misses (the
// vector idea of VPP's graph nodes). Each packet keeps its own best rank, so
// priority pruning still applies per packet, and the walk over tables ends
// when no packet can improve.
func (t *Table) decideChunk(fs []rule.Fields, out []int32) int {
	var best, misc, cand [maxChunk]uint64
	n := len(fs)
	out = out[:n]
	for i := range fs {
		f := &fs[i]
		out[i] = -1
		best[i] = noRank
		if f.Family == 0 {
			best[i] = 0 // not IP: no table may be probed
		}
		misc[i] = miscWord(f)
		cand[i] = t.pf.candidates(f.Src.Hi, f.Dst.Hi)
	}
	probes := 0
	entries := t.entries
	for ti := range t.tables {
		ht := &t.tables[ti]
		bit := pfBit(ti)
		active, probed := 0, 0
		for i := 0; i < n; i++ {
			if ht.best >= best[i] {
				continue
			}
			active++
			if cand[i]&bit == 0 {
				continue
			}
			probed++
			f := &fs[i]
			m0, m1, m2, m3, m4 := f.Src.Hi&ht.mask.srcHi, f.Src.Lo&ht.mask.srcLo, f.Dst.Hi&ht.mask.dstHi, f.Dst.Lo&ht.mask.dstLo, misc[i]&ht.mask.misc
			b := hash5(m0, m1, m2, m3, m4) >> ht.shift
			if ht.bloom[b/64]&(1<<(b%64)) == 0 {
				continue
			}
			slots := ht.slots
			for h := b >> bloomShift; ; h = (h + 1) & ht.bits {
				s := &slots[h]
				if s.n == 0 {
					break
				}
				if s.srcHi != m0 || s.dstHi != m2 || s.misc != m4 || s.srcLo != m1 || s.dstLo != m3 {
					continue
				}
				es := entries[s.first : s.first+s.n]
				for j := range es {
					e := &es[j]
					if e.rank >= best[i] {
						break
					}
					if e.flags == 0 || (e.flags == needPorts && f.HasPorts()) || (e.flags != needPorts && t.holds(e, f, misc[i])) {
						best[i], out[i] = e.rank, e.rule
						break
					}
				}
				break
			}
		}
		if active == 0 {
			break // tables are in best-rank order: no packet can improve
		}
		probes += probed
	}
	return probes
}

// AppendMatching appends to dst the index of every rule whose match holds
// for f on its own (regardless of priority), each once, in no particular
// order. It does not allocate when dst has room. It reads the lookup the
// set decides with: the trees or the hash tables.
func (t *Table) AppendMatching(dst []int32, f *rule.Fields) []int32 {
	if f.Family == 0 {
		return dst
	}
	if t.tr != nil {
		return t.treeMatching(dst, f)
	}
	if t.pt != nil {
		return t.patchMatching(dst, f)
	}
	return t.tssMatching(dst, f)
}

// tssMatching is AppendMatching with the hash tables.
func (t *Table) tssMatching(dst []int32, f *rule.Fields) []int32 {
	start := len(dst)
	k := keyOf(f)
	for ti := range t.tables {
		ht := &t.tables[ti]
		mk := k.and(ht.mask)
		b := hash5(mk.srcHi, mk.srcLo, mk.dstHi, mk.dstLo, mk.misc) >> ht.shift
		if ht.bloom[b/64]&(1<<(b%64)) == 0 {
			continue
		}
		for h := b >> bloomShift; ; h = (h + 1) & ht.bits {
			s := &ht.slots[h]
			if s.n == 0 {
				break
			}
			if (key{s.srcHi, s.srcLo, s.dstHi, s.dstLo, s.misc}) != mk {
				continue
			}
			es := t.entries[s.first : s.first+s.n]
		next:
			for i := range es {
				e := &es[i]
				if !t.holds(e, f, k.misc) {
					continue
				}
				for _, r := range dst[start:] {
					if r == e.rule {
						continue next
					}
				}
				dst = append(dst, e.rule)
			}
			break
		}
	}
	return dst
}

// decideSingle is decideChunk for a Table with exactly one hash table (a
// small rule set whose rules share one mask, such as the source
// material's five port rules): no rank arrays, no prefilter (the table's
// Bloom filter answers what the prefilter would) and no pruning. It returns
// the tables probed: one per IP packet.
func (t *Table) decideSingle(fs []rule.Fields, out []int32) int {
	out = out[:len(fs)]
	ht := &t.tables[0]
	mask := ht.mask
	if mask.srcHi|mask.srcLo|mask.dstHi|mask.dstLo == 0 {
		return t.decideMiscOnly(fs, out)
	}
	shift, nbits := ht.shift, ht.bits
	bloom, slots, entries := ht.bloom, ht.slots, t.entries
	probes := 0
	for i := range fs {
		f := &fs[i]
		r := int32(-1)
		if f.Family != 0 {
			probes++
			misc := miscWord(f)
			m0, m1, m2, m3, m4 := f.Src.Hi&mask.srcHi, f.Src.Lo&mask.srcLo, f.Dst.Hi&mask.dstHi, f.Dst.Lo&mask.dstLo, misc&mask.misc
			b := hash5(m0, m1, m2, m3, m4) >> shift
			if bloom[b/64]&(1<<(b%64)) != 0 {
				for h := b >> bloomShift; ; h = (h + 1) & nbits {
					s := &slots[h]
					if s.n == 0 {
						break
					}
					if s.srcHi != m0 || s.dstHi != m2 || s.misc != m4 || s.srcLo != m1 || s.dstLo != m3 {
						continue
					}
					// Entries of a slot are in rank order: the first that
					// holds decides.
					es := entries[s.first : s.first+s.n]
					for j := range es {
						e := &es[j]
						if e.flags == 0 || (e.flags == needPorts && f.HasPorts()) || (e.flags != needPorts && t.holds(e, f, misc)) {
							r = e.rule
							break
						}
					}
					break
				}
			}
		}
		out[i] = r
	}
	return probes
}

// decideMiscOnly is decideSingle for a hash table keyed on the misc word
// alone (family, protocol, ports: no address bits), such as a set of port
// rules. Every slot's address words are then zero (keys are stored
// masked), so the hash and the slot compare take the misc word only, and
// the key stays in registers.
func (t *Table) decideMiscOnly(fs []rule.Fields, out []int32) int {
	if t.plain {
		return t.decideMiscPlain(fs, out)
	}
	out = out[:len(fs)]
	ht := &t.tables[0]
	mm := ht.mask.misc
	shift, nbits := ht.shift, ht.bits
	bloom, slots, entries := ht.bloom, ht.slots, t.entries
	probes := 0
	for i := range fs {
		f := &fs[i]
		r := int32(-1)
		if f.Family != 0 {
			probes++
			misc := miscWord(f)
			m4 := misc & mm
			b := hash5(0, 0, 0, 0, m4) >> shift
			if bloom[b/64]&(1<<(b%64)) != 0 {
				for h := b >> bloomShift; ; h = (h + 1) & nbits {
					s := &slots[h]
					if s.n == 0 {
						break
					}
					if s.misc != m4 {
						continue
					}
					es := entries[s.first : s.first+s.n]
					for j := range es {
						e := &es[j]
						if e.flags == 0 || (e.flags == needPorts && f.HasPorts()) || (e.flags != needPorts && t.holds(e, f, misc)) {
							r = e.rule
							break
						}
					}
					break
				}
			}
		}
		out[i] = r
	}
	return probes
}

// decideMiscPlain is decideMiscOnly for a plain Table (see Table.plain):
// an entry whose key matched decides if it needs nothing or the packet has
// ports. With no call in the loop the compiler keeps everything in
// registers.
func (t *Table) decideMiscPlain(fs []rule.Fields, out []int32) int {
	out = out[:len(fs)]
	ht := &t.tables[0]
	mm := ht.mask.misc
	shift, nbits := ht.shift, ht.bits
	bloom, slots, entries := ht.bloom, ht.slots, t.entries
	probes := 0
	for i := range fs {
		f := &fs[i]
		r := int32(-1)
		if f.Family != 0 {
			probes++
			m4 := miscWord(f) & mm
			b := hash5(0, 0, 0, 0, m4) >> shift
			if bloom[b/64]&(1<<(b%64)) != 0 {
				for h := b >> bloomShift; ; h = (h + 1) & nbits {
					s := &slots[h]
					if s.n == 0 {
						break
					}
					if s.misc != m4 {
						continue
					}
					ports := f.HasPorts()
					es := entries[s.first : s.first+s.n]
					for j := range es {
						if es[j].flags == 0 || ports {
							r = es[j].rule
							break
						}
					}
					break
				}
			}
		}
		out[i] = r
	}
	return probes
}
