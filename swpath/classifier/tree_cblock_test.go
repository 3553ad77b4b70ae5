package classifier

import (
	"fmt"
	"math/bits"
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"

	"github.com/scrubd/scrubd/swpath/rule"
	"github.com/scrubd/scrubd/swpath/traffic"
)

// cblockRecord decodes lane j of b into the record it was made from,
// by the layout's definition (tree_cblock.go), not by the scan's
// arithmetic: the address prefix length from the marker's position, the
// port masks from the spans (a prefix's range: its mask is the span's
// complement; a side whose range is not a prefix's, an entry's port
// range that the lane holds (clane), has mask 0 and value 0 in the
// record, as in its entry's key), the family from its bit. rule is -1: a
// block has no rules.
func cblockRecord(b *cblock, j int) trec {
	c, e := b.c[j], b.e[j]
	if c == neverCLane {
		return trec{sd: neverRec.sd, sdm: neverRec.sdm, misc: neverRec.misc, miscMask: neverRec.miscMask, ent: treeNoRank, rule: -1}
	}
	addr := func(w uint32, full bool) (v, m uint32) {
		if full {
			return w, ^uint32(0)
		}
		n := 31 - bits.TrailingZeros32(w) // the prefix length
		m = ^uint32(0) << (32 - n)
		if n == 0 {
			m = 0
		}
		return w & m, m
	}
	sv, sm := addr(b.s[j], c&cSrcFull != 0)
	dv, dm := addr(b.d[j], c&cDstFull != 0)
	var hv, hm uint32
	if c&cProtoMask != 0 {
		hv, hm = c&0xff, 0xff
	}
	if c&(cFamily6<<cMasks) != 0 {
		fam := uint32(rule.IPv4)
		if c&cFamily6 != 0 {
			fam = uint32(rule.IPv6)
		}
		hv, hm = hv|fam<<8, hm|0xff00
	}
	hv |= (c >> cV6Top & 3) << 16
	hm |= (c >> (cV6Top + cMasks) & 3) << 16
	var lo, pv uint32
	for _, sh := range [2]uint32{16, 0} {
		if span := b.q[j] >> sh & 0xffff; span&(span+1) == 0 { // 2^k - 1: a prefix's
			lo |= (^span & 0xffff) << sh
			pv |= b.p[j] & (0xffff << sh)
		}
	}
	mm := uint64(hm)<<32 | uint64(lo)
	switch {
	case e&laneFull != 0:
		mm |= chkFullBit
	case e&lanePorts != 0:
		mm |= chkPortsBit
	}
	return trec{sd: uint64(sv)<<32 | uint64(dv), sdm: uint64(sm)<<32 | uint64(dm),
		misc: uint64(hv)<<32 | uint64(pv), miscMask: mm, ent: e & laneEnt, rule: -1}
}

// randCRecord returns a record whose check has the masks a compact lane
// holds: address and port prefixes, the protocol and family whole or
// not at all, any of the IPv6 top bits.
func randCRecord(r *rand.Rand, ent uint32) trec {
	pre := func(n, w int) uint64 {
		if n == 0 {
			return 0
		}
		return (uint64(1)<<n - 1) << (w - n)
	}
	sl, dl := r.IntN(33), r.IntN(33)
	sdm := pre(sl, 32)<<32 | pre(dl, 32)
	hm := uint64(0)
	if r.IntN(2) == 0 {
		hm |= 0xff
	}
	if r.IntN(3) != 0 {
		hm |= 0xff00
	}
	hm |= uint64(r.IntN(4)) << 16
	fam := uint64(rule.IPv4)
	if r.IntN(2) == 0 {
		fam = uint64(rule.IPv6)
	}
	hv := (uint64(r.IntN(256)) | fam<<8 | uint64(r.IntN(4))<<16) & hm
	lo := pre(r.IntN(17), 16)<<16 | pre(r.IntN(17), 16)
	mm := hm<<32 | lo
	rec := trec{sd: r.Uint64() & sdm, sdm: sdm, misc: (hv<<32 | r.Uint64()&0xffffffff) & mm, miscMask: mm, ent: ent, rule: int32(ent)}
	switch r.IntN(4) {
	case 0:
		rec.miscMask |= chkFullBit
	case 1:
		rec.miscMask |= chkPortsBit
	}
	return rec
}

