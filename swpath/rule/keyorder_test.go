package rule

import (
	"strings"
	"testing"
	"time"
)

// A misspelt key is the first error, before the "required" it causes: the
// operator reads the cause, not its consequence.
func TestMisspeltKeyLeads(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name, text, first string
		file              bool
	}{
		{"one rule, misspelt id", "{idd: a, action: drop, match: {dst: 203.0.113.0/24}}", "f.yaml:1: idd: unknown key", false},
		{"one rule, misspelt action", "{id: a, acton: drop, match: {dst: 203.0.113.0/24}}", `f.yaml:1: rule "a": acton: unknown key`, false},
		{"file, misspelt id", "rules:\n  - ID: a\n    action: drop\n    match: {dst: 203.0.113.0/24}\n", "f.yaml:2: ID: unknown key", true},
	} {
		var err error
		if tc.file {
			_, err = Parse("f.yaml", []byte(tc.text), now)
		} else {
			_, err = ParseRule("f.yaml", []byte(tc.text), now)
		}
		if err == nil {
			t.Errorf("%s: accepted", tc.name)
			continue
		}
		first, _, _ := strings.Cut(err.Error(), "\n")
		if !strings.HasPrefix(first, tc.first) {
			t.Errorf("%s: first error %q, want it to start %q (all: %v)", tc.name, first, tc.first, err)
		}
		if !strings.Contains(err.Error(), "required") {
			t.Errorf("%s: the missing key is not reported too: %v", tc.name, err)
		}
	}
}
