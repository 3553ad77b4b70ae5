package classifier

import (
	"testing"

	"github.com/scrubd/scrubd/swpath/traffic"
)

// TestPrefilterNeverMisses checks, table by table, that every table holding
// a slot for a packet's masked key is among the prefilter's candidates, and
// that the prefilter rules out some tables (else it is useless).
func TestPrefilterNeverMisses(t *testing.T) {
	sets := map[string]uint64{"random": 0, "classbench": 1}
	for name, kind := range sets {
		for seed := uint64(1); seed <= 5; seed++ {
			set := traffic.RandomRules(seed, 400)
			if kind == 1 {
				set = traffic.ClassBenchRules(seed, 3000)
			}
			tab, err := compile(set, treesOff) // the prefilter is built with the hash tables
			if err != nil {
				t.Fatal(err)
			}
			fs, _ := burstFields(t, set, seed, 2000)
			skipped := 0
			for i := range fs {
				f := &fs[i]
				if f.Family == 0 {
					continue
				}
				cand := tab.pf.candidates(f.Src.Hi, f.Dst.Hi)
				k := keyOf(f)
				for ti := range tab.tables {
					ht := &tab.tables[ti]
					mk := k.and(ht.mask)
					has := false
					for _, s := range ht.slots {
						if s.n != 0 && (key{s.srcHi, s.srcLo, s.dstHi, s.dstLo, s.misc}) == mk {
							has = true
						}
					}
					if cand&pfBit(ti) == 0 {
						skipped++
						if has {
							t.Fatalf("%s seed %d packet %d: table %d (%+v) holds its key but is not a candidate", name, seed, i, ti, ht.shape)
						}
					}
				}
			}
			if skipped == 0 && len(tab.tables) > 1 {
				t.Errorf("%s seed %d: the prefilter ruled out no table of %d", name, seed, len(tab.tables))
			}
		}
	}
}