// randCPacket returns the address and tree misc words of a packet: one
// that passes rec's check, or misses it by one bit, or a random one. Its
// family is IPv4 or IPv6, as every packet that reaches a scan.
func randCPacket(r *rand.Rand, rec *trec) (sd, misc uint64) {
	mm := rec.miscMask &^ (chkPortsBit | chkFullBit)
	sd = rec.sd | r.Uint64()&^rec.sdm
	misc = rec.misc | r.Uint64()&^mm
	if r.IntN(3) == 0 {
		// Half the misses are at an address prefix's last bit, the bit a
		// scan that reads the prefix one bit short (or a whole word as a
		// prefix of its value) lets through; the others anywhere.
		m := uint32(rec.sdm >> 32)
		sh := 32
		if r.IntN(2) == 0 {
			m, sh = uint32(rec.sdm), 0
		}
		if r.IntN(2) == 0 && m != 0 {
			sd ^= 1 << (bits.TrailingZeros32(m) + sh)
		} else if bit := r.IntN(128); bit < 64 {
			sd ^= 1 << bit
		} else {
			misc ^= 1 << (bit - 64)
		}
	}
	if r.IntN(8) == 0 {
		sd, misc = r.Uint64(), r.Uint64()
	}
	// Only the fields a packet has: its family 4 or 6, nothing above the
	// IPv6 top bits.
	fam := uint64(rule.IPv4)
	if misc>>41&1 != 0 {
		fam = uint64(rule.IPv6)
	}
	misc = misc&(3<<48|0xff<<32|0xffffffff) | fam<<40
	if r.IntN(8) == 0 {
		misc &^= 0xffffffff // ports 0
	}
	return sd, misc
}

// TestCBlockLanes: a compact lane holds the check of every record whose
// masks it can hold, decodes back to it, and passes exactly the packets
// that the record's own check passes (sd&sdm == sd, misc&miscMask ==
// misc, the form every other scan compares), in cblockMask and in the
// scans' Go references.
func TestCBlockLanes(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	rounds := 20000
	if testing.Short() {
		rounds = 3000
	}
	passed, tight, tops := 0, 0, 0
	for it := range rounds {
		var b cblock
		recs := make([]trec, vecBlock)
		for j := range vecBlock {
			recs[j] = randCRecord(r, uint32(it*8+j))
			if j == 7 && it%4 == 0 {
				recs[j] = neverRec
			}
			if it%3 != 0 && recs[j].ent != treeNoRank {
				// IPv6 top bits that are their masks, so that the
				// block has a tight form (tTop) in two rounds of three,
				// and in one of them no top bits at all.
				recs[j].misc = recs[j].misc&^(3<<48) | recs[j].miscMask&(3<<48)
				if it%3 == 2 {
					recs[j].misc &^= 3 << 48
					recs[j].miscMask &^= 3 << 48
				}
			}
			if !b.setLane(j, &recs[j]) {
				t.Fatalf("record %+v: no compact lane", recs[j])
			}
			got := cblockRecord(&b, j)
			want := recs[j]
			want.rule = -1
			if recs[j].ent == treeNoRank {
				want = cblockRecord(&neverCBlock[0], 0)
			}
			if got != want {
				t.Fatalf("record %+v: decoded %+v", want, got)
			}
		}
		// The block's tight form: eight records make at most eight
		// classes, and it expands to the compact block it came from,
		// where each record's IPv6 top bits are its masks or none
		// (tTop); a record whose top value is not its mask has none.
		fits := true
		for j := range recs {
			v, m := recs[j].misc>>48&3, recs[j].miscMask>>48&3
			fits = fits && (recs[j].ent == treeNoRank || v == m)
		}
		tb, te, cl, ok := tblocksOf([2][]cblock{{b}, neverCBlock[:]}, nil)
		if ok != fits || ok && (tb[0][0].expand(cl) != b || te[0][0] != b.e) {
			t.Fatalf("records %+v: tight block %v (want %v), expanded %+v", recs, ok, fits, tb[0])
		}
		for range 4 {
			sd, misc := randCPacket(r, &recs[r.IntN(vecBlock)])
			key := [4]uint32{uint32(sd >> 32), uint32(sd), hiLane(misc), uint32(misc)}
			var want uint32
			for j := range recs {
				mm := recs[j].miscMask &^ (chkPortsBit | chkFullBit)
				if recs[j].ent != treeNoRank && sd&recs[j].sdm == recs[j].sd && misc&mm == recs[j].misc {
					want |= 1 << j
				}
			}
			if got := cblockMask(&key, &b); got != want {
				t.Fatalf("packet %#x %#x: lanes %08b, records' checks %08b (records %+v)", sd, misc, got, want, recs)
			}
			if ok {
				if got := tblockMask(&key, &tb[0][0], cl); got != want {
					t.Fatalf("packet %#x %#x: tight lanes %08b, records' checks %08b (records %+v)", sd, misc, got, want, recs)
				}
			}
			passed += bits.OnesCount32(want)
			// The packet's flags: laneFull always, lanePorts for a
			// packet without ports.
			flags := uint32(laneFull) | uint32(r.IntN(2))*lanePorts
			// The leaf's lanes: a run of them in the block (layPacked).
			lo := r.IntN(vecBlock)
			hi := lo + 1 + r.IntN(vecBlock-lo)
			lanes := uint32(1<<hi-1) &^ (1<<lo - 1)
			wb, wc := treeNoRank, uint32(0)
			for j := range recs {
				if (want&lanes)>>j&1 == 0 {
					continue
				}
				if laneEntry(&recs[j])&flags != 0 {
					wc |= 1 << j
				} else {
					wb = min(wb, recs[j].ent)
				}
			}
			// The block as tree 0's and as tree 1's: the one-packet
			// scans, cblockScan2 (AVX2 on amd64) and cleafScan2 where
			// the CPU runs its stub (else its Go reference).
			scans := []struct {
				name string
				scan func(*[4]uint32, uint32, *cblock, *cblock, uint32) (uint32, uint32)
			}{{"cleafScan2Go", cleafScan2Go}, {"cblockScan2", cblockScan2}}
			if lanesCPU {
				scans = append(scans, scans[0])
				scans[2].name, scans[2].scan = "cleafScan2", cleafScan2
			}
			for _, sc := range scans {
				if best, check := sc.scan(&key, flags, &b, &neverCBlock[0], lanes|0xff00); best != wb || check != wc {
					t.Fatalf("packet %#x %#x: %s %#x %#x, want %#x %#x", sd, misc, sc.name, best, check, wb, wc)
				}
				if best, check := sc.scan(&key, flags, &neverCBlock[0], &b, lanes<<vecBlock|0xff); best != wb || check != wc<<vecBlock {
					t.Fatalf("packet %#x %#x: %s, block 1: %#x %#x, want %#x %#x", sd, misc, sc.name, best, check, wb, wc<<vecBlock)
				}
			}
			if !ok {
				continue
			}
			tight++
			if !tightCPU {
				if tbest, tcheck := tleafScan2Go(&key, flags, &tb[0][0], &tb[1][0], cl, lanes|0xff00); tbest != wb || tcheck != wc {
					t.Fatalf("packet %#x %#x: tleafScan2Go %#x %#x, want %#x %#x", sd, misc, tbest, tcheck, wb, wc)
				}
				for _, x := range tb[0][0].x {
					if x != tNeverLane && x&tTop != 0 {
						tops++
						break
					}
				}
				continue
			}
			if tbest, tcheck := tleafScan6(&key, flags, &tb[0][0], &tb[1][0], cl, lanes|0xff00); tbest != wb || tcheck != wc {
				t.Fatalf("packet %#x %#x: tleafScan6 %#x %#x, want %#x %#x", sd, misc, tbest, tcheck, wb, wc)
			}
			top := false
			for _, x := range tb[0][0].x {
				top = top || x != tNeverLane && x&tTop != 0
			}
			if top {
				tops++
			} else if tbest, tcheck := tleafScan2(&key, flags, &tb[0][0], &tb[1][0], cl, lanes|0xff00); tbest != wb || tcheck != wc {
				t.Fatalf("packet %#x %#x: tleafScan2 %#x %#x, want %#x %#x", sd, misc, tbest, tcheck, wb, wc)
			}
			if gbest, gcheck := tleafScan2Go(&key, flags, &tb[0][0], &tb[1][0], cl, lanes|0xff00); gbest != wb || gcheck != wc {
				t.Fatalf("packet %#x %#x: tleafScan2Go %#x %#x, want %#x %#x", sd, misc, gbest, gcheck, wb, wc)
			}
		}
	}
	if tight < rounds || tops < tight/4 || tops > tight*3/4 {
		t.Fatalf("%d packets over tight blocks in %d rounds, %d of them with IPv6 top bits", tight, rounds, tops)
	}
	if passed < rounds {
		t.Fatalf("%d passing lanes in %d rounds: the packets test little", passed, rounds)
	}
	// A never-passing lane has all-zero values and masks but its never
	// bit: packets of all zeros and all ones pass nothing.
	for _, key := range [][4]uint32{{}, {^uint32(0), ^uint32(0), 0x7ff, ^uint32(0)}} {
		if m := cblockMask(&key, &neverCBlock[0]); m != 0 {
			t.Fatalf("packet %#x: never-passing lanes %08b pass", key, m)
		}
	}
}

