// Package packet reduces an Ethernet frame to rule.Fields without allocating.
// It is the one frame parser shared by every software engine; it follows the
// parsing rules written in the swpath/rule package doc exactly:
//
//   - up to two 802.1Q (0x8100) or 802.1ad (0x88a8) tags are skipped; a third
//     tag, a non-IP EtherType, or a truncated or malformed IP header makes the
//     frame non-IP (the zero Fields);
//   - IPv4 needs version 4, IHL 5..15 and all IHL*4 bytes captured;
//   - IPv6 needs version 6 and its 40-byte header; up to
//     rule.MaxIPv6ExtHeaders extension headers (hop-by-hop, routing,
//     destination options, fragment) are walked; a longer chain or a truncated
//     extension header leaves Proto at the Next Header where the walk stopped
//     and no L4 header;
//   - the L4 header is present only at fragment offset 0 when the captured
//     bytes hold the protocol's fixed header (TCP 20, UDP 8, SCTP 12, ICMP and
//     ICMPv6 4).
//
// Where the rule doc is silent this parser decides, and the decision is part of
// its contract: the IPv4 Total Length is not checked against the header length
// or the captured length (libpcap does not either); an IPv6 fragment header
// with a non-zero offset ends the walk (what follows is fragment data, not a
// header) and its Next Header is the protocol.
package packet

import (
	"encoding/binary"

	"github.com/scrubd/scrubd/swpath/rule"
)

// EtherTypes the parser knows.
const (
	EtherTypeIPv4  = 0x0800
	EtherTypeIPv6  = 0x86dd
	EtherTypeVLAN  = 0x8100 // 802.1Q customer tag
	EtherTypeQinQ  = 0x88a8 // 802.1ad service tag
	MaxVLANTags    = 2
	ethHeaderLen   = 14
	vlanTagLen     = 4
	ipv4MinHdrLen  = 20
	ipv6HdrLen     = 40
	ipv6FragHdrLen = 8
)

// IPv6 extension header numbers the parser walks.
const (
	IPv6HopByHop = 0
	IPv6Routing  = 43
	IPv6Fragment = 44
	IPv6DestOpts = 60
)

// Status says why a frame is or is not IP. Frames that are not IP pass every
// rule set; the status only feeds statistics.
type Status uint8

const (
	// OK: the frame is IPv4 or IPv6 and Fields describe it.
	OK Status = iota
	// NotIP: the EtherType (after tags) is neither IPv4 nor IPv6.
	NotIP
	// TooManyTags: more than MaxVLANTags VLAN tags.
	TooManyTags
	// Truncated: the Ethernet, tag or IP header is cut short.
	Truncated
	// Malformed: the IP version or IPv4 header length is wrong.
	Malformed
	numStatus
)

var statusNames = [numStatus]string{"ok", "not-ip", "too-many-tags", "truncated", "malformed"}

func (s Status) String() string {
	if s < numStatus {
		return statusNames[s]
	}
	return "status(?)"
}

// Parse fills f from the Ethernet frame b and reports the status. On any
// status other than OK, f is the zero Fields. Parse never allocates and never
// panics, whatever b holds.
//
// The commonest frame of a flood, untagged IPv4 without options at fragment
// offset 0, takes a fast path whatever its protocol: one length check covers
// every byte it reads, what it takes from the L4 header is chosen by a table
// indexed by the protocol (l4v4) with masks rather than branches, and Fields
// is written once. A flood of mixed protocols (ClassBench-style sets name
// TCP, UDP, ICMP, SCTP, GRE and more) would otherwise mispredict a branch on
// the protocol for about every other packet. Every other frame takes the
// general walk; both give the same Fields (a fuzz test compares them).
func Parse(b []byte, f *rule.Fields) Status {
	if len(b) >= fastLen {
		// EtherType 0x0800 then version 4 with IHL 5, in one load.
		eh := binary.BigEndian.Uint32(b[12:16])
		ff := binary.BigEndian.Uint16(b[20:22])
		if eh>>8 == 0x080045 && ff&0x1fff == 0 {
			proto := b[23]
			k := l4v4[proto]
			// The first four bytes of the L4 header: ports (TCP, UDP,
			// SCTP) or type and code (ICMP), kept by masks of all ones
			// or zeros taken from k.
			l4 := binary.BigEndian.Uint32(b[34:38])
			ports := l4 & -uint32(k&l4Ports)
			icmp := l4 >> 16 & -uint32(k>>l4ICMPShift&1)
			// Offset 0: DF maps to DontFragment, MF to FirstFragment,
			// neither to NotFragment.
			frag := rule.Frag(ff>>14&1) | rule.FirstFragment
			if ff&0x2000 == 0 {
				frag = rule.Frag(ff>>14&1) | rule.NotFragment
			}
			// Field by field, not a composite literal: the compiler builds
			// a literal on the stack and copies it with wide loads that
			// stall on its own narrow stores.
			f.Family = rule.IPv4
			f.Proto = proto
			f.L4 = k != 0
			f.Frag = frag
			f.DSCP = uint8(eh) >> 2
			f.TCPFlags = b[ethHeaderLen+ipv4MinHdrLen+13] & -(k >> l4FlagsShift & 1)
			f.ICMPType, f.ICMPCode = uint8(icmp>>8), uint8(icmp)
			f.SrcPort = uint16(ports >> 16)
			f.DstPort = uint16(ports)
			f.Length = uint32(binary.BigEndian.Uint16(b[16:18]))
			f.Src = rule.Addr{Hi: uint64(binary.BigEndian.Uint32(b[26:30])) << 32}
			f.Dst = rule.Addr{Hi: uint64(binary.BigEndian.Uint32(b[30:34])) << 32}
			return OK
		}
	}
	return parseSlow(b, f)
}

