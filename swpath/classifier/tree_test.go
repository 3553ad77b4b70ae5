package classifier

import (
	"fmt"
	"math/bits"
	"math/rand/v2"
	"net/netip"
	"reflect"
	"slices"
	"testing"

	"github.com/scrubd/scrubd/swpath/rule"
	"github.com/scrubd/scrubd/swpath/traffic"
)

// TestTreesChosen checks which lookup Compile picks: the decision trees for
// ClassBench-style sets and random sets of several hash tables, the hash
// tables for a set of one table (decideSingle) and for a set whose entries
// no cut separates (every rule keys nothing but a length range, so every
// entry lands in one leaf longer than treeMaxLeaf); and that the forced
// other lookup decides the same packets the same way as the reference.
func TestTreesChosen(t *testing.T) {
	wild := &rule.Set{}
	for i := range treeMaxLeaf + 1 {
		wild.Rules = append(wild.Rules, rule.Rule{ID: fmt.Sprint("len", i), Priority: uint32(i), Action: rule.Drop,
			Match: rule.Match{Length: rule.Ranges{{Lo: uint32(100 + 3*i), Hi: uint32(101 + 3*i)}}, Src: netip.MustParsePrefix("0.0.0.0/0")}})
	}
	cases := []struct {
		name             string
		set              *rule.Set
		trees, buildable bool
	}{
		{"classbench 1k", traffic.ClassBenchRules(1, 1000), true, true},
		{"classbench 10k", traffic.ClassBenchRules(2, 10000), true, true},
		{"random 300", traffic.RandomRules(31, 300), true, true},
		{"source workload", traffic.SourceWorkload(), false, true},
		{"length ranges only", wild, false, false},
	}
	for _, c := range cases {
		tab, err := Compile(c.set)
		if err != nil {
			t.Fatal(err)
		}
		if got := tab.tr != nil; got != c.trees {
			t.Errorf("%s: trees %v, want %v (%d hash tables)", c.name, got, c.trees, tab.ntables)
		}
		// Only the lookup that decides is built, and Stats says which.
		st := tab.Stats()
		if tab.tr != nil {
			if tab.tables != nil || tab.entries != nil || tab.chk != nil || tab.pf.slots != nil || tab.pf.src8 != nil || tab.pf.dst8 != nil {
				t.Errorf("%s: trees decide, but hash tables are built: %d tables, %d entries, %d prefilter slots", c.name, len(tab.tables), len(tab.entries), len(tab.pf.slots))
			}
			if st.Tuples != 0 || st.Trees != len(tab.tr.t) || st.Trees == 0 || st.Entries != len(tab.tr.ents) {
				t.Errorf("%s: trees decide, stats %+v", c.name, st)
			}
		} else if st.Trees != 0 || st.Tuples != len(tab.tables) || st.Tuples == 0 || st.Entries != len(tab.entries) {
			t.Errorf("%s: hash tables decide, stats %+v", c.name, st)
		}
		// Bursts: packet by packet for the 1k set's trees (in the cache),
		// in groups for the 10k set's.
		if tab.tr != nil && tab.tr.walk != (c.name != "classbench 10k") {
			t.Errorf("%s: bursts packet by packet: %v", c.name, tab.tr.walk)
		}
		forced, err := compile(c.set, treesForce)
		if err != nil {
			t.Fatal(err)
		}
		if got := forced.tr != nil; got != c.buildable {
			t.Errorf("%s: trees built %v, want %v", c.name, got, c.buildable)
		}
		g := traffic.NewGenerator(traffic.Config{Seed: 5, Rules: c.set, RuleFraction: 0.9, Odd: true, Sizes: traffic.Sizes{Min: 64, Max: 1518}})
		checkAgainstReference(t, c.name, c.set, parseAll(g.Frames(1500)))
	}
	if tr := (&Table{}).buildTrees(nil); tr == nil || len(tr.t) != 0 {
		t.Errorf("empty set: %+v", tr)
	}
}

