package rule

import (
	"errors"
	"fmt"
	"math/bits"
	"strconv"
)

// Guard refuses rules that cover too much of the address space. A rule
// file cut short, a FlowSpec route without a destination or an API body
// with a typo can otherwise turn into "drop every packet"; the guard makes
// that a refusal with a reason instead.
//
// A drop rule passes when its source or its destination prefix is at least
// MinPrefixV4 bits long (IPv4) or MinPrefixV6 bits long (IPv6). A rule with
// neither prefix covers both families whole: it passes only when both limits
// are 0. Accept rules are not limited by prefix (they only ever let packets
// through), but a match-all ("match: all") of any action passes only with
// AllowMatchAll.
type Guard struct {
	MinPrefixV4   int
	MinPrefixV6   int
	AllowMatchAll bool
	// MaxListEntries bounds the entries of each list condition (protocols,
	// port, ICMP and length ranges, DSCP values) of any rule, accept or
	// drop (0: no bound): a list of thousands of ports costs every engine
	// (hardware entries, classifier tables) and is not what an operator or
	// a detector means.
	MaxListEntries int
}

// DefaultGuard is the guard an agent applies unless configured otherwise:
// a drop rule names a source or destination of at least a /8 (IPv4) or a
// /32 (IPv6), and match-all is refused. A source blocklist entry such as
// 198.51.100.0/24 passes; dst 0.0.0.0/0 alone does not.
var DefaultGuard = Guard{MinPrefixV4: 8, MinPrefixV6: 32}

// Check returns nil if r passes, else an *Error naming the rule, the field
// and why. Whatever the guard's settings, a rule that fails
// Match.CheckBounds fails Check: every rule the store takes passes it.
func (g Guard) Check(r *Rule) error {
	m := &r.Match
	if e := m.bounds(); e != nil {
		e.RuleID = r.ID
		return e
	}
	fail := func(field, value, format string, a ...any) error {
		return &Error{RuleID: r.ID, Field: field, Value: value, Reason: fmt.Sprintf(format, a...)}
	}
	if m.All && !g.AllowMatchAll {
		return fail("match", MatchAllName, "matches every packet: refused unless rules.guard.allow_match_all is true")
	}
	if g.MaxListEntries > 0 {
		for _, l := range []struct {
			field string
			n     int
		}{{"match.proto", len(m.Proto)}, {"match.src_port", len(m.SrcPort)}, {"match.dst_port", len(m.DstPort)},
			{"match.port", len(m.Port)}, {"match.icmp_type", len(m.ICMPType)}, {"match.icmp_code", len(m.ICMPCode)},
			{"match.length", len(m.Length)}, {"match.dscp", bits.OnesCount64(m.DSCP)}} {
			if l.n > g.MaxListEntries {
				return fail(l.field, "", "%d entries, more than the %d of rules.guard.max_list_entries", l.n, g.MaxListEntries)
			}
		}
	}
	if r.Action != Drop {
		return nil
	}
	fam := m.Family()
	if fam == FamilyAny {
		if g.MinPrefixV4 > 0 || g.MinPrefixV6 > 0 {
			return fail("match", "", "too broad: a drop rule without a source or destination address drops matching packets of every address; "+
				"give match.src or match.dst (at least /%d in IPv4, /%d in IPv6: rules.guard.min_prefix_v4, min_prefix_v6)", g.MinPrefixV4, g.MinPrefixV6)
		}
		return nil
	}
	min, key := g.MinPrefixV4, "rules.guard.min_prefix_v4"
	if fam == IPv6 {
		min, key = g.MinPrefixV6, "rules.guard.min_prefix_v6"
	}
	// The more specific of the two prefixes bounds what the rule covers.
	field, p := "match.dst", m.Dst
	if !p.IsValid() || (m.Src.IsValid() && m.Src.Bits() > p.Bits()) {
		field, p = "match.src", m.Src
	}
	if p.Bits() < min {
		other := ""
		if m.Src.IsValid() && m.Dst.IsValid() {
			other = " (the more specific of match.src and match.dst)"
		}
		return fail(field, p.String(), "too broad: a drop rule needs a source or destination prefix of /%d or longer in IPv%d%s, this is /%s (limit: %s)",
			min, fam, other, strconv.Itoa(p.Bits()), key)
	}
	return nil
}

// CheckSet checks every rule of s and returns every refusal (up to 20),
// each with name (a file name) filled in.
func (g Guard) CheckSet(name string, s *Set) error {
	var errs []error
	for i := range s.Rules {
		if err := g.Check(&s.Rules[i]); err != nil && len(errs) < maxErrors {
			if e, ok := err.(*Error); ok {
				e.File = name
			}
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
