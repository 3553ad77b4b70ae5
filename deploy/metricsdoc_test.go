package deploy_test

import (
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/scrubd/scrubd/internal/doctable"
)

// TestMetricsReferenceComplete fails when the agent exports a scrubd_
// metric that docs/metrics.md has no row for, when a row lists other
// labels than the metric carries, or when the doc names a metric that is
// gone.
func TestMetricsReferenceComplete(t *testing.T) {
	doc, err := os.ReadFile("../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string][]string{} // metric -> labels, from the doc's tables
	for name, cells := range doctable.Rows(string(doc), "scrubd_") {
		if len(cells) < 2 {
			t.Errorf("docs/metrics.md: row %s has fewer than four columns", name)
			continue
		}
		var labels []string
		for _, f := range strings.Split(cells[1], ",") {
			if f = strings.Trim(strings.TrimSpace(f), "`"); f != "" {
				labels = append(labels, f)
			}
		}
		rows[name] = labels
	}
	exp := exported(t)
	n := 0
	for name, labels := range exp {
		if !strings.HasPrefix(name, "scrubd_") {
			continue
		}
		n++
		doc, ok := rows[name]
		if !ok {
			t.Errorf("%s has no row in docs/metrics.md", name)
			continue
		}
		a, b := slices.Sorted(slices.Values(labels)), slices.Sorted(slices.Values(doc))
		if !slices.Equal(a, b) {
			t.Errorf("%s: docs/metrics.md lists labels %v, the agent exports %v", name, b, a)
		}
	}
	if n < 35 {
		t.Fatalf("only %d scrubd_ metrics found", n)
	}
	for name := range rows {
		if _, ok := exp[name]; !ok {
			t.Errorf("docs/metrics.md documents %s, which the agent does not export", name)
		}
	}
}