// TestCBlockRejects: a check with a mask that is not a prefix or a whole
// field has no compact lane, so a set with one keeps other records.
func TestCBlockRejects(t *testing.T) {
	ok := trec{sd: 10 << 56, sdm: 0xff << 56, misc: 6 << 32, miscMask: 0xff << 32}
	if _, fits := cencode(&ok); !fits {
		t.Fatalf("%+v: no lane", ok)
	}
	for _, c := range []struct {
		name string
		edit func(*trec)
	}{
		{"source mask not a prefix", func(r *trec) { r.sdm = 0xff00ff00 << 32 }},
		{"destination mask not a prefix", func(r *trec) { r.sdm |= 0x0f0 }},
		{"source value outside its mask", func(r *trec) { r.sd |= 1 << 40 }},
		{"protocol mask of four bits", func(r *trec) { r.miscMask = 0x0f << 32; r.misc = 6 << 32 }},
		{"family mask of four bits", func(r *trec) { r.miscMask |= 0x0f00 << 32 }},
		{"family 5", func(r *trec) { r.miscMask |= 0xff00 << 32; r.misc |= 5 << 40 }},
		{"a mask bit above the IPv6 top bits", func(r *trec) { r.miscMask |= 1 << 50 }},
		{"source port mask not a prefix", func(r *trec) { r.miscMask |= 0x00ff << 16 }},
		{"destination port value outside its mask", func(r *trec) { r.miscMask |= 0xff00; r.misc |= 1 }},
	} {
		r := ok
		c.edit(&r)
		if _, fits := cencode(&r); fits {
			t.Errorf("%s (%+v): a lane", c.name, r)
		}
	}
}

