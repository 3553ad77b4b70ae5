package deploy_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/scrubd/scrubd/agent/metrics"
)

// exported returns every metric name the agent's registry can export, with
// its label names: the collector's descriptors (all of them, whether or not
// a series exists yet) plus the Go and process collectors' families.
func exported(t *testing.T) map[string][]string {
	t.Helper()
	c := metrics.New(metrics.Sources{Node: "t"}, 1)
	ch := make(chan *prometheus.Desc, 256)
	c.Describe(ch)
	close(ch)
	nameRe := regexp.MustCompile(`fqName: "([^"]+)"`)
	labelRe := regexp.MustCompile(`variableLabels: \{([^}]*)\}\}$`)
	out := map[string][]string{}
	for d := range ch {
		s := d.String()
		n := nameRe.FindStringSubmatch(s)
		l := labelRe.FindStringSubmatch(s)
		if n == nil || l == nil {
			t.Fatalf("cannot read descriptor %s", s)
		}
		var labels []string
		if l[1] != "" {
			labels = strings.Split(l[1], ",")
		}
		out[n[1]] = labels
	}
	fams, err := metrics.NewRegistry(metrics.New(metrics.Sources{Node: "t"}, 1)).Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if _, ok := out[f.GetName()]; ok {
			continue
		}
		var labels []string
		for _, m := range f.GetMetric() {
			for _, lp := range m.GetLabel() {
				if !slices.Contains(labels, lp.GetName()) {
					labels = append(labels, lp.GetName())
				}
			}
		}
		out[f.GetName()] = labels
	}
	if len(out) < 20 {
		t.Fatalf("only %d exported metrics found", len(out))
	}
	return out
}

// queries returns every PromQL expression in a Grafana dashboard: panel
// targets, template variable queries and annotation queries.
func queries(v any) []string {
	var out []string
	switch x := v.(type) {
	case map[string]any:
		if x["type"] == "datasource" {
			return nil // a data source variable: its query is a plugin id
		}
		for k, e := range x {
			switch s := e.(type) {
			case string:
				if k == "expr" || k == "query" || k == "definition" {
					out = append(out, s)
				}
			default:
				out = append(out, queries(e)...)
			}
		}
	case []any:
		for _, e := range x {
			out = append(out, queries(e)...)
		}
	}
	return out
}

var (
	promFuncs = map[string]bool{}
	quotedRe  = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)
	selRe     = regexp.MustCompile(`\{([^}]*)\}`)
	groupRe   = regexp.MustCompile(`\b(?:by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)`)
	rangeRe   = regexp.MustCompile(`\[[^\]]*\]`)
	varRe     = regexp.MustCompile(`\$\{?\w+\}?`)
	identRe   = regexp.MustCompile(`[A-Za-z_:][A-Za-z0-9_:]*`)
	lvRe      = regexp.MustCompile(`label_values\(\s*([A-Za-z_:][A-Za-z0-9_:]*)\s*(?:\{[^}]*\})?\s*,\s*(\w+)\s*\)`)
	matcherRe = regexp.MustCompile(`^\s*([A-Za-z_]\w*)\s*(?:=~|!~|!=|=)`)
)

func init() {
	for _, f := range strings.Fields(`sum min max avg count topk bottomk quantile stddev stdvar group count_values
		rate irate increase delta idelta changes resets deriv predict_linear abs ceil floor round clamp clamp_min clamp_max
		histogram_quantile label_replace label_join vector scalar time timestamp absent absent_over_time
		avg_over_time min_over_time max_over_time sum_over_time count_over_time last_over_time sort sort_desc
		by without on ignoring group_left group_right bool and or unless offset label_values`) {
		promFuncs[f] = true
	}
}

// checkQuery returns the problems of one expression: metric names the agent
// does not export, and label names (in selectors and grouping clauses) that
// none of the expression's metrics carries.
func checkQuery(expr string, exp map[string][]string) []string {
	var probs []string
	var names []string
	labelsUsed := map[string]bool{}
	e := expr
	// label_values(metric, label): a metric and one of its labels.
	for _, m := range lvRe.FindAllStringSubmatch(e, -1) {
		names = append(names, m[1])
		labelsUsed[m[2]] = true
	}
	e = lvRe.ReplaceAllString(e, " ")
	for _, m := range selRe.FindAllStringSubmatch(e, -1) {
		for _, part := range strings.Split(quotedRe.ReplaceAllString(m[1], `""`), ",") {
			if lm := matcherRe.FindStringSubmatch(part); lm != nil {
				labelsUsed[lm[1]] = true
			}
		}
	}
	for _, m := range groupRe.FindAllStringSubmatch(e, -1) {
		for _, l := range strings.Split(m[1], ",") {
			if l = strings.TrimSpace(l); l != "" {
				labelsUsed[l] = true
			}
		}
	}
	e = quotedRe.ReplaceAllString(e, " ")
	e = selRe.ReplaceAllString(e, " ")
	e = groupRe.ReplaceAllString(e, " ")
	e = rangeRe.ReplaceAllString(e, " ")
	e = varRe.ReplaceAllString(e, " ")
	for _, id := range identRe.FindAllString(e, -1) {
		if !promFuncs[id] {
			names = append(names, id)
		}
	}
	if len(names) == 0 {
		probs = append(probs, "queries no metric")
	}
	have := map[string]bool{"instance": true, "job": true}
	for _, n := range names {
		labels, ok := exp[n]
		if !ok {
			probs = append(probs, fmt.Sprintf("metric %s is not exported by the agent", n))
			continue
		}
		for _, l := range labels {
			have[l] = true
		}
	}
	for l := range labelsUsed {
		if !have[l] {
			probs = append(probs, fmt.Sprintf("label %q is on none of its metrics %v", l, names))
		}
	}
	sort.Strings(probs)
	return probs
}

