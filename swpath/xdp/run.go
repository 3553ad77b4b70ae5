//go:build linux

package xdp

import (
	"fmt"

	"github.com/cilium/ebpf"
)

// XDP actions the program returns.
const (
	XDPDrop     = 1
	XDPPass     = 2
	XDPRedirect = 4
)

// minFrame is the shortest frame BPF_PROG_TEST_RUN accepts (an Ethernet
// header); shorter frames are not IP, so nothing can match them.
const minFrame = 14

// Run passes one frame through the loaded program with BPF_PROG_TEST_RUN
// (no interface needed) and returns the XDP action. Counters move exactly as
// for a received frame. A frame shorter than an Ethernet header is passed
// without running the program (no rule can match it).
func (e *Engine) Run(frame []byte) (uint32, error) {
	if len(frame) < minFrame {
		return XDPPass, nil
	}
	act, err := e.prog.Run(&ebpf.RunOptions{Data: frame, Repeat: 1})
	if err != nil {
		return 0, fmt.Errorf("xdp: test run (%d-byte frame): %w", len(frame), err)
	}
	return act, nil
}
