//go:build linux

package xdp

import (
	"errors"
	"fmt"
	"time"

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
// (no interface needed) and returns the XDP action (for an Engine loaded with
// Options.Trace, the raw return value; use Decide). Counters move exactly as
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

// Decide runs frame through a traced Engine (Options.Trace) and returns the
// index in the set in force of the rule that decided it, or -1 when none did,
// and the verdict.
func (e *Engine) Decide(frame []byte) (int, Verdict, error) {
	if !e.opts.Trace {
		return 0, 0, errors.New("xdp: Decide needs an Engine loaded with Options.Trace")
	}
	if len(frame) < minFrame {
		return -1, NotIP, nil
	}
	ret, err := e.prog.Run(&ebpf.RunOptions{Data: frame, Repeat: 1})
	if err != nil {
		return 0, 0, fmt.Errorf("xdp: test run (%d-byte frame): %w", len(frame), err)
	}
	v := Verdict(ret >> 4 & 15)
	slot1 := ret >> 8
	if slot1 == 0 {
		return -1, v, nil
	}
	e.mu.Lock()
	i, ok := e.bySlot[slot1-1]
	e.mu.Unlock()
	if !ok {
		return 0, 0, fmt.Errorf("xdp: program decided by counter slot %d, which no rule of the set holds", slot1-1)
	}
	return i, v, nil
}

// RunStats returns the program's cumulative run time and number of runs as
// the kernel accounts them while BPF run-time statistics are on (the sysctl
// kernel.bpf_stats_enabled, or ebpf.EnableStats held open; Linux 5.8): the
// program's own cost on the traffic it really gets. Both stay still while
// statistics are off.
func (e *Engine) RunStats() (time.Duration, uint64, error) {
	st, err := e.prog.Stats()
	if err != nil {
		return 0, 0, fmt.Errorf("xdp: program statistics: %w", err)
	}
	return st.Runtime, st.RunCount, nil
}
