package classifier

import (
	"testing"
)

func TestDebugSweep(t *testing.T) {
	for _, n := range []int{1000, 10000, 100000} {
		wl := classBench(nil, n, false)
		for _, cl := range []int{8, 16, 32} {
			for _, st := range []uint8{4, 8} {
				for _, ps := range []uint8{4, 16} {
					collisionLimit, addrStep4, portStep = cl, st, ps
					tab, _ := Compile(wl.set)
					pr := 0
					chk := 0
					for i := range wl.fs {
						pr += tab.Probes(&wl.fs[i])
					}
					_ = chk
					t.Logf("n=%d cl=%d step=%d pstep=%d tables=%d probes/pkt=%.2f MiB=%.1f build=%v", n, cl, st, ps, len(tab.tables), float64(pr)/float64(len(wl.fs)), float64(tab.memBytes())/(1<<20), tab.build)
				}
			}
		}
	}
}
