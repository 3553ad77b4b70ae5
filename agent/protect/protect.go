// Package protect decides how a drop rule relates to the protected traffic
// (the management address, the BGP peers, the operator's protect list): a
// rule that can only ever drop protected traffic is refused; one that
// overlaps it is narrowed, which means the protect list's accept rules, placed
// first at priority 0, except the protected traffic from it in every engine.
//
// The analysis is conservative: Overlaps may say yes for rules that cannot
// actually share a packet (the cost is a narrowed rule), but Covers says yes
// only when every packet the rule matches is protected. Both understand a
// protect rule's source, destination and either-side (`port`) ports, and a
// drop rule's; a rule with `port` is refused when its source side is
// covered by one entry and its destination side by another (the BGP
// session's two protect rules).
package protect

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/scrubd/scrubd/offload/compile"
	"github.com/scrubd/scrubd/swpath/rule"
)

// Verdict is how a rule relates to the protected set.
type Verdict int

const (
	// Clear: the rule cannot drop protected traffic.
	Clear Verdict = iota
	// Narrowed: some traffic the rule matches is protected; the protect
	// rules except it.
	Narrowed
	// Refused: every packet the rule matches is protected.
	Refused
)

func (v Verdict) String() string {
	switch v {
	case Clear:
		return "clear"
	case Narrowed:
		return "narrowed"
	case Refused:
		return "refused"
	}
	return fmt.Sprintf("verdict(%d)", int(v))
}

// Entry is one protected item: an accept rule (Src and/or Dst prefix,
// optionally protocols and source, destination or either-side ports) and a
// note for messages.
type Entry struct {
	Rule rule.Rule
	Note string
}

// List is the protected set.
type List struct{ Entries []Entry }

// Rules returns the accept rules, in order.
func (l *List) Rules() []rule.Rule {
	out := make([]rule.Rule, len(l.Entries))
	for i, e := range l.Entries {
		out[i] = e.Rule
	}
	return out
}

// Check classifies a rule. Accept rules are always Clear.
func (l *List) Check(r *rule.Rule) (Verdict, string) {
	if r.Action != rule.Drop {
		return Clear, ""
	}
	if why, ok := l.coveredByList(&r.Match); ok {
		return Refused, "refused: every packet it matches is protected by " + why
	}
	var hit []string
	for _, e := range l.Entries {
		p := &e.Rule.Match
		if Overlaps(p, &r.Match) {
			hit = append(hit, fmt.Sprintf("%s (%s)", describe(p), e.Note))
		}
	}
	if len(hit) == 0 {
		return Clear, ""
	}
	slices.Sort(hit)
	hit = slices.Compact(hit)
	return Narrowed, fmt.Sprintf("narrowed: protected traffic excepted: %v", hit)
}

func describe(m *rule.Match) string { return m.String() }

// within reports whether inner lies inside outer (outer not given: yes).
func within(inner, outer netip.Prefix) bool {
	if !outer.IsValid() {
		return true
	}
	if !inner.IsValid() || inner.Addr().Is4() != outer.Addr().Is4() {
		return false
	}
	return outer.Bits() <= inner.Bits() && outer.Contains(inner.Addr())
}

// portProtos are the protocols whose packets carry ports (rule.Fields.HasPorts).
var portProtos = []uint8{rule.ProtoTCP, rule.ProtoUDP, rule.ProtoSCTP}

func hasPortCond(m *rule.Match) bool { return m.SrcPort != nil || m.DstPort != nil || m.Port != nil }

// portSet is a set of 16-bit port numbers.
type portSet [1024]uint64

func setOf(rs rule.Ranges) *portSet {
	var s portSet
	if rs == nil {
		for i := range s {
			s[i] = ^uint64(0)
		}
		return &s
	}
	for _, r := range rs {
		for v := r.Lo; v <= r.Hi && v <= 0xffff; v++ {
			s[v>>6] |= 1 << (v & 63)
		}
	}
	return &s
}

func (s *portSet) and(o *portSet) *portSet {
	var r portSet
	for i := range r {
		r[i] = s[i] & o[i]
	}
	return &r
}

func (s *portSet) andNot(o *portSet) *portSet {
	var r portSet
	for i := range r {
		r[i] = s[i] &^ o[i]
	}
	return &r
}

func (s *portSet) or(o *portSet) *portSet {
	var r portSet
	for i := range r {
		r[i] = s[i] | o[i]
	}
	return &r
}

func (s *portSet) empty() bool {
	for _, w := range s {
		if w != 0 {
			return false
		}
	}
	return true
}

func (s *portSet) subsetOf(o *portSet) bool { return s.andNot(o).empty() }

