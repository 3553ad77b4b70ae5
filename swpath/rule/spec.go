package rule

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
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
	// All is "match: all" (written as that word, not as a mapping).
	All bool `json:"-" yaml:"-"`
}

type plainMatchSpec MatchSpec

// MarshalJSON writes "all" for a match-all, else the mapping.
func (m MatchSpec) MarshalJSON() ([]byte, error) {
	if m.All {
		return json.Marshal(MatchAllName)
	}
	return json.Marshal(plainMatchSpec(m))
}

// UnmarshalJSON reads "all" or the mapping.
func (m *MatchSpec) UnmarshalJSON(b []byte) error {
	var s string
	if json.Unmarshal(b, &s) == nil {
		if s != MatchAllName {
			return fmt.Errorf("match %q: must be a mapping of conditions, or %s", s, MatchAllName)
		}
		*m = MatchSpec{All: true}
		return nil
	}
	return json.Unmarshal(b, (*plainMatchSpec)(m))
}

// MarshalYAML writes "all" for a match-all, else the mapping.
func (m MatchSpec) MarshalYAML() (any, error) {
	if m.All {
		return MatchAllName, nil
	}
	return plainMatchSpec(m), nil
}

// UnmarshalYAML reads "all" or the mapping.
func (m *MatchSpec) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode && n.Tag != "!!null" {
		if n.Value != MatchAllName {
			return fmt.Errorf("line %d: match %q: must be a mapping of conditions, or %s", n.Line, n.Value, MatchAllName)
		}
		*m = MatchSpec{All: true}
		return nil
	}
	return n.Decode((*plainMatchSpec)(m))
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
		s.Expires = r.Expires.UTC().Format(time.RFC3339Nano)
	}
	m := &r.Match
	s.Match.All = m.All
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