// keptMins checks what a group scan's stub kept in s for ZDECIDE against
// g, its Go reference's scratch, for n packets: each packet's four lane
// minimums, whose least is its best, and its lanes to check.
func keptMins(t *testing.T, it int, s, g *laneScratch, n int) {
	t.Helper()
	for i := range n {
		best, check := uint32(g.res[i]), uint32(g.res[i]>>32)
		if slices.Min(s.mins[i][:]) != best || uint32(s.chk[i]) != check {
			t.Fatalf("round %d, packet %d: minimums %x and check %x, Go's best %x and check %x", it, i, s.mins[i], s.chk[i], best, check)
		}
	}
}

// TestScanLanesC2: the stubs (scanLanesC2 over a group, cleafScan2 and
// cblockScan2 a packet at a time) against their Go references, on blocks of random
// records and packets made to pass some of them.
func TestScanLanesC2(t *testing.T) {
	scanC2, leafC2 := scanLanesC2, cleafScan2
	if !lanesCPU {
		t.Log("no AVX-512 here: scanLanesC2 and cleafScan2 are their Go references, the tight scans' stubs are not run")
		scanC2 = func(s *laneScratch, b0, b1 []cblock, vrule, out []int32, n, _ int, narrow bool) int {
			return scanLanesC2Go(s, b0, b1, vrule, out, n, narrow)
		}
		leafC2 = cleafScan2Go
	}
	r := rand.New(rand.NewPCG(5, 6))
	rounds := 300
	if testing.Short() {
		rounds = 50
	}
	vrule := randVrule(r)
	var s, g laneScratch
	out, gout, tout0 := make([]int32, treeGroup), make([]int32, treeGroup), make([]int32, treeGroup)
	decided, total, tight, tops, above := 0, 0, 0, 0, 0
	for it := range rounds {
		var blk [2][]cblock
		var recs [2][16][vecBlock]trec
		// Every other round, records of at most tNever classes (the c
		// words and source ports of a pool of records), so that the
		// blocks have a tight form too.
		var pool []trec
		if it%2 == 1 {
			for range 1 + r.IntN(tNever) {
				pool = append(pool, randCRecord(r, 0))
			}
		}
		for ti := range blk {
			blk[ti] = make([]cblock, 16)
			blk[ti][0] = neverCBlock[0]
			for b := 1; b < 16; b++ {
				for j := range vecBlock {
					rec := randCRecord(r, uint32(r.IntN(1100)))
					if pool != nil {
						// The pool's class, and IPv6 top bits that
						// are their masks (tTop): any of the four in
						// every other such round, none in the others.
						rec = withClass(rec, &pool[r.IntN(len(pool))])
						top := uint64(r.IntN(4)*(it/2%2)) << 48
						rec.misc = rec.misc&^(3<<48) | top
						rec.miscMask = rec.miscMask&^(3<<48) | top
					}
					if it%4 == 3 {
						// Every fourth round, each odd lane's record
						// is the lane's before it, a flag taken or
						// given, so that a packet made from one passes
						// both; and the records with a flag rank after
						// those without, so that a packet's lanes to
						// check cannot lower the best of those it
						// passes without one (narrowing drops them).
						const flags = chkFullBit | chkPortsBit
						if j%2 == 1 {
							rec = recs[ti][b][j-1]
							if rec.miscMask&flags != 0 {
								rec.miscMask &^= flags
							} else {
								rec.miscMask |= chkFullBit
							}
						}
						rec.ent = uint32(r.IntN(550))
						if rec.miscMask&flags != 0 {
							rec.ent += 550
						}
						rec.rule = int32(rec.ent)
					}
					recs[ti][b][j] = rec
					blk[ti][b].setLane(j, &recs[ti][b][j])
				}
			}
		}
		tb, _, cl, ok := tblocksOf(blk, nil)
		if pool != nil && !ok {
			t.Fatalf("round %d: records of %d classes have no tight blocks", it, len(pool))
		}
		for i := range treeGroup {
			for ti := range 2 {
				// A leaf of layPacked: a run of lanes of one block, or
				// (one in 16) a long leaf from a block's first lane.
				lo := r.IntN(vecBlock)
				cnt := r.IntN(vecBlock - lo + 1)
				w := treeLeaf | uint64(cnt)<<32 | uint64(r.IntN(16)*vecBlock+lo)
				if r.IntN(16) == 0 {
					w = treeLeaf | treeLong | uint64(vecBlock+1+r.IntN(20))<<32 | uint64(r.IntN(16)*vecBlock)
				}
				s.cur[ti][i] = w
			}
			// A packet made from a record of one of its blocks.
			ti := r.IntN(2)
			rec := &recs[ti][uint32(s.cur[ti][i])/vecBlock][r.IntN(vecBlock)]
			if uint32(s.cur[ti][i])/vecBlock == 0 {
				rec = &recs[ti][1+r.IntN(15)][0]
			}
			sd, misc := randCPacket(r, rec)
			s.sds[i], s.keys[2][i] = sd, misc
			s.flags[i] = laneFlags(&rule.Fields{L4: true, Family: rule.Family(misc >> 40 & 0xff), Proto: uint8(misc >> 32)})
			if r.IntN(20) == 0 {
				s.flags[i] = 0 // not IP
			}
		}
		n := 1 + r.IntN(treeGroup)
		if it%5 == 0 {
			n = treeGroup
		}
		s.res, s.rest = [treeGroup]uint64{}, [treeGroup]uint8{}
		for i := range out {
			out[i], gout[i] = -7, -7
		}
		g = s
		narrow := it%2 == 0
		nr := scanC2(&s, blk[0], blk[1], vrule, out, n, it%3*4, narrow)
		gr := scanLanesC2Go(&g, blk[0], blk[1], vrule, gout, n, narrow)
		if nr != gr || s.rest != g.rest || s.res != g.res || !slices.Equal(out, gout) {
			t.Fatalf("round %d, %d packets: %d left %v, res %x, out %v; Go %d left %v, res %x, out %v", it, n, nr, s.rest, s.res[:n], out[:n], gr, g.rest, g.res[:n], gout[:n])
		}
		if lanesWalk && !slices.Equal(s.lanes[:n], g.lanes[:n]) {
			t.Fatalf("round %d, %d packets: lane words %x, Go's %x", it, n, s.lanes[:n], g.lanes[:n])
		}
		if lanesWalk {
			// The stub's scans left each packet's lane minimums and
			// lanes to check for ZDECIDE.
			keptMins(t, it, &s, &g, n)
		}
		if ok {
			// The tight scans, stubs and Go, do what the compact ones
			// did: scanLanesT6 always, scanLanesT2 where no lane has
			// IPv6 top bits (tTop), as trees.v6 chooses.
			top := false
			for ti := range tb {
				for b := range tb[ti] {
					for _, x := range tb[ti][b].x {
						top = top || x != tNeverLane && x&tTop != 0
					}
				}
			}
			if top {
				tops++
			}
			for k, scan := range []func(*laneScratch) int{
				func(ts *laneScratch) int { return scanLanesT2Go(ts, tb[0], tb[1], vrule, tout0, n, narrow, cl) },
				func(ts *laneScratch) int { return scanLanesT6(ts, tb[0], tb[1], vrule, tout0, n, it%3*4, narrow, cl) },
				func(ts *laneScratch) int { return scanLanesT2(ts, tb[0], tb[1], vrule, tout0, n, it%3*4, narrow, cl) },
			} {
				if k == 2 && top || k > 0 && !tightCPU {
					continue
				}
				ts := g
				ts.res, ts.rest = [treeGroup]uint64{}, [treeGroup]uint8{}
				for i := range tout0 {
					tout0[i] = -7
				}
				tr := scan(&ts)
				if tr != gr || ts.rest != g.rest || ts.res != g.res || !slices.Equal(tout0, gout) {
					t.Fatalf("round %d, %d packets, scan %d: tight %d left, res %x, out %v; compact %d left, res %x, out %v", it, n, k, tr, ts.res[:n], tout0[:n], gr, g.res[:n], gout[:n])
				}
				if lanesWalk && k > 0 {
					keptMins(t, it, &ts, &g, n)
				}
			}
			// The stubs for ranks that are their rules (trees.tident)
			// read none: each decided packet's out is its best, -1
			// where that is the last or past it, as is a listed one's.
			ident := make([]int32, len(vrule))
			for k := range ident {
				ident[k] = int32(k)
			}
			ident[len(ident)-1] = -1
			for k, scan := range []func(*laneScratch) int{
				func(ts *laneScratch) int { return scanLanesT6I(ts, tb[0], tb[1], ident, tout0, n, it%3*4, narrow, cl) },
				func(ts *laneScratch) int { return scanLanesT2I(ts, tb[0], tb[1], ident, tout0, n, it%3*4, narrow, cl) },
			} {
				if k == 1 && top || !tightCPU {
					continue
				}
				ts := g
				ts.res, ts.rest = [treeGroup]uint64{}, [treeGroup]uint8{}
				for i := range tout0 {
					tout0[i] = -7
				}
				if tr := scan(&ts); tr != gr || ts.rest != g.rest || ts.res != g.res {
					t.Fatalf("round %d, %d packets, scan %d: identity %d left, res %x; compact %d left, res %x", it, n, k, tr, ts.res[:n], gr, g.res[:n])
				}
				for i := range n {
					want := int32(-1)
					if b := uint32(g.res[i]); !slices.Contains(g.rest[:gr], uint8(i)) && b < uint32(len(ident)-1) {
						want = int32(b)
					}
					if tout0[i] != want {
						t.Fatalf("round %d: packet %d, identity scan %d out %d, want %d", it, i, k, tout0[i], want)
					}
				}
			}
			tight++
		}
		for i := range n {
			key := [4]uint32{uint32(s.sds[i] >> 32), uint32(s.sds[i]), hiLane(s.keys[2][i]), uint32(s.keys[2][i])}
			b0, b1 := &blk[0][uint32(s.cur[0][i])/vecBlock], &blk[1][uint32(s.cur[1][i])/vecBlock]
			lanes := leafLanes(s.cur[0][i]) | leafLanes(s.cur[1][i])<<vecBlock
			b, c := leafC2(&key, s.flags[i], b0, b1, lanes)
			gb, gc := cleafScan2Go(&key, s.flags[i], b0, b1, lanes)
			if vb, vc := cblockScan2(&key, s.flags[i], b0, b1, lanes); vb != gb || vc != gc {
				t.Fatalf("round %d: packet %d: cblockScan2 %#x %#x, Go %#x %#x", it, i, vb, vc, gb, gc)
			}
			rc := c
			if narrow {
				rc = useful(c, b, &b0.e, &b1.e)
			}
			// res holds the whole check; narrowing only decides
			// whether the packet is listed.
			if b != gb || c != gc || uint64(b)|uint64(c)<<32 != s.res[i] {
				t.Fatalf("round %d: packet %d: cleafScan2 %#x %#x, Go %#x %#x, group %#x", it, i, b, c, gb, gc, s.res[i])
			}
			list := s.flags[i] == 0 || (s.cur[0][i]|s.cur[1][i])&treeLong != 0 || rc != 0
			if !narrow && c != 0 && useful(c, b, &b0.e, &b1.e) == 0 {
				// Listed only because the scan did not narrow: count
				// those whose lanes to check all rank at or after
				// the best (not only lanes without laneFull).
				all := true
				for m := c; m != 0; m &= m - 1 {
					l := bits.TrailingZeros32(m)
					all = all && [2]*cblock{b0, b1}[l/vecBlock].e[l%vecBlock]&laneEnt >= b
				}
				if all {
					above++
				}
			}
			if list != slices.Contains(s.rest[:nr], uint8(i)) {
				t.Fatalf("round %d: packet %d listed %v, want %v (narrowed check %#x)", it, i, !list, list, rc)
			}
			if !slices.Contains(s.rest[:nr], uint8(i)) {
				decided++
				if want := vrule[min(b, uint32(len(vrule)-1))]; out[i] != want {
					t.Fatalf("round %d: packet %d decided %d, want %d", it, i, out[i], want)
				}
			} else if out[i] != vrule[len(vrule)-1] {
				t.Fatalf("round %d: packet %d listed, out %d, want the last entry's rule %d", it, i, out[i], vrule[len(vrule)-1])
			}
			total++
		}
	}
	if decided < total/4 || decided > total*15/16 {
		t.Fatalf("%d of %d packets decided by the scan: the blocks test little", decided, total)
	}
	if tight < rounds/2 || tops < tight/2 || tops == tight {
		t.Fatalf("%d of %d rounds with tight blocks, %d of them with IPv6 top bits", tight, rounds, tops)
	}
	if above < rounds/5 {
		t.Fatalf("%d packets with lanes to check that cannot lower their best, in %d rounds", above, rounds)
	}
}

