//go:build !linux

package packet_test

func threadCPU() int64 { return 0 }
