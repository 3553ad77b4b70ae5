package classifier

import (
	"testing"

	"github.com/scrubd/scrubd/swpath/packet"
	"github.com/scrubd/scrubd/swpath/rule"
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

// TestTLeafBest: a tight tree's leaf scan in Go's rare paths (tleafBest,
// the stub a block at a time) finds what the compact blocks it came from
// give in Go (cleafBest over the same tree with its blocks expanded), for
// every leaf that packets of the set's traffic reach, from no best and
// from bests between the leaf's entries: the same rule, from an entry no
// later. The set has rules whose holds
// need the frame's length, and the packets half their lengths inside
// those holds.
func TestTLeafBest(t *testing.T) {
	needCBlocks(t)
	if !lanesTight {
		t.Skip("no AVX-512BW and VBMI2 here: no set takes tight blocks")
	}
	defer func(v int) { tblockMin = v }(tblockMin)
	tblockMin = 0
	for _, v6 := range []bool{false, true} {
		set := withHeld(classBenchSet(3000, v6), 7)
		tab, err := Compile(set)
		if err != nil {
			t.Fatal(err)
		}
		tr := tab.tr
		if tr == nil || !tr.tight {
			t.Fatalf("IPv6 %v: no tight blocks", v6)
		}
		// The reference: each tree with its blocks expanded (cblock's
		// form, entry words from tent), which cleafBest tests in Go.
		refs := make([]dtree, len(tr.t))
		for i := range tr.t {
			refs[i] = tr.t[i]
			refs[i].cblk = make([]cblock, len(tr.t[i].tblk))
			for b := range refs[i].cblk {
				refs[i].cblk[b] = tr.t[i].cblock(uint32(b))
			}
			refs[i].tblk = nil
		}
		g := traffic.NewGenerator(traffic.Config{Seed: 7, Rules: set, RuleFraction: 0.95})
		var buf []byte
		leaves, bests, beaten := 0, 0, 0
		for p := range 4000 {
			buf = g.Next(buf[:0])
			var f rule.Fields
			packet.Parse(buf, &f)
			if p%2 == 0 {
				f.Length = uint32(60 + p%240)
			}
			if f.Family == 0 {
				continue
			}
			misc := miscWord(&f) | tr.miscBits(&f)
			key := cblockKey(&f, misc)
			for i := range tr.t {
				d := &tr.t[i]
				n := d.walk(&treeKey{f.Src.Hi, f.Dst.Hi, misc})
				cnt := uint32(n>>32) & 0xffffff
				if cnt == 0 {
					continue
				}
				leaves++
				from := []uint32{treeNoRank}
				for at := uint32(n); at < uint32(n)+cnt; at++ {
					from = append(from, d.tent[at/vecBlock][at%vecBlock]&laneEnt+1)
				}
				for _, best := range from {
					got := tab.cleafBest(d, n, &key, &f, misc, best)
					want := tab.cleafBest(&refs[i], n, &key, &f, misc, best)
					// The stub's best is its rank's first entry, which
					// may be before the lane's own: the same rule.
					if tr.vecRule(got) != tr.vecRule(want) || got > want {
						t.Fatalf("IPv6 %v, packet %d, tree %d, leaf %#x, from %#x: %#x (rule %d), the expanded blocks' %#x (rule %d)", v6, p, i, n, best, got, tr.vecRule(got), want, tr.vecRule(want))
					}
					bests++
					if got < best {
						beaten++
					}
				}
			}
		}
		t.Logf("IPv6 %v: %d leaves, %d of %d bests beaten", v6, leaves, beaten, bests)
		if leaves < 1000 || beaten < bests/20 {
			t.Fatalf("IPv6 %v: %d leaves, %d of %d bests beaten: the scans test little", v6, leaves, beaten, bests)
		}
	}
}