// withClass returns rec with the c word and source port of p: its
// protocol, family and IPv6 top bits (values and masks), and its source
// port's value and mask, so that records given the same p share a class
// (tclassOf).
func withClass(rec trec, p *trec) trec {
	const class = 0xffffffff<<32 | 0xffff<<16
	flags := rec.miscMask & (chkPortsBit | chkFullBit)
	rec.miscMask = rec.miscMask&^class | p.miscMask&class&^(chkPortsBit|chkFullBit) | flags
	rec.misc = rec.misc&^class | p.misc&class
	return rec
}

// classBenchSet returns a ClassBench-style set of n rules, as IPv6 where v6
// (each a.b.c.d/m as 2001:db8:a.b:c.d::/(32+m), as aclbench writes them).
func classBenchSet(n int, v6 bool) *rule.Set {
	set := traffic.ClassBenchRules(uint64(n), n)
	if !v6 {
		return set
	}
	set6 := &rule.Set{Rules: append([]rule.Rule(nil), set.Rules...)}
	conv := func(p netip.Prefix) netip.Prefix {
		if !p.IsValid() {
			return p
		}
		a := p.Addr().As4()
		return netip.PrefixFrom(netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, a[0], a[1], a[2], a[3]}), 32+p.Bits())
	}
	for i := range set6.Rules {
		m := &set6.Rules[i].Match
		m.Src, m.Dst = conv(m.Src), conv(m.Dst)
	}
	return set6
}

