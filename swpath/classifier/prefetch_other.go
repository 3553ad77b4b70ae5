//go:build purego || !(amd64 || arm64)

package classifier

// prefetchLeaves has no stub here: Go has no prefetch, and the scans
// load the records themselves.
func prefetchLeaves(rec *crec, leaves *uint64, n int) {}
