// Package plan is scrubd's regime model: how many packets per second a link
// carries at each frame size, how many the software path can classify, and
// whether software alone holds line rate. It is pure arithmetic, shared by
// `scrubd plan` and by agent/placement.
//
// Line rate counts the 20 bytes every Ethernet frame costs on the wire beyond
// its own length (preamble, start delimiter and inter-frame gap):
//
//	pps = bits per second / ((frame + 20) * 8)
//
// Software capacity is workers * clock / cycles per packet. A frame size is
// held when capacity >= line rate.
package plan

import (
	"errors"
	"fmt"
	"math"
)

// WireOverhead is the per-frame cost on the wire beyond the frame itself, in
// bytes: 7 preamble + 1 start-of-frame delimiter + 12 inter-frame gap.
const WireOverhead = 20

// FrameSizes are the frame sizes `scrubd plan` reports, in bytes.
var FrameSizes = []int{64, 128, 256, 512, 1024, 1500}

// IMIXPart is one frame size of a mix and its weight.
type IMIXPart struct {
	Size   int
	Weight int
}

// IMIX is the simple Internet mix: 7 frames of 64 B, 4 of 594 B and 1 of
// 1518 B (sizes with the FCS), average 361.8 B on the wire before overhead.
var IMIX = []IMIXPart{{64, 7}, {594, 4}, {1518, 1}}

// AvgFrame returns the weighted mean frame size of a mix.
func AvgFrame(mix []IMIXPart) float64 {
	var sum, w float64
	for _, p := range mix {
		sum += float64(p.Size) * float64(p.Weight)
		w += float64(p.Weight)
	}
	if w == 0 {
		return 0
	}
	return sum / w
}

// LineRatePPS returns the packet rate a link of linkBps bits per second
// carries with frames of avgFrame bytes.
func LineRatePPS(linkBps, avgFrame float64) float64 {
	if avgFrame <= 0 {
		return 0
	}
	return linkBps / ((avgFrame + WireOverhead) * 8)
}

// CapacityPPS returns the software capacity in packets per second of workers
// cores at hz each spending cyclesPerPacket per packet.
func CapacityPPS(workers int, hz, cyclesPerPacket float64) float64 {
	if cyclesPerPacket <= 0 {
		return 0
	}
	return float64(workers) * hz / cyclesPerPacket
}

// Params are the inputs of a plan.
type Params struct {
	LinkGbps        float64 `json:"link_gbps"`
	Workers         int     `json:"workers"`
	GHz             float64 `json:"ghz"`
	CyclesPerPacket float64 `json:"cycles_per_packet"`
}

// Validate names the first bad parameter.
func (p Params) Validate() error {
	switch {
	case !(p.LinkGbps > 0) || math.IsInf(p.LinkGbps, 0):
		return fmt.Errorf("link-gbps %v: must be a positive number", p.LinkGbps)
	case p.Workers <= 0:
		return fmt.Errorf("workers %d: must be at least 1", p.Workers)
	case !(p.GHz > 0) || math.IsInf(p.GHz, 0):
		return fmt.Errorf("ghz %v: must be a positive number", p.GHz)
	case !(p.CyclesPerPacket > 0) || math.IsInf(p.CyclesPerPacket, 0):
		return fmt.Errorf("cycles-per-packet %v: must be a positive number", p.CyclesPerPacket)
	}
	return nil
}

// Row is one frame size of a plan.
type Row struct {
	Frame         string  `json:"frame"` // "64" ... or "IMIX"
	AvgFrameBytes float64 `json:"avg_frame_bytes"`
	LineRateMpps  float64 `json:"line_rate_mpps"`
	SWCapMpps     float64 `json:"sw_capacity_mpps"`
	HoldsLineRate bool    `json:"holds_line_rate"`
	// LoadPercent is line rate as a percentage of software capacity.
	LoadPercent float64 `json:"load_percent"`
	// SWGbps is the traffic software carries at this size when it runs at
	// capacity (or line rate, whichever is lower).
	SWGbps float64 `json:"sw_gbps"`
}

// Result is a whole plan.
type Result struct {
	Params
	SWCapMpps float64 `json:"sw_capacity_mpps"`
	Rows      []Row   `json:"rows"`
}

// ErrParams wraps every parameter error.
var ErrParams = errors.New("bad plan parameters")

// Compute builds the table for FrameSizes and IMIX.
func Compute(p Params) (Result, error) {
	if err := p.Validate(); err != nil {
		return Result{}, fmt.Errorf("%w: %w", ErrParams, err)
	}
	linkBps := p.LinkGbps * 1e9
	capPPS := CapacityPPS(p.Workers, p.GHz*1e9, p.CyclesPerPacket)
	res := Result{Params: p, SWCapMpps: capPPS / 1e6}
	row := func(name string, avg float64) Row {
		lr := LineRatePPS(linkBps, avg)
		carried := math.Min(lr, capPPS)
		return Row{
			Frame:         name,
			AvgFrameBytes: avg,
			LineRateMpps:  lr / 1e6,
			SWCapMpps:     capPPS / 1e6,
			HoldsLineRate: capPPS >= lr,
			LoadPercent:   100 * lr / capPPS,
			SWGbps:        carried * (avg + WireOverhead) * 8 / 1e9,
		}
	}
	for _, s := range FrameSizes {
		res.Rows = append(res.Rows, row(fmt.Sprint(s), float64(s)))
	}
	res.Rows = append(res.Rows, row("IMIX", AvgFrame(IMIX)))
	return res, nil
}
