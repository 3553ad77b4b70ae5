//go:build purego || !amd64

package classifier

// lanesStub: the lane walk's stubs are built (walkLanes8, scanLanes2).
const lanesStub = false

// lanesWalk: no stub here (arm64's Advanced SIMD has no gather), so
// bursts keep the walks of tree.go and tree_vec2.go.
var lanesWalk = false

// walkLanes is walkLanesGo over d's nodes.
func (d *dtree) walkLanes(keys *[3][treeGroup]uint64, cur *[treeGroup]uint64, n int) {
	walkLanesGo(d.nodes, d.root, keys, cur, n)
}

// scanLanes2 is scanLanes2Go where no stub is built.
func scanLanes2(b0, b1 []sblock, cur0, cur1, sds, misc *[treeGroup]uint64, flags *[treeGroup]uint32, res *[treeGroup]uint64, n int) {
	scanLanes2Go(b0, b1, cur0, cur1, sds, misc, flags, res, n)
}

// scanLanes4 is scanLanes4Go where no stub is built.
func scanLanes4(b0, b1 []sblock, cur0, cur1, sds, misc *[treeGroup]uint64, flags *[treeGroup]uint32, res *[treeGroup]uint64, n int) {
	scanLanes4Go(b0, b1, cur0, cur1, sds, misc, flags, res, n)
}