// TestTreeNodeWords checks the walk against hand-made trees: a root that
// cuts the top 4 bits of the destination address, whose child 0xc cuts
// the destination port's top 8 bits, with a leaf at 0x00 (ports 0-255);
// every other child an empty leaf.
func TestTreeNodeWords(t *testing.T) {
	d := dtree{rec: make([]trec, 3)}
	d.nodes = make([]uint64, 16+256)
	for i := range d.nodes {
		d.nodes[i] = treeLeaf
	}
	d.root = 1<<56 | 60<<48 | 15<<32            // key word 1, shift 60, 16 children at 0
	d.nodes[0xc] = 2<<56 | 8<<48 | 255<<32 | 16 // key word 2, shift 8, 256 children at 16
	d.nodes[16] = treeLeaf | 2<<32 | 1          // records 1 and 2
	d.nodes[3] = treeLeaf | 1<<32               // record 0
	for _, c := range []struct {
		dst  string
		port uint16
		want uint64
	}{
		{"192.0.2.1", 80, treeLeaf | 2<<32 | 1},
		{"207.255.255.255", 255, treeLeaf | 2<<32 | 1},
		{"192.0.2.1", 256, treeLeaf},
		{"208.0.0.0", 80, treeLeaf},
		{"48.1.2.3", 9999, treeLeaf | 1<<32},
	} {
		f := rule.Fields{Family: rule.IPv4, Proto: rule.ProtoUDP, DstPort: c.port, Dst: rule.AddrFrom(netip.MustParseAddr(c.dst))}
		k := treeKey{f.Src.Hi, f.Dst.Hi, miscWord(&f)}
		if got := d.walk(&k); got != c.want {
			t.Errorf("%s port %d: leaf %#x, want %#x", c.dst, c.port, got, c.want)
		}
	}
}

// TestTreesIPv6LikeIPv4: a ClassBench-style set written in IPv6 (each IPv4
// prefix a.b.c.d/n as 2001:db8:aabb:ccdd::/(32+n), as aclbench -ipv6 does)
// cuts into trees about as big as the IPv4 set's: the shared top 32 bits
// do not count towards an address being small (with them counted, every
// IPv6 prefix looked small and the 10k set took 3.6 times the records).
func TestTreesIPv6LikeIPv4(t *testing.T) {
	set4, set6 := classBenchSet(10000, false), classBenchSet(10000, true)
	var recs, full, nodes [2]int
	for i, set := range []*rule.Set{set4, set6} {
		tab, err := Compile(set)
		if err != nil {
			t.Fatal(err)
		}
		if tab.tr == nil {
			t.Fatalf("set %d: no trees", i)
		}
		_, nodes[i], recs[i] = tab.tr.stats()
		for _, d := range tab.tr.t {
			for _, r := range d.records() {
				if r.miscMask&chkFullBit != 0 {
					full[i]++
				}
			}
		}
	}
	if recs[1] > recs[0]*5/4 {
		t.Errorf("leaf records: IPv6 %d, IPv4 %d: more than 1.25 times", recs[1], recs[0])
	}
	// A node skips the shared top 32 bits even when some of its entries
	// are wildcards there (skipFrom), so it cuts the bits below them.
	if nodes[1] > nodes[0]*21/20 {
		t.Errorf("node words: IPv6 %d, IPv4 %d: more than 1.05 times", nodes[1], nodes[0])
	}
	// The shared top 32 bits are in the scan checks (tree_v6.go): no more
	// records need holds than in IPv4.
	if full[1] > full[0]*5/4 {
		t.Errorf("leaf records that need holds: IPv6 %d, IPv4 %d: more than 1.25 times", full[1], full[0])
	}
	g := traffic.NewGenerator(traffic.Config{Seed: 8, Rules: set6, RuleFraction: 0.9, Odd: true})
	checkAgainstReference(t, "classbench 10k ipv6", set6, parseAll(g.Frames(3000)))
}

