package classifier

import "github.com/scrubd/scrubd/swpath/rule"

// Two packets at a time. A fresh-5-tuple packet's walks at 1k
// ClassBench-style rules are one to three dependent loads per tree and its
// leaf scan waits on its blocks, so one packet leaves the core idle while
// those loads are in flight; two packets' walks a level at a time, and
// their two scans one after the other, overlap their misses. At 1k rules
// in four trees (treeJoin off) two packets took 0.90-0.92 of the time of
// one at a time; three in registers no less than two (0.99 of two), and
// four with their walks in arrays, as the group walk of bigger trees
// keeps them (treeGroup), 1.11 of one (alternated in one process, thread
// CPU time). Where no stub is built (the purego tag) the leaves are Go
// loops: a pair of packets of a two-tree set took 0.89-0.90 of the time
// of one at a time there, and of a four-tree set 1.03-1.05, so sets of
// more than two trees keep one packet at a time; the pair's leaves are
// now windows (tree_window.go).

// walk2 walks the trees trs (at most four) for two packets, keys k and l,
// a level at a time, and returns their leaves: treeLeaf (an empty leaf)
// for a tree the set does not have and for a packet that is not IP (kok
// or lok false).
func walk2(trs []dtree, k, l *treeKey, kok, lok bool) (n0, n1, n2, n3, m0, m1, m2, m3 uint64) {
	n0, n1, n2, n3 = treeLeaf, treeLeaf, treeLeaf, treeLeaf
	switch len(trs) {
	case 4:
		n3 = trs[3].root
		fallthrough
	case 3:
		n2 = trs[2].root
		fallthrough
	case 2:
		n1 = trs[1].root
		fallthrough
	case 1:
		n0 = trs[0].root
	}
	m0, m1, m2, m3 = n0, n1, n2, n3
	if !kok {
		n0, n1, n2, n3 = treeLeaf, treeLeaf, treeLeaf, treeLeaf
	}
	if !lok {
		m0, m1, m2, m3 = treeLeaf, treeLeaf, treeLeaf, treeLeaf
	}
	for n0&n1&n2&n3&m0&m1&m2&m3&treeLeaf == 0 {
		if n0&treeLeaf == 0 {
			n0 = trs[0].nodes[uint32(n0)+uint32(k[n0>>56&3]>>(n0>>48&63))&uint32(n0>>32&0xffff)]
		}
		if m0&treeLeaf == 0 {
			m0 = trs[0].nodes[uint32(m0)+uint32(l[m0>>56&3]>>(m0>>48&63))&uint32(m0>>32&0xffff)]
		}
		if n1&treeLeaf == 0 {
			n1 = trs[1].nodes[uint32(n1)+uint32(k[n1>>56&3]>>(n1>>48&63))&uint32(n1>>32&0xffff)]
		}
		if m1&treeLeaf == 0 {
			m1 = trs[1].nodes[uint32(m1)+uint32(l[m1>>56&3]>>(m1>>48&63))&uint32(m1>>32&0xffff)]
		}
		if n2&treeLeaf == 0 {
			n2 = trs[2].nodes[uint32(n2)+uint32(k[n2>>56&3]>>(n2>>48&63))&uint32(n2>>32&0xffff)]
		}
		if m2&treeLeaf == 0 {
			m2 = trs[2].nodes[uint32(m2)+uint32(l[m2>>56&3]>>(m2>>48&63))&uint32(m2>>32&0xffff)]
		}
		if n3&treeLeaf == 0 {
			n3 = trs[3].nodes[uint32(n3)+uint32(k[n3>>56&3]>>(n3>>48&63))&uint32(n3>>32&0xffff)]
		}
		if m3&treeLeaf == 0 {
			m3 = trs[3].nodes[uint32(m3)+uint32(l[m3>>56&3]>>(m3>>48&63))&uint32(m3>>32&0xffff)]
		}
	}
	return
}

// vecEntry2 is vecEntry for two packets in sets of three or four trees
// (sets of two take vecEntry2of2): walk2, then leafScan4 for each.
func (t *Table) vecEntry2(f, g *rule.Fields) (uint32, uint32) {
	tr := t.tr
	k := treeKey{f.Src.Hi, f.Dst.Hi, miscWord(f) | tr.topBits(f)}
	l := treeKey{g.Src.Hi, g.Dst.Hi, miscWord(g) | tr.topBits(g)}
	n0, n1, n2, n3, m0, m1, m2, m3 := walk2(tr.t, &k, &l, f.Family != 0, g.Family != 0)
	vb := &tr.vblk
	a0, a1, a2, a3 := &vb[0][uint32(n0)/vecBlock], &vb[1][uint32(n1)/vecBlock], &vb[2][uint32(n2)/vecBlock], &vb[3][uint32(n3)/vecBlock]
	c0, c1, c2, c3 := &vb[0][uint32(m0)/vecBlock], &vb[1][uint32(m1)/vecBlock], &vb[2][uint32(m2)/vecBlock], &vb[3][uint32(m3)/vecBlock]
	sf, sg := scanSD(f), scanSD(g)
	bf, cf := leafScan4(sf, k[2], laneFlags(f), a0, a1, a2, a3)
	bg, cg := leafScan4(sg, l[2], laneFlags(g), c0, c1, c2, c3)
	if (n0|n1|n2|n3)&treeLong != 0 || cf != 0 {
		bf = t.vecRest(f, sf, k[2], bf, cf, [4]uint64{n0, n1, n2, n3}, [4]*sblock{a0, a1, a2, a3}, treeLong)
	}
	if (m0|m1|m2|m3)&treeLong != 0 || cg != 0 {
		bg = t.vecRest(g, sg, l[2], bg, cg, [4]uint64{m0, m1, m2, m3}, [4]*sblock{c0, c1, c2, c3}, treeLong)
	}
	return bf, bg
}

