package compile

import "github.com/scrubd/scrubd/swpath/rule"

// Overlap reports whether some packet may match both a and b. It never
// reports false when such a packet exists (it is exact per field and
// conservative across fields), so a drop rule it clears can go to hardware
// without dropping anything an earlier accept rule passes.
func Overlap(a, b *rule.Match) bool {
	for _, fam := range []rule.Family{rule.IPv4, rule.IPv6} {
		if overlapFamily(a, b, fam) {
			return true
		}
	}
	return false
}

func familyAllows(m *rule.Match, fam rule.Family) bool {
	f := m.Family()
	return f == rule.FamilyAny || f == fam
}

func overlapFamily(a, b *rule.Match, fam rule.Family) bool {
	if !familyAllows(a, fam) || !familyAllows(b, fam) {
		return false
	}
	if a.Src.IsValid() && b.Src.IsValid() && !a.Src.Overlaps(b.Src) {
		return false
	}
	if a.Dst.IsValid() && b.Dst.IsValid() && !a.Dst.Overlaps(b.Dst) {
		return false
	}
	pa, pb := protos(a, fam), protos(b, fam)
	if pa != nil && len(pa) == 0 || pb != nil && len(pb) == 0 {
		return false
	}
	if pa != nil && pb != nil && !sharesProto(pa, pb) {
		return false
	}
	if !portsOverlap(a, b) {
		return false
	}
	if a.HasTCPFlags && b.HasTCPFlags && (a.TCPFlags.Value^b.TCPFlags.Value)&a.TCPFlags.Mask&b.TCPFlags.Mask != 0 {
		return false
	}
	if !rangesMeet(a.ICMPType, b.ICMPType, 255) || !rangesMeet(a.ICMPCode, b.ICMPCode, 255) {
		return false
	}
	if !rangesMeet(a.Length, b.Length, ^uint32(0)) {
		return false
	}
	if a.DSCP != 0 && b.DSCP != 0 && a.DSCP&b.DSCP == 0 {
		return false
	}
	return fragCells(a, fam)&fragCells(b, fam) != 0
}

func sharesProto(a, b []uint8) bool {
	for _, x := range a {
		for _, y := range b {
			if x == y {
				return true
			}
		}
	}
	return false
}

func rangesMeet(a, b rule.Ranges, max uint32) bool {
	if a == nil || b == nil {
		return true
	}
	return len(intersect(norm(a, max), norm(b, max))) > 0
}

// fragCells returns the bit set of (df, fragment state) cells of family fam
// whose packets can match m (later fragments excluded when m needs L4).
func fragCells(m *rule.Match, fam rule.Family) uint8 {
	cells := []struct {
		mf  bool
		off uint16
	}{{false, 0}, {true, 0}, {true, 8}, {false, 8}}
	var out uint8
	for i, c := range cells {
		if m.NeedsL4() && c.off != 0 {
			continue
		}
		for d, df := range []bool{false, true} {
			if df && fam == rule.IPv6 {
				continue
			}
			if m.Fragment == 0 || m.Fragment&rule.FragState(df, c.mf, c.off) != 0 {
				out |= 1 << (i*2 + d)
			}
		}
	}
	return out
}

// portsOverlap reports whether some (src, dst) port pair satisfies the port
// conditions of both a and b. Each `port` list must hold on the source or
// the destination side; every assignment of sides is tried.
func portsOverlap(a, b *rule.Match) bool {
	const max = 0xffff
	s := intersect(norm(a.SrcPort, max), norm(b.SrcPort, max))
	d := intersect(norm(a.DstPort, max), norm(b.DstPort, max))
	var ps []rule.Ranges
	for _, p := range []rule.Ranges{a.Port, b.Port} {
		if p != nil {
			ps = append(ps, norm(p, max))
		}
	}
	for side := 0; side < 1<<len(ps); side++ {
		ss, dd := s, d
		for i, p := range ps {
			if side&(1<<i) == 0 {
				ss = intersect(ss, p)
			} else {
				dd = intersect(dd, p)
			}
		}
		if (ss == nil || len(ss) > 0) && (dd == nil || len(dd) > 0) {
			return true
		}
	}
	return false
}