// TestTreeCounts: sets whose rules fall into one to five of the prefix
// groups (a long source prefix, a long destination prefix, a medium
// source, a medium destination, the rest: see buildTrees) make that many
// trees, the medium groups joined to the long ones (treeJoin) or not, and
// each decides as the linear reference does, per packet and in bursts on
// both burst paths (checkAgainstReference). The per-packet walk keeps up
// to four walks in registers and takes a loop over the trees for five,
// and sets of two trees test two blocks (leafScan2) where those of three
// or four test four, so all are covered.
func TestTreeCounts(t *testing.T) {
	for _, join := range []bool{true, false} {
		t.Run(fmt.Sprint("join=", join), func(t *testing.T) {
			defer func(v bool) { treeJoin = v }(treeJoin)
			treeJoin = join
			treeCounts(t, join)
		})
	}
}

func treeCounts(t *testing.T, join bool) {
	type span struct{ lo, hi int }
	groups := []struct{ src, dst span }{
		{span{16, 32}, span{0, 32}},
		{span{0, 15}, span{16, 32}},
		{span{8, 15}, span{0, 15}},
		{span{0, 7}, span{8, 15}},
		{span{0, 7}, span{0, 7}},
	}
	r := rand.New(rand.NewPCG(7, 11))
	prefix := func(s span) netip.Prefix {
		a := netip.AddrFrom4([4]byte{10, byte(r.IntN(4)), byte(r.IntN(256)), byte(r.IntN(256))})
		return netip.PrefixFrom(a, s.lo+r.IntN(s.hi-s.lo+1)).Masked()
	}
	for _, use := range [][]int{{0}, {0, 1}, {0, 1, 4}, {0, 1, 2, 3}, {0, 1, 2, 3, 4}, {2, 4}} {
		set := &rule.Set{}
		for i := range 300 {
			g := groups[use[i%len(use)]]
			m := rule.Match{Src: prefix(g.src), Dst: prefix(g.dst), Proto: []uint8{[]uint8{rule.ProtoTCP, rule.ProtoUDP}[r.IntN(2)]}}
			if p := uint32(r.IntN(1024)); r.IntN(2) == 0 {
				m.DstPort = rule.Ranges{{Lo: p, Hi: p + uint32(r.IntN(4))}}
			}
			set.Rules = append(set.Rules, rule.Rule{ID: fmt.Sprint("r", i), Priority: uint32(r.IntN(50)), Action: rule.Drop, Match: m})
		}
		tab, err := Compile(set)
		if err != nil {
			t.Fatal(err)
		}
		if tab.tr == nil {
			t.Fatalf("groups %v: no trees (%d hash tables)", use, tab.ntables)
		}
		want := len(use)
		if join {
			// Groups 2 and 3 join 0 and 1.
			trees := map[int]bool{}
			for _, g := range use {
				trees[map[int]int{0: 0, 1: 1, 2: 0, 3: 1, 4: 4}[g]] = true
			}
			want = len(trees)
		}
		if len(tab.tr.t) != want {
			t.Fatalf("groups %v: %d trees, want %d", use, len(tab.tr.t), want)
		}
		if tab.tr.vec && tab.tr.vec2 != (want <= 2) {
			t.Fatalf("groups %v: %d trees, two blocks a packet %v", use, want, tab.tr.vec2)
		}
		g := traffic.NewGenerator(traffic.Config{Seed: uint64(len(use)), Rules: set, RuleFraction: 0.9})
		name := fmt.Sprintf("groups %v", use)
		if matched := checkAgainstReference(t, name, set, parseAll(g.Frames(1200))); matched < 400 {
			t.Errorf("%s: only %d of 1200 packets matched a rule", name, matched)
		}
	}
}

