package flowspec

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"net/netip"
	"slices"
	"time"

	"github.com/osrg/gobgp/v3/pkg/packet/bgp"

	"github.com/scrubd/scrubd/swpath/rule"
)

// Refusal is why a FlowSpec route did not become a rule. Reason is a short
// label for counters; Detail names the component or action and its value.
type Refusal struct {
	Reason string
	Detail string
}

func (r *Refusal) Error() string { return r.Reason + ": " + r.Detail }

// Refusal reasons (metric label values).
const (
	ReasonAction      = "unsupported_action" // not traffic-rate 0
	ReasonNoAction    = "no_drop_action"     // no traffic-rate at all
	ReasonComponent   = "unsupported_component"
	ReasonOperator    = "unsupported_operator" // bitmask combination the rule model cannot hold
	ReasonEmpty       = "matches_nothing"
	ReasonDestination = "destination_not_allowed"
	ReasonTooBroad    = "too_broad"      // refused by the rule guard (rules.guard)
	ReasonTooMany     = "too_many_rules" // the session's source holds rules.max_rules_per_source
	ReasonInvalid     = "invalid"
)

func refuse(reason, format string, a ...any) *Refusal {
	return &Refusal{Reason: reason, Detail: fmt.Sprintf(format, a...)}
}

// Action inspects the extended communities: traffic-rate-bytes (0x8006) or
// traffic-rate-packets (0x800c) with rate 0 mean drop. Any other FlowSpec
// action (a non-zero rate, redirect, remark) refuses the route, since
// enforcing it as a drop would drop traffic the sender meant to pass.
func Action(attrs []bgp.PathAttributeInterface) *Refusal {
	drop := false
	for _, a := range attrs {
		ec, ok := a.(*bgp.PathAttributeExtendedCommunities)
		if !ok {
			continue
		}
		for _, c := range ec.Value {
			switch v := c.(type) {
			case *bgp.TrafficRateExtended:
				if v.Rate != 0 {
					return refuse(ReasonAction, "traffic-rate-bytes %g (rate limiting) is not supported", v.Rate)
				}
				drop = true
			case *bgp.UnknownExtended:
				if uint8(v.Type) == 0x80 && len(v.Value) == 7 && v.Value[0] == 0x0c {
					rate := math.Float32frombits(binary.BigEndian.Uint32(v.Value[3:7]))
					if rate != 0 {
						return refuse(ReasonAction, "traffic-rate-packets %g (rate limiting) is not supported", rate)
					}
					drop = true
				}
			case *bgp.TrafficActionExtended:
				// Terminal/sample bits do not change a drop.
			case *bgp.RedirectTwoOctetAsSpecificExtended, *bgp.RedirectIPv4AddressSpecificExtended,
				*bgp.RedirectFourOctetAsSpecificExtended, *bgp.RedirectIPv6AddressSpecificExtended:
				return refuse(ReasonAction, "redirect %s is not supported", c.String())
			case *bgp.TrafficRemarkExtended:
				return refuse(ReasonAction, "traffic-marking %s is not supported", c.String())
			}
		}
	}
	if !drop {
		return refuse(ReasonNoAction, "no traffic-rate 0 (discard) action")
	}
	return nil
}

// RuleID names the rule of a route: a hash of its family and NLRI, stable
// across restarts and re-announcements and the same whichever peer sends it
// (two route reflectors announcing one route make one rule).
func RuleID(family bgp.RouteFamily, nlri []byte) string {
	h := sha256.New()
	var f [4]byte
	binary.BigEndian.PutUint32(f[:], uint32(family))
	h.Write(f[:])
	h.Write(nlri)
	return "fs-" + hex.EncodeToString(h.Sum(nil)[:8])
}

// numeric evaluates RFC 8955 numeric operators into ranges over [0, max]:
// terms joined by AND bind tighter than the OR between groups.
func numeric(items []*bgp.FlowSpecComponentItem, max uint32) rule.Ranges {
	var out rule.Ranges
	var group rule.Ranges
	for i, it := range items {
		t := term(it.Op, it.Value, max)
		if i == 0 || it.Op&bgp.DEC_NUM_OP_AND == 0 {
			if i > 0 {
				out = union(out, group)
			}
			group = t
			continue
		}
		group = intersect(group, t)
	}
	return union(out, group)
}

