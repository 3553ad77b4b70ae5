// Package protect decides how a drop rule relates to the protected traffic
// (the management address, the BGP peers, the operator's protect list): a
// rule that can only ever drop protected traffic is refused; one that
// overlaps it is narrowed, which means the protect list's accept rules, placed
// first at priority 0, except the protected traffic from it in every engine.
//
// The analysis is conservative: Overlaps may say yes for rules that cannot
// actually share a packet (the cost is a narrowed rule that is kept out of
// hardware), but Covers says yes only when every packet the rule matches is
// protected.
package protect

import (
	"fmt"
	"net/netip"
	"slices"

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

// Entry is one protected item: an accept rule (Src or Dst prefix, optionally
// protocols and ports) and a note for messages.
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
	var hit []string
	for _, e := range l.Entries {
		p := &e.Rule.Match
		if Covers(p, &r.Match) {
			return Refused, fmt.Sprintf("refused: every packet it matches is protected by %s (%s)", describe(p), e.Note)
		}
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

func prefixesOverlap(a, b netip.Prefix) bool {
	if !a.IsValid() || !b.IsValid() {
		return true
	}
	if a.Addr().Is4() != b.Addr().Is4() {
		return false
	}
	return a.Overlaps(b)
}

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

func rangesOverlap(a, b rule.Ranges) bool {
	if a == nil || b == nil {
		return true
	}
	for _, x := range a {
		for _, y := range b {
			if x.Lo <= y.Hi && y.Lo <= x.Hi {
				return true
			}
		}
	}
	return false
}

func rangesWithin(inner, outer rule.Ranges) bool {
	if outer == nil {
		return true
	}
	if inner == nil {
		return false
	}
	for _, x := range inner {
		ok := false
		for _, y := range outer {
			if y.Lo <= x.Lo && x.Hi <= y.Hi {
				ok = true
				break
			}
		}
		if !ok {
			return false
		}
	}
	return true
}

func protosOverlap(a, b []uint8) bool {
	if a == nil || b == nil {
		return true
	}
	for _, x := range a {
		if slices.Contains(b, x) {
			return true
		}
	}
	return false
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

// Overlaps reports whether a packet might match both p (a protect rule with
// at most Src or Dst, Proto and Port) and m. It never says no when a shared
// packet exists.
func Overlaps(p, m *rule.Match) bool {
	if pf, mf := p.Family(), m.Family(); pf != rule.FamilyAny && mf != rule.FamilyAny && pf != mf {
		return false
	}
	if !prefixesOverlap(p.Src, m.Src) || !prefixesOverlap(p.Dst, m.Dst) {
		return false
	}
	if !protosOverlap(p.Proto, m.Proto) {
		return false
	}
	if p.Port != nil && m.SrcPort != nil && m.DstPort != nil &&
		!rangesOverlap(p.Port, m.SrcPort) && !rangesOverlap(p.Port, m.DstPort) {
		// Both of the packet's ports lie outside the protected ones.
		return false
	}
	return true
}

// Covers reports whether every packet m matches also matches p.
func Covers(p, m *rule.Match) bool {
	if pf := p.Family(); pf != rule.FamilyAny && m.Family() != pf {
		return false
	}
	if !within(m.Src, p.Src) || !within(m.Dst, p.Dst) {
		return false
	}
	if !protosWithin(m.Proto, p.Proto) {
		return false
	}
	if p.Port != nil {
		// m must force a port inside p.Port on one side.
		if !(rangesWithin(m.SrcPort, p.Port) && m.SrcPort != nil) &&
			!(rangesWithin(m.DstPort, p.Port) && m.DstPort != nil) {
			return false
		}
	}
	return true
}