// TestTreeBurstHeldRecords: records whose entries need Table.holds are
// listed by the burst's scans and checked after them (holdsListed), and
// past the list's room checked in the scan. Every record here needs holds
// (a port range of more than six prefixes): 64 rules under one source
// prefix, overlapping ranges, none separable by a cut, so one leaf holds
// them all and a group's packets list far more records than the list
// holds (or, in compact blocks, whose lanes hold the ranges, none). Both
// burst paths, Decide and the reference must agree.
func TestTreeBurstHeldRecords(t *testing.T) {
	set := &rule.Set{}
	for i := range 64 {
		lo := uint32(1001 + 7*i)
		m := rule.Match{Src: netip.MustParsePrefix("10.0.0.0/16"), Proto: []uint8{rule.ProtoTCP}, DstPort: rule.Ranges{{Lo: lo, Hi: lo + 40}}}
		set.Rules = append(set.Rules, rule.Rule{ID: fmt.Sprint("r", i), Priority: uint32(i % 7), Action: rule.Drop, Match: m})
	}
	r := rand.New(rand.NewPCG(3, 5))
	fs := make([]rule.Fields, 1024)
	for i := range fs {
		src := netip.AddrFrom4([4]byte{10, byte(r.IntN(2)), byte(r.IntN(256)), byte(r.IntN(256))})
		dst := netip.AddrFrom4([4]byte{192, 0, 2, byte(r.IntN(256))})
		fs[i] = rule.Fields{Family: rule.IPv4, Proto: rule.ProtoTCP, L4: true, Frag: rule.NotFragment,
			SrcPort: uint16(r.IntN(65536)), DstPort: uint16(950 + r.IntN(560)),
			Src: rule.AddrFrom(src), Dst: rule.AddrFrom(dst)}
	}
	tab, err := compile(set, treesForce)
	if err != nil {
		t.Fatal(err)
	}
	if tab.tr == nil {
		t.Fatal("no trees")
	}
	// What the first group's scans would list: every record of their
	// leaves that passes its check and needs holds.
	listed := 0
	for i := range fs[:treeGroup] {
		f := &fs[i]
		k := treeKey{f.Src.Hi, f.Dst.Hi, miscWord(f) | tab.tr.topBits(f)}
		sd := scanSD(f)
		for ti := range tab.tr.t {
			d := &tab.tr.t[ti]
			n := d.walk(&k)
			for _, rc := range d.records()[uint32(n) : uint32(n)+uint32(n>>32)&0xffffff] {
				if sd&rc.sdMask() == rc.sd && k[2]&rc.miscMask == rc.misc && rc.miscMask&chkFullBit != 0 {
					listed++
				}
			}
		}
	}
	switch room := len(heldList{}.key); {
	case tab.tr.cvec && listed != 0:
		// Compact blocks hold each entry's one range a side in its lane
		// (clane): no record needs holds.
		t.Fatalf("compact blocks: the first group lists %d records, want none", listed)
	case !tab.tr.cvec && listed <= room:
		t.Fatalf("the first group lists %d records, no more than the list's %d", listed, room)
	}
	if matched := checkAgainstReference(t, "held records", set, fs); matched < 300 || matched > 900 {
		t.Fatalf("%d of %d packets matched a rule", matched, len(fs))
	}
}

// TestTreesBigLeaves: a set of more than treeBigEntries entries is cut
// down to leaves of treeBinthBig (some leaves longer than treeBinth) with
// cuts that copy entries at most treeSpaceBig times, its
// groups of half-long prefixes join the long ones (treeJoin: two trees,
// as a smaller ClassBench-style set makes, where without the join that
// one makes four), and it decides as the reference does on both burst
// paths. Where the lane walk runs, and where bursts take compact blocks
// without it (cvecGroup, which any CPU can run: cblockScan2 is Go where
// no stub is built), the same set is cut down to leaves of treeBinth
// instead (treeOneBlockMax), with the same bound on copies.
func TestTreesBigLeaves(t *testing.T) {
	defer func(v bool) { lanesWalk = v }(lanesWalk)
	defer func(v bool) { cvecGroup = v }(cvecGroup)
	builds := [][2]bool{{false, false}, {false, true}}
	if lanesWalk && vecScan {
		builds = append(builds, [2]bool{true, false})
	}
	for _, b := range builds {
		lanesWalk, cvecGroup = b[0], b[1]
		t.Run(fmt.Sprintf("lanes=%v/cgroup=%v", b[0], b[1]), testTreesBigLeaves)
	}
}

