package classifier

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"

	"github.com/scrubd/scrubd/swpath/rule"
)

// TestTreeWindows: without the vector scan (the purego build's case), the
// bursts of a two-tree set scan windows. Each tree's records end with
// recWindow never-passing ones; the leaves longer than a window, and only
// those, are marked treeLong; and bursts decide as the loops over the same
// trees (windows off) and as the linear reference. Two sets: 1k
// ClassBench-style rules on fresh 5-tuples, and rules that differ only in
// the packet length, which no cut separates, so their leaves are longer
// than a window, with a few that make short leaves beside them.
func TestTreeWindows(t *testing.T) {
	keepBlocks(t)
	defer func(v bool) { vecScan = v }(vecScan)
	vecScan = false
	long, lfs := windowLongSet()
	cb := classBench(nil, 1000, true)
	for _, c := range []struct {
		name string
		set  *rule.Set
		fs   []rule.Fields
		long bool // leaves longer than a window
	}{
		{"classbench1k", cb.set, cb.fs, false},
		{"long", long, lfs, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			tab, err := compile(c.set, treesForce)
			if err != nil {
				t.Fatal(err)
			}
			off, err := compile(c.set, treesForce)
			if err != nil {
				t.Fatal(err)
			}
			if tab.tr == nil || !tab.tr.window || len(tab.tr.t) != 2 || tab.tr.vec || tab.tr.compact {
				t.Fatalf("trees %v: want two trees of trec records with windows", tab.tr != nil)
			}
			off.tr.window = false
			longLeaves := 0
			for i := range tab.tr.t {
				d := &tab.tr.t[i]
				for j, rc := range d.rec[len(d.rec)-recWindow:] {
					if rc != neverRec {
						t.Fatalf("tree %d: padding record %d is %+v", i, j, rc)
					}
				}
				for _, n := range append([]uint64{d.root}, d.nodes...) {
					if n&treeLeaf == 0 {
						continue
					}
					if long := n>>32&0xffffff > recWindow; long != (n&treeLong != 0) {
						t.Fatalf("tree %d: leaf %#x marked long %v", i, n, !long)
					} else if long {
						longLeaves++
					}
				}
			}
			if c.long && longLeaves == 0 {
				t.Fatal("no leaf longer than a window")
			}
			out := make([]int32, len(c.fs))
			ref := make([]int32, len(c.fs))
			tab.DecideBurst(c.fs, out)
			off.DecideBurst(c.fs, ref)
			decided := 0
			for i := range c.fs {
				want := c.set.Decide(&c.fs[i])
				if int(out[i]) != want || ref[i] != out[i] {
					t.Fatalf("packet %d %+v: windows %d, loops %d, reference %d", i, &c.fs[i], out[i], ref[i], want)
				}
				if want >= 0 {
					decided++
				}
			}
			if decided < len(c.fs)/4 || decided == len(c.fs) {
				t.Fatalf("%d of %d packets decided: the set tests little", decided, len(c.fs))
			}
			t.Logf("%d leaves longer than a window, %d of %d packets decided", longLeaves, decided, len(c.fs))
		})
	}
}

