//go:build !amd64 && !arm64

// Package barrier supports only amd64 and arm64. Building it elsewhere
// fails on purpose: a DMA ring without the right barriers would run and
// corrupt packets silently.
package barrier

var _ = barrier_package_supports_only_amd64_and_arm64
