package placement

import (
	"unsafe"

	"github.com/scrubd/scrubd/agent/dataplane"
)

// setMasks keeps ms, a Cost's list of mask shapes (read, never written),
// as its first element and length (a list is as long as the rule has
// distinct shapes, far below 2^32).
func (rs *ruleState) setMasks(ms []dataplane.MaskShape) {
	rs.masks, rs.nmasks = unsafe.SliceData(ms), uint32(len(ms))
	if rs.nmasks == 0 {
		rs.masks = nil
	}
}

// maskList is the list setMasks kept.
func (rs *ruleState) maskList() []dataplane.MaskShape {
	if rs.masks == nil {
		return nil
	}
	return unsafe.Slice(rs.masks, rs.nmasks)
}
