package rule

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// The limits of DefaultGuard, worked by hand: a drop rule needs a source or
// destination of at least /8 (IPv4) or /32 (IPv6); match: all only with
// AllowMatchAll.
func TestGuard(t *testing.T) {
	tests := []struct {
		rule      string
		g         Guard
		field     string // "" = passes
		wantInMsg string
	}{
		{`{id: a, action: drop, match: {dst: 0.0.0.0/0}}`, DefaultGuard, "match.dst", "/8"},
		{`{id: a, action: drop, match: {dst: 0.0.0.0/0, proto: udp, dst_port: 53}}`, DefaultGuard, "match.dst", "rules.guard.min_prefix_v4"},
		{`{id: a, action: drop, match: {proto: udp}}`, DefaultGuard, "match", "without a source or destination"},
		{`{id: a, action: drop, match: {dst: 10.0.0.0/7}}`, DefaultGuard, "match.dst", "/7"},
		{`{id: a, action: drop, match: {dst: 10.0.0.0/8}}`, DefaultGuard, "", ""},
		{`{id: a, action: drop, match: {src: 198.51.100.0/24}}`, DefaultGuard, "", ""},
		{`{id: a, action: drop, match: {src: 198.51.100.0/24, dst: 0.0.0.0/0}}`, DefaultGuard, "", ""},
		{`{id: a, action: drop, match: {src: 0.0.0.0/1, dst: 0.0.0.0/0}}`, DefaultGuard, "match.src", "more specific"},
		{`{id: a, action: drop, match: {dst: "::/0", proto: tcp}}`, DefaultGuard, "match.dst", "/32"},
		{`{id: a, action: drop, match: {dst: "2001:db8::/31"}}`, DefaultGuard, "match.dst", "min_prefix_v6"},
		{`{id: a, action: drop, match: {dst: "2001:db8::/32"}}`, DefaultGuard, "", ""},
		{`{id: a, action: drop, match: all}`, DefaultGuard, "match", "allow_match_all"},
		{`{id: a, action: accept, match: all}`, DefaultGuard, "match", "allow_match_all"},
		{`{id: a, action: accept, match: {proto: icmp}}`, DefaultGuard, "", ""},
		{`{id: a, action: accept, match: {dst: 0.0.0.0/0}}`, DefaultGuard, "", ""},
		// The operator's limits.
		{`{id: a, action: drop, match: {dst: 10.0.0.0/8}}`, Guard{MinPrefixV4: 16, MinPrefixV6: 32}, "match.dst", "/16"},
		{`{id: a, action: drop, match: {dst: 0.0.0.0/0}}`, Guard{MinPrefixV4: 0, MinPrefixV6: 32}, "", ""},
		{`{id: a, action: drop, match: {proto: udp}}`, Guard{MinPrefixV4: 0, MinPrefixV6: 32}, "match", "/32"},
		{`{id: a, action: drop, match: {proto: udp}}`, Guard{}, "", ""},
		{`{id: a, action: drop, match: all}`, Guard{MinPrefixV4: 8, MinPrefixV6: 32, AllowMatchAll: true}, "match", "without a source"},
		{`{id: a, action: drop, match: all}`, Guard{AllowMatchAll: true}, "", ""},
	}
	for _, tt := range tests {
		r := mustRule(t, tt.rule)
		err := tt.g.Check(&r)
		if tt.field == "" {
			if err != nil {
				t.Errorf("%s with %+v refused: %v", tt.rule, tt.g, err)
			}
			continue
		}
		var e *Error
		if !errors.As(err, &e) || e.Field != tt.field || e.RuleID != "a" || !strings.Contains(err.Error(), tt.wantInMsg) {
			t.Errorf("%s with %+v: got %v, want field %s and %q in the message", tt.rule, tt.g, err, tt.field, tt.wantInMsg)
		}
	}
}

func TestMatchAllRoundTrip(t *testing.T) {
	r := mustRule(t, `{id: a, action: drop, match: all}`)
	if !r.Match.All || !r.Match.Empty() {
		t.Fatalf("match all parsed as %+v", r.Match)
	}
	j, err := json.Marshal(r.Spec())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(j), `"match":"all"`) {
		t.Fatalf("JSON %s", j)
	}
	if r2, err := ParseRule("j", j, t0); err != nil || !r2.Match.All {
		t.Fatalf("JSON round trip: %+v %v", r2, err)
	}
	var back Spec
	if err := json.Unmarshal(j, &back); err != nil || !back.Match.All {
		t.Fatalf("JSON decode: %+v %v", back, err)
	}
	y, err := yaml.Marshal(r.Spec())
	if err != nil {
		t.Fatal(err)
	}
	if r2, err := ParseRule("y", y, t0); err != nil || !r2.Match.All {
		t.Fatalf("YAML round trip: %v\n%s", err, y)
	}
	var backY Spec
	if err := yaml.Unmarshal(y, &backY); err != nil || !backY.Match.All {
		t.Fatalf("YAML decode: %+v %v", backY, err)
	}
	// A mapping still round-trips as a mapping.
	r = mustRule(t, `{id: b, action: drop, match: {dst: 192.0.2.0/24, tcp_flags: {value: [], mask: [syn]}}}`)
	j, _ = json.Marshal(r.Spec())
	r2, err := ParseRule("j", j, t0)
	if err != nil || r2.Match.All || r2.Match.TCPFlags != (TCPFlags{Value: 0, Mask: SYN}) || !r2.Match.HasTCPFlags {
		t.Fatalf("mapping round trip: %s -> %+v %v", j, r2, err)
	}
}

func TestEmptyRuleFile(t *testing.T) {
	s, err := Parse("f", []byte("rules: []\n"), t0)
	if err != nil || s == nil || len(s.Rules) != 0 {
		t.Fatalf("rules: [] gave %v, %v", s, err)
	}
	for _, in := range []string{"", "\n", "# nothing\n", "rules:\n", "rules: ~\n"} {
		if s, err := Parse("f", []byte(in), t0); err == nil {
			t.Errorf("%q accepted: %+v", in, s)
		}
	}
}
