//go:build !purego && (amd64 || arm64)

package classifier

// prefetchLeaves asks the cache for the records of the leaves (leaf words)
// of a group walk, records 2, 4, ... 14 of each (two 32-byte records a
// line; the first line is read by the walk's caller), or the leaf's last
// where it is shorter: PREFETCHT0 on amd64, PRFM PLDL1KEEP on arm64. A
// prefetch is a hint: it orders nothing, never faults, and changes no
// result, only when the scans' loads find their lines.
//
//go:noescape
func prefetchLeaves(rec *crec, leaves *uint64, n int)
