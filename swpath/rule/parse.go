package rule

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Error is a refused piece of rule input. It names where (file, line, rule)
// and what (field and value).
type Error struct {
	File   string // "" for input that is not a file (an API body)
	Line   int    // 0 when unknown
	RuleID string // "" before the id is known
	Field  string // dotted path such as "match.dst_port"
	Value  string // the offending value as written
	Reason string
}

func (e *Error) Error() string {
	var b strings.Builder
	if e.File != "" {
		b.WriteString(e.File)
		if e.Line > 0 {
			b.WriteString(":" + strconv.Itoa(e.Line))
		}
		b.WriteString(": ")
	} else if e.Line > 0 {
		b.WriteString("line " + strconv.Itoa(e.Line) + ": ")
	}
	if e.RuleID != "" {
		fmt.Fprintf(&b, "rule %q: ", e.RuleID)
	}
	if e.Field != "" {
		b.WriteString(e.Field)
		if e.Value != "" {
			fmt.Fprintf(&b, " %q", e.Value)
		}
		b.WriteString(": ")
	}
	b.WriteString(e.Reason)
	return b.String()
}

// maxErrors bounds how many errors one refused input reports.
const maxErrors = 20

type parser struct {
	file string
	now  time.Time
	errs []error
	id   string // rule being parsed
	// lists holds one copy of each port, length, ICMP and protocol list
	// the input repeats (intern): rule sets repeat a few protocols and
	// ports over thousands of rules.
	lists map[string]any
}

// maxInterned bounds the distinct lists one parse keeps (lists).
const maxInterned = 4096

// intern returns the parse's copy of the list xs of key (the list's
// values, bytes of a type that says what they are), held read-only from
// then on: rules with the same list share one array. Its capacity ends at
// its length, so appending to a rule's list never writes another's. An
// empty list is returned as it is (nil and empty differ).
func intern[T any](p *parser, key []byte, xs []T) []T {
	if len(xs) == 0 {
		return xs
	}
	if v, ok := p.lists[string(key)]; ok {
		return v.([]T)
	}
	xs = xs[:len(xs):len(xs)]
	if p.lists == nil {
		p.lists = map[string]any{}
	}
	if len(p.lists) < maxInterned {
		p.lists[string(key)] = xs
	}
	return xs
}

// internRanges is intern for a Ranges.
func (p *parser) internRanges(rs Ranges) Ranges {
	if len(rs) == 0 || len(rs) > 16 {
		return rs
	}
	var b [1 + 16*8]byte
	k := append(b[:0], 'r')
	for _, r := range rs {
		k = binary.LittleEndian.AppendUint32(k, r.Lo)
		k = binary.LittleEndian.AppendUint32(k, r.Hi)
	}
	return intern(p, k, rs)
}

// internProto is intern for a protocol list.
func (p *parser) internProto(ps []uint8) []uint8 {
	if len(ps) == 0 || len(ps) > 16 {
		return ps
	}
	var b [1 + 16]byte
	return intern(p, append(append(b[:0], 'p'), ps...), ps)
}

func (p *parser) fail(n *yaml.Node, field, value, format string, args ...any) {
	if len(p.errs) >= maxErrors {
		return
	}
	line := 0
	if n != nil {
		line = n.Line
	}
	p.errs = append(p.errs, &Error{File: p.file, Line: line, RuleID: p.id, Field: field, Value: value, Reason: fmt.Sprintf(format, args...)})
}

func (p *parser) err() error {
	return errors.Join(p.errs...)
}

// Parse reads a rule file. name is used in error messages; now anchors
// relative expiry durations. On any error nothing is returned: the input is
// refused whole, and every error (up to 20) is reported, each an *Error.
func Parse(name string, data []byte, now time.Time) (*Set, error) {
	return ParseContext(context.Background(), name, data, now)
}