// vecEntry2of2 is vecEntry2 for sets of at most two trees (vec2): four
// walks, not eight of which four start at a leaf, and written out here:
// a pair of packets of a two-tree set took 0.80-0.81 of the time of one
// packet at a time so, 0.83-0.85 with the four walks in a function of
// their own, and 0.88-0.90 with walk2 (alternated in one process, thread
// CPU time).
func (t *Table) vecEntry2of2(f, g *rule.Fields) (uint32, uint32) {
	tr := t.tr
	k := treeKey{f.Src.Hi, f.Dst.Hi, miscWord(f) | tr.topBits(f)}
	l := treeKey{g.Src.Hi, g.Dst.Hi, miscWord(g) | tr.topBits(g)}
	trs := tr.t
	n0, n1 := treeLeaf, treeLeaf
	switch len(trs) {
	case 2:
		n1 = trs[1].root
		fallthrough
	case 1:
		n0 = trs[0].root
	}
	m0, m1 := n0, n1
	if tr.padded {
		for range treePad {
			n0 = trs[0].nodes[uint32(n0)+uint32(k[n0>>56&3]>>(n0>>48&63))&uint32(n0>>32&0xffff)]
			m0 = trs[0].nodes[uint32(m0)+uint32(l[m0>>56&3]>>(m0>>48&63))&uint32(m0>>32&0xffff)]
			n1 = trs[1].nodes[uint32(n1)+uint32(k[n1>>56&3]>>(n1>>48&63))&uint32(n1>>32&0xffff)]
			m1 = trs[1].nodes[uint32(m1)+uint32(l[m1>>56&3]>>(m1>>48&63))&uint32(m1>>32&0xffff)]
		}
	}
	if f.Family == 0 {
		n0, n1 = treeLeaf, treeLeaf
	}
	if g.Family == 0 {
		m0, m1 = treeLeaf, treeLeaf
	}
	for n0&n1&m0&m1&treeLeaf == 0 {
		if n0&treeLeaf == 0 {
			n0 = trs[0].nodes[uint32(n0)+uint32(k[n0>>56&3]>>(n0>>48&63))&uint32(n0>>32&0xffff)]
		}
		if m0&treeLeaf == 0 {
			m0 = trs[0].nodes[uint32(m0)+uint32(l[m0>>56&3]>>(m0>>48&63))&uint32(m0>>32&0xffff)]
		}
		if n1&treeLeaf == 0 {
			n1 = trs[1].nodes[uint32(n1)+uint32(k[n1>>56&3]>>(n1>>48&63))&uint32(n1>>32&0xffff)]
		}
		if m1&treeLeaf == 0 {
			m1 = trs[1].nodes[uint32(m1)+uint32(l[m1>>56&3]>>(m1>>48&63))&uint32(m1>>32&0xffff)]
		}
	}
	vb := &tr.vblk
	a0, a1 := &vb[0][uint32(n0)/vecBlock], &vb[1][uint32(n1)/vecBlock]
	c0, c1 := &vb[0][uint32(m0)/vecBlock], &vb[1][uint32(m1)/vecBlock]
	sf, sg := scanSD(f), scanSD(g)
	bf, cf := leafScan2(sf, k[2], laneFlags(f), a0, a1)
	bg, cg := leafScan2(sg, l[2], laneFlags(g), c0, c1)
	never := &neverBlock[0]
	if (n0|n1)&treeLong != 0 || cf != 0 {
		bf = t.vecRest(f, sf, k[2], bf, cf, [4]uint64{n0, n1, treeLeaf, treeLeaf}, [4]*sblock{a0, a1, never, never}, treeLong)
	}
	if (m0|m1)&treeLong != 0 || cg != 0 {
		bg = t.vecRest(g, sg, l[2], bg, cg, [4]uint64{m0, m1, treeLeaf, treeLeaf}, [4]*sblock{c0, c1, never, never}, treeLong)
	}
	return bf, bg
}

