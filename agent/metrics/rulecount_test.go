package metrics

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/scrubd/scrubd/agent/store"
	"github.com/scrubd/scrubd/swpath/rule"
)

// scrubd_rules from the store's kept counts (RuleCounts, no copy of the
// rules): two rule files are one "file" series, an expired API rule is
// refused, a FlowSpec rule deleted again is gone from its count.
func TestRuleCountsFromStore(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	st := store.New(nil, func() time.Time { return now })
	drop := func(id, dst string) rule.Rule {
		return rule.Rule{ID: id, Action: rule.Drop, Match: rule.Match{Dst: netip.MustParsePrefix(dst)}}
	}
	if _, err := st.Replace("file:/a.yaml", []rule.Rule{drop("a1", "203.0.113.1/32"), drop("a2", "203.0.113.2/32")}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Replace("file:/b.yaml", []rule.Rule{drop("b1", "203.0.113.3/32")}); err != nil {
		t.Fatal(err)
	}
	old := drop("x1", "198.51.100.1/32")
	old.Expires = now.Add(-time.Minute)
	_, _ = st.Put("api", old) // stored as refused
	for _, id := range []string{"f1", "f2"} {
		if _, err := st.Put("bgp:192.0.2.1", drop(id, "198.51.100.9/32")); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Delete("bgp:192.0.2.1", "f1"); err != nil {
		t.Fatal(err)
	}
	out := scrape(t, New(Sources{RuleCounts: st.Counts}, 1))
	has(t, out, `scrubd_rules{source="file",status="active"} 3`)
	has(t, out, `scrubd_rules{source="api",status="refused"} 1`)
	has(t, out, `scrubd_rules{source="bgp",status="active"} 1`)
	if n := strings.Count(out, "scrubd_rules{"); n != 3 {
		t.Errorf("%d scrubd_rules series, want 3", n)
	}
}