// ParseContext is Parse that gives up once ctx is done, between chunks of
// items of a plain rule file, and returns ctx's error: at 100k rules a
// parse takes seconds, and an agent told to stop while it reads its rule
// files must not wait for them.
func ParseContext(ctx context.Context, name string, data []byte, now time.Time) (*Set, error) {
	if set, ok, err := parseItems(ctx, name, data, now); ok {
		return set, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return parseWhole(name, data, now)
}

// parseWhole is Parse over the whole file's YAML node tree.
func parseWhole(name string, data []byte, now time.Time) (*Set, error) {
	p := &parser{file: name, now: now}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, &Error{File: name, Reason: "not valid YAML: " + err.Error()}
	}
	set := &Set{}
	// An empty file, or one cut off after "rules:", is far more likely a
	// truncated write than a decision to remove every rule: a file with no
	// rules says so with "rules: []".
	if doc.Kind == 0 || len(doc.Content) == 0 {
		return nil, &Error{File: name, Field: "rules", Reason: "empty file (a file with no rules says rules: [])"}
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		p.fail(root, "", "", "top level must be a mapping with a 'rules' key")
		return nil, p.err()
	}
	seen := map[string]int{}
	haveRules := false
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		if k.Value != "rules" {
			p.fail(k, k.Value, "", "unknown key (the top level has only 'rules')")
			continue
		}
		haveRules = true
		if v.Kind == yaml.ScalarNode && v.Tag == "!!null" {
			p.fail(v, "rules", "", "empty value (a file with no rules says rules: [])")
			continue
		}
		if v.Kind != yaml.SequenceNode {
			p.fail(v, "rules", "", "must be a list of rules")
			continue
		}
		p.rules(v.Content, set, seen)
	}
	if !haveRules && len(p.errs) == 0 {
		p.fail(root, "rules", "", "missing (a file with no rules says rules: [])")
	}
	if len(p.errs) > 0 {
		return nil, p.err()
	}
	return set, nil
}

// ParseRule reads one rule given as a YAML or JSON object (an API body).
func ParseRule(name string, data []byte, now time.Time) (Rule, error) {
	p := &parser{file: name, now: now}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return Rule{}, &Error{File: name, Reason: "not valid YAML or JSON: " + err.Error()}
	}
	if doc.Kind == 0 || len(doc.Content) == 0 {
		return Rule{}, &Error{File: name, Reason: "empty rule"}
	}
	r, ok := p.rule(doc.Content[0])
	if !ok {
		return Rule{}, p.err()
	}
	return r, nil
}

// rules parses the rule nodes items into set, refusing an id already in
// seen (which maps each id to the line that defined it).
func (p *parser) rules(items []*yaml.Node, set *Set, seen map[string]int) {
	for _, rn := range items {
		r, ok := p.rule(rn)
		if !ok {
			continue
		}
		if line, dup := seen[r.ID]; dup {
			p.fail(rn, "id", r.ID, "duplicate id (first defined on line %d)", line)
			continue
		}
		seen[r.ID] = rn.Line
		set.Rules = append(set.Rules, r)
	}
}

func (p *parser) rule(n *yaml.Node) (Rule, bool) {
	p.id = ""
	before := len(p.errs)
	r := Rule{Priority: DefaultPriority}
	if n.Kind != yaml.MappingNode {
		p.fail(n, "", "", "a rule must be a mapping")
		return r, false
	}
	// The id first, so later errors can name the rule.
	var idNode *yaml.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == "id" {
			idNode = n.Content[i+1]
		}
	}
	// A missing id is reported after the keys: a misspelt "id" is an
	// unknown key first.
	if idNode != nil {
		if idNode.Kind != yaml.ScalarNode || !ValidID(idNode.Value) {
			p.fail(idNode, "id", idNode.Value, "must match [A-Za-z0-9._-]{1,64}")
		} else {
			r.ID = idNode.Value
			p.id = r.ID
		}
	}
	var matchNode, actionNode *yaml.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		switch k.Value {
		case "id":
		case "priority":
			u, err := strconv.ParseUint(v.Value, 10, 32)
			if v.Kind != yaml.ScalarNode || err != nil {
				p.fail(v, "priority", v.Value, "must be an integer 0-4294967295")
				continue
			}
			r.Priority = uint32(u)
		case "action":
			actionNode = v
			switch v.Value {
			case "drop":
				r.Action = Drop
			case "accept":
				r.Action = Accept
			default:
				p.fail(v, "action", v.Value, "must be drop or accept")
			}
		case "expires":
			t, ok := p.expiry(v)
			if ok {
				r.Expires = t
			}
		case "match":
			matchNode = v
		default:
			p.fail(k, k.Value, "", "unknown key (a rule has id, priority, action, expires, match)")
		}
	}
	if idNode == nil {
		p.fail(n, "id", "", "required")
	}
	if actionNode == nil {
		p.fail(n, "action", "", "required (drop or accept)")
	}
	if matchNode != nil {
		r.Match = p.match(matchNode)
	}
	if len(p.errs) == before && r.Match.Empty() && !r.Match.All {
		at := matchNode
		if at == nil {
			at = n
		}
		p.fail(at, "match", "", "no match condition: a rule says what it matches (match: all, for every packet, is refused unless the configuration allows it)")
	}
	return r, len(p.errs) == before
}

