package traffic

import (
	"encoding/binary"
	"net/netip"

	"github.com/scrubd/scrubd/swpath/rule"
)

// MinFrame is the shortest Ethernet frame without its FCS; shorter frames are
// padded with zeros after the IP packet (the IP length fields do not count
// the padding).
const MinFrame = 60

// Ext is an IPv6 extension header to put in a frame.
type Ext struct {
	Type uint8 // 0, 43, 60 or 44 (fragment); any other value is written as a generic 8*n header
	Len  int   // bytes, a multiple of 8 (at least 8); ignored for a fragment header (always 8)
}

// Frame describes one Ethernet frame for AppendFrame. The zero Frame is a
// 60-byte non-IP frame with EtherType 0.
type Frame struct {
	// Tags are the TPIDs of the VLAN tags, outermost first (0x8100, 0x88a8,
	// or anything else to test odd frames). VIDs are 100, 101, ...
	Tags []uint16
	// EtherType is used when Family is 0 (a non-IP frame).
	EtherType uint16

	Family   rule.Family
	Src, Dst netip.Addr // must match Family
	Proto    uint8      // upper-layer protocol (the last Next Header for IPv6)
	DSCP     uint8
	// DF, MF and FragOffset (in 8-byte units) go into the IPv4 header, or into
	// an IPv6 fragment header when Ext lists one.
	DF, MF     bool
	FragOffset uint16
	// IPv4Options is the number of option bytes (a multiple of 4, up to 40).
	IPv4Options int
	// Ext are the IPv6 extension headers in order.
	Ext []Ext
	// Version overrides the IP version nibble when non-zero (malformed frames).
	Version uint8
	// IHL overrides the IPv4 header-length nibble when non-zero.
	IHL uint8

	SrcPort, DstPort   uint16
	TCPFlags           uint8
	ICMPType, ICMPCode uint8

	// Size is the frame length without FCS before truncation; the IP packet
	// fills it. Smaller than the headers means just the headers.
	Size int
	// Truncate, when > 0, cuts the frame to that many bytes (a short capture).
	Truncate int
}

func l4Len(proto uint8, fam rule.Family) int {
	switch proto {
	case rule.ProtoTCP:
		return 20
	case rule.ProtoUDP:
		return 8
	case rule.ProtoSCTP:
		return 12
	case rule.ProtoICMP, rule.ProtoICMPv6:
		return 8
	}
	return 0
}

// AppendFrame appends the frame fr describes to dst and returns the result.
func AppendFrame(dst []byte, fr *Frame) []byte {
	start := len(dst)
	var mac = [12]byte{0x02, 0, 0, 0, 0, 1, 0x02, 0, 0, 0, 0, 2}
	dst = append(dst, mac[:]...)
	for i, tpid := range fr.Tags {
		dst = binary.BigEndian.AppendUint16(dst, tpid)
		dst = binary.BigEndian.AppendUint16(dst, uint16(100+i))
	}
	l2 := len(dst) + 2 - start
	switch fr.Family {
	case rule.IPv4:
		dst = binary.BigEndian.AppendUint16(dst, 0x0800)
		dst = appendIPv4(dst, fr, fr.Size-l2)
	case rule.IPv6:
		dst = binary.BigEndian.AppendUint16(dst, 0x86dd)
		dst = appendIPv6(dst, fr, fr.Size-l2)
	default:
		dst = binary.BigEndian.AppendUint16(dst, fr.EtherType)
		for len(dst)-start < fr.Size {
			dst = append(dst, byte(len(dst)))
		}
	}
	for len(dst)-start < MinFrame {
		dst = append(dst, 0)
	}
	if fr.Truncate > 0 && len(dst)-start > fr.Truncate {
		dst = dst[:start+fr.Truncate]
	}
	return dst
}

func appendIPv4(dst []byte, fr *Frame, ipLen int) []byte {
	hl := 20 + fr.IPv4Options&^3
	if hl > 60 {
		hl = 60
	}
	min := hl + l4Len(fr.Proto, rule.IPv4)
	if ipLen < min {
		ipLen = min
	}
	if ipLen > 65535 {
		ipLen = 65535
	}
	h := len(dst)
	ver, ihl := uint8(4), uint8(hl/4)
	if fr.Version != 0 {
		ver = fr.Version
	}
	if fr.IHL != 0 {
		ihl = fr.IHL
	}
	dst = append(dst, ver<<4|ihl&0x0f, fr.DSCP<<2)
	dst = binary.BigEndian.AppendUint16(dst, uint16(ipLen))
	dst = append(dst, 0x12, 0x34)
	ff := fr.FragOffset & 0x1fff
	if fr.DF {
		ff |= 0x4000
	}
	if fr.MF {
		ff |= 0x2000
	}
	dst = binary.BigEndian.AppendUint16(dst, ff)
	dst = append(dst, 64, fr.Proto, 0, 0)
	src, d := fr.Src.As4(), fr.Dst.As4()
	dst = append(dst, src[:]...)
	dst = append(dst, d[:]...)
	for i := 20; i < hl; i++ {
		dst = append(dst, 1) // NOP options
	}
	binary.BigEndian.PutUint16(dst[h+10:], checksum(dst[h:h+hl]))
	dst = appendL4(dst, fr, rule.IPv4)
	for len(dst)-h < ipLen {
		dst = append(dst, byte(len(dst)))
	}
	return dst
}