// TestCBlocksBig: with the lane walk, sets too big for leaves of one
// block (sblock) within treeOneBlockMax take compact blocks, and decide
// as the linear reference does, IPv4 and IPv6, every path: bursts (the
// group's stub and its Go rest), Decide, AppendMatching.
func TestCBlocksBig(t *testing.T) {
	needCBlocks(t)
	sizes := []int{20000, 50000}
	if testing.Short() {
		sizes = []int{20000}
	}
	for _, n := range sizes {
		for _, v6 := range []bool{false, true} {
			name := fmt.Sprintf("%d rules, IPv6 %v", n, v6)
			set := withHeld(classBenchSet(n, v6), 50)
			tab, err := Compile(set)
			if err != nil {
				t.Fatal(err)
			}
			if tab.tr == nil || !tab.tr.cvec || tab.tr.vec || tab.tr.compact {
				t.Fatalf("%s: compact blocks %v (blocks %v, compact records %v)", name, tab.tr != nil && tab.tr.cvec, tab.tr != nil && tab.tr.vec, tab.tr != nil && tab.tr.compact)
			}
			// The 50k sets' compact blocks pass tblockMin, and their
			// lanes make 19 classes: tight blocks. The IPv6 set's would
			// make 55 with its top bits, which its lanes keep in x
			// (tTop).
			if want := lanesTight && n == 50000; tab.tr.tight != want {
				t.Fatalf("%s: tight blocks %v, want %v", name, tab.tr.tight, want)
			}
			recs, lanes := 0, 0
			for i := range tab.tr.t {
				d := &tab.tr.t[i]
				if d.rec != nil || d.blk != nil || d.crec != nil {
					t.Fatalf("%s: tree %d keeps other records (%d, %d blocks, %d compact)", name, i, len(d.rec), len(d.blk), len(d.crec))
				}
				// The leaves share blocks (layPacked): their records fill
				// nearly every lane, and none takes another's.
				seen := map[uint64]bool{}
				taken := make([]bool, vecBlock*(len(d.cblk)+len(d.tblk)))
				for _, w := range append([]uint64{d.root}, d.nodes...) {
					if w&treeLeaf == 0 || w>>32&0xffffff == 0 || seen[w] {
						continue
					}
					seen[w] = true
					first, cnt := uint32(w), uint32(w>>32)&0xffffff
					if cnt <= vecBlock && first/vecBlock != (first+cnt-1)/vecBlock {
						t.Fatalf("%s: leaf %#x spans two blocks", name, w)
					}
					for at := first; at < first+cnt; at++ {
						if taken[at] {
							t.Fatalf("%s: leaf %#x takes a lane another leaf has", name, w)
						}
						taken[at] = true
					}
					recs += int(cnt)
				}
				lanes += len(taken) - vecBlock // block 0 is the empty leaves'
			}
			if recs < lanes*95/100 {
				t.Fatalf("%s: the leaves' %d records fill %d lanes: the blocks are not shared", name, recs, lanes)
			}
			g := traffic.NewGenerator(traffic.Config{Seed: uint64(n), Rules: set, RuleFraction: 0.9, Odd: true})
			if m := checkAgainstReference(t, name, set, parseAll(g.Frames(3000))); m < 1000 {
				t.Fatalf("%s: %d of 3000 packets matched", name, m)
			}
		}
	}
}

