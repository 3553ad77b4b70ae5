package classifier

import (
	"math/rand/v2"
	"testing"

	"github.com/scrubd/scrubd/swpath/rule"
)

// TestLaneKeys: laneKeys (the stub, laneKeys8, where the CPU has the lane
// walk) writes the lane words and returns the IP packets that laneKeysGo
// does, for groups of every length from 1 to treeGroup of packets whose
// every byte that the words read is random (protocols 0-255, families 0,
// 4, 6 and others, L4 either way), and leaves the lanes past the group
// as they were. The group ends where an inaccessible page begins, so a
// read past its last packet faults.
func TestLaneKeys(t *testing.T) {
	if !lanesKeys {
		// A CPU feature, which no package installs: the mutation check
		// reports the mutations of the lane stubs as skipped there too.
		t.Skip("no laneKeys8 here: it needs AVX-512 (F, VL, BW) and BMI2 on amd64")
	}
	rng := rand.New(rand.NewPCG(3, 9))
	tr := &trees{}
	for n := 1; n <= treeGroup; n++ {
		fs := guardedFields(t, n)
		for i := range fs {
			f := &fs[i]
			f.Family = rule.Family([]uint8{0, 4, 6, uint8(rng.IntN(256))}[rng.IntN(4)])
			f.Proto = uint8(rng.IntN(256))
			if rng.IntN(4) == 0 {
				f.Proto = []uint8{rule.ProtoTCP, rule.ProtoUDP, rule.ProtoSCTP}[rng.IntN(3)]
			}
			f.L4 = rng.IntN(2) == 0
			f.Frag, f.DSCP, f.TCPFlags = rule.Frag(rng.Uint32()), uint8(rng.Uint32()), uint8(rng.Uint32())
			f.ICMPType, f.ICMPCode = uint8(rng.Uint32()), uint8(rng.Uint32())
			f.SrcPort, f.DstPort, f.Length = uint16(rng.Uint32()), uint16(rng.Uint32()), rng.Uint32()
			f.Src, f.Dst = rule.Addr{Hi: rng.Uint64(), Lo: rng.Uint64()}, rule.Addr{Hi: rng.Uint64(), Lo: rng.Uint64()}
		}
		var got, want laneScratch
		for i := range treeGroup {
			for w := range 3 {
				want.keys[w][i] = rng.Uint64()
			}
			want.sds[i], want.flags[i] = rng.Uint64(), rng.Uint32()
		}
		got = want
		gip, wip := tr.laneKeys(fs, &got), tr.laneKeysGo(fs, &want)
		if gip != wip {
			t.Fatalf("%d packets: laneKeys counts %d IP packets, laneKeysGo %d", n, gip, wip)
		}
		if got.keys != want.keys || got.sds != want.sds || got.flags != want.flags {
			for i := range treeGroup {
				if got.keys[0][i] != want.keys[0][i] || got.keys[1][i] != want.keys[1][i] || got.keys[2][i] != want.keys[2][i] ||
					got.sds[i] != want.sds[i] || got.flags[i] != want.flags[i] {
					t.Fatalf("%d packets: lane %d (%+v): keys %#x %#x %#x sds %#x flags %#x, laneKeysGo's %#x %#x %#x %#x %#x",
						n, i, fs[min(i, n-1)], got.keys[0][i], got.keys[1][i], got.keys[2][i], got.sds[i], got.flags[i],
						want.keys[0][i], want.keys[1][i], want.keys[2][i], want.sds[i], want.flags[i])
				}
			}
		}
	}
}
