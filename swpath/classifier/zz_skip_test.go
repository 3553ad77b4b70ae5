package classifier

import (
	"testing"
)

func TestZZSkip(t *testing.T) {
	for _, n := range []int{10000, 100000} {
		wl := classBench(t, n, true)
		c, _ := New(wl.set)
		tr := c.Table().tr
		var skip0, skip1, empty0, empty1 int
		for i := range wl.fs {
			f := &wl.fs[i]
			misc := miscWord(f) | tr.topBits(f)
			k := treeKey{f.Src.Hi, f.Dst.Hi, misc}
			key := cblockKey(f, misc)
			var best, minr [2]uint32
			for ti := 0; ti < 2; ti++ {
				d := &tr.t[ti]
				nn := d.walk(&k)
				b := d.cblock(uint32(nn) / 8)
				lanes := leafLanes(nn)
				best[ti], minr[ti] = treeNoRank, treeNoRank
				for j := 0; j < 8; j++ {
					if lanes>>j&1 != 0 {
						minr[ti] = min(minr[ti], b.e[j]&laneEnt)
					}
				}
				m := cblockMask(&key, &b) & lanes
				for j := 0; j < 8; j++ {
					if m>>j&1 != 0 {
						best[ti] = min(best[ti], b.e[j]&laneEnt)
					}
				}
			}
			if minr[0] == treeNoRank {
				empty0++
			} else if minr[0] >= best[1] {
				skip0++
			}
			if minr[1] == treeNoRank {
				empty1++
			} else if minr[1] >= best[0] {
				skip1++
			}
		}
		N := len(wl.fs)
		t.Logf("n=%d tree0 empty %.1f%% skippable-after-tree1 %.1f%%; tree1 empty %.1f%% skippable-after-tree0 %.1f%%", n,
			100*float64(empty0)/float64(N), 100*float64(skip0)/float64(N), 100*float64(empty1)/float64(N), 100*float64(skip1)/float64(N))
	}
}