// fastLen is the length the fast path needs: Ethernet, a 20-byte IPv4
// header and TCP's 20-byte fixed header, the longest of the fixed headers
// parseL4 reads (UDP 8, SCTP 12, ICMP 4). A minimum Ethernet frame (60
// bytes without its FCS) holds it.
const fastLen = ethHeaderLen + ipv4MinHdrLen + 20

// What l4v4 says of an IPv4 protocol: the L4 header's first four bytes
// are ports (l4Ports) or ICMP type and code (l4ICMP), and its byte 13 is
// TCP's flags (l4Flags). Zero: parseL4 reads no L4 header.
const (
	l4Ports      = 1
	l4FlagsShift = 1
	l4ICMPShift  = 2
	l4Flags      = 1 << l4FlagsShift
	l4ICMP       = 1 << l4ICMPShift
)

// l4v4 is parseL4's choice for IPv4, by protocol number.
var l4v4 = [256]uint8{
	rule.ProtoTCP:  l4Ports | l4Flags,
	rule.ProtoUDP:  l4Ports,
	rule.ProtoSCTP: l4Ports,
	rule.ProtoICMP: l4ICMP,
}

// parseSlow is the general parser: tags, options, fragments, IPv6 and
// every protocol.
func parseSlow(b []byte, f *rule.Fields) Status {
	*f = rule.Fields{}
	if len(b) < ethHeaderLen {
		return Truncated
	}
	et := binary.BigEndian.Uint16(b[12:14])
	off := ethHeaderLen
	for tags := 0; et == EtherTypeVLAN || et == EtherTypeQinQ; tags++ {
		if tags == MaxVLANTags {
			return TooManyTags
		}
		if len(b) < off+vlanTagLen {
			return Truncated
		}
		et = binary.BigEndian.Uint16(b[off+2 : off+4])
		off += vlanTagLen
	}
	switch et {
	case EtherTypeIPv4:
		return parseIPv4(b[off:], f)
	case EtherTypeIPv6:
		return parseIPv6(b[off:], f)
	}
	return NotIP
}

func parseIPv4(b []byte, f *rule.Fields) Status {
	if len(b) < ipv4MinHdrLen {
		return Truncated
	}
	if b[0]>>4 != 4 {
		return Malformed
	}
	hl := int(b[0]&0x0f) * 4
	if hl < ipv4MinHdrLen {
		return Malformed
	}
	if len(b) < hl {
		return Truncated
	}
	ff := binary.BigEndian.Uint16(b[6:8])
	offset := ff & 0x1fff
	f.Family = rule.IPv4
	f.DSCP = b[1] >> 2
	f.Length = uint32(binary.BigEndian.Uint16(b[2:4]))
	f.Proto = b[9]
	f.Frag = rule.FragState(ff&0x4000 != 0, ff&0x2000 != 0, offset)
	f.Src = rule.AddrFrom4(b[12:16])
	f.Dst = rule.AddrFrom4(b[16:20])
	if offset == 0 {
		parseL4(b[hl:], f, rule.ProtoICMP)
	}
	return OK
}

func parseIPv6(b []byte, f *rule.Fields) Status {
	if len(b) < ipv6HdrLen {
		return Truncated
	}
	if b[0]>>4 != 6 {
		return Malformed
	}
	f.Family = rule.IPv6
	f.DSCP = uint8(binary.BigEndian.Uint16(b[0:2])>>6) & 0x3f
	f.Length = ipv6HdrLen + uint32(binary.BigEndian.Uint16(b[4:6]))
	f.Src = rule.AddrFrom16(b[8:24])
	f.Dst = rule.AddrFrom16(b[24:40])
	f.Frag = rule.NotFragment
	nh := b[6]
	p := b[ipv6HdrLen:]
	for n := 0; ; n++ {
		switch nh {
		case IPv6HopByHop, IPv6Routing, IPv6DestOpts, IPv6Fragment:
		default:
			f.Proto = nh
			parseL4(p, f, rule.ProtoICMPv6)
			return OK
		}
		if n == rule.MaxIPv6ExtHeaders {
			f.Proto = nh // chain too long: no upper layer found
			return OK
		}
		if len(p) < 8 {
			f.Proto = nh // truncated extension header
			return OK
		}
		if nh == IPv6Fragment {
			fo := binary.BigEndian.Uint16(p[2:4])
			offset := fo >> 3
			f.Frag = rule.FragState(false, fo&1 != 0, offset)
			if offset != 0 {
				f.Proto = p[0] // fragment data follows, not a header
				return OK
			}
			nh, p = p[0], p[ipv6FragHdrLen:]
			continue
		}
		hl := (int(p[1]) + 1) * 8
		if len(p) < hl {
			f.Proto = nh
			return OK
		}
		nh, p = p[0], p[hl:]
	}
}

// parseL4 fills the upper-layer fields for a packet at fragment offset 0.
// icmp is the ICMP protocol number of the packet's family.
func parseL4(b []byte, f *rule.Fields, icmp uint8) {
	switch f.Proto {
	case rule.ProtoTCP:
		if len(b) < 20 {
			return
		}
		f.TCPFlags = b[13]
	case rule.ProtoUDP:
		if len(b) < 8 {
			return
		}
	case rule.ProtoSCTP:
		if len(b) < 12 {
			return
		}
	case icmp:
		if len(b) < 4 {
			return
		}
		f.ICMPType, f.ICMPCode = b[0], b[1]
		f.L4 = true
		return
	default:
		return
	}
	f.SrcPort = binary.BigEndian.Uint16(b[0:2])
	f.DstPort = binary.BigEndian.Uint16(b[2:4])
	f.L4 = true
}
