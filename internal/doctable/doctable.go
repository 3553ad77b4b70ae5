// Package doctable reads the reference tables of the project's markdown
// docs (docs/config.md, docs/metrics.md, docs/cli.md), for the tests that
// keep those pages in line with the code.
package doctable

import "strings"

// Rows returns the rows of the tables in doc whose first cell is a code
// span starting with prefix ("| `" + prefix ...): each row's key (the code
// span, prefix included, without its backticks) and its other cells, in
// order, trimmed of spaces. A key that appears twice keeps its last row.
func Rows(doc, prefix string) map[string][]string {
	rows := map[string][]string{}
	for _, l := range strings.Split(doc, "\n") {
		rest, ok := strings.CutPrefix(l, "| `"+prefix)
		if !ok {
			continue
		}
		key, rest, _ := strings.Cut(rest, "`")
		cells := strings.Split(rest, "|")[1:]
		if n := len(cells); n > 0 && strings.TrimSpace(cells[n-1]) == "" {
			cells = cells[:n-1] // after the row's closing bar
		}
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		rows[prefix+key] = cells
	}
	return rows
}
