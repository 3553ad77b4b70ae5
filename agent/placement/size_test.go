package placement

import (
	"reflect"
	"testing"

	"github.com/scrubd/scrubd/agent/dataplane"
)

// A rule's state is what every rule of the set costs the placer: it
// stays within 80 bytes (a size class of the Go allocator), the parts
// that most rules never need in ruleExtra.
func TestRuleStateSize(t *testing.T) {
	if n := reflect.TypeFor[ruleState]().Size(); n > 80 {
		t.Fatalf("ruleState is %d bytes, want at most 80", n)
	}
}

// A rule's mask shapes read back as Compile gave them, the same array.
func TestMaskListKept(t *testing.T) {
	ms := []dataplane.MaskShape{{Hash: 1, Chain: 0, Prio: 10}, {Hash: 2, Chain: 0, Prio: 11}, {Hash: 3, Chain: 1, Prio: 10}}
	var rs ruleState
	if rs.maskList() != nil {
		t.Fatalf("a new state's masks: %v", rs.maskList())
	}
	rs.setMasks(ms[:2])
	if got := rs.maskList(); len(got) != 2 || &got[0] != &ms[0] || got[1] != ms[1] {
		t.Fatalf("masks read back %v, want %v in its array", got, ms[:2])
	}
	rs.setMasks(nil)
	if rs.maskList() != nil {
		t.Fatalf("masks after none: %v", rs.maskList())
	}
}

// A rule of the published list is held in 56 bytes (its RuleView, 160,
// is built when read): 48, and its place in the store's order for Find.
func TestRuleEntrySize(t *testing.T) {
	if n := reflect.TypeFor[ruleEntry]().Size(); n > 56 {
		t.Fatalf("ruleEntry is %d bytes, want at most 56", n)
	}
}
