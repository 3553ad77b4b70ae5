package rule

import (
	"errors"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.yaml.in/yaml/v3"
)

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

func TestParseExample(t *testing.T) {
	data, err := os.ReadFile("testdata/example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	s, err := Parse("example.yaml", data, t0)
	if err != nil {
		t.Fatal(err)
	}
	want := []Rule{
		{ID: "dns-amp", Priority: 100, Action: Drop, Expires: t0.Add(30 * time.Minute), Match: Match{
			Src: netip.MustParsePrefix("198.51.100.0/24"), Dst: netip.MustParsePrefix("203.0.113.7/32"),
			Proto: []uint8{ProtoUDP}, SrcPort: Ranges{{53, 53}}, DstPort: Ranges{{1000, 2000}, {4444, 4444}},
			Length: Ranges{{0, 100}}, DSCP: 1<<46 | 1,
		}},
		{ID: "syn-flood", Priority: DefaultPriority, Action: Drop, Match: Match{
			Dst: netip.MustParsePrefix("2001:db8::/32"), Proto: []uint8{ProtoTCP}, Port: Ranges{{80, 80}},
			TCPFlags: TCPFlags{Value: SYN, Mask: SYN | ACK}, HasTCPFlags: true,
		}},
		{ID: "ping", Priority: 5, Action: Accept, Expires: time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC), Match: Match{
			Proto: []uint8{ProtoICMP}, ICMPType: Ranges{{8, 8}}, ICMPCode: Ranges{{0, 0}},
		}},
		{ID: "frags", Priority: DefaultPriority, Action: Drop, Match: Match{Fragment: IsFragment | FirstFragment}},
	}
	if d := cmp.Diff(want, s.Rules, cmp.Comparer(func(a, b netip.Prefix) bool { return a == b })); d != "" {
		t.Fatalf("parsed rules differ (-want +got):\n%s", d)
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name, in string
		want     Error // fields compared where set
	}{
		{"bad port", "rules:\n- id: a\n  match:\n    dst_port: \"70000\"\n  action: drop\n", Error{Line: 4, RuleID: "a", Field: "match.dst_port", Value: "70000"}},
		{"reversed range", "rules:\n- id: a\n  match:\n    src_port: 20-10\n  action: drop\n", Error{Line: 4, RuleID: "a", Field: "match.src_port", Value: "20-10"}},
		{"host bits", "rules:\n- id: r1\n  match:\n    src: 10.0.0.1/8\n  action: drop\n", Error{Line: 4, RuleID: "r1", Field: "match.src", Value: "10.0.0.1/8"}},
		{"unknown key", "rules:\n- id: a\n  match:\n    dport: 1\n  action: drop\n", Error{Line: 4, RuleID: "a", Field: "match.dport"}},
		{"unknown rule key", "rules:\n- id: a\n  acton: drop\n  action: drop\n", Error{Line: 3, RuleID: "a", Field: "acton"}},
		{"bad action", "rules:\n- id: a\n  action: reject\n", Error{Line: 3, RuleID: "a", Field: "action", Value: "reject"}},
		{"bad id", "rules:\n- id: \"a b\"\n  action: drop\n", Error{Line: 2, Field: "id", Value: "a b"}},
		{"missing id", "rules:\n- action: drop\n", Error{Line: 2, Field: "id"}},
		{"dup id", "rules:\n- {id: a, action: drop, match: all}\n- {id: a, action: drop, match: all}\n", Error{Line: 3, RuleID: "a", Field: "id", Value: "a"}},
		{"families", "rules:\n- id: a\n  match:\n    src: 10.0.0.0/8\n    dst: 2001:db8::/32\n  action: drop\n", Error{Line: 5, RuleID: "a", Field: "match.dst"}},
		{"ports need proto", "rules:\n- id: a\n  match:\n    proto: icmp\n    dst_port: 53\n  action: drop\n", Error{Line: 5, RuleID: "a", Field: "match.proto"}},
		{"flags need tcp", "rules:\n- id: a\n  match:\n    proto: udp\n    tcp_flags: {value: [syn]}\n  action: drop\n", Error{Line: 5, RuleID: "a", Field: "match.tcp_flags"}},
		{"flags outside mask", "rules:\n- id: a\n  match:\n    tcp_flags: {value: [syn, fin], mask: [syn]}\n  action: drop\n", Error{Line: 4, RuleID: "a", Field: "match.tcp_flags"}},
		{"icmp v6", "rules:\n- id: a\n  match:\n    dst: 2001:db8::/32\n    proto: icmp\n    icmp_type: 8\n  action: drop\n", Error{Line: 5, RuleID: "a", Field: "match.proto"}},
		{"bad proto", "rules:\n- id: a\n  match:\n    proto: tpc\n  action: drop\n", Error{Line: 4, RuleID: "a", Field: "match.proto", Value: "tpc"}},
		{"bad dscp", "rules:\n- id: a\n  match:\n    dscp: 64\n  action: drop\n", Error{Line: 4, RuleID: "a", Field: "match.dscp", Value: "64"}},
		{"bad frag", "rules:\n- id: a\n  match:\n    fragment: [later]\n  action: drop\n", Error{Line: 4, RuleID: "a", Field: "match.fragment", Value: "later"}},
		{"bad expiry", "rules:\n- id: a\n  expires: tomorrow\n  action: drop\n", Error{Line: 3, RuleID: "a", Field: "expires", Value: "tomorrow"}},
		{"negative expiry", "rules:\n- id: a\n  expires: -5m\n  action: drop\n", Error{Line: 3, RuleID: "a", Field: "expires", Value: "-5m"}},
		{"top key", "rulez: []\n", Error{Line: 1, Field: "rulez"}},
		{"no action", "rules:\n- id: a\n  match: {dst: 192.0.2.0/24}\n", Error{Line: 2, RuleID: "a", Field: "action"}},
		{"cut off after action", "rules:\n- id: only-one\n  action: drop\n", Error{Line: 2, RuleID: "only-one", Field: "match"}},
		{"id alone", "rules:\n- id: x\n", Error{Line: 2, RuleID: "x", Field: "action"}},
		{"empty match", "rules:\n- id: a\n  action: drop\n  match: {}\n", Error{Line: 4, RuleID: "a", Field: "match"}},
		{"null match", "rules:\n- id: a\n  action: accept\n  match:\n", Error{Line: 4, RuleID: "a", Field: "match"}},
		{"match word", "rules:\n- id: a\n  action: drop\n  match: everything\n", Error{Line: 4, RuleID: "a", Field: "match", Value: "everything"}},
		{"rules null", "rules:\n", Error{Line: 1, Field: "rules"}},
		{"comments only", "# rules: []\n", Error{Field: "rules"}},
		{"empty file", "", Error{Field: "rules"}},
		{"no rules key", "{}\n", Error{Line: 1, Field: "rules"}},
		{"flags value [] without mask", "rules:\n- id: a\n  action: drop\n  match:\n    proto: tcp\n    tcp_flags: {value: []}\n", Error{Line: 6, RuleID: "a", Field: "match.tcp_flags"}},
		{"length", "rules:\n- id: a\n  match:\n    length: 1-70000\n  action: drop\n", Error{Line: 4, RuleID: "a", Field: "match.length", Value: "1-70000"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Parse("f.yaml", []byte(tt.in), t0)
			if err == nil {
				t.Fatalf("accepted: %+v", s)
			}
			if s != nil {
				t.Fatalf("refused input returned a set")
			}
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("error %v is not *Error", err)
			}
			if e.File != "f.yaml" || e.Line != tt.want.Line || e.RuleID != tt.want.RuleID || e.Field != tt.want.Field ||
				(tt.want.Value != "" && e.Value != tt.want.Value) {
				t.Fatalf("got %+v (%v), want %+v", *e, err, tt.want)
			}
			msg := err.Error()
			if !strings.HasPrefix(msg, "f.yaml:") || !strings.Contains(msg, tt.want.Field) {
				t.Fatalf("message %q lacks file or field", msg)
			}
		})
	}
}