func testTreesBigLeaves(t *testing.T) {
	set := traffic.ClassBenchRules(6000, 6000)
	tab, err := compile(set, treesForce)
	if err != nil {
		t.Fatal(err)
	}
	if tab.tr == nil || len(tab.tr.ents) <= treeBigEntries {
		t.Fatalf("trees %v, %d entries: want trees of more than %d", tab.tr != nil, len(tab.tr.ents), treeBigEntries)
	}
	small, err := compile(traffic.ClassBenchRules(6000, 1000), treesForce)
	if err != nil {
		t.Fatal(err)
	}
	treeJoin = false
	apart, err := compile(traffic.ClassBenchRules(6000, 1000), treesForce)
	treeJoin = true
	if err != nil {
		t.Fatal(err)
	}
	if len(tab.tr.t) != 2 || small.tr == nil || len(small.tr.t) != 2 || apart.tr == nil || len(apart.tr.t) != 4 {
		t.Fatalf("%d trees for %d entries, %v for 1000 rules (%v without the join): want 2, 2 and 4", len(tab.tr.t), len(tab.tr.ents), small.tr != nil && len(small.tr.t) == 2, apart.tr != nil && len(apart.tr.t) == 4)
	}
	// Every entry is in the tree of its group: the source tree holds the
	// entries with a source prefix of 8 bits or more, unless the
	// destination's is 16 or more and the source's under 16.
	for ti := range tab.tr.t {
		d := &tab.tr.t[ti]
		for _, r := range d.records() {
			if r.ent == treeNoRank {
				continue
			}
			e := &tab.tr.ents[r.ent]
			src := e.srcLen >= treeSmallBits || e.srcLen >= treeSmallBits/2 && e.dstLen < treeSmallBits
			if src != (ti == 0) {
				t.Fatalf("entry %d (source /%d, destination /%d) in tree %d", r.ent, e.srcLen, e.dstLen, ti)
			}
		}
	}
	long := 0
	for i := range tab.tr.t {
		d := &tab.tr.t[i]
		for _, n := range d.nodes {
			if c := int(n >> 32 & 0xffffff); n&treeLeaf != 0 && c > treeBinth && c <= treeBinthBig {
				long++
			}
		}
	}
	oneBlock := lanesWalk || cvecGroup
	switch {
	case oneBlock && (long != 0 || tab.tr.vecLong):
		t.Fatalf("lane walk %v, compact blocks without it %v: %d leaves of %d-%d records, two-block scans %v; want none, one-block", lanesWalk, cvecGroup, long, treeBinth+1, treeBinthBig, tab.tr.vecLong)
	case !oneBlock && long == 0:
		t.Fatalf("no leaf of %d-%d records", treeBinth+1, treeBinthBig)
	case cvecGroup && !tab.tr.cvec:
		t.Fatalf("compact blocks without the lane walk: the set has none")
	}
	// Every cut keeps within treeSpaceBig: a node of n entries cutting k
	// bits gives its children at most treeSpaceBig*n + 16 entries, the
	// builder's count (2^k, plus 2^(k-p) for an entry whose prefix covers
	// p of the k bits). A node's entries are those of its parent that
	// agree with the child's index on the bits their masks cover.
	for ti := range tab.tr.t {
		d := &tab.tr.t[ti]
		seen := map[uint32]bool{}
		var ids []uint32
		for _, r := range d.records() {
			if r.ent != treeNoRank && !seen[r.ent] { // not a block's padding
				seen[r.ent] = true
				ids = append(ids, r.ent)
			}
		}
		checkTreeSpace(t, tab, d, d.root, ids, treeSpaceBig)
	}
	pkts := 3000
	if testing.Short() {
		pkts = 1000
	}
	g := traffic.NewGenerator(traffic.Config{Seed: 11, Rules: set, RuleFraction: 0.9, Odd: true})
	fs := parseAll(g.Frames(pkts))
	if m := checkAgainstReference(t, "classbench 6000", set, fs); m < len(fs)/5 {
		t.Errorf("only %d of %d packets matched", m, len(fs))
	}
}

