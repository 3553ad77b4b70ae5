package classifier

import (
	"testing"

	"github.com/scrubd/scrubd/swpath/traffic"
)

// TestTLane: a tight lane's words, from the layout's definition
// (tree_tblock.go) worked by hand, for a compact lane of a record with a
// source /8, a whole destination word, source ports 1024-2047, the
// destination port 53, the protocol compared, and holds.
func TestTLane(t *testing.T) {
	l := clane{
		s: 0x0a000000 | 1<<23, // 10.0.0.0/8 and its marker
		d: 0xc0000201,         // 192.0.2.1, whole
		p: 0x0400<<16 | 53,    // the low ends: 1024 and 53
		q: 0x03ff << 16,       // the spans: 1023 and 0
		c: 17 | cProtoMask | cDstFull,
		e: 1234 | laneFull,
	}
	s, d, y, x := tlane(l, 5)
	// y: 53 in bits 0-15, span 0 above it; x: entry 1234, class 5 at bit
	// 20, the destination whole (bit 28), laneFull (bit 31).
	if s != 0x0a800000 || d != 0xc0000201 || y != 53 || x != 1234|5<<20|1<<28|1<<31 {
		t.Fatalf("tight lane %#x %#x %#x %#x", s, d, y, x)
	}
	// The class: the c word without the whole-word bits, and the source
	// port's range as low end << 16 | span.
	if k := tclassOf(l); k != [2]uint32{17 | 0xff<<16, 0x0400<<16 | 0x03ff} {
		t.Fatalf("class %#x", k)
	}
	if _, _, _, x := tlane(neverCLaneWords, 3); x != ^uint32(0) {
		t.Fatalf("never lane: x %#x", x)
	}
}

// TestTBlocksFallback: a set of blocks whose lanes make more classes
// than tNever, or one with an entry at tEnt or above, has no tight form;
// tNever classes do. The compact blocks of a ClassBench-style set expand
// back from their tight blocks, lane for lane, and with ranks (tpos)
// their lanes hold the ranks the set's entries make by definition.
func TestTBlocksFallback(t *testing.T) {
	mk := func(classes, ent int) [2][]cblock {
		blk := make([]cblock, (classes+vecBlock-1)/vecBlock+1)
		blk[0] = neverCBlock[0]
		for i := range classes {
			l := clane{s: 1 << 31, d: 1 << 31, q: 0xffff, c: uint32(i) | cProtoMask, e: uint32(ent)}
			blk[1+i/vecBlock].putLane(i%vecBlock, l)
		}
		for i := classes; i%vecBlock != 0; i++ {
			blk[1+i/vecBlock].putLane(i%vecBlock, neverCLaneWords)
		}
		return [2][]cblock{blk, neverCBlock[:]}
	}
	for _, c := range []struct {
		classes, ent int
		ok           bool
	}{{tNever, 7, true}, {tNever + 1, 7, false}, {3, tEnt - 1, true}, {3, tEnt, false}} {
		if _, _, _, ok := tblocksOf(mk(c.classes, c.ent), nil); ok != c.ok {
			t.Fatalf("%d classes, entry %#x: tight %v, want %v", c.classes, c.ent, ok, c.ok)
		}
	}
	defer func(v int) { tblockMin = v }(tblockMin)
	tblockMin = 1 << 40 // compact blocks only
	tab, err := Compile(traffic.ClassBenchRules(20000, 20000))
	if err != nil {
		t.Fatal(err)
	}
	tr := tab.tr
	if tr == nil || !tr.cvec || tr.tight {
		t.Skip("no compact blocks here (AVX-512 on amd64)")
	}
	tb, _, cl, ok := tblocksOf(tr.cblk, nil)
	if !ok {
		t.Fatal("20k ClassBench-style rules: no tight blocks")
	}
	for i := range tb {
		for b := range tb[i] {
			if tb[i][b].expand(cl) != tr.cblk[i][b] {
				t.Fatalf("tree %d block %d: expands to %+v, was %+v", i, b, tb[i][b].expand(cl), tr.cblk[i][b])
			}
		}
	}
	// With ranks: each entry's rank is the count of rule changes before
	// it in decision order, its rule trule's at the rank and its first
	// entry tfirst's; a lane holds its entry's rank and flags, and te
	// its entry word.
	pos := tr.tpos()
	rank := uint32(0)
	for e := range tr.ents {
		if e > 0 && tr.ents[e].rule != tr.ents[e-1].rule {
			rank++
		}
		if pos[e] != rank || tr.trule[rank] != tr.ents[e].rule || tr.ents[tr.tfirst[rank]].rule != tr.ents[e].rule || tr.tfirst[rank] > uint32(e) {
			t.Fatalf("entry %d (rule %d): rank %d, want %d; the rank's rule %d, first entry %d", e, tr.ents[e].rule, pos[e], rank, tr.trule[pos[e]], tr.tfirst[pos[e]])
		}
	}
	if len(tr.trule) != int(rank)+2 || tr.trule[rank+1] != -1 || !tr.tident {
		t.Fatalf("%d ranks, the last rule %d, identity %v: want %d, -1, true (ClassBench-style rules are in decision order)", len(tr.trule)-1, tr.trule[len(tr.trule)-1], tr.tident, rank+1)
	}
	tb, te, cl, ok := tblocksOf(tr.cblk, pos)
	if !ok {
		t.Fatal("20k ClassBench-style rules: no tight blocks with ranks")
	}
	for i := range tb {
		for b := range tb[i] {
			c, want := tb[i][b].expand(cl), tr.cblk[i][b]
			if te[i][b] != want.e {
				t.Fatalf("tree %d block %d: entry words %#x, want %#x", i, b, te[i][b], want.e)
			}
			for j, e := range want.e {
				if e != treeNoRank {
					e = pos[e&laneEnt] | e&^laneEnt
				}
				if c.e[j] != e {
					t.Fatalf("tree %d block %d lane %d: rank word %#x, want %#x", i, b, j, c.e[j], e)
				}
			}
			c.e = want.e
			if c != want {
				t.Fatalf("tree %d block %d: expands to %+v, was %+v", i, b, c, want)
			}
		}
	}
}