// rect is a set of (source port, destination port) pairs A x B.
type rect struct{ a, b *portSet }

// rects returns m's port condition as a union of rectangles: SrcPort x
// DstPort, narrowed by Port (source or destination) into two.
func rects(m *rule.Match) []rect {
	s, d := setOf(m.SrcPort), setOf(m.DstPort)
	if m.Port == nil {
		return []rect{{s, d}}
	}
	p := setOf(m.Port)
	return []rect{{s.and(p), d}, {s, d.and(p)}}
}

// rectWithin reports whether r lies inside the union of us, exactly: r's
// source ports are cut into the pieces that lie in the same rectangles of
// us, and each piece's destination ports must lie in their union.
func rectWithin(r rect, us []rect) bool {
	if r.a.empty() || r.b.empty() {
		return true
	}
	var pieces func(a *portSet, i int, ys *portSet) bool
	pieces = func(a *portSet, i int, ys *portSet) bool {
		if a.empty() {
			return true
		}
		if i == len(us) {
			return r.b.subsetOf(ys)
		}
		return pieces(a.and(us[i].a), i+1, ys.or(us[i].b)) && pieces(a.andNot(us[i].a), i+1, ys)
	}
	return pieces(r.a, 0, &portSet{})
}

// Overlaps reports whether a packet might match both p (a protect rule) and
// m: exact per field (addresses, protocols, source, destination and
// either-side ports, ...), conservative across fields, so it never says no
// when a shared packet exists.
func Overlaps(p, m *rule.Match) bool { return compile.Overlap(p, m) }

// Covers reports whether every packet m matches also matches p. p may hold
// addresses, protocols and ports (source, destination or either side); a p
// with any other condition covers nothing (conservative). For such p the
// answer is exact.
func Covers(p, m *rule.Match) bool {
	if p.ICMPType != nil || p.ICMPCode != nil || p.HasTCPFlags || p.Fragment != 0 || p.Length != nil || p.DSCP != 0 {
		return false
	}
	if pf := p.Family(); pf != rule.FamilyAny && m.Family() != pf {
		return false
	}
	if !within(m.Src, p.Src) || !within(m.Dst, p.Dst) {
		return false
	}
	mp := m.Proto
	if mp == nil && hasPortCond(m) {
		mp = portProtos // only packets with ports match m
	}
	if !protosWithin(mp, p.Proto) {
		return false
	}
	if !hasPortCond(p) {
		return true
	}
	if !hasPortCond(m) {
		// m matches packets without ports (other protocols, later
		// fragments), which p does not.
		return false
	}
	us := rects(p)
	for _, r := range rects(m) {
		if !rectWithin(r, us) {
			return false
		}
	}
	return true
}

// coveredByList reports whether every packet m matches is matched by some
// entry: by one entry, or, for a rule with `port` (source or destination),
// its source side by one entry and its destination side by another (the
// BGP session's two protect rules, one per port direction).
func (l *List) coveredByList(m *rule.Match) (string, bool) {
	for _, e := range l.Entries {
		if Covers(&e.Rule.Match, m) {
			return fmt.Sprintf("%s (%s)", describe(&e.Rule.Match), e.Note), true
		}
	}
	if m.Port == nil {
		return "", false
	}
	src, dst := *m, *m
	src.Port, dst.Port = nil, nil
	src.SrcPort = intersectRanges(m.SrcPort, m.Port)
	dst.DstPort = intersectRanges(m.DstPort, m.Port)
	var why []string
	for _, half := range []*rule.Match{&src, &dst} {
		if half.SrcPort != nil && len(half.SrcPort) == 0 || half.DstPort != nil && len(half.DstPort) == 0 {
			continue // no packet
		}
		w, ok := l.coveredByList(half)
		if !ok {
			return "", false
		}
		why = append(why, w)
	}
	return strings.Join(why, " and "), true
}

// intersectRanges returns a ∩ b (nil: every port).
func intersectRanges(a, b rule.Ranges) rule.Ranges {
	if a == nil {
		return slices.Clone(b)
	}
	if b == nil {
		return slices.Clone(a)
	}
	out := rule.Ranges{}
	for _, x := range a {
		for _, y := range b {
			if lo, hi := max(x.Lo, y.Lo), min(x.Hi, y.Hi); lo <= hi {
				out = append(out, rule.Range{Lo: lo, Hi: hi})
			}
		}
	}
	return out
}

func protosWithin(inner, outer []uint8) bool {
	if outer == nil {
		return true
	}
	if inner == nil {
		return false
	}
	for _, x := range inner {
		if !slices.Contains(outer, x) {
			return false
		}
	}
	return true
}
