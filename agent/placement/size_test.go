package placement

import (
	"reflect"
	"testing"
)

// A rule's state is what every rule of the set costs the placer: it
// stays within 96 bytes (a size class of the Go allocator), the parts
// that most rules never need in ruleExtra.
func TestRuleStateSize(t *testing.T) {
	if n := reflect.TypeFor[ruleState]().Size(); n > 96 {
		t.Fatalf("ruleState is %d bytes, want at most 96", n)
	}
}

// A rule of the published list is held in 48 bytes (its RuleView, 160,
// is built when read).
func TestRuleEntrySize(t *testing.T) {
	if n := reflect.TypeFor[ruleEntry]().Size(); n > 48 {
		t.Fatalf("ruleEntry is %d bytes, want at most 48", n)
	}
}