// TestWindowPortsKey: a window set's records of entries that need only
// the packet's ports (chkPortsBit) test portsKeyBit in their misc value
// and mask instead, and no record is left that needs just that; the
// packet's bit comes from miscBits. The 1k ClassBench-style set's fresh
// 5-tuples, each also as a non-first fragment (no L4 header, ports 0),
// GRE and ICMP (no ports), SCTP (ports): bursts, Decide and
// AppendMatching against the linear reference, and the decisions of
// some packets change with their ports, so the bit decides something.
func TestWindowPortsKey(t *testing.T) {
	keepBlocks(t)
	defer func(v bool) { vecScan = v }(vecScan)
	vecScan = false
	cb := classBench(nil, 1000, true)
	tab, err := compile(cb.set, treesForce)
	if err != nil {
		t.Fatal(err)
	}
	if tab.tr == nil || !tab.tr.window || tab.tr.keyBits&portsKeyBit == 0 {
		t.Fatalf("trees %v: want windows with the ports bit", tab.tr != nil)
	}
	keyed := 0
	for i := range tab.tr.t {
		for _, r := range tab.tr.t[i].rec {
			if r.miscMask&(chkPortsBit|chkFullBit) == chkPortsBit {
				t.Fatalf("tree %d: record %+v still needs the ports from recRest", i, r)
			}
			if r.miscMask&portsKeyBit != 0 {
				if r.misc&portsKeyBit == 0 {
					t.Fatalf("tree %d: record %+v tests the ports bit for 0", i, r)
				}
				keyed++
			}
		}
	}
	if keyed == 0 {
		t.Fatal("no record tests the ports bit: the set tests nothing here")
	}
	// Packets that pass each such record's scan check, with their L4
	// header and without (a non-first fragment): the record decides the
	// first, never the second.
	var fs []rule.Fields
	for i := range tab.tr.t {
		for _, r := range tab.tr.t[i].rec {
			if r.miscMask&portsKeyBit == 0 {
				continue
			}
			f := rule.Fields{Family: rule.Family(r.misc >> 40), Proto: uint8(r.misc >> 32), L4: true, Frag: rule.NotFragment,
				SrcPort: uint16(r.misc >> 16), DstPort: uint16(r.misc),
				Src: rule.Addr{Hi: r.sd >> 32 << 32}, Dst: rule.Addr{Hi: r.sd << 32}}
			g := f
			g.L4, g.Frag = false, rule.IsFragment|rule.LastFragment
			fs = append(fs, f, g)
		}
	}
	keyedAt := len(fs)
	for i, f := range cb.fs[:8192] {
		fs = append(fs, f)
		g := f
		g.L4, g.Frag, g.SrcPort, g.DstPort = false, rule.IsFragment|rule.LastFragment, 0, 0
		fs = append(fs, g)
		g = f
		g.Proto, g.SrcPort, g.DstPort = rule.ProtoGRE, 0, 0
		fs = append(fs, g)
		g = f
		g.Proto, g.SrcPort, g.DstPort, g.ICMPType = rule.ProtoICMP, 0, 0, uint8(i)
		fs = append(fs, g)
		g = f
		g.Proto = rule.ProtoSCTP
		fs = append(fs, g)
	}
	out := make([]int32, len(fs))
	tab.DecideBurst(fs, out)
	changed, recChanged := 0, 0
	for i := range fs {
		f := &fs[i]
		want := cb.set.Decide(f)
		if int(out[i]) != want || tab.Decide(f) != want {
			t.Fatalf("packet %d %+v: burst %d, Decide %d, reference %d", i, f, out[i], tab.Decide(f), want)
		}
		got := tab.AppendMatching(nil, f)
		slices.Sort(got)
		if ref := refMatching(cb.set, f); !slices.Equal(got, ref) {
			t.Fatalf("packet %d %+v: AppendMatching %v, reference %v", i, f, got, ref)
		}
		switch {
		case i < keyedAt && i%2 == 1 && want != int(out[i-1]):
			recChanged++
		case i >= keyedAt && (i-keyedAt)%5 == 1 && want != int(out[i-1]):
			changed++
		}
	}
	if recChanged < keyed/4 || changed < 100 {
		t.Fatalf("%d of %d records' packets and %d fresh 5-tuples decided otherwise without their L4 header: the set tests little", recChanged, keyed, changed)
	}
	t.Logf("%d records test the ports bit, %d of their packets and %d of %d fresh 5-tuples decided otherwise without their L4 header", keyed, recChanged, changed, (len(fs)-keyedAt)/5)
}

// TestWinMask checks winMask against each record's check written as a
// loop, for every count from 0 to recWindow and random windows in which
// each record passes or fails the packet by one field (the address word,
// the misc word, or neither).
func TestWinMask(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 5))
	seen := make([]int, recWindow+1) // windows whose last counted record passes, by count
	for range 20000 {
		sd, misc := r.Uint64(), r.Uint64()
		recs := make([]trec, recWindow)
		for j := range recs {
			rc := trec{sdm: r.Uint64(), miscMask: r.Uint64()}
			rc.sd, rc.misc = sd&rc.sdm, misc&rc.miscMask
			switch r.IntN(3) {
			case 0: // fails on one address bit under its mask
				rc.sd ^= rc.sdm & -rc.sdm
			case 1: // fails on one misc bit
				rc.misc ^= rc.miscMask & -rc.miscMask
			}
			recs[j] = rc
		}
		cnt := uint64(r.IntN(recWindow + 1))
		var want uint32
		for j := range cnt {
			if (sd&recs[j].sdm^recs[j].sd)|(misc&recs[j].miscMask^recs[j].misc) == 0 {
				want |= 1 << j
			}
		}
		if got := winMask((*[recWindow]trec)(recs), sd, misc, cnt); got != want {
			t.Fatalf("count %d: winMask %08b, the loop %08b (records %+v)", cnt, got, want, recs)
		}
		if cnt > 0 && want>>(cnt-1) != 0 {
			seen[cnt]++
		}
	}
	for c, n := range seen[1:] {
		if n == 0 {
			t.Fatalf("no window of count %d whose last record passes", c+1)
		}
	}
}