// checkTreeSpace checks the replication bound space at node n of d and
// below, ids being the entries that reach n.
func checkTreeSpace(t *testing.T, tab *Table, d *dtree, n uint64, ids []uint32, space int) {
	t.Helper()
	if n&treeLeaf != 0 {
		return
	}
	w, shift, cm := n>>56&3, n>>48&63, n>>32&0xffff
	k := bits.Len64(cm)
	sum := 1 << k
	kids := make([][]uint32, cm+1)
	for _, id := range ids {
		e := &tab.tr.ents[id]
		val := [3]uint64{e.srcHi, e.dstHi, e.misc}[w]
		mask := [3]uint64{hiMask(e.srcLen), hiMask(e.dstLen), e.miscMask}[w] >> shift & cm
		sum += 1 << (k - bits.OnesCount64(mask))
		for c := range kids {
			if (uint64(c)^val>>shift)&mask == 0 {
				kids[c] = append(kids[c], id)
			}
		}
	}
	if sum > space*len(ids)+16 {
		t.Fatalf("a node of %d entries cuts %d bits of word %d: %d > %d*%d+16", len(ids), k, w, sum, space, len(ids))
	}
	for c := range kids {
		checkTreeSpace(t, tab, d, d.nodes[uint32(n)+uint32(c)], kids[c], space)
	}
}

// TestTreesIPv6TopBits: the trees' scan checks cover an IPv6 prefix's top
// 32 bits with a bit of the misc word (tree_v6.go) when they are the
// set's most common ones, and leave the rest to holds. Rules with that top
// (2001:db8::/32), with another (2a00:1450::/32) and with prefixes shorter
// than 32 bits decide as the linear reference does, for packets whose
// addresses have either top, a top one bit off and one no rule has, on
// the per-packet walk with blocks (1k rules) and the groups (10k).
func TestTreesIPv6TopBits(t *testing.T) {
	sizes := []int{1000, 10000}
	if testing.Short() {
		sizes = sizes[:1]
	}
	for _, n := range sizes {
		set4 := traffic.ClassBenchRules(uint64(n), n)
		set := &rule.Set{Rules: append([]rule.Rule(nil), set4.Rules...)}
		for i := range set.Rules {
			conv := func(p netip.Prefix, j int) netip.Prefix {
				if !p.IsValid() {
					return p
				}
				a := p.Addr().As4()
				b := [16]byte{0x20, 0x01, 0x0d, 0xb8, a[0], a[1], a[2], a[3]}
				switch {
				case (i+j)%5 == 1: // another top
					b[0], b[1], b[2], b[3] = 0x2a, 0x00, 0x14, 0x50
				case (i+j)%41 == 2: // shorter than the top: 2001:d00::/20 and shorter
					return netip.PrefixFrom(netip.AddrFrom16(b), 20-p.Bits()%8).Masked()
				}
				return netip.PrefixFrom(netip.AddrFrom16(b), 32+p.Bits()).Masked()
			}
			m := &set.Rules[i].Match
			m.Src, m.Dst = conv(m.Src, 0), conv(m.Dst, 1)
		}
		tab, err := Compile(set)
		if err != nil {
			t.Fatal(err)
		}
		if tab.tr == nil || tab.tr.top6 != [2]uint32{0x20010db8, 0x20010db8} {
			t.Fatalf("%d rules: trees %v, want them with the top 2001:db8 on both sides", n, tab.tr != nil)
		}
		g := traffic.NewGenerator(traffic.Config{Seed: 3, Rules: set, RuleFraction: 0.95, IPv6Fraction: 1})
		fs := parseAll(g.Frames(3000))
		tops := []uint64{0x20010db8, 0x2a001450, 0x20010db9, 0x20010d12, 0x30000000}
		for i := range fs {
			f := &fs[i]
			if f.Family != rule.IPv6 {
				continue
			}
			// Most packets keep the top a rule gave them.
			if x := i % 7; x < len(tops) {
				f.Src.Hi = f.Src.Hi&0xffffffff | tops[x]<<32
			}
			if x := i % 11; x < len(tops) {
				f.Dst.Hi = f.Dst.Hi&0xffffffff | tops[x]<<32
			}
		}
		if m := checkAgainstReference(t, fmt.Sprintf("%d rules, mixed IPv6 tops", n), set, fs); m < len(fs)/10 {
			t.Fatalf("%d rules: %d of %d packets matched a rule: the traffic does not probe the rules", n, m, len(fs))
		}
	}
}

