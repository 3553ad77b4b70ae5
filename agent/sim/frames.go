package sim

import (
	"encoding/binary"

	"github.com/scrubd/scrubd/agent/plan"
	"github.com/scrubd/scrubd/swpath/packet"
	"github.com/scrubd/scrubd/swpath/rule"
	"github.com/scrubd/scrubd/swpath/traffic"
)

// The simulator tags every frame it sends so the far side of each path can
// tell which flow a frame belongs to and what the reference decision for it
// was, without a lookup: the IPv4 identification field (the IPv6 flow
// label's low 16 bits) carries flow<<1 | refDrop. No rule key reads either
// field, so the tag changes no verdict.
const (
	tagDrop     = 1
	maxFlows    = 1 << 15
	ethHdr      = 14
	offV4ID     = ethHdr + 4
	offV6Label  = ethHdr + 2
	etherIPv4   = 0x0800
	etherIPv6   = 0x86dd
	noTag       = -1
	tagFlowBits = 1
)

// variant is one distinct packet of a flow (a source address of its Vary
// range): its two frames (reference pass, reference drop), its parsed
// fields and the receive queue RSS puts it on.
type variant struct {
	frames [2][]byte
	fields rule.Fields
	queue  int
}

// buildVariants makes the frames of flow fi.
func buildVariants(fi int, fl *Flow, reta plan.RETA) ([]variant, error) {
	n := max(fl.Vary, 1)
	out := make([]variant, n)
	for v := 0; v < n; v++ {
		f := fl.Fields
		if v > 0 {
			if f.Family == rule.IPv6 {
				f.Src.Lo += uint64(v)
			} else {
				f.Src.Hi += uint64(v) << 32 // the IPv4 address sits in Hi's top half
			}
		}
		fr := traffic.Frame{Family: f.Family, Src: f.Src.Netip(f.Family), Dst: f.Dst.Netip(f.Family), Proto: f.Proto,
			SrcPort: f.SrcPort, DstPort: f.DstPort, TCPFlags: f.TCPFlags, Size: fl.Frame - 4} // the wire size less the FCS
		base := traffic.AppendFrame(nil, &fr)
		for d := 0; d < 2; d++ {
			b := append([]byte(nil), base...)
			setTag(b, uint16(fi<<tagFlowBits|d))
			out[v].frames[d] = b
		}
		if st := packet.Parse(out[v].frames[0], &out[v].fields); st != packet.OK {
			return nil, &FlowError{Flow: fl.Name, Msg: "its frames do not parse as IP (" + st.String() + ")"}
		}
		// RSS as scrubd's engine sets it up on mlx5: Toeplitz with the
		// Microsoft key over the source and destination addresses, then
		// the indirection table.
		fs := &out[v].fields
		var in []byte
		if fs.Family == rule.IPv6 {
			in = plan.RSSInputV6(fs.Src.Netip(rule.IPv6).As16(), fs.Dst.Netip(rule.IPv6).As16(), 0, 0, false)
		} else {
			in = plan.RSSInputV4(fs.Src.Netip(rule.IPv4).As4(), fs.Dst.Netip(rule.IPv4).As4(), 0, 0, false)
		}
		out[v].queue = reta.Queue(plan.Toeplitz(plan.MicrosoftKey, in))
	}
	return out, nil
}

// FlowError is a traffic-mix flow the simulator cannot send.
type FlowError struct {
	Flow string
	Msg  string
}

func (e *FlowError) Error() string { return "sim: flow " + e.Flow + ": " + e.Msg }

func setTag(b []byte, tag uint16) {
	switch binary.BigEndian.Uint16(b[12:]) {
	case etherIPv4:
		binary.BigEndian.PutUint16(b[offV4ID:], tag)
		hl := int(b[ethHdr]&0x0f) * 4
		h := b[ethHdr : ethHdr+hl]
		h[10], h[11] = 0, 0
		binary.BigEndian.PutUint16(h[10:], ipChecksum(h))
	case etherIPv6:
		binary.BigEndian.PutUint16(b[offV6Label:], tag)
	}
}

// tagOf reads a frame's tag (noTag if it has none).
func tagOf(b []byte) int {
	if len(b) < ethHdr+20 {
		return noTag
	}
	switch binary.BigEndian.Uint16(b[12:]) {
	case etherIPv4:
		return int(binary.BigEndian.Uint16(b[offV4ID:]))
	case etherIPv6:
		return int(binary.BigEndian.Uint16(b[offV6Label:]))
	}
	return noTag
}

func ipChecksum(b []byte) uint16 {
	var s uint32
	for i := 0; i+1 < len(b); i += 2 {
		s += uint32(b[i])<<8 | uint32(b[i+1])
	}
	for s > 0xffff {
		s = s>>16 + s&0xffff
	}
	return ^uint16(s)
}
