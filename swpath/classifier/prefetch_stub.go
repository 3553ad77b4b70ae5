//go:build !purego && (amd64 || arm64)

package classifier

// prefetchLeaves asks the cache for the records of the leaves (leaf words)
// of a group walk, records 0, 2, ... 14 of each (two 32-byte records a
// line: a leaf's lines where it starts on one, all but the last line of
// a leaf of 16 records that does not), or the leaf's last where it is
// shorter: PREFETCHT0 on amd64, PRFM PLDL1KEEP on arm64. A
// prefetch is a hint: it orders nothing, never faults, and changes no
// result, only when the scans' loads find their lines.
//
//go:noescape
func prefetchLeaves(rec *crec, leaves *uint64, n int)

// prefetchCounters asks the cache for the counters a burst's decisions
// add to: ctr[slot[ids[i]]] for i < n, ctr[slot[0]] for an id below 0
// (no rule): PREFETCHT0 on amd64, PRFM PSTL1KEEP (for a store) on arm64.
// A hint, as prefetchLeaves.
//
//go:noescape
func prefetchCounters(ctr *counter, slot *uint32, ids *int32, n int)

// prefetchCBlocks asks the cache for the first compact block of each
// leaf of n packets (leaf words c0[i] in the blocks from b0 on, c1[i] in
// those from b1 on): a block's three lines, PREFETCHT0 on amd64, PRFM
// PLDL1KEEP on arm64. A hint, as prefetchLeaves: it reads the leaf words
// only, and no block.
//
//go:noescape
func prefetchCBlocks(b0, b1 *cblock, c0, c1 *uint64, n int)

// prefetchStub: prefetchLeaves and prefetchCounters ask the cache for
// something.
const prefetchStub = true
