package rule

import (
	"fmt"
	"net/netip"
)

// The largest value of each field a range list tests: what the parsers
// accept, and what every engine holds as written (the XDP program and the
// NIC's flower keys compare ports as 16-bit values, ICMP type and code as
// 8-bit ones).
const (
	MaxPort   = 65535
	MaxICMP   = 255
	MaxLength = 65535 + 40 // IPv6: a payload length of 65535 behind the 40-byte header
)

// CheckBounds returns nil if every condition of m is one the engines hold
// as written, else an *Error naming the first field and value that is not:
// a range past its field's largest value or with its start above its end,
// a prefix with host bits set, or a source and destination of different
// families. The parsers refuse all of these with the same words;
// CheckBounds is for rules made elsewhere (the FlowSpec translation,
// code), which would otherwise reach engines that read them differently:
// a port range of 100-70000 cut to 100-4464 by one engine's 16-bit keys
// and kept whole by another.
func (m *Match) CheckBounds() error {
	if e := m.bounds(); e != nil {
		return e
	}
	return nil
}

func (m *Match) bounds() *Error {
	for _, l := range []struct {
		field string
		rs    Ranges
		max   uint32
	}{
		{"match.src_port", m.SrcPort, MaxPort}, {"match.dst_port", m.DstPort, MaxPort}, {"match.port", m.Port, MaxPort},
		{"match.icmp_type", m.ICMPType, MaxICMP}, {"match.icmp_code", m.ICMPCode, MaxICMP},
		{"match.length", m.Length, MaxLength},
	} {
		for _, r := range l.rs {
			if why := r.outside(l.max); why != "" {
				return &Error{Field: l.field, Value: r.String(), Reason: why}
			}
		}
	}
	for _, p := range []struct {
		field string
		p     netip.Prefix
	}{{"match.src", m.Src}, {"match.dst", m.Dst}} {
		switch {
		case !p.p.IsValid():
		case p.p.Masked() != p.p:
			return &Error{Field: p.field, Value: p.p.String(), Reason: fmt.Sprintf("host bits are set (did you mean %s?)", p.p.Masked())}
		}
	}
	if m.Src.IsValid() && m.Dst.IsValid() && m.Src.Addr().Is4() != m.Dst.Addr().Is4() {
		return &Error{Field: "match.dst", Value: m.Dst.String(), Reason: fmt.Sprintf("family differs from match.src %s (one family per rule)", m.Src)}
	}
	return nil
}

// outside returns why r is not a range of values 0-max (a range past max,
// or one whose start is above its end), or "" when it is one.
func (r Range) outside(max uint32) string {
	switch {
	case r.Lo > max || r.Hi > max:
		return fmt.Sprintf("out of range 0-%d", max)
	case r.Lo > r.Hi:
		return "range start is above its end"
	}
	return ""
}
