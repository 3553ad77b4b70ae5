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

// cvecGroup: sets of at most two trees past cgroupMin, or of more than
// oneBlockEntries entries, whose checks fit compact lanes get compact
// blocks, and a burst walks a group's trees with walkGroup and then scans
// each packet's two blocks with cblockScan2 (cvecBurst). No Arm core was
// at hand to time it. On an AMD EPYC without AVX-512, with the walk in Go
// as here and cblockScan2's steps in 128-bit AVX (four lanes, two halves a
// block, as below), fresh 5-tuple bursts took 0.70-0.77 of the group
// walk's time at 10k ClassBench-style rules, 0.68-0.70 at 20k-50k and
// 0.91-1.04 at 100k (the two tables alternated in one process, thread
// CPU time, medians of 21-31 rounds), for 35.2 MiB instead of 26.7 at
// 100k; Decide a packet at a time took 1.3 times as long at 100k, the
// trade amd64 makes too.
var cvecGroup = true

// cblockScan2 is cleafScan2Go in NEON's four 32-bit lanes (CBLK in
// tree_vec_arm64.s): a compact block's tests in two halves of about
// thirty instructions each. It orders no memory.
//
//go:noescape
func cblockScan2(key *[4]uint32, flags uint32, b0, b1 *cblock, lanes uint32) (best, check uint32)
