//go:build purego || !amd64

package classifier

import "github.com/scrubd/scrubd/swpath/rule"

// lanesStub: the lane walk's stubs are built (walkLanes8, scanLanes2).
const lanesStub = false

// lanesWalk: no stub here (arm64's Advanced SIMD has no gather), so
// bursts keep the walks of tree.go and tree_vec2.go.
var lanesWalk = false

// lanesCPU, tightCPU and quadsCPU: no CPU runs a stub that is not
// built.
const lanesCPU, tightCPU, quadsCPU = false, false, false

// lanesTight: no tight blocks without the lane walk's stubs.
var lanesTight = false

// lanesKeys: no laneKeys8 here.
var lanesKeys = false

// laneKeys is laneKeysGo.
func (tr *trees) laneKeys(fs []rule.Fields, s *laneScratch) int { return tr.laneKeysGo(fs, s) }

// walkLanes is walkLanesGo.
func (d *dtree) walkLanes(keys *[3][treeGroup]uint64, cur *[treeGroup]uint64, n int) {
	d.walkLanesGo(keys, cur, n)
}

// walkLanes2 is walkLanes2Go; tail is the stub's.
func walkLanes2(d0, d1 *dtree, keys *[3][treeGroup]uint64, cur *[2][treeGroup]uint64, n int, _ *laneTail) {
	walkLanes2Go(d0, d1, keys, cur, n)
}

// scanLanes2 is scanLanes2Go where no stub is built. It prefetches
// nothing (Go has no prefetch): pfd is the stub's, as in scanLanes4.
func scanLanes2(s *laneScratch, b0, b1 []sblock, vrule, out []int32, n, _ int, narrow bool) (rest int) {
	return scanLanes2Go(s, b0, b1, vrule, out, n, narrow)
}

// scanLanes4 is scanLanes4Go where no stub is built, pfd ignored.
func scanLanes4(s *laneScratch, b0, b1 []sblock, vrule, out []int32, n, _ int) (rest int) {
	return scanLanes4Go(s, b0, b1, vrule, out, n)
}

// scanLanesC2 is scanLanesC2Go where no stub is built, pfd ignored.
func scanLanesC2(s *laneScratch, b0, b1 []cblock, vrule, out []int32, n, _ int, narrow bool) (rest int) {
	return scanLanesC2Go(s, b0, b1, vrule, out, n, narrow)
}

// cleafScan2 is cleafScan2Go where no stub is built.
func cleafScan2(key *[4]uint32, flags uint32, b0, b1 *cblock, lanes uint32) (best, check uint32) {
	return cleafScan2Go(key, flags, b0, b1, lanes)
}

// scanLanesT2 is scanLanesT2Go where no stub is built, pfd ignored.
func scanLanesT2(s *laneScratch, b0, b1 []tblock, vrule, out []int32, n, _ int, narrow bool, cl *tclasses) (rest int) {
	return scanLanesT2Go(s, b0, b1, vrule, out, n, narrow, cl)
}

// scanLanesT2I is scanLanesT2Go where no stub is built: vrule is the
// identity it stands for (trees.tident).
func scanLanesT2I(s *laneScratch, b0, b1 []tblock, vrule, out []int32, n, _ int, narrow bool, cl *tclasses) (rest int) {
	return scanLanesT2Go(s, b0, b1, vrule, out, n, narrow, cl)
}

// tleafScan2 is tleafScan2Go where no stub is built.
func tleafScan2(key *[4]uint32, flags uint32, b0, b1 *tblock, cl *tclasses, lanes uint32) (best, check uint32) {
	return tleafScan2Go(key, flags, b0, b1, cl, lanes)
}

// scanLanesT6 is scanLanesT2Go where no stub is built: the Go scan reads
// a lane's IPv6 top bits as it expands it.
func scanLanesT6(s *laneScratch, b0, b1 []tblock, vrule, out []int32, n, _ int, narrow bool, cl *tclasses) (rest int) {
	return scanLanesT2Go(s, b0, b1, vrule, out, n, narrow, cl)
}

// scanLanesT6I is scanLanesT2I where no stub is built.
func scanLanesT6I(s *laneScratch, b0, b1 []tblock, vrule, out []int32, n, _ int, narrow bool, cl *tclasses) (rest int) {
	return scanLanesT2Go(s, b0, b1, vrule, out, n, narrow, cl)
}

// tleafScan6 is tleafScan2Go where no stub is built.
func tleafScan6(key *[4]uint32, flags uint32, b0, b1 *tblock, cl *tclasses, lanes uint32) (best, check uint32) {
	return tleafScan2Go(key, flags, b0, b1, cl, lanes)
}
