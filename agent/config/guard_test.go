package config

import (
	"errors"
	"strings"
	"testing"

	"github.com/scrubd/scrubd/swpath/rule"
)

func TestGuardRefusals(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{"flowspec: {enabled: true, asn: 1, router_id: 1.1.1.1, neighbors: [{address: 1.1.1.2, asn: 2}]}\n", `flowspec.allowed_destinations: required when flowspec is enabled`},
		{"rules: {guard: {min_prefix_v4: 33}}\n", `rules.guard.min_prefix_v4 "33": must be 0-32`},
		{"rules: {guard: {min_prefix_v6: -1}}\n", `rules.guard.min_prefix_v6 "-1": must be 0-128`},
		{"rules: {files: [testdata/broad.yaml]}\n", `rules.files[0] "testdata/broad.yaml": rule file refused: testdata/broad.yaml: rule "everything-udp": match.dst "0.0.0.0/0": too broad`},
		{"rules: {files: [testdata/empty.yaml]}\n", `rules.files[0] "testdata/empty.yaml": rule file refused: testdata/empty.yaml: rules: empty file`},
	} {
		_, err := Parse("x", []byte(tc.yaml), true)
		if err == nil {
			t.Errorf("%q: accepted", tc.yaml)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %q does not contain %q", tc.yaml, err, tc.want)
		}
		var ce *Error
		if !errors.As(err, &ce) {
			t.Errorf("%q: %T is not a *config.Error", tc.yaml, err)
		}
	}
}

func TestGuardConfig(t *testing.T) {
	if g := Defaults().Rules.Guard.Rule(); g != (rule.Guard{MinPrefixV4: 8, MinPrefixV6: 32, MaxListEntries: 256}) {
		t.Fatalf("default guard %+v, want /8 and /32, match-all refused, lists of at most 256 entries", g)
	}
	for _, tc := range []struct{ yaml, want string }{
		{"rules: {guard: {max_list_entries: 0}}\nsoftware: {engine: none}\n", `rules.guard.max_list_entries "0": must be at least 1`},
		{"rules: {max_rules_per_source: 0}\nsoftware: {engine: none}\n", `rules.max_rules_per_source "0": must be at least 1`},
	} {
		if _, err := Parse("x", []byte(tc.yaml), false); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want %q", tc.yaml, err, tc.want)
		}
	}
	// The operator may lower the limit: the broad file then loads.
	c, err := Parse("x", []byte("rules: {files: [testdata/broad.yaml], guard: {min_prefix_v4: 0, allow_match_all: true}}\nsoftware: {engine: none}\n"), true)
	if err != nil {
		t.Fatal(err)
	}
	if g := c.Rules.Guard.Rule(); g != (rule.Guard{MinPrefixV4: 0, MinPrefixV6: 32, AllowMatchAll: true, MaxListEntries: 256}) {
		t.Fatalf("guard %+v", g)
	}
}
