package compile

import (
	"net/netip"
	"slices"

	"github.com/scrubd/scrubd/swpath/rule"
)

// subtractAccept returns matches whose union holds for exactly the packets
// d holds for and a does not (d∖a), and false when that cannot be written
// as a few matches. It succeeds when a's condition on every field but one
// is implied by d's, and that one field is an address prefix, a port list
// (with d sure to carry ports), an ICMP type or code list (with d sure to
// be ICMP), a protocol list or a DSCP set: then d∖a is d with that field
// narrowed to its complement. A d that a does not touch comes back as is;
// a d inside a comes back as nothing.
func subtractAccept(d, a *rule.Match) ([]rule.Match, bool) {
	if !Overlap(d, a) {
		return []rule.Match{*d}, true
	}
	famD, famA := d.Family(), a.Family()
	if famA != rule.FamilyAny && famA != famD {
		return nil, false
	}
	type field int
	const (
		fSrc field = iota
		fDst
		fProto
		fSrcPort
		fDstPort
		fICMPType
		fICMPCode
		fDSCP
	)
	var open []field
	prefixIn := func(a, d netip.Prefix) bool {
		return !a.IsValid() || d.IsValid() && a.Bits() <= d.Bits() && a.Contains(d.Addr())
	}
	rangesIn := func(a, d rule.Ranges, max uint32) bool {
		return a == nil || d != nil && len(subtract(norm(d, max), norm(a, max), max)) == 0
	}
	if !prefixIn(a.Src, d.Src) {
		open = append(open, fSrc)
	}
	if !prefixIn(a.Dst, d.Dst) {
		open = append(open, fDst)
	}
	if a.Proto != nil && (d.Proto == nil || slices.ContainsFunc(d.Proto, func(p uint8) bool { return !slices.Contains(a.Proto, p) })) {
		open = append(open, fProto)
	}
	if !rangesIn(a.SrcPort, d.SrcPort, 0xffff) {
		open = append(open, fSrcPort)
	}
	if !rangesIn(a.DstPort, d.DstPort, 0xffff) {
		open = append(open, fDstPort)
	}
	if !rangesIn(a.ICMPType, d.ICMPType, 255) {
		open = append(open, fICMPType)
	}
	if !rangesIn(a.ICMPCode, d.ICMPCode, 255) {
		open = append(open, fICMPCode)
	}
	if a.DSCP != 0 && (d.DSCP == 0 || d.DSCP&^a.DSCP != 0) {
		open = append(open, fDSCP)
	}
	// Fields that cannot be the one to narrow must be implied outright.
	if a.Port != nil && (d.Port == nil || !rangesIn(a.Port, d.Port, 0xffff)) {
		return nil, false
	}
	if a.HasTCPFlags && (!d.HasTCPFlags || d.TCPFlags.Mask&a.TCPFlags.Mask != a.TCPFlags.Mask ||
		d.TCPFlags.Value&a.TCPFlags.Mask != a.TCPFlags.Value) {
		return nil, false
	}
	if a.Fragment != 0 {
		for _, fam := range []rule.Family{rule.IPv4, rule.IPv6} {
			if familyAllows(d, fam) && fragCells(d, fam)&^fragCells(a, fam) != 0 {
				return nil, false
			}
		}
	}
	if !rangesIn(a.Length, d.Length, ^uint32(0)) {
		return nil, false
	}
	if len(open) == 0 {
		return nil, true // d lies inside a
	}
	if len(open) > 1 {
		return nil, false
	}
	out := *d
	hasPorts := d.SrcPort != nil || d.DstPort != nil || d.Port != nil
	hasICMP := d.ICMPType != nil || d.ICMPCode != nil
	switch open[0] {
	case fSrc, fDst:
		ap, dp := a.Src, d.Src
		if open[0] == fDst {
			ap, dp = a.Dst, d.Dst
		}
		if !dp.IsValid() {
			if famD == rule.FamilyAny {
				return nil, false
			}
			dp = netip.PrefixFrom(ap.Addr(), 0).Masked()
		}
		var parts []rule.Match
		for _, p := range prefixComplement(dp, ap) {
			m := out
			if open[0] == fSrc {
				m.Src = p
			} else {
				m.Dst = p
			}
			parts = append(parts, m)
		}
		return parts, true
	case fProto:
		if d.Proto == nil {
			return nil, false
		}
		out.Proto = []uint8{}
		for _, p := range d.Proto {
			if !slices.Contains(a.Proto, p) {
				out.Proto = append(out.Proto, p)
			}
		}
	case fSrcPort:
		if !hasPorts {
			return nil, false
		}
		out.SrcPort = subtract(norm(d.SrcPort, 0xffff), norm(a.SrcPort, 0xffff), 0xffff)
	case fDstPort:
		if !hasPorts {
			return nil, false
		}
		out.DstPort = subtract(norm(d.DstPort, 0xffff), norm(a.DstPort, 0xffff), 0xffff)
	case fICMPType:
		if !hasICMP {
			return nil, false
		}
		out.ICMPType = subtract(norm(d.ICMPType, 255), norm(a.ICMPType, 255), 255)
	case fICMPCode:
		if !hasICMP {
			return nil, false
		}
		out.ICMPCode = subtract(norm(d.ICMPCode, 255), norm(a.ICMPCode, 255), 255)
	case fDSCP:
		ds := d.DSCP
		if ds == 0 {
			ds = ^uint64(0)
		}
		out.DSCP = ds &^ a.DSCP
		if out.DSCP == 0 {
			return nil, true
		}
	}
	return []rule.Match{out}, true
}

// prefixComplement returns the prefixes covering q minus p, for p inside q:
// the sibling of p's ancestor at each length from q's length + 1 to p's.
func prefixComplement(q, p netip.Prefix) []netip.Prefix {
	var out []netip.Prefix
	for l := q.Bits() + 1; l <= p.Bits(); l++ {
		anc := netip.PrefixFrom(p.Addr(), l).Masked()
		b := anc.Addr().AsSlice()
		b[(l-1)/8] ^= 0x80 >> ((l - 1) % 8)
		sib, _ := netip.AddrFromSlice(b)
		out = append(out, netip.PrefixFrom(sib, l))
	}
	return out
}
