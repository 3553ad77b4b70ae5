package metrics

import (
	"os"
	"strings"
	"testing"

	"github.com/scrubd/scrubd/agent/placement"
	"github.com/scrubd/scrubd/agent/store"
	"github.com/scrubd/scrubd/internal/doctable"
)

// The type column of docs/metrics.md is the type the agent exports, for
// every scrubd_ family a fully fed collector serves. (deploy's
// TestMetricsReferenceComplete checks the names and labels.)
func TestMetricsReferenceTypes(t *testing.T) {
	data, err := os.ReadFile("../../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := map[string]string{}
	for name, cells := range doctable.Rows(string(data), "scrubd_") {
		if len(cells) > 0 {
			doc[name] = cells[0]
		}
	}
	v := view(3)
	c := New(Sources{View: func() *placement.View { return v }, Node: "t",
		RuleCounts: func() []store.Count { return []store.Count{{Source: "api", Status: store.Active, N: 2}} },
		FlowSpec: func() FlowSpec {
			return FlowSpec{Refused: map[string]uint64{"too_broad": 1}, Sessions: map[string]bool{"192.0.2.9": true}}
		},
		StateCorrupt:     func() uint64 { return 1 },
		StateWrites:      func() (uint64, uint64, uint64) { return 1, 1, 0 },
		RuleFileRefusals: func() uint64 { return 0 },
		ProtectedLost:    func() map[string]uint64 { return nil },
	}, 10)
	fams, err := NewRegistry(c).Gather()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, f := range fams {
		if !strings.HasPrefix(f.GetName(), "scrubd_") {
			continue
		}
		n++
		want := strings.ToLower(f.GetType().String())
		if got, ok := doc[f.GetName()]; ok && got != want {
			t.Errorf("docs/metrics.md: %s is a %s, the agent exports a %s", f.GetName(), got, want)
		}
	}
	if n < len(doc) {
		t.Errorf("the test's collector served %d scrubd_ families, docs/metrics.md has %d rows: feed it every source", n, len(doc))
	}
}