// TestCBlocksPatched: a table patched over a base of compact blocks (its
// masked rules found again through AppendMatching, its overlay, its
// folds) decides as a table compiled from the new set does, and as the
// set's linear reference, step by step. Compact blocks are forced on a
// set of 2000 rules, as TestLanesForced forces them, so that the steps
// reach removed rules and folds (at 20k rules a step removes about two
// rules in 20k, and a set folds after 141 changes); then tight blocks,
// forced the same way.
func TestCBlocksPatched(t *testing.T) {
	forceCBlocks(t)
	defer func(m int) { foldMin = m }(foldMin)
	foldMin = 8 // folds within the test's steps
	defer func(v int) { tblockMin = v }(tblockMin)
	// Compact blocks, then tight blocks (tblockMin 0) where the CPU has
	// their scan.
	for _, tight := range []bool{false, true} {
		if tight && !lanesTight {
			continue
		}
		tblockMin = 1 << 40
		if tight {
			tblockMin = 0
		}
		set := withHeld(traffic.ClassBenchRules(56, 2000), 20)
		if tab, err := Compile(set); err != nil || tab.tr == nil || !tab.tr.cvec || tab.tr.tight != tight {
			t.Fatalf("2000 rules, compact blocks forced: %v, compact blocks %v, tight %v", err, err == nil && tab.tr != nil && tab.tr.cvec, tight)
		}
		fallbacks, overlaid, patched := testPatchSequence(t, 9, treesAuto, set, 25)
		if fallbacks == 0 || overlaid == 0 || patched == 0 {
			t.Fatalf("tight %v: %d packets past a masked base rule, %d tables with an overlay, %d patched: the steps test little", tight, fallbacks, overlaid, patched)
		}
	}
}

