package rule

import (
	"strings"
	"time"
)

// Spec is a rule in the rule-file shape, for JSON and YAML output (the API,
// status views). Parse(Spec marshalled) gives the rule back.
type Spec struct {
	ID       string    `json:"id" yaml:"id"`
	Priority uint32    `json:"priority" yaml:"priority"`
	Action   string    `json:"action" yaml:"action"`
	Expires  string    `json:"expires,omitempty" yaml:"expires,omitempty"`
	Match    MatchSpec `json:"match" yaml:"match"`
}

// MatchSpec is a Match in the rule-file shape.
type MatchSpec struct {
	Src      string     `json:"src,omitempty" yaml:"src,omitempty"`
	Dst      string     `json:"dst,omitempty" yaml:"dst,omitempty"`
	Proto    []string   `json:"proto,omitempty" yaml:"proto,omitempty"`
	SrcPort  []string   `json:"src_port,omitempty" yaml:"src_port,omitempty"`
	DstPort  []string   `json:"dst_port,omitempty" yaml:"dst_port,omitempty"`
	Port     []string   `json:"port,omitempty" yaml:"port,omitempty"`
	ICMPType []string   `json:"icmp_type,omitempty" yaml:"icmp_type,omitempty"`
	ICMPCode []string   `json:"icmp_code,omitempty" yaml:"icmp_code,omitempty"`
	TCPFlags *FlagsSpec `json:"tcp_flags,omitempty" yaml:"tcp_flags,omitempty"`
	Fragment []string   `json:"fragment,omitempty" yaml:"fragment,omitempty"`
	Length   []string   `json:"length,omitempty" yaml:"length,omitempty"`
	DSCP     []int      `json:"dscp,omitempty" yaml:"dscp,omitempty"`
}

// FlagsSpec is a TCP flags condition in the rule-file shape.
type FlagsSpec struct {
	Value []string `json:"value" yaml:"value"`
	Mask  []string `json:"mask" yaml:"mask"`
}

func flagNames(b uint8) []string {
	out := []string{}
	for _, f := range tcpFlagNames {
		if b&f.bit != 0 {
			out = append(out, f.name)
		}
	}
	return out
}

func rangeStrings(rs Ranges) []string {
	if rs == nil {
		return nil
	}
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.String()
	}
	return out
}

// Spec returns r in the rule-file shape.
func (r *Rule) Spec() Spec {
	s := Spec{ID: r.ID, Priority: r.Priority, Action: r.Action.String()}
	if !r.Expires.IsZero() {
		s.Expires = r.Expires.UTC().Format(time.RFC3339)
	}
	m := &r.Match
	if m.Src.IsValid() {
		s.Match.Src = m.Src.String()
	}
	if m.Dst.IsValid() {
		s.Match.Dst = m.Dst.String()
	}
	for _, p := range m.Proto {
		s.Match.Proto = append(s.Match.Proto, ProtoName(p))
	}
	s.Match.SrcPort = rangeStrings(m.SrcPort)
	s.Match.DstPort = rangeStrings(m.DstPort)
	s.Match.Port = rangeStrings(m.Port)
	s.Match.ICMPType = rangeStrings(m.ICMPType)
	s.Match.ICMPCode = rangeStrings(m.ICMPCode)
	s.Match.Length = rangeStrings(m.Length)
	if m.HasTCPFlags {
		s.Match.TCPFlags = &FlagsSpec{Value: flagNames(m.TCPFlags.Value), Mask: flagNames(m.TCPFlags.Mask)}
	}
	s.Match.Fragment = m.Fragment.names()
	for d := 0; d < 64; d++ {
		if m.DSCP&(1<<d) != 0 {
			s.Match.DSCP = append(s.Match.DSCP, d)
		}
	}
	return s
}

// FragNames returns the rule-format names of the states in f.
func (f Frag) String() string { return strings.Join(f.names(), ",") }