func TestParseManyErrorsReported(t *testing.T) {
	_, err := Parse("f", []byte("rules:\n- id: a\n  action: x\n- id: b\n  priority: -1\n  action: drop\n  match: all\n"), t0)
	var n int
	for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
		if _, ok := e.(*Error); ok {
			n++
		}
	}
	if n != 2 {
		t.Fatalf("want 2 errors, got %d: %v", n, err)
	}
}

func TestSpecRoundTrip(t *testing.T) {
	data, _ := os.ReadFile("testdata/example.yaml")
	s, err := Parse("example.yaml", data, t0)
	if err != nil {
		t.Fatal(err)
	}
	var specs struct {
		Rules []Spec `yaml:"rules"`
	}
	for i := range s.Rules {
		specs.Rules = append(specs.Rules, s.Rules[i].Spec())
	}
	out, err := yaml.Marshal(specs)
	if err != nil {
		t.Fatal(err)
	}
	s2, err := Parse("roundtrip", out, t0)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	cmpExpiry := func(a, b time.Time) bool { return a.Equal(b) }
	if d := cmp.Diff(s.Rules, s2.Rules, cmp.Comparer(func(a, b netip.Prefix) bool { return a == b }), cmp.Comparer(cmpExpiry)); d != "" {
		t.Fatalf("round trip differs:\n%s\n%s", d, out)
	}
}