func term(op uint8, v uint64, max uint32) rule.Ranges {
	lt, gt, eq := op&0x04 != 0, op&0x02 != 0, op&0x01 != 0
	var rs rule.Ranges
	val := uint32(min(v, uint64(max)+1)) // values beyond max: only lt can hold
	if lt && val > 0 {
		rs = append(rs, rule.Range{Lo: 0, Hi: min(val-1, max)})
	}
	if eq && v <= uint64(max) {
		rs = append(rs, rule.Range{Lo: val, Hi: val})
	}
	if gt && v < uint64(max) {
		rs = append(rs, rule.Range{Lo: val + 1, Hi: max})
	}
	return normalize(rs)
}

func normalize(rs rule.Ranges) rule.Ranges {
	if len(rs) == 0 {
		return rule.Ranges{}
	}
	rs = slices.Clone(rs)
	slices.SortFunc(rs, func(a, b rule.Range) int { return int(int64(a.Lo) - int64(b.Lo)) })
	out := rule.Ranges{rs[0]}
	for _, r := range rs[1:] {
		last := &out[len(out)-1]
		if uint64(r.Lo) <= uint64(last.Hi)+1 {
			last.Hi = max(last.Hi, r.Hi)
			continue
		}
		out = append(out, r)
	}
	return out
}

func union(a, b rule.Ranges) rule.Ranges { return normalize(append(slices.Clone(a), b...)) }

func intersect(a, b rule.Ranges) rule.Ranges {
	var out rule.Ranges
	for _, x := range a {
		for _, y := range b {
			lo, hi := max(x.Lo, y.Lo), min(x.Hi, y.Hi)
			if lo <= hi {
				out = append(out, rule.Range{Lo: lo, Hi: hi})
			}
		}
	}
	return normalize(out)
}

// flags turns bitmask terms into one (value, mask) pair, where the rule
// model can hold them: a single term, or terms joined by AND whose masks
// do not conflict. match set: all bits of v set -> (v, v); neither: any bit
// set, which is one condition only for a single bit; not+match: not all set,
// one condition only for a single bit -> (0, v); not alone: none set -> (0, v).
func flags(items []*bgp.FlowSpecComponentItem) (value, mask uint8, ok bool) {
	for i, it := range items {
		if i > 0 && it.Op&bgp.BITMASK_FLAG_OP_AND == 0 {
			return 0, 0, false // OR of terms
		}
		v := uint8(it.Value)
		if uint64(v) != it.Value {
			return 0, 0, false
		}
		single := v != 0 && v&(v-1) == 0
		var tv, tm uint8
		switch it.Op & 0x03 {
		case bgp.BITMASK_FLAG_OP_MATCH:
			tv, tm = v, v
		case 0:
			if !single {
				return 0, 0, false
			}
			tv, tm = v, v
		case bgp.BITMASK_FLAG_OP_NOT:
			tv, tm = 0, v
		case bgp.BITMASK_FLAG_OP_NOT_MATCH:
			if !single {
				return 0, 0, false
			}
			tv, tm = 0, v
		}
		if (mask&tm)&(value^tv) != 0 {
			return 0, 0, false // contradicting terms
		}
		value, mask = value|tv, mask|tm
	}
	return value, mask, mask != 0
}

// fragments maps FlowSpec fragment terms onto the rule model's any-of set
// (0: any packet). A term of value 0 without the match bit is GoBGP's and
// ExaBGP's "not-a-fragment"; with the match bit it holds for every packet
// ((data AND 0) == 0, RFC 8955 section 4.2.1.2), and so does the component.
func fragments(items []*bgp.FlowSpecComponentItem) (rule.Frag, bool) {
	var out rule.Frag
	always := false
	for i, it := range items {
		if i > 0 && it.Op&bgp.BITMASK_FLAG_OP_AND != 0 {
			return 0, false
		}
		if it.Op&bgp.BITMASK_FLAG_OP_NOT != 0 {
			return 0, false
		}
		v := it.Value
		if it.Op&bgp.BITMASK_FLAG_OP_MATCH != 0 && v&(v-1) != 0 {
			return 0, false // all of several states: not expressible
		}
		if v == 0 && it.Op&bgp.BITMASK_FLAG_OP_MATCH != 0 {
			always = true
		} else if v == 0 {
			out |= rule.NotFragment
		}
		if v&bgp.FRAG_FLAG_DONT != 0 {
			out |= rule.DontFragment
		}
		if v&bgp.FRAG_FLAG_IS != 0 {
			out |= rule.IsFragment
		}
		if v&bgp.FRAG_FLAG_FIRST != 0 {
			out |= rule.FirstFragment
		}
		if v&bgp.FRAG_FLAG_LAST != 0 {
			out |= rule.LastFragment
		}
		if v&^0x0f != 0 {
			return 0, false
		}
	}
	if always {
		return 0, true
	}
	return out, out != 0
}