// treeLookup2of2 is treeLookup for two packets in sets of two trees of
// trec records without blocks (the purego build, and builds without a
// stub): their four walks a level at a time, as in vecEntry2of2 (and
// written out again for the same reason: in a function of their own they
// cost the pair about 4 %), then the four leaves' windows (winMask, every
// mask before the first pick) and each packet's first passing records
// (winFirst, winPick only where one needs holds), or the Go loop over
// each leaf (recScan) where one is longer than a window.
func (t *Table) treeLookup2of2(f, g *rule.Fields) (int32, int32) {
	tr := t.tr
	k := treeKey{f.Src.Hi, f.Dst.Hi, miscWord(f) | tr.miscBits(f)}
	l := treeKey{g.Src.Hi, g.Dst.Hi, miscWord(g) | tr.miscBits(g)}
	trs := tr.t[:2]
	n0, n1 := trs[0].root, trs[1].root
	m0, m1 := n0, n1
	if tr.padded {
		for range treePad {
			n0 = trs[0].nodes[uint32(n0)+uint32(k[n0>>56&3]>>(n0>>48&63))&uint32(n0>>32&0xffff)]
			m0 = trs[0].nodes[uint32(m0)+uint32(l[m0>>56&3]>>(m0>>48&63))&uint32(m0>>32&0xffff)]
			n1 = trs[1].nodes[uint32(n1)+uint32(k[n1>>56&3]>>(n1>>48&63))&uint32(n1>>32&0xffff)]
			m1 = trs[1].nodes[uint32(m1)+uint32(l[m1>>56&3]>>(m1>>48&63))&uint32(m1>>32&0xffff)]
		}
	}
	if f.Family == 0 {
		n0, n1 = treeLeaf, treeLeaf
	}
	if g.Family == 0 {
		m0, m1 = treeLeaf, treeLeaf
	}
	for n0&n1&m0&m1&treeLeaf == 0 {
		if n0&treeLeaf == 0 {
			n0 = trs[0].nodes[uint32(n0)+uint32(k[n0>>56&3]>>(n0>>48&63))&uint32(n0>>32&0xffff)]
		}
		if m0&treeLeaf == 0 {
			m0 = trs[0].nodes[uint32(m0)+uint32(l[m0>>56&3]>>(m0>>48&63))&uint32(m0>>32&0xffff)]
		}
		if n1&treeLeaf == 0 {
			n1 = trs[1].nodes[uint32(n1)+uint32(k[n1>>56&3]>>(n1>>48&63))&uint32(n1>>32&0xffff)]
		}
		if m1&treeLeaf == 0 {
			m1 = trs[1].nodes[uint32(m1)+uint32(l[m1>>56&3]>>(m1>>48&63))&uint32(m1>>32&0xffff)]
		}
	}
	sf, sg := scanSD(f), scanSD(g)
	if (n0|n1|m0|m1)&treeLong != 0 || !t.tr.window {
		return t.recScan2of2(f, g, sf, sg, k[2], l[2], n0, n1, m0, m1)
	}
	// The four windows' masks before any pick, so that no mispredicted
	// branch of a pick holds back the loads of the windows after it.
	a0, a1 := trs[0].leafWindow(n0), trs[1].leafWindow(n1)
	c0, c1 := trs[0].leafWindow(m0), trs[1].leafWindow(m1)
	ma0, ma1 := winMask(a0, sf, k[2], n0>>32&0xff), winMask(a1, sf, k[2], n1>>32&0xff)
	mc0, mc1 := winMask(c0, sg, l[2], m0>>32&0xff), winMask(c1, sg, l[2], m1>>32&0xff)
	e0, rf, mf0 := winFirst(ma0, a0)
	e1, r1, mf1 := winFirst(ma1, a1)
	d0, rg, mg0 := winFirst(mc0, c0)
	d1, q1, mg1 := winFirst(mc1, c1)
	if e1 < e0 {
		rf = r1
	}
	if d1 < d0 {
		rg = q1
	}
	if mf0|mf1 >= chkPortsBit {
		bf, r := t.winPick(ma0, a0, f, k[2], treeNoRank, -1)
		_, rf = t.winPick(ma1, a1, f, k[2], bf, r)
	}
	if mg0|mg1 >= chkPortsBit {
		bg, r := t.winPick(mc0, c0, g, l[2], treeNoRank, -1)
		_, rg = t.winPick(mc1, c1, g, l[2], bg, r)
	}
	return rf, rg
}

// recScan2of2 is treeLookup2of2's scan of leaves n0, n1 (packet f) and m0,
// m1 (packet g) where one is longer than a window, or the trees have no
// windows (tests): every leaf with the loop.
func (t *Table) recScan2of2(f, g *rule.Fields, sf, sg, kf, kg uint64, n0, n1, m0, m1 uint64) (int32, int32) {
	trs := t.tr.t[:2]
	bf, rf := t.recScan(trs[0].rec[uint32(n0):uint32(n0)+uint32(n0>>32)&0xffffff], f, sf, kf, treeNoRank, -1)
	_, rf = t.recScan(trs[1].rec[uint32(n1):uint32(n1)+uint32(n1>>32)&0xffffff], f, sf, kf, bf, rf)
	bg, rg := t.recScan(trs[0].rec[uint32(m0):uint32(m0)+uint32(m0>>32)&0xffffff], g, sg, kg, treeNoRank, -1)
	_, rg = t.recScan(trs[1].rec[uint32(m1):uint32(m1)+uint32(m1>>32)&0xffffff], g, sg, kg, bg, rg)
	return rf, rg
}