func (p *parser) expiry(v *yaml.Node) (time.Time, bool) {
	if v.Kind != yaml.ScalarNode {
		p.fail(v, "expires", "", "must be a duration such as 30m or an RFC 3339 time")
		return time.Time{}, false
	}
	if d, err := time.ParseDuration(v.Value); err == nil {
		if d <= 0 {
			p.fail(v, "expires", v.Value, "duration must be positive")
			return time.Time{}, false
		}
		return p.now.Add(d), true
	}
	t, err := time.Parse(time.RFC3339, v.Value)
	if err != nil {
		p.fail(v, "expires", v.Value, "must be a duration such as 30m or an RFC 3339 time")
		return time.Time{}, false
	}
	return t, true
}

// scalars returns the scalar values of a node that is a scalar or a list of
// scalars.
func (p *parser) scalars(v *yaml.Node, field string) ([]*yaml.Node, bool) {
	switch v.Kind {
	case yaml.ScalarNode:
		if v.Tag == "!!null" {
			p.fail(v, field, "", "empty value")
			return nil, false
		}
		return []*yaml.Node{v}, true
	case yaml.SequenceNode:
		if len(v.Content) == 0 {
			p.fail(v, field, "", "empty list")
			return nil, false
		}
		for _, c := range v.Content {
			if c.Kind != yaml.ScalarNode {
				p.fail(c, field, "", "list elements must be scalars")
				return nil, false
			}
		}
		return v.Content, true
	}
	p.fail(v, field, "", "must be a value or a list of values")
	return nil, false
}

func (p *parser) ranges(v *yaml.Node, field string, max uint32) Ranges {
	ns, ok := p.scalars(v, field)
	if !ok {
		return nil
	}
	var out Ranges
	for _, n := range ns {
		r, err := ParseRange(n.Value, max)
		if err != nil {
			p.fail(n, field, n.Value, "%v", err)
			continue
		}
		out = append(out, r)
	}
	return p.internRanges(out)
}

// ParseRange reads "N" or "N-M" with values at most max.
func ParseRange(s string, max uint32) (Range, error) {
	lo, hi, isRange := strings.Cut(strings.TrimSpace(s), "-")
	a, err := strconv.ParseUint(strings.TrimSpace(lo), 10, 32)
	if err != nil {
		return Range{}, fmt.Errorf("must be N or N-M with N, M in 0-%d", max)
	}
	b := a
	if isRange {
		b, err = strconv.ParseUint(strings.TrimSpace(hi), 10, 32)
		if err != nil {
			return Range{}, fmt.Errorf("must be N or N-M with N, M in 0-%d", max)
		}
	}
	r := Range{uint32(a), uint32(b)} // both parsed as 32-bit values
	if why := r.outside(max); why != "" {
		return Range{}, errors.New(why)
	}
	return r, nil
}

