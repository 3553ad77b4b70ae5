//go:build purego || !(amd64 || arm64)

package classifier

// prefetchLeaves has no stub here: Go has no prefetch, and the scans
// load the records themselves.
func prefetchLeaves(rec *crec, leaves *uint64, n int) {}

// prefetchCounters has no stub here either.
func prefetchCounters(ctr *counter, slot *uint32, ids *int32, n int) {}

// prefetchCBlocks has no stub here either.
func prefetchCBlocks(b0, b1 *cblock, c0, c1 *uint64, n int) {}

// prefetchStub: no prefetch, so the group walk's scans keep their pass
// over the leaves' first records (treeGroup) at every size.
const prefetchStub = false