// TestPaddedWalks: the pair walks of a two-tree set (treeLookup2of2,
// vecEntry2of2) take treePad levels of each tree without a branch, which
// is right only if padDepth leaves every leaf at least treePad loads from
// its root and every packet at the leaf it reached before. For the 1k
// ClassBench-style set, a set whose two trees are a leaf each (their
// roots), and the windows' set of long leaves, with windows and, where a
// vector stub runs here, with blocks and the pair walk (no lanes): every
// word the walks can reach, level by level, is a leaf only from treePad
// on; each packet's leaf in each tree is the one an unpadded build of the
// same set reaches; and DecideBurst decides as the rule set does, on
// traces in which one packet in 37 or so is not IP (those walk too, and
// must still decide nothing).
func TestPaddedWalks(t *testing.T) {
	defer func(v bool) { vecScan = v }(vecScan)
	defer func(v bool) { lanesWalk = v }(lanesWalk)
	defer func(v bool) { treePadWalks = v }(treePadWalks)
	lanesWalk = false
	vecs := []bool{false}
	if vecScan {
		vecs = append(vecs, true)
	}
	cb := classBench(nil, 1000, true)
	two := &rule.Set{Rules: []rule.Rule{
		{ID: "src", Action: rule.Drop, Match: rule.Match{Src: netip.MustParsePrefix("10.1.0.0/16")}},
		{ID: "dst", Action: rule.Drop, Match: rule.Match{Dst: netip.MustParsePrefix("192.0.2.0/24"), Proto: []uint8{rule.ProtoUDP}}},
	}}
	long, lfs := windowLongSet()
	r := rand.New(rand.NewPCG(5, 9))
	cfs := append([]rule.Fields(nil), cb.fs[:8192]...)
	tfs := make([]rule.Fields, 4096)
	for i := range cfs {
		if i%37 == 0 {
			cfs[i].Family = 0
		}
	}
	for i := range tfs {
		tfs[i] = rule.Fields{Family: rule.IPv4, Proto: []uint8{rule.ProtoTCP, rule.ProtoUDP}[r.IntN(2)], L4: true, Frag: rule.NotFragment,
			SrcPort: uint16(r.IntN(65536)), DstPort: uint16(r.IntN(65536)), Length: 100,
			Src: rule.AddrFrom(netip.AddrFrom4([4]byte{10, byte(r.IntN(3)), byte(r.IntN(256)), 1})),
			Dst: rule.AddrFrom(netip.AddrFrom4([4]byte{192, 0, byte(1 + r.IntN(3)), 7}))}
		if i%37 == 0 {
			tfs[i].Family = 0
		}
	}
	for _, vec := range vecs {
		vecScan = vec
		for _, c := range []struct {
			name string
			set  *rule.Set
			fs   []rule.Fields
		}{{"classbench1k", cb.set, cfs}, {"roots", two, tfs}, {"long", long, lfs}} {
			t.Run(fmt.Sprintf("%s/blocks=%v", c.name, vec), func(t *testing.T) {
				treePadWalks = true
				tab, err := compile(c.set, treesForce)
				if err != nil {
					t.Fatal(err)
				}
				treePadWalks = false
				off, err := compile(c.set, treesForce)
				if err != nil {
					t.Fatal(err)
				}
				tr := tab.tr
				if tr == nil || len(tr.t) != 2 || tr.compact || !tr.padded || off.tr.padded || tr.vec != vec {
					t.Fatalf("trees %v: want two padded trees (blocks %v)", tr != nil, vec)
				}
				for i := range tr.t {
					d := &tr.t[i]
					level := map[uint64]bool{d.root: true}
					for depth := 0; len(level) > 0; depth++ {
						next := map[uint64]bool{}
						for w := range level {
							if w&treeLeaf != 0 {
								if depth < treePad {
									t.Fatalf("tree %d: leaf %#x at depth %d", i, w, depth)
								}
								continue
							}
							for j := uint32(w); j <= uint32(w)+uint32(w>>32&0xffff); j++ {
								next[d.nodes[j]] = true
							}
						}
						level = next
					}
				}
				out := make([]int32, len(c.fs))
				tab.DecideBurst(c.fs, out)
				decided := 0
				for i := range c.fs {
					f := &c.fs[i]
					k := treeKey{f.Src.Hi, f.Dst.Hi, miscWord(f) | tr.miscBits(f)}
					for ti := range tr.t {
						if got, want := tr.t[ti].walk(&k), off.tr.t[ti].walk(&k); got != want {
							t.Fatalf("packet %d, tree %d: leaf %#x, unpadded %#x", i, ti, got, want)
						}
					}
					if want := c.set.Decide(f); int(out[i]) != want {
						t.Fatalf("packet %d %+v: decided %d, reference %d", i, f, out[i], want)
					} else if want >= 0 {
						decided++
					}
				}
				if decided < len(c.fs)/8 {
					t.Fatalf("%d of %d packets decided: the set tests little", decided, len(c.fs))
				}
				t.Logf("%d of %d packets decided; nodes %d and %d, unpadded %d and %d", decided, len(c.fs),
					len(tr.t[0].nodes), len(tr.t[1].nodes), len(off.tr.t[0].nodes), len(off.tr.t[1].nodes))
			})
		}
	}
}