func prefixOf(p bgp.AddrPrefixInterface) (netip.Prefix, error) {
	pf, err := netip.ParsePrefix(p.String())
	if err != nil {
		return netip.Prefix{}, err
	}
	return pf.Masked(), nil
}

// Translate turns the components of a FlowSpec NLRI of family fam (IPv4 or
// IPv6 FlowSpec) into a drop rule with the given id and priority, or says
// why it cannot. The rule applies to fam's packets only, as RFC 8955 and
// 8956 say: a route without prefix components gets the family's whole
// address space as its destination (0.0.0.0/0, ::/0), so that "UDP port
// 53" of an IPv4 route does not drop IPv6 DNS.
func Translate(id string, priority uint32, fam rule.Family, comps []bgp.FlowSpecComponentInterface, allowed []netip.Prefix) (rule.Rule, *Refusal) {
	r := rule.Rule{ID: id, Priority: priority, Action: rule.Drop}
	m := &r.Match
	var seen [256]bool
	for _, c := range comps {
		// Each type at most once (RFC 8955 section 4.2). GoBGP's decoder
		// keeps repeats; translated one by one, the last would replace the
		// others, where the route asks for all of them.
		t := uint8(c.Type())
		if seen[t] {
			return r, refuse(ReasonInvalid, "component %s appears twice in one route (RFC 8955 section 4.2: each type at most once)", c.String())
		}
		seen[t] = true
		switch v := c.(type) {
		case *bgp.FlowSpecDestinationPrefix:
			p, err := prefixOf(v.Prefix)
			if err != nil {
				return r, refuse(ReasonInvalid, "destination prefix %s: %v", v.Prefix, err)
			}
			m.Dst = p
		case *bgp.FlowSpecSourcePrefix:
			p, err := prefixOf(v.Prefix)
			if err != nil {
				return r, refuse(ReasonInvalid, "source prefix %s: %v", v.Prefix, err)
			}
			m.Src = p
		case *bgp.FlowSpecDestinationPrefix6:
			if v.Offset != 0 {
				return r, refuse(ReasonComponent, "destination prefix %s with offset %d", v.Prefix, v.Offset)
			}
			p, err := prefixOf(v.Prefix)
			if err != nil {
				return r, refuse(ReasonInvalid, "destination prefix %s: %v", v.Prefix, err)
			}
			m.Dst = p
		case *bgp.FlowSpecSourcePrefix6:
			if v.Offset != 0 {
				return r, refuse(ReasonComponent, "source prefix %s with offset %d", v.Prefix, v.Offset)
			}
			p, err := prefixOf(v.Prefix)
			if err != nil {
				return r, refuse(ReasonInvalid, "source prefix %s: %v", v.Prefix, err)
			}
			m.Src = p
		case *bgp.FlowSpecComponent:
			if rf := component(m, v); rf != nil {
				return r, rf
			}
		default:
			return r, refuse(ReasonComponent, "component %s", c.String())
		}
	}
	if m.Port != nil || m.SrcPort != nil || m.DstPort != nil {
		// Port components match TCP and UDP ports (RFC 8955 sections
		// 4.2.2.4-6); the rule model's ports hold for SCTP too, so the
		// rule names the protocols.
		var ps []uint8
		for _, p := range []uint8{rule.ProtoTCP, rule.ProtoUDP} {
			if m.Proto == nil || slices.Contains(m.Proto, p) {
				ps = append(ps, p)
			}
		}
		if len(ps) == 0 {
			return r, refuse(ReasonEmpty, "port components with protocol %v: FlowSpec ports are TCP and UDP ports (RFC 8955 section 4.2.2.4)", m.Proto)
		}
		m.Proto = ps
	}
	if got := m.Family(); got != rule.FamilyAny && got != fam {
		return r, refuse(ReasonInvalid, "prefixes of the other address family in an IPv%d FlowSpec route", fam)
	}
	if !m.Src.IsValid() && !m.Dst.IsValid() {
		if fam == rule.IPv6 {
			m.Dst = netip.PrefixFrom(netip.IPv6Unspecified(), 0)
		} else {
			m.Dst = netip.PrefixFrom(netip.IPv4Unspecified(), 0)
		}
	}
	// The destinations this network owns are required (RFC 8955 section
	// 6): with none configured every route is refused.
	ok := false
	for _, a := range allowed {
		if m.Dst.IsValid() && a.Addr().Is4() == m.Dst.Addr().Is4() && a.Bits() <= m.Dst.Bits() && a.Contains(m.Dst.Addr()) {
			ok = true
		}
	}
	switch {
	case ok:
	case len(allowed) == 0:
		return r, refuse(ReasonDestination, "destination %v: no flowspec.allowed_destinations configured", m.Dst)
	case !m.Dst.IsValid():
		return r, refuse(ReasonDestination, "no destination prefix: a route must name a destination inside flowspec.allowed_destinations")
	default:
		return r, refuse(ReasonDestination, "destination %v is not inside flowspec.allowed_destinations", m.Dst)
	}
	// The rule parser's checks (families, ports need tcp/udp/sctp, ...)
	// apply to FlowSpec rules too.
	spec, err := json.Marshal(r.Spec())
	if err != nil {
		return r, refuse(ReasonInvalid, "%v", err)
	}
	if _, err := rule.ParseRule("flowspec", spec, time.Time{}); err != nil {
		return r, refuse(ReasonInvalid, "%v", err)
	}
	return r, nil
}