func loadDashboard(t *testing.T) (map[string]any, []string) {
	t.Helper()
	data, err := os.ReadFile("grafana/scrubd.json")
	if err != nil {
		t.Fatal(err)
	}
	var d map[string]any
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatalf("grafana/scrubd.json: %v", err)
	}
	return d, queries(d)
}

func TestDashboardQueriesExportedMetrics(t *testing.T) {
	exp := exported(t)
	_, qs := loadDashboard(t)
	if len(qs) < 20 {
		t.Fatalf("only %d queries found in the dashboard", len(qs))
	}
	used := map[string]bool{}
	for _, q := range qs {
		for _, p := range checkQuery(q, exp) {
			t.Errorf("%s\n    in: %s", p, q)
		}
		for _, id := range identRe.FindAllString(q, -1) {
			if _, ok := exp[id]; ok {
				used[id] = true
			}
		}
	}
	// What the dashboard is for (issue: hw and sw drops per rule side by
	// side, moves, software capacity and headroom, hardware table use, NIC
	// drop counters).
	for _, m := range []string{"scrubd_rule_dropped_packets_total", "scrubd_placement_moves_total", "scrubd_rule_placement",
		"scrubd_sw_capacity_packets_per_second", "scrubd_sw_load_packets_per_second", "scrubd_sw_headroom_ratio",
		"scrubd_hw_entries_used", "scrubd_hw_entries_max", "scrubd_hw_masks_used", "scrubd_nic_dropped_packets_total",
		"scrubd_hw_install_failures_total", "scrubd_protected_lost_packets_total", "scrubd_path_dropped_frame_size_bytes"} {
		if !used[m] {
			t.Errorf("the dashboard never queries %s", m)
		}
	}
}

// The checker must be able to fail.
func TestDashboardCheckerCatchesMistakes(t *testing.T) {
	exp := exported(t)
	for _, c := range []struct{ q, want string }{
		{`sum by (rule, path) (rate(scrubd_rule_droped_packets_total{instance=~"$instance"}[5m]))`, "scrubd_rule_droped_packets_total is not exported"},
		{`sum by (rule, lane) (rate(scrubd_rule_dropped_packets_total[5m]))`, `label "lane"`},
		{`scrubd_hw_entries_used{path="hw"}`, `label "path"`},
		{`label_values(scrubd_nfo, instance)`, "scrubd_nfo is not exported"},
		{`rate(go_gc_duration_second[5m])`, "go_gc_duration_second is not exported"},
	} {
		probs := checkQuery(c.q, exp)
		if !strings.Contains(strings.Join(probs, "\n"), c.want) {
			t.Errorf("checkQuery(%s) = %q, want a problem mentioning %q", c.q, probs, c.want)
		}
	}
	if probs := checkQuery(`8 * sum by (path) (rate(scrubd_rule_dropped_bytes_total{instance=~"$instance",path="hw"}[$__rate_interval]))`, exp); len(probs) != 0 {
		t.Errorf("a correct query was refused: %q", probs)
	}
}

// promqlSyntax has promtool parse every dashboard query (as the expressions
// of recording rules in a rules file: `promtool check rules` parses them with
// Prometheus's own PromQL parser). Grafana's variables are replaced by
// values of their type first; label_values() is Grafana's, not PromQL.
func promqlSyntax(t *testing.T, qs []string) (string, error) {
	t.Helper()
	repl := strings.NewReplacer("$__rate_interval", "1m", "${instance}", ".*", "$instance", ".*")
	var b strings.Builder
	b.WriteString("groups:\n  - name: dashboard\n    rules:\n")
	n := 0
	for _, q := range qs {
		if strings.HasPrefix(strings.TrimSpace(q), "label_values(") {
			continue
		}
		j, _ := json.Marshal(repl.Replace(q))
		fmt.Fprintf(&b, "      - record: dashboard:query%d\n        expr: %s\n", n, j)
		n++
	}
	f := t.TempDir() + "/dashboard.rules.yml"
	if err := os.WriteFile(f, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("promtool", "check", "rules", f).CombinedOutput()
	return string(out), err
}

func needPromtool(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("promtool"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("promtool not found: CI must install the prometheus package")
		}
		t.Skip("promtool not installed (Debian package prometheus)")
	}
}

func TestDashboardPromQLParses(t *testing.T) {
	needPromtool(t)
	_, qs := loadDashboard(t)
	if out, err := promqlSyntax(t, qs); err != nil {
		t.Fatalf("promtool check rules on the dashboard's queries: %v\n%s", err, out)
	}
	if out, err := promqlSyntax(t, []string{`sum by (rule) (rate(scrubd_rule_dropped_packets_total[5m])`}); err == nil {
		t.Fatalf("promtool accepted an unbalanced parenthesis:\n%s", out)
	}
}