func (p *parser) prefix(v *yaml.Node, field string) netip.Prefix {
	if v.Kind != yaml.ScalarNode {
		p.fail(v, field, "", "must be a CIDR prefix")
		return netip.Prefix{}
	}
	s := v.Value
	if !strings.Contains(s, "/") {
		a, err := netip.ParseAddr(s)
		if err != nil {
			p.fail(v, field, s, "not an IP address or CIDR prefix")
			return netip.Prefix{}
		}
		return netip.PrefixFrom(a, a.BitLen())
	}
	pf, err := netip.ParsePrefix(s)
	if err != nil {
		p.fail(v, field, s, "not a CIDR prefix")
		return netip.Prefix{}
	}
	if pf.Addr().Zone() != "" {
		p.fail(v, field, s, "zones are not allowed")
		return netip.Prefix{}
	}
	if pf.Masked() != pf {
		p.fail(v, field, s, "host bits are set (did you mean %s?)", pf.Masked())
		return netip.Prefix{}
	}
	return pf
}

func (p *parser) flagBits(v *yaml.Node, field string) (uint8, bool) {
	ns, ok := p.scalars(v, field)
	if !ok {
		return 0, false
	}
	var out uint8
	for _, n := range ns {
		i := slices.IndexFunc(tcpFlagNames, func(f struct {
			name string
			bit  uint8
		}) bool {
			return f.name == strings.ToLower(n.Value)
		})
		if i < 0 {
			u, err := strconv.ParseUint(n.Value, 0, 8)
			if err != nil {
				p.fail(n, field, n.Value, "not a TCP flag (fin syn rst psh ack urg ece cwr, or a number 0-255)")
				return 0, false
			}
			out |= uint8(u)
			continue
		}
		out |= tcpFlagNames[i].bit
	}
	return out, true
}

func (p *parser) match(n *yaml.Node) Match {
	var m Match
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return m
	}
	if n.Kind == yaml.ScalarNode && n.Value == MatchAllName {
		m.All = true
		return m
	}
	if n.Kind != yaml.MappingNode {
		p.fail(n, "match", n.Value, "must be a mapping of conditions, or %s", MatchAllName)
		return m
	}
	nodes := map[string]*yaml.Node{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		f := "match." + k.Value
		if _, dup := nodes[k.Value]; dup {
			p.fail(k, f, "", "given twice")
			continue
		}
		nodes[k.Value] = k
		switch k.Value {
		case "src":
			m.Src = p.prefix(v, f)
		case "dst":
			m.Dst = p.prefix(v, f)
		case "proto":
			ns, ok := p.scalars(v, f)
			if !ok {
				continue
			}
			m.Proto = []uint8{}
			for _, x := range ns {
				if pv, ok := protoNames[strings.ToLower(x.Value)]; ok {
					m.Proto = append(m.Proto, pv)
					continue
				}
				u, err := strconv.ParseUint(x.Value, 10, 8)
				if err != nil {
					p.fail(x, f, x.Value, "not a protocol (tcp udp icmp icmpv6 sctp gre, or 0-255)")
					continue
				}
				m.Proto = append(m.Proto, uint8(u))
			}
			slices.Sort(m.Proto)
			m.Proto = p.internProto(slices.Compact(m.Proto))
		case "src_port":
			m.SrcPort = p.ranges(v, f, MaxPort)
		case "dst_port":
			m.DstPort = p.ranges(v, f, MaxPort)
		case "port":
			m.Port = p.ranges(v, f, MaxPort)
		case "icmp_type":
			m.ICMPType = p.ranges(v, f, MaxICMP)
		case "icmp_code":
			m.ICMPCode = p.ranges(v, f, MaxICMP)
		case "length":
			m.Length = p.ranges(v, f, MaxLength)
		case "dscp":
			for _, r := range p.ranges(v, f, 63) {
				for d := r.Lo; d <= r.Hi; d++ {
					m.DSCP |= 1 << d
				}
			}
		case "fragment":
			ns, ok := p.scalars(v, f)
			if !ok {
				continue
			}
			for _, x := range ns {
				i := slices.IndexFunc(fragNames, func(fn struct {
					name string
					bit  Frag
				}) bool {
					return fn.name == x.Value
				})
				if i < 0 {
					p.fail(x, f, x.Value, "not a fragment state (dont-fragment is-fragment first-fragment last-fragment not-fragment)")
					continue
				}
				m.Fragment |= fragNames[i].bit
			}
		case "tcp_flags":
			if v.Kind != yaml.MappingNode {
				p.fail(v, f, "", "must be {value: [...], mask: [...]}")
				continue
			}
			var haveMask bool
			for j := 0; j+1 < len(v.Content); j += 2 {
				kk, vv := v.Content[j], v.Content[j+1]
				switch kk.Value {
				case "value":
					if vv.Kind == yaml.SequenceNode && len(vv.Content) == 0 {
						// value: [] with a mask: none of the masked
						// flags set ((flags & mask) == 0).
						m.TCPFlags.Value = 0
						continue
					}
					m.TCPFlags.Value, _ = p.flagBits(vv, f+".value")
				case "mask":
					m.TCPFlags.Mask, _ = p.flagBits(vv, f+".mask")
					haveMask = true
				default:
					p.fail(kk, f+"."+kk.Value, "", "unknown key (tcp_flags has value and mask)")
				}
			}
			if !haveMask {
				// No mask: the listed flags must be set, others are free.
				m.TCPFlags.Mask = m.TCPFlags.Value
			}
			if m.TCPFlags.Value&^m.TCPFlags.Mask != 0 {
				p.fail(v, f, "", "value has flags outside mask: it can never match")
			}
			if m.TCPFlags.Mask == 0 {
				p.fail(v, f, "", "empty mask: give the flags to test")
			}
			m.HasTCPFlags = true
		default:
			p.fail(k, f, "", "unknown match field (src dst proto src_port dst_port port icmp_type icmp_code tcp_flags fragment length dscp)")
		}
	}
	p.checkMatch(&m, nodes)
	return m
}

