//go:build !linux

package classifier

func threadCPU() int64 { return 0 }