func appendIPv6(dst []byte, fr *Frame, ipLen int) []byte {
	ext := 0
	for _, e := range fr.Ext {
		ext += extLen(e)
	}
	min := 40 + ext + l4Len(fr.Proto, rule.IPv6)
	if ipLen < min {
		ipLen = min
	}
	if ipLen > 65535+40 {
		ipLen = 65535 + 40
	}
	h := len(dst)
	ver := uint8(6)
	if fr.Version != 0 {
		ver = fr.Version
	}
	vtc := uint32(ver)<<28 | uint32(fr.DSCP)<<22 | 0x12345
	dst = binary.BigEndian.AppendUint32(dst, vtc)
	dst = binary.BigEndian.AppendUint16(dst, uint16(ipLen-40))
	first := fr.Proto
	if len(fr.Ext) > 0 {
		first = fr.Ext[0].Type
	}
	dst = append(dst, first, 64)
	src, d := fr.Src.As16(), fr.Dst.As16()
	dst = append(dst, src[:]...)
	dst = append(dst, d[:]...)
	for i, e := range fr.Ext {
		next := fr.Proto
		if i+1 < len(fr.Ext) {
			next = fr.Ext[i+1].Type
		}
		if e.Type == 44 {
			fo := fr.FragOffset << 3
			if fr.MF {
				fo |= 1
			}
			dst = append(dst, next, 0)
			dst = binary.BigEndian.AppendUint16(dst, fo)
			dst = append(dst, 0xde, 0xad, 0xbe, 0xef)
			continue
		}
		n := extLen(e)
		dst = append(dst, next, uint8(n/8-1))
		for j := 2; j < n; j++ {
			dst = append(dst, 0)
		}
	}
	dst = appendL4(dst, fr, rule.IPv6)
	for len(dst)-h < ipLen {
		dst = append(dst, byte(len(dst)))
	}
	return dst
}

func extLen(e Ext) int {
	if e.Type == 44 {
		return 8
	}
	n := (e.Len + 7) &^ 7
	if n < 8 {
		n = 8
	}
	if n > 2048 {
		n = 2048
	}
	return n
}

// appendL4 writes the upper-layer header. It is written for fragments with a
// non-zero offset too: those bytes are fragment data that must be ignored.
func appendL4(dst []byte, fr *Frame, fam rule.Family) []byte {
	switch fr.Proto {
	case rule.ProtoTCP:
		dst = binary.BigEndian.AppendUint16(dst, fr.SrcPort)
		dst = binary.BigEndian.AppendUint16(dst, fr.DstPort)
		dst = append(dst, 0, 0, 0, 1, 0, 0, 0, 0, 0x50, fr.TCPFlags, 0xff, 0xff, 0, 0, 0, 0)
	case rule.ProtoUDP:
		dst = binary.BigEndian.AppendUint16(dst, fr.SrcPort)
		dst = binary.BigEndian.AppendUint16(dst, fr.DstPort)
		dst = append(dst, 0, 8, 0, 0)
	case rule.ProtoSCTP:
		dst = binary.BigEndian.AppendUint16(dst, fr.SrcPort)
		dst = binary.BigEndian.AppendUint16(dst, fr.DstPort)
		dst = append(dst, 0, 0, 0, 1, 0, 0, 0, 0)
	case rule.ProtoICMP, rule.ProtoICMPv6:
		dst = append(dst, fr.ICMPType, fr.ICMPCode, 0, 0, 0, 1, 0, 1)
	}
	return dst
}

func checksum(b []byte) uint16 {
	var s uint32
	for i := 0; i+1 < len(b); i += 2 {
		s += uint32(binary.BigEndian.Uint16(b[i:]))
	}
	for s>>16 != 0 {
		s = s&0xffff + s>>16
	}
	return ^uint16(s)
}
