package classifier

import (
	"github.com/scrubd/scrubd/swpath/rule"
)

// The staged burst lookup. A packet's walk through the tables is a chain of
// dependent loads (prefilter slot, Bloom word, slot, entry), and in the
// per-packet walk each step ends in a branch on a loaded value that the
// processor predicts poorly on fresh traffic (is the Bloom bit set? does
// the slot hold the key?), so it often waits for one load, mispredicts, and
// only then starts the next. decideStaged instead runs each step for a group of packets before
// the next step, so that the loads of one step are independent of each
// other and overlap, and the Bloom test is data, not a branch:
//
//  1. which packets are IP (every table is a candidate of an IP packet:
//     the prefilter is left out, see walkPrefilterMax);
//  2. for every (table, packet): the hash, and the Bloom word's bit; a
//     probe record is written always and kept (the count advanced) only
//     when the bit is set;
//  3. for every kept probe: the slot chain; a slot that holds the key and
//     whose best entry decides alone (slot.quick) decides there, one whose
//     best entry cannot beat the packet's best so far is dropped, and the
//     others leave a hit record;
//  4. for every hit: the slot's entry checks, with the packet's best rank
//     so far pruning them.
//
// The result is the lookup's: the deciding entry is the best-ranked entry
// that holds among every table that holds the packet's key; the per-packet
// walk reaches the same entry sooner by pruning whole tables, the staged one
// probes every candidate table (Bloom bits are cheap next to a
// mispredicted branch) and prunes slots and entries only.
//
// A group is 64 packets (fewer when their probes would not fit the
// scratch): more independent loads per stage than 32, which was 9-13 %
// slower at 100k ClassBench-style rules and 2-13 % at 10k (6 interleaved
// rounds, pinned, 19 of 24 pairs).
const stagedGroup = 64

// walkPrefilterMax: a set whose prefilter hash is at most this big (so
// the set is small and its tables sit in the cache) decides bursts with the
// per-packet walk, prefilter and table pruning included, which was 1-15 %
// faster than the staged lookup on ClassBench-style sets of 1k rules
// (prefilter 32 KiB). Bigger sets take the staged lookup without the
// prefilter: its probes miss the cache and depend on each other, while the
// Bloom words they would spare are few, small and loaded in parallel (at
// 10k rules, 512 KiB, the staged lookup with it was 5-7 % slower than
// without, and the walk slower still).
const walkPrefilterMax = 64 << 10

// maxStagedTables: the staged lookup takes sets of at most this many
// tables (a candidate bit each); sets with more use the per-packet walk.
const maxStagedTables = 63

// stagedJobs is the size of the probe scratch of one DecideBurst call: a
// group holds as many packets as their candidate tables can fill it with.
const stagedJobs = 1024

// stagedProbe is a (packet, table) pair whose Bloom bit is set, and the
// slot its probe starts at (stage 3 rewrites it, in place, to the slot that
// holds the key).
type stagedProbe struct {
	pkt, ti uint16
	h       uint32
}

// decideStaged decides fs into out (rule index or -1) group by group and
// returns the tables hashed into. jobs is scratch of any length of at
// least maxStagedTables.
func (t *Table) decideStaged(fs []rule.Fields, out []int32, jobs []stagedProbe) int {
	out = out[:len(fs)]
	if len(t.tables) > maxStagedTables || t.burstWalk {
		probes := 0
		for i := range fs {
			r, n := t.lookup(&fs[i])
			out[i] = r
			probes += n
		}
		return probes
	}
	g := min(stagedGroup, len(jobs)/max(len(t.tables), 1))
	probes := 0
	for len(fs) > 0 {
		n := min(len(fs), g)
		probes += t.stagedGroup(fs[:n], out[:n], jobs)
		fs, out = fs[n:], out[n:]
	}
	return probes
}

// stagedGroup decides a group of at most stagedGroup packets whose
// candidate tables fit jobs.
func (t *Table) stagedGroup(fs []rule.Fields, out []int32, jobs []stagedProbe) int {
	var cand, best [stagedGroup]uint64
	out = out[:len(fs)]
	valid := uint64(1)<<len(t.tables) - 1 // at most 63 tables: bit 63 is never one
	// 1. Candidate tables.
	for i := range fs {
		f := &fs[i]
		best[i] = noRank
		out[i] = -1
		var c uint64
		if f.Family != 0 {
			c = valid
		}
		cand[i] = c
	}
	// 2. Hash and Bloom bit of every candidate table; keep the set ones.
	tables := t.tables
	nj, probes := 0, 0
	// Every table is a candidate of every IP packet: table by table,
	// so that a table's mask and filter stay in registers, and in
	// best-rank order, so that packets meet their likely best entries
	// first and prune more in stages 3 and 4.
	var misc [stagedGroup]uint64
	for i := range fs {
		f := &fs[i]
		misc[i] = miscWord(f)
		probes += len(tables) * int(cand[i]&1)
	}
	for ti := range tables {
		ht := &tables[ti]
		mk, shift, bloom := ht.mask, ht.shift, ht.bloom
		for i := range fs {
			f := &fs[i]
			b := hash5(f.Src.Hi&mk.srcHi, f.Src.Lo&mk.srcLo, f.Dst.Hi&mk.dstHi, f.Dst.Lo&mk.dstLo, misc[i]&mk.misc) >> shift
			jobs[nj] = stagedProbe{uint16(i), uint16(ti), uint32(b >> bloomShift)}
			nj += int(bloom[b/64] >> (b % 64) & cand[i] & 1)
		}
	}
	// 3. Slot chains of the kept probes; a hit overwrites the records
	// already read.
	nh := 0
	for j := range jobs[:nj] {
		p := jobs[j]
		f := &fs[p.pkt]
		ht := &tables[p.ti]
		m0, m1, m2, m3 := f.Src.Hi&ht.mask.srcHi, f.Src.Lo&ht.mask.srcLo, f.Dst.Hi&ht.mask.dstHi, f.Dst.Lo&ht.mask.dstLo
		m4 := miscWord(f) & ht.mask.misc
		slots := ht.slots
		for h := p.h; ; h = (h + 1) & uint32(ht.bits) {
			s := &slots[h]
			if s.n == 0 {
				break
			}
			if s.srcHi != m0 || s.dstHi != m2 || s.misc != m4 || s.srcLo != m1 || s.dstLo != m3 {
				continue
			}
			if s.rank >= best[p.pkt] {
				break // the slot's best entry cannot win
			}
			if s.quick == quickAny || (s.quick == quickPorts && f.HasPorts()) {
				best[p.pkt], out[p.pkt] = s.rank, s.rule // decided from the slot's line
				break
			}
			jobs[nh] = stagedProbe{p.pkt, p.ti, h}
			nh++
			break
		}
	}
	// 4. Entries of the hit slots, best rank first within a slot.
	for k := range jobs[:nh] {
		p := &jobs[k]
		i := p.pkt
		f := &fs[i]
		s := &tables[p.ti].slots[p.h]
		if s.rank >= best[i] {
			continue
		}
		sd := scanSD(f)
		misc := miscWord(f)
		if r, ru := t.scanSlot(s, f, sd, misc); r < best[i] {
			best[i], out[i] = r, ru
		}
	}
	return probes
}
