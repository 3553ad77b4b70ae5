package classifier

import (
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

// holds reports whether the entry's own key and every other condition of
// its rule hold for f, whose key is k.
func (t *Table) holds(e *entry, k *key, f *rule.Fields) bool {
	if e.flags == 0 {
		return true
	}
	if e.flags&chkKey != 0 {
		if m := k.and(e.mask); !m.eq(&e.val) {
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
	if e.flags&chkDSCP != 0 && e.dscp&(1<<(f.DSCP&63)) == 0 {
		return false
	}
	if e.flags&chkRes != 0 && !t.res[e.res].holds(f) {
		return false
	}
	return true
}

// lookup returns the rank and rule of the deciding entry (noRank, -1 when
// none) and how many hash tables it probed.
func (t *Table) lookup(f *rule.Fields) (uint64, int32, int) {
	if f.Family == 0 {
		return noRank, -1, 0
	}
	k := keyOf(f)
	best, bestRule := noRank, int32(-1)
	probes := 0
	for ti := range t.tables {
		ht := &t.tables[ti]
		if ht.best >= best {
			break // tables are in best-rank order: none left can win
		}
		probes++
		mk := k.and(ht.mask)
		b := hashKey(&mk, ht.shift)
		if ht.bloom[b/64]&(1<<(b%64)) == 0 {
			continue
		}
		for h := b >> bloomShift; ; h = (h + 1) & ht.bits {
			s := &ht.slots[h]
			if s.n == 0 {
				break
			}
			if ht.keys[h].eq(&mk) {
				es := t.entries[s.first : s.first+s.n]
				for i := range es {
					e := &es[i]
					if e.rank >= best {
						break
					}
					if t.holds(e, &k, f) {
						best, bestRule = e.rank, e.rule
						break
					}
				}
				break
			}
		}
	}
	return best, bestRule, probes
}

// Decide returns the index of the deciding rule for f in the compiled set,
// or -1 when no rule matches (the packet passes). It agrees with
// (*rule.Set).Decide.
func (t *Table) Decide(f *rule.Fields) int {
	_, r, _ := t.lookup(f)
	return int(r)
}

// Probes returns how many hash tables a lookup of f probes.
func (t *Table) Probes(f *rule.Fields) int {
	_, _, n := t.lookup(f)
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
	probes := 0
	for i := range fs {
		_, r, n := t.lookup(&fs[i])
		out[i] = r
		probes += n
	}
	return probes
}

// AppendMatching appends to dst the index of every rule whose match holds
// for f on its own (regardless of priority), each once, in no particular
// order. It does not allocate when dst has room.
func (t *Table) AppendMatching(dst []int32, f *rule.Fields) []int32 {
	if f.Family == 0 {
		return dst
	}
	start := len(dst)
	k := keyOf(f)
	for ti := range t.tables {
		ht := &t.tables[ti]
		mk := k.and(ht.mask)
		b := hashKey(&mk, ht.shift)
		if ht.bloom[b/64]&(1<<(b%64)) == 0 {
			continue
		}
		for h := b >> bloomShift; ; h = (h + 1) & ht.bits {
			s := &ht.slots[h]
			if s.n == 0 {
				break
			}
			if ht.keys[h].eq(&mk) {
				es := t.entries[s.first : s.first+s.n]
			next:
				for i := range es {
					e := &es[i]
					if !t.holds(e, &k, f) {
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
	}
	return dst
}
