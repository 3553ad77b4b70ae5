//go:build purego || !(amd64 || arm64)

package classifier

// vecScan: without a stub the blocks are not built (the Go scan of the
// records is the faster there).
var vecScan = false

// leafScan4 is leafScan4Go where no stub is built.
func leafScan4(sd, misc uint64, flags uint32, b0, b1, b2, b3 *sblock) (best, check uint32) {
	return leafScan4Go(sd, misc, flags, b0, b1, b2, b3)
}

// leafScan2 is leafScan2Go where no stub is built.
func leafScan2(sd, misc uint64, flags uint32, b0, b1 *sblock) (best, check uint32) {
	return leafScan2Go(sd, misc, flags, b0, b1)
}

// cvecGroup: no compact blocks without a stub to scan them.
var cvecGroup = false

// cblockScan2 is cleafScan2Go where no stub is built.
func cblockScan2(key *[4]uint32, flags uint32, b0, b1 *cblock, lanes uint32) (best, check uint32) {
	return cleafScan2Go(key, flags, b0, b1, lanes)
}