// TestTreeBurstSizes: the trees' group walk decides bursts of every size
// as Decide does, single packets (which take the single-packet walk),
// groups that end mid-burst, and one scratch reused by every burst (a
// worker's) as well as DecideBurst's own.
func TestTreeBurstSizes(t *testing.T) {
	set := traffic.ClassBenchRules(5, 2000)
	c, err := New(set)
	if err != nil {
		t.Fatal(err)
	}
	tab := c.Table()
	if tab.tr == nil {
		t.Fatal("no trees")
	}
	tab.tr.walk, tab.tr.vec = false, false // the group walk, whatever the size chose
	g := traffic.NewGenerator(traffic.Config{Seed: 8, Rules: set, RuleFraction: 0.9})
	fs := parseAll(g.Frames(4000))
	lens := make([]uint32, len(fs))
	want := make([]int32, len(fs))
	for i := range fs {
		want[i] = int32(tab.Decide(&fs[i]))
		lens[i] = 64
	}
	sizes := []int{1, 2, 3, 5, 64, 127, 128, 129, 200, 256, 1}
	w := c.NewWorker()
	defer w.Close()
	w.SetCachePolicy(CacheNever)
	sc := new(treeScratch)
	out := make([]int32, 256)
	res := make([]Result, 256)
	for k, i := 0, 0; i < len(fs); k++ {
		n := min(sizes[k%len(sizes)], len(fs)-i)
		for api := range 3 {
			switch api {
			case 0:
				tab.treeBurst(fs[i:i+n], out, sc)
			case 1:
				tab.DecideBurst(fs[i:i+n], out)
			default:
				w.ClassifyBurst(fs[i:i+n], lens[i:i+n], res)
				for j := range n {
					out[j] = res[j].Rule
				}
			}
			for j := range n {
				if out[j] != want[i+j] {
					t.Fatalf("api %d, burst of %d at %d: packet %d decided %d, Decide %d", api, n, i, i+j, out[j], want[i+j])
				}
			}
		}
		i += n
	}
}

// records returns d's leaf records as trec, the compact ones (crec)
// expanded.
func (d *dtree) records() []trec {
	if n := max(len(d.cblk), len(d.tblk)); n > 0 {
		out := make([]trec, 0, vecBlock*n)
		for i := range n {
			b := d.cblock(uint32(i))
			for j := range vecBlock {
				out = append(out, cblockRecord(&b, j))
			}
		}
		return out
	}
	if d.crec == nil {
		return d.rec
	}
	out := make([]trec, len(d.crec))
	for j := range d.crec {
		c := &d.crec[j]
		out[j] = trec{sd: c.sd, sdm: c.sdMask(), misc: c.misc, miscMask: c.miscMask, ent: c.ent(), rule: c.rule}
	}
	return out
}

// toCompact converts the trees' leaf records to crec (trees without
// blocks), so that the group walk can run on small trees; false when a
// record has no compact form.
func (tr *trees) toCompact() bool {
	for i := range tr.t {
		d := &tr.t[i]
		if tr.window {
			// Without the windows' padding and long marks.
			d.rec = d.rec[:max(len(d.rec)-recWindow, 1)]
			d.root &^= treeLong
			for j := range d.nodes {
				d.nodes[j] &^= treeLong
			}
		}
		d.crec = make([]crec, len(d.rec))
		for j := range d.rec {
			c, ok := crecOf(&d.rec[j])
			if !ok {
				return false
			}
			d.crec[j] = c
		}
		d.rec = nil
	}
	tr.compact, tr.window = true, false
	return true
}

