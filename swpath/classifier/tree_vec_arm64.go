//go:build !purego

package classifier

// vecScan: the trees of small sets are laid out in blocks and scanned
// with the NEON stub (Advanced SIMD is part of every ARMv8-A core).
var vecScan = true

// leafScan4 tests the eight lanes of each of the blocks b0-b3 against a
// packet's address word sd and misc word, and returns the lowest entry of
// a passing lane without any of flags (laneFlags), treeNoRank when none,
// and the passing lanes with one of flags (bit 8i+j for lane j of block
// i). It gives NEON's four 32-bit lanes per instruction: each block is two
// halves of four masked compares, the flags and an unsigned minimum.
//
//go:noescape
func leafScan4(sd, misc uint64, flags uint32, b0, b1, b2, b3 *sblock) (best, check uint32)

// leafScan2 is leafScan4 over two blocks (bits 0-15 of check), for sets
// of at most two trees.
//
//go:noescape
func leafScan2(sd, misc uint64, flags uint32, b0, b1 *sblock) (best, check uint32)

// cvecGroup: no compact blocks without a NEON scan of them.
var cvecGroup = false

// cblockScan2 is cleafScan2Go: no NEON stub for compact blocks yet.
func cblockScan2(key *[4]uint32, flags uint32, b0, b1 *cblock, lanes uint32) (best, check uint32) {
	return cleafScan2Go(key, flags, b0, b1, lanes)
}
