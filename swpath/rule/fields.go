package rule

import (
	"encoding/binary"
	"math/bits"
	"net/netip"
)

// Addr is an IP address as a 128-bit big-endian number. An IPv4 address sits
// in the top 32 bits of Hi, so a prefix of length n is the top n bits for both
// families.
type Addr struct{ Hi, Lo uint64 }

// AddrFrom converts a netip.Addr (4 or 16 bytes; 4in6 stays IPv6).
func AddrFrom(a netip.Addr) Addr {
	if a.Is4() {
		b := a.As4()
		return Addr{Hi: uint64(binary.BigEndian.Uint32(b[:])) << 32}
	}
	b := a.As16()
	return Addr{Hi: binary.BigEndian.Uint64(b[:8]), Lo: binary.BigEndian.Uint64(b[8:])}
}

// AddrFrom4 converts 4 bytes of an IPv4 address in network order.
func AddrFrom4(b []byte) Addr {
	return Addr{Hi: uint64(binary.BigEndian.Uint32(b)) << 32}
}

// AddrFrom16 converts 16 bytes of an IPv6 address in network order.
func AddrFrom16(b []byte) Addr {
	return Addr{Hi: binary.BigEndian.Uint64(b), Lo: binary.BigEndian.Uint64(b[8:])}
}

// PrefixMask returns the mask of the top n bits (0..128).
func PrefixMask(n int) Addr {
	switch {
	case n <= 0:
		return Addr{}
	case n <= 64:
		return Addr{Hi: ^uint64(0) << (64 - n)}
	case n >= 128:
		return Addr{Hi: ^uint64(0), Lo: ^uint64(0)}
	}
	return Addr{Hi: ^uint64(0), Lo: ^uint64(0) << (128 - n)}
}

// And returns a & m.
func (a Addr) And(m Addr) Addr { return Addr{a.Hi & m.Hi, a.Lo & m.Lo} }

// PrefixLen returns the number of leading one bits of a mask.
func (a Addr) PrefixLen() int {
	if a.Hi != ^uint64(0) {
		return bits.LeadingZeros64(^a.Hi)
	}
	return 64 + bits.LeadingZeros64(^a.Lo)
}

// Netip converts back, as IPv4 when fam is IPv4.
func (a Addr) Netip(fam Family) netip.Addr {
	if fam == IPv4 {
		var b [4]byte
		binary.BigEndian.PutUint32(b[:], uint32(a.Hi>>32))
		return netip.AddrFrom4(b)
	}
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], a.Hi)
	binary.BigEndian.PutUint64(b[8:], a.Lo)
	return netip.AddrFrom16(b)
}

// PrefixAddr returns the masked address and mask of p.
func PrefixAddr(p netip.Prefix) (addr, mask Addr) {
	m := PrefixMask(p.Bits())
	return AddrFrom(p.Addr()).And(m), m
}

// Fields is a packet reduced to what rules can match. The zero Fields is a
// non-IP packet. See the package doc for how a parser fills it.
type Fields struct {
	Family Family // 0: not IP; no rule matches
	Proto  uint8
	// L4 reports that the upper-layer header is present: the packet is not a
	// non-first fragment and holds the protocol's fixed header.
	L4       bool
	Frag     Frag // every fragment state that holds
	DSCP     uint8
	TCPFlags uint8
	ICMPType uint8
	ICMPCode uint8
	SrcPort  uint16
	DstPort  uint16
	Length   uint32
	Src, Dst Addr
}

// HasPorts reports whether the packet carries an L4 header with ports.
func (f *Fields) HasPorts() bool {
	return f.L4 && (f.Proto == ProtoTCP || f.Proto == ProtoUDP || f.Proto == ProtoSCTP)
}

// HasICMP reports whether the packet carries an ICMP header of its family.
func (f *Fields) HasICMP() bool {
	return f.L4 && ((f.Family == IPv4 && f.Proto == ProtoICMP) || (f.Family == IPv6 && f.Proto == ProtoICMPv6))
}

// FragState returns the fragment states that hold for a packet with the given
// don't-fragment bit, more-fragments bit and fragment offset.
func FragState(df, mf bool, offset uint16) Frag {
	var f Frag
	if df {
		f |= DontFragment
	}
	switch {
	case offset != 0 && mf:
		f |= IsFragment
	case offset != 0:
		f |= IsFragment | LastFragment
	case mf:
		f |= FirstFragment
	default:
		f |= NotFragment
	}
	return f
}

func prefixHolds(p netip.Prefix, a Addr) bool {
	if !p.IsValid() {
		return true
	}
	pa, m := PrefixAddr(p)
	return a.And(m) == pa
}

// Matches reports whether the packet f satisfies m on its own, regardless of
// other rules. It is the reference for every engine.
func (m *Match) Matches(f *Fields) bool {
	if f.Family == 0 {
		return false
	}
	if fam := m.Family(); fam != FamilyAny && fam != f.Family {
		return false
	}
	if !prefixHolds(m.Src, f.Src) || !prefixHolds(m.Dst, f.Dst) {
		return false
	}
	if m.Proto != nil && !containsProto(m.Proto, f.Proto) {
		return false
	}
	if m.SrcPort != nil || m.DstPort != nil || m.Port != nil {
		if !f.HasPorts() {
			return false
		}
		if m.SrcPort != nil && !m.SrcPort.Contains(uint32(f.SrcPort)) {
			return false
		}
		if m.DstPort != nil && !m.DstPort.Contains(uint32(f.DstPort)) {
			return false
		}
		if m.Port != nil && !m.Port.Contains(uint32(f.SrcPort)) && !m.Port.Contains(uint32(f.DstPort)) {
			return false
		}
	}
	if m.HasTCPFlags {
		if !f.L4 || f.Proto != ProtoTCP || f.TCPFlags&m.TCPFlags.Mask != m.TCPFlags.Value {
			return false
		}
	}
	if m.ICMPType != nil || m.ICMPCode != nil {
		if !f.HasICMP() {
			return false
		}
		if m.ICMPType != nil && !m.ICMPType.Contains(uint32(f.ICMPType)) {
			return false
		}
		if m.ICMPCode != nil && !m.ICMPCode.Contains(uint32(f.ICMPCode)) {
			return false
		}
	}
	if m.Fragment != 0 && m.Fragment&f.Frag == 0 {
		return false
	}
	if m.Length != nil && !m.Length.Contains(f.Length) {
		return false
	}
	if m.DSCP != 0 && m.DSCP&(1<<(f.DSCP&63)) == 0 {
		return false
	}
	return true
}

func containsProto(ps []uint8, p uint8) bool {
	for _, x := range ps {
		if x == p {
			return true
		}
	}
	return false
}

// Decide is the reference decision: a linear scan for the deciding rule. It
// returns the index of the deciding rule in s, or -1 when no rule matches (the
// packet passes). Expired rules are the caller's business.
func (s *Set) Decide(f *Fields) int {
	best := -1
	for i := range s.Rules {
		r := &s.Rules[i]
		if best >= 0 && !Before(r, s.Key(i), &s.Rules[best], s.Key(best)) {
			continue
		}
		if r.Match.Matches(f) && s.Live(i) {
			best = i
		}
	}
	return best
}