// TestCompactRecords: a compact leaf record (crec) keeps the address mask
// of every pair of prefix lengths, the entry and the rule, refuses masks
// that are not two prefixes and entries past recMaxEnts, orders its keys
// as its entries; the trees of sets that take the group walk hold only
// compact records (32 bytes) and small ones only trec, and both decide
// and match as the linear reference does.
func TestCompactRecords(t *testing.T) {
	if sz := reflect.TypeFor[crec]().Size(); sz != 32 {
		t.Fatalf("crec is %d bytes, want 32", sz)
	}
	for s := range uint8(33) {
		for d := range uint8(33) {
			m := hiMask(s) | hiMask(d)>>32
			for _, ent := range []uint32{0, 1, 12345, recMaxEnts - 1} {
				r := trec{sd: 0x0a0b0c0d_c0a80001 & m, sdm: m, misc: 7, miscMask: chkFullBit | 0xff, ent: ent, rule: int32(ent) - 3}
				c, ok := crecOf(&r)
				if !ok {
					t.Fatalf("/%d /%d entry %d: no compact form", s, d, ent)
				}
				back := trec{sd: c.sd, sdm: c.sdMask(), misc: c.misc, miscMask: c.miscMask, ent: c.ent(), rule: c.rule}
				if back != r {
					t.Fatalf("/%d /%d: %+v became %+v", s, d, r, back)
				}
			}
		}
	}
	for _, m := range []uint64{0x00ff0000_00000000, 0xffffffff_0000ff00, 0x80000000_00000001, 0xfffffff7_ffffffff} {
		if _, ok := crecOf(&trec{sdm: m}); ok {
			t.Fatalf("mask %#x: a compact form", m)
		}
	}
	if _, ok := crecOf(&trec{ent: recMaxEnts}); ok {
		t.Fatal("entry recMaxEnts: a compact form")
	}
	lo, _ := crecOf(&trec{sdm: ^uint64(0), ent: 41})
	hi, _ := crecOf(&trec{ent: 42})
	if lo.key >= hi.key || hi.key >= recNoKey {
		t.Fatalf("keys %#x (entry 41, longest mask), %#x (entry 42): out of order", lo.key, hi.key)
	}

	defer func(v int) { treeLanesMax = v }(treeLanesMax)
	defer func(v bool) { treeCBlocks = v }(treeCBlocks)
	treeLanesMax, treeCBlocks = 0, false // the group walk at 10k rules with lanes too
	big := traffic.ClassBenchRules(6000, 10000)
	for _, set := range []*rule.Set{big, traffic.ClassBenchRules(6000, 1000)} {
		tab, err := compile(set, treesForce)
		if err != nil {
			t.Fatal(err)
		}
		tr := tab.tr
		if tr == nil || tr.compact == tr.walk || tr.compact != (set == big) {
			t.Fatalf("%d rules: trees %v, walk %v, compact %v (%d entries)", len(set.Rules), tr != nil, tr != nil && tr.walk, tr != nil && tr.compact, len(tab.tr.ents))
		}
		for i := range tr.t {
			if d := &tr.t[i]; (len(d.crec) == 0) != (d.rec != nil) || (len(d.rec) == 0) != (d.crec != nil) {
				t.Fatalf("%d rules, tree %d: %d trec and %d crec", len(set.Rules), i, len(d.rec), len(d.crec))
			}
		}
		g := traffic.NewGenerator(traffic.Config{Seed: 17, Rules: set, RuleFraction: 0.95})
		fs := parseAll(g.Frames(3000))
		out := make([]int32, len(fs))
		tab.DecideBurst(fs, out)
		matched := 0
		for i := range fs {
			want := set.Decide(&fs[i])
			if int(out[i]) != want || tab.Decide(&fs[i]) != want {
				t.Fatalf("%d rules, packet %d: burst %d, Decide %d, reference %d", len(set.Rules), i, out[i], tab.Decide(&fs[i]), want)
			}
			got := tab.AppendMatching(nil, &fs[i])
			slices.Sort(got)
			if ref := refMatching(set, &fs[i]); !slices.Equal(got, ref) {
				t.Fatalf("%d rules, packet %d: matching %v, reference %v", len(set.Rules), i, got, ref)
			}
			if want >= 0 {
				matched++
			}
		}
		if matched < len(fs)/4 {
			t.Fatalf("%d rules: %d of %d packets matched", len(set.Rules), matched, len(fs))
		}
	}
}
