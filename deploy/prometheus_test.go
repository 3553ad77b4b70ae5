package deploy_test

import (
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

type ruleFile struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []struct {
			Record string `yaml:"record"`
			Alert  string `yaml:"alert"`
			Expr   string `yaml:"expr"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

func loadRules(t *testing.T, path string) ruleFile {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var f ruleFile
	if err := yaml.Unmarshal(b, &f); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return f
}

var madeRe = regexp.MustCompile(`,\s*"(\w+)",\s*"[^"]*",\s*"[^"]*",\s*"[^"]*"\s*\)`)

// The fleet's alerts: the ones an operator of many agents needs.
var wantAlerts = []string{"ScrubdAgentDown", "ScrubdFlowSpecSessionDown", "ScrubdFlowSpecMalformedMessage", "ScrubdSoftwareHeadroomLow",
	"ScrubdHardwareTableFull", "ScrubdResyncStorm", "ScrubdProtectedTrafficDropped", "ScrubdProtectedTrafficLost"}

// Every metric the recording and alerting rules read is one the agent
// exports (or a series Prometheus itself makes, or one the recording rules
// record), with the labels the rules use.
func TestPrometheusRulesQueryExportedMetrics(t *testing.T) {
	exp := exported(t)
	exp["up"] = []string{"job", "instance"}
	rec := loadRules(t, "prometheus/recording.yml")
	al := loadRules(t, "prometheus/alerts.yml")
	var exprs []string
	for _, f := range []ruleFile{rec, al} {
		for _, g := range f.Groups {
			for _, r := range g.Rules {
				if r.Record != "" {
					// A recorded series keeps the labels of what it reads;
					// grant it every label the agent's metrics carry.
					exp[r.Record] = []string{"rule", "path", "source", "status", "peer", "reason", "worker", "node", "stat"}
				}
				exprs = append(exprs, r.Expr)
			}
		}
	}
	for _, e := range exprs {
		// A label label_replace makes is not read from a metric: drop it
		// from the grouping clauses before the check.
		for _, m := range madeRe.FindAllStringSubmatch(e, -1) {
			e = strings.NewReplacer(", "+m[1]+")", ")", "("+m[1]+", ", "(").Replace(e)
		}
		for _, p := range checkQuery(strings.ReplaceAll(e, "humanizePercentage", ""), exp) {
			t.Errorf("%s\n    in: %s", p, e)
		}
	}
	var alerts []string
	for _, g := range al.Groups {
		for _, r := range g.Rules {
			alerts = append(alerts, r.Alert)
		}
	}
	for _, a := range wantAlerts {
		if !slices.Contains(alerts, a) {
			t.Errorf("alerts.yml has no %s", a)
		}
	}
}

// promtool checks the rule files and runs their unit tests, and every alert
// has a test case that expects it to fire.
func TestPrometheusRulesPromtool(t *testing.T) {
	needPromtool(t)
	out, err := exec.Command("promtool", "check", "rules", "prometheus/recording.yml", "prometheus/alerts.yml").CombinedOutput()
	if err != nil {
		t.Fatalf("promtool check rules: %v\n%s", err, out)
	}
	out, err = exec.Command("promtool", "test", "rules", "prometheus/rules_test.yml").CombinedOutput()
	t.Logf("promtool test rules prometheus/rules_test.yml:\n%s", out)
	if err != nil || !strings.Contains(string(out), "SUCCESS") {
		t.Fatalf("promtool test rules: %v", err)
	}
	b, err := os.ReadFile("prometheus/rules_test.yml")
	if err != nil {
		t.Fatal(err)
	}
	var tf struct {
		Tests []struct {
			Alerts []struct {
				Name string `yaml:"alertname"`
				Exp  []any  `yaml:"exp_alerts"`
			} `yaml:"alert_rule_test"`
		} `yaml:"tests"`
	}
	if err := yaml.Unmarshal(b, &tf); err != nil {
		t.Fatal(err)
	}
	fires, silent := map[string]bool{}, map[string]bool{}
	for _, tc := range tf.Tests {
		for _, a := range tc.Alerts {
			if len(a.Exp) > 0 {
				fires[a.Name] = true
			} else {
				silent[a.Name] = true
			}
		}
	}
	for _, g := range loadRules(t, "prometheus/alerts.yml").Groups {
		for _, r := range g.Rules {
			if !fires[r.Alert] {
				t.Errorf("no promtool test expects %s to fire", r.Alert)
			}
		}
	}
	// The tests themselves must be able to fail: a threshold moved breaks
	// the headroom case.
	dir := t.TempDir()
	al, _ := os.ReadFile("prometheus/alerts.yml")
	rec, _ := os.ReadFile("prometheus/recording.yml")
	broken := strings.Replace(string(al), "scrubd:sw_headroom_ratio:known < 0.10", "scrubd:sw_headroom_ratio:known < 0.01", 1)
	for name, data := range map[string]string{"alerts.yml": broken, "recording.yml": string(rec), "rules_test.yml": string(b)} {
		if err := os.WriteFile(dir+"/"+name, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command("promtool", "test", "rules", "rules_test.yml")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err == nil {
		t.Fatalf("promtool test rules passed with the headroom threshold at 1 %%:\n%s", out)
	}
}

// The dashboard has a fleet view: a row of panels per node (grouped or
// legended by instance) for rules and sessions, drops by path, software
// headroom and hardware table use.
func TestDashboardFleetView(t *testing.T) {
	d, _ := loadDashboard(t)
	panels, _ := d["panels"].([]any)
	inRow := false
	covered := map[string]bool{}
	for _, p := range panels {
		pm, _ := p.(map[string]any)
		if pm["type"] == "row" {
			inRow = strings.HasPrefix(pm["title"].(string), "Fleet")
			continue
		}
		if !inRow {
			continue
		}
		for _, q := range queries(pm) {
			byNode := strings.Contains(q, "by (instance") || !strings.Contains(q, "sum") && !strings.Contains(q, "topk")
			for _, m := range []string{"scrubd_flowspec_session_up", "scrubd_rules", "scrubd_rule_dropped_packets_total",
				"scrubd_sw_headroom_ratio", "scrubd_hw_entries_used", "scrubd_rule_placement"} {
				if byNode && strings.Contains(q, m+"{") {
					covered[m] = true
				}
			}
		}
	}
	for _, m := range []string{"scrubd_flowspec_session_up", "scrubd_rules", "scrubd_rule_dropped_packets_total",
		"scrubd_sw_headroom_ratio", "scrubd_hw_entries_used", "scrubd_rule_placement"} {
		if !covered[m] {
			t.Errorf("the dashboard's Fleet row shows no per-node %s", m)
		}
	}
}