func component(m *rule.Match, c *bgp.FlowSpecComponent) *Refusal {
	t := c.Type()
	name := bgp.BGPFlowSpecType(t).String()
	empty := func(rs rule.Ranges) *Refusal {
		if len(rs) == 0 {
			return refuse(ReasonEmpty, "%s %s matches no value", name, c.String())
		}
		return nil
	}
	switch t {
	case bgp.FLOW_SPEC_TYPE_IP_PROTO:
		rs := numeric(c.Items, 255)
		if rf := empty(rs); rf != nil {
			return rf
		}
		m.Proto = []uint8{}
		for _, x := range rs {
			for p := x.Lo; p <= x.Hi; p++ {
				m.Proto = append(m.Proto, uint8(p))
			}
		}
	case bgp.FLOW_SPEC_TYPE_PORT, bgp.FLOW_SPEC_TYPE_DST_PORT, bgp.FLOW_SPEC_TYPE_SRC_PORT:
		rs := numeric(c.Items, 65535)
		if rf := empty(rs); rf != nil {
			return rf
		}
		switch t {
		case bgp.FLOW_SPEC_TYPE_PORT:
			m.Port = rs
		case bgp.FLOW_SPEC_TYPE_DST_PORT:
			m.DstPort = rs
		default:
			m.SrcPort = rs
		}
	case bgp.FLOW_SPEC_TYPE_ICMP_TYPE, bgp.FLOW_SPEC_TYPE_ICMP_CODE:
		rs := numeric(c.Items, 255)
		if rf := empty(rs); rf != nil {
			return rf
		}
		if t == bgp.FLOW_SPEC_TYPE_ICMP_TYPE {
			m.ICMPType = rs
		} else {
			m.ICMPCode = rs
		}
	case bgp.FLOW_SPEC_TYPE_PKT_LEN:
		rs := numeric(c.Items, 65535+40)
		if rf := empty(rs); rf != nil {
			return rf
		}
		m.Length = rs
	case bgp.FLOW_SPEC_TYPE_DSCP:
		rs := numeric(c.Items, 63)
		if rf := empty(rs); rf != nil {
			return rf
		}
		for _, x := range rs {
			for d := x.Lo; d <= x.Hi; d++ {
				m.DSCP |= 1 << d
			}
		}
	case bgp.FLOW_SPEC_TYPE_TCP_FLAG:
		v, mk, ok := flags(c.Items)
		if !ok {
			return refuse(ReasonOperator, "tcp-flags %s: only one value/mask condition is supported", c.String())
		}
		m.TCPFlags, m.HasTCPFlags = rule.TCPFlags{Value: v, Mask: mk}, true
	case bgp.FLOW_SPEC_TYPE_FRAGMENT:
		f, ok := fragments(c.Items)
		if !ok {
			return refuse(ReasonOperator, "fragment %s: only any-of fragment states are supported", c.String())
		}
		m.Fragment = f
	default:
		return refuse(ReasonComponent, "%s %s", name, c.String())
	}
	return nil
}