// checkMatch refuses combinations that can never match.
func (p *parser) checkMatch(m *Match, at map[string]*yaml.Node) {
	if m.Src.IsValid() && m.Dst.IsValid() && m.Src.Addr().Is4() != m.Dst.Addr().Is4() {
		p.fail(at["dst"], "match.dst", m.Dst.String(), "family differs from match.src %s (one family per rule)", m.Src)
	}
	allow := func(ps ...uint8) bool {
		if m.Proto == nil {
			return true
		}
		for _, x := range m.Proto {
			if slices.Contains(ps, x) {
				return true
			}
		}
		return false
	}
	ports := m.SrcPort != nil || m.DstPort != nil || m.Port != nil
	icmp := m.ICMPType != nil || m.ICMPCode != nil
	if ports && !allow(ProtoTCP, ProtoUDP, ProtoSCTP) {
		p.fail(firstOf(at, "src_port", "dst_port", "port"), "match.proto", "", "ports need proto tcp, udp or sctp")
	}
	if m.HasTCPFlags && !allow(ProtoTCP) {
		p.fail(at["tcp_flags"], "match.tcp_flags", "", "tcp_flags needs proto tcp")
	}
	if icmp {
		fam := m.Family()
		switch {
		case ports || m.HasTCPFlags:
			p.fail(firstOf(at, "icmp_type", "icmp_code"), "match.icmp_type", "", "ICMP fields cannot be combined with ports or tcp_flags")
		case fam == IPv4 && !allow(ProtoICMP):
			p.fail(at["proto"], "match.proto", "", "icmp_type/icmp_code in IPv4 need proto icmp")
		case fam == IPv6 && !allow(ProtoICMPv6):
			p.fail(at["proto"], "match.proto", "", "icmp_type/icmp_code in IPv6 need proto icmpv6")
		case !allow(ProtoICMP, ProtoICMPv6):
			p.fail(at["proto"], "match.proto", "", "icmp_type/icmp_code need proto icmp or icmpv6")
		}
	}
}

func firstOf(at map[string]*yaml.Node, keys ...string) *yaml.Node {
	for _, k := range keys {
		if n := at[k]; n != nil {
			return n
		}
	}
	return nil
}
