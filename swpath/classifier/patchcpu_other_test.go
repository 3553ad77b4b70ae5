//go:build !linux

package classifier

func processCPU() int64 { return 0 }
