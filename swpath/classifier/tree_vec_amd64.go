//go:build !purego

package classifier

import "golang.org/x/sys/cpu"

// vecScan: the trees of small sets are laid out in blocks and scanned
// with the AVX2 stub.
var vecScan = cpu.X86.HasAVX2

// leafScan4 tests the eight lanes of each of the blocks b0-b3 against a
// packet's address word sd and misc word, and returns the lowest entry of
// a passing lane without any of flags (laneFlags), treeNoRank when none,
// and the passing lanes with one of flags (bit 8i+j for lane j of block
// i). It gives AVX2's eight 32-bit lanes per instruction: four masked
// compares, the flags and an unsigned minimum per block.
//
//go:noescape
func leafScan4(sd, misc uint64, flags uint32, b0, b1, b2, b3 *sblock) (best, check uint32)

// leafScan2 is leafScan4 over two blocks (bits 0-15 of check), for sets
// of at most two trees.
//
//go:noescape
func leafScan2(sd, misc uint64, flags uint32, b0, b1 *sblock) (best, check uint32)

// cvecGroup: where bursts do not take the lane walk (no AVX-512), sets of
// at most two trees past cgroupMin, or of more than oneBlockEntries
// entries, whose checks fit compact lanes get compact blocks too, and a
// burst walks a group's trees with walkGroup and then scans each packet's
// two blocks with cblockScan2 (cvecBurst).
var cvecGroup = vecScan && !lanesWalk

// cblockScan2 is cleafScan2Go with AVX2's eight 32-bit lanes (CBLK in
// tree_vec_amd64.s): a compact block's tests in about forty instructions,
// where cleafScan2's CSCAN takes AVX-512's mask registers. It orders no
// memory.
//
//go:noescape
func cblockScan2(key *[4]uint32, flags uint32, b0, b1 *cblock, lanes uint32) (best, check uint32)