// windowLongSet is a set of two trees whose leaves are longer than a
// window, and a trace for it in which one packet in about 50 is not IP.
func windowLongSet() (*rule.Set, []rule.Fields) {
	long := &rule.Set{}
	for i := range 24 {
		lo := uint32(60 + 20*i)
		long.Rules = append(long.Rules,
			rule.Rule{ID: fmt.Sprint("src", i), Priority: uint32(i % 5), Action: rule.Drop,
				Match: rule.Match{Src: netip.MustParsePrefix("10.1.0.0/16"), Length: rule.Ranges{{Lo: lo, Hi: lo + 150}}}},
			rule.Rule{ID: fmt.Sprint("dst", i), Priority: uint32(i % 3), Action: rule.Drop,
				Match: rule.Match{Dst: netip.MustParsePrefix("192.0.2.0/24"), Length: rule.Ranges{{Lo: lo + 7, Hi: lo + 90}}}})
	}
	for i := range 6 {
		long.Rules = append(long.Rules, rule.Rule{ID: fmt.Sprint("short", i), Priority: 2, Action: rule.Drop,
			Match: rule.Match{Dst: netip.PrefixFrom(netip.AddrFrom4([4]byte{198, 51, byte(i), 0}), 24), Proto: []uint8{rule.ProtoUDP}}})
	}
	r := rand.New(rand.NewPCG(7, 11))
	lfs := make([]rule.Fields, 4096)
	for i := range lfs {
		src := netip.AddrFrom4([4]byte{10, byte(r.IntN(3)), byte(r.IntN(256)), byte(r.IntN(256))})
		dst := netip.AddrFrom4([4]byte{[]byte{192, 198}[r.IntN(2)], []byte{0, 51}[r.IntN(2)], byte(r.IntN(8)), byte(r.IntN(256))})
		if r.IntN(2) == 0 {
			dst = netip.AddrFrom4([4]byte{192, 0, 2, byte(r.IntN(256))})
		}
		lfs[i] = rule.Fields{Family: rule.IPv4, Proto: []uint8{rule.ProtoTCP, rule.ProtoUDP}[r.IntN(2)], L4: true, Frag: rule.NotFragment,
			SrcPort: uint16(r.IntN(65536)), DstPort: uint16(r.IntN(65536)), Length: uint32(40 + r.IntN(700)),
			Src: rule.AddrFrom(src), Dst: rule.AddrFrom(dst)}
		if r.IntN(50) == 0 {
			lfs[i].Family = 0 // not IP
		}
	}
	return long, lfs
}