func TestParseRuleJSON(t *testing.T) {
	r, err := ParseRule("api", []byte(`{"id":"x","action":"drop","match":{"dst":"192.0.2.1","proto":["tcp","udp"],"dst_port":[53,"100-200"]}}`), t0)
	if err != nil {
		t.Fatal(err)
	}
	if r.Match.Dst != netip.MustParsePrefix("192.0.2.1/32") || len(r.Match.Proto) != 2 || len(r.Match.DstPort) != 2 {
		t.Fatalf("got %+v", r)
	}
	_, err = ParseRule("api", []byte(`{"id":"x","match":{"dst_port":"x"}}`), t0)
	if err == nil || !strings.Contains(err.Error(), `match.dst_port "x"`) {
		t.Fatalf("err = %v", err)
	}
}

func FuzzParse(f *testing.F) {
	data, _ := os.ReadFile("testdata/example.yaml")
	f.Add(data)
	f.Add([]byte("rules:\n- id: a\n  match: {src_port: [1-2, 3], tcp_flags: {value: 2}}\n"))
	f.Add([]byte("rules: [{id: a, match: {fragment: is-fragment, length: 0-9}}]"))
	f.Add([]byte("{"))
	f.Add([]byte("rules: [{id: a, action: drop, match: all}, {id: b, action: accept, match: {dst: 10.0.0.0/8, proto: tcp, tcp_flags: {value: [], mask: [syn]}}}]"))
	f.Add([]byte("rules: []"))
	f.Fuzz(func(t *testing.T, in []byte) {
		s, err := Parse("fuzz", in, t0)
		if err != nil {
			if s != nil {
				t.Fatal("error with a set")
			}
			return
		}
		// Whatever is accepted must survive the Spec round trip.
		var specs struct {
			Rules []Spec `yaml:"rules"`
		}
		for i := range s.Rules {
			specs.Rules = append(specs.Rules, s.Rules[i].Spec())
		}
		out, err := yaml.Marshal(specs)
		if err != nil {
			t.Fatal(err)
		}
		s2, err := Parse("again", out, t0)
		if err != nil {
			t.Fatalf("accepted rules do not re-parse: %v\n%s", err, out)
		}
		// The same rules come back, and the guard judges them the same.
		if d := cmp.Diff(s.Rules, s2.Rules, cmp.Comparer(func(a, b netip.Prefix) bool { return a == b }),
			cmp.Comparer(func(a, b time.Time) bool { return a.Equal(b) })); d != "" {
			t.Fatalf("round trip differs:\n%s\n%s", d, out)
		}
		for i := range s.Rules {
			if (DefaultGuard.Check(&s.Rules[i]) == nil) != (DefaultGuard.Check(&s2.Rules[i]) == nil) {
				t.Fatalf("guard differs after the round trip for %s", s.Rules[i].ID)
			}
		}
	})
}