// TestCBlockSpans: a compact lane holds an entry's one port range a side
// (clane), so a set whose port ranges no six prefixes cover takes no
// holds for them, and decides as the reference does at every range's
// edges (the ports one below, at, and one above each end), the burst,
// Decide and AppendMatching alike.
func TestCBlockSpans(t *testing.T) {
	forceCBlocks(t)
	r := rand.New(rand.NewPCG(21, 22))
	set := &rule.Set{}
	type edge struct{ sp, dp []uint16 }
	var edges []edge
	span := func() (rule.Ranges, []uint16) {
		lo := uint32(1 + r.IntN(60000))
		hi := lo + 100 + uint32(r.IntN(5000))
		return rule.Ranges{{Lo: lo, Hi: hi}}, []uint16{uint16(lo - 1), uint16(lo), uint16(hi), uint16(hi + 1)}
	}
	for i := range 400 {
		m := rule.Match{Src: netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(i % 4), 0, 0}), 16), Proto: []uint8{rule.ProtoTCP}}
		var e edge
		switch i % 3 {
		case 0:
			m.DstPort, e.dp = span()
		case 1:
			m.SrcPort, e.sp = span()
		default:
			m.SrcPort, e.sp = span()
			m.DstPort, e.dp = span()
		}
		edges = append(edges, e)
		set.Rules = append(set.Rules, rule.Rule{ID: fmt.Sprint("s", i), Priority: uint32(i % 5), Action: rule.Drop, Match: m})
	}
	tab, err := Compile(set)
	if err != nil || tab.tr == nil || !tab.tr.cvec {
		t.Fatalf("compact blocks forced: %v, compact blocks %v", err, err == nil && tab.tr != nil && tab.tr.cvec)
	}
	spanned, full := 0, 0
	for i := range tab.tr.ents {
		e := &tab.tr.ents[i]
		if e.flags&chkPortSpan == 0 {
			continue
		}
		spanned++
		rec := recOf(e.check(), uint32(i), e.rule)
		if l, ok := tab.tr.clane(&rec); !ok || l.e&laneFull != 0 {
			full++
		}
	}
	if spanned < 300 || full != 0 {
		t.Fatalf("%d entries with port ranges, %d of them with lanes that need holds: want 300 or more, none", spanned, full)
	}
	// Packets at the edges of the ranges, their other ports random.
	var fs []rule.Fields
	port := func(ps []uint16) uint16 {
		if len(ps) == 0 || r.IntN(4) == 0 {
			return uint16(r.IntN(65536))
		}
		return ps[r.IntN(len(ps))]
	}
	for range 4000 {
		e := edges[r.IntN(len(edges))]
		src := netip.AddrFrom4([4]byte{10, byte(r.IntN(5)), byte(r.IntN(256)), byte(r.IntN(256))})
		dst := netip.AddrFrom4([4]byte{192, 0, 2, byte(r.IntN(256))})
		f := rule.Fields{Family: rule.IPv4, Proto: rule.ProtoTCP, L4: true, Frag: rule.NotFragment,
			SrcPort: port(e.sp), DstPort: port(e.dp), Src: rule.AddrFrom(src), Dst: rule.AddrFrom(dst)}
		if r.IntN(10) == 0 {
			f.Proto, f.L4, f.SrcPort, f.DstPort = rule.ProtoICMP, true, 0, 0 // no ports
		}
		fs = append(fs, f)
	}
	matched := checkAgainstReference(t, "port ranges", set, fs)
	if matched < len(fs)/5 || matched > len(fs)*4/5 {
		t.Fatalf("%d of %d packets matched a rule: the edges test little", matched, len(fs))
	}
}

// withHeld returns set with a copy of every k-th rule before it that
// also needs an IP length of 60 to 300 bytes: a condition that no lane
// holds (chkRes), so that compact blocks, whose lanes hold the
// ClassBench-style sets' port ranges (clane), still have lanes that need
// holds, ranked above the rule they copy.
func withHeld(set *rule.Set, k int) *rule.Set {
	out := &rule.Set{}
	for i, r := range set.Rules {
		if i%k == 0 {
			h := r
			h.ID = "held-" + r.ID
			h.Match.Length = rule.Ranges{{Lo: 60, Hi: 300}}
			out.Rules = append(out.Rules, h)
		}
		out.Rules = append(out.Rules, r)
	}
	return out
}

// needCBlocks has sets take compact blocks in t: where the lane walk
// runs they do; elsewhere (amd64 without AVX-512, arm64, the purego
// build) it turns cvecGroup on until t ends, whose bursts (cvecBurst)
// every CPU runs, cblockScan2 in Go where no stub is built.
func needCBlocks(t *testing.T) {
	t.Helper()
	if lanesWalk && vecScan {
		return
	}
	v := cvecGroup
	t.Cleanup(func() { cvecGroup = v })
	cvecGroup = true
}

// needLanes skips t where the CPU cannot run the lane walk's stubs
// (lanesCPU: amd64 without AVX-512, arm64, the purego build): a CPU
// feature no package installs.
func needLanes(t *testing.T) {
	t.Helper()
	if !lanesWalk {
		t.Skip("no lane walk here (AVX-512 F, VL and BW, and BMI2 on amd64): its layouts are not built")
	}
}

// keepBlocks lays the 1k ClassBench-style set out as before cblockMin
// gave it compact blocks, in blocks (sblock), for the rest of the test:
// the tests of blocks, windows and records take it as their set.
func keepBlocks(t *testing.T) {
	v := cblockMin
	t.Cleanup(func() { cblockMin = v })
	cblockMin = 1 << 30
}

// forceCBlocks is needCBlocks, then gives every set that the lane scans
// would take compact blocks until t ends (treeOneBlockMax and
// oneBlockEntries 0), as TestLanesForced forces them.
func forceCBlocks(t *testing.T) {
	t.Helper()
	needCBlocks(t)
	one, entries := treeOneBlockMax, oneBlockEntries
	t.Cleanup(func() { treeOneBlockMax, oneBlockEntries = one, entries })
	treeOneBlockMax, oneBlockEntries = 0, 0
}
