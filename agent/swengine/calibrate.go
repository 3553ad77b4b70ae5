package swengine

import (
	"context"
	"fmt"

	"github.com/scrubd/scrubd/swpath/bench"
)

// CalibrationPackets is how many packets the start-up calibration sends.
const CalibrationPackets = 1 << 17

// Calibrate measures the software path's cost on this machine with a short
// swpath/bench run (`scrubd bench` with one worker and 64-byte frames
// only): the Direct Verbs engine over pre-filled NIC-emulator rings, the
// source material's five drop rules. It returns core cycles per packet.
// The emulator has no DMA or device-written cache lines, so the figure is a
// lower bound for a real NIC; the engine's live counters refine it once
// traffic flows. With ghz > 0 (software.ghz, the workers' clock) the
// figure is the measured time per packet times that clock, on any
// architecture; otherwise it is the bench's own cycles (the core clock on
// x86, counter ticks where the core clock is unknown).
func Calibrate(ctx context.Context, ghz float64) (float64, error) {
	rep, err := bench.Run(ctx, bench.Config{Workers: 1, FrameSizes: []int{64}, Packets: CalibrationPackets})
	if err != nil {
		return 0, fmt.Errorf("calibration: %w", err)
	}
	if len(rep.Sizes) == 0 || !(rep.Sizes[0].CyclesPerPkt > 0) {
		return 0, fmt.Errorf("calibration: no cycles measured")
	}
	if ghz > 0 && rep.Sizes[0].NsPerPkt > 0 {
		return rep.Sizes[0].NsPerPkt * ghz, nil
	}
	return rep.Sizes[0].CyclesPerPkt, nil
}
