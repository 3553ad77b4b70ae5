package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/scrubd/scrubd/swpath/dryrun"
	"github.com/scrubd/scrubd/swpath/packet"
	"github.com/scrubd/scrubd/swpath/rule"
	"github.com/scrubd/scrubd/swpath/traffic"
)

func runCmd(args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	rc := run(args, &out, &errb)
	return rc, out.String(), errb.String()
}

func TestDispatch(t *testing.T) {
	if rc, _, e := runCmd(); rc != 2 || !strings.Contains(e, "usage: scrubd") {
		t.Errorf("no args: rc %d stderr %q", rc, e)
	}
	if rc, _, e := runCmd("frobnicate"); rc != 2 || !strings.Contains(e, `unknown command "frobnicate"`) || !strings.Contains(e, "dryrun") {
		t.Errorf("unknown: rc %d stderr %q", rc, e)
	}
	if rc, o, _ := runCmd("version"); rc != 0 || strings.TrimSpace(o) == "" {
		t.Errorf("version: rc %d out %q", rc, o)
	}
	if rc, _, _ := runCmd("dryrun"); rc != 2 {
		t.Errorf("dryrun without flags: rc %d", rc)
	}
}

// expected computes the report with the reference (rule.Set.Decide and
// Match.Matches) over the frames, independently of the dryrun code.
func expected(set *rule.Set, frames [][]byte) dryrun.Report {
	rep := dryrun.Report{Rules: make([]dryrun.RuleReport, len(set.Rules))}
	for i := range set.Rules {
		rep.Rules[i].ID = set.Rules[i].ID
	}
	var f rule.Fields
	for _, b := range frames {
		packet.Parse(b, &f)
		rep.Packets++
		for i := range set.Rules {
			if set.Rules[i].Match.Matches(&f) {
				rep.Rules[i].Matched++
			}
		}
		d := set.Decide(&f)
		if d < 0 {
			rep.Passed++
			continue
		}
		rep.Rules[d].Hits++
		rep.Rules[d].Bytes += uint64(len(b))
		if set.Rules[d].Action == rule.Accept {
			rep.AcceptedByRule++
			rep.Passed++
		} else {
			rep.Dropped++
		}
	}
	return rep
}

func writeRules(t *testing.T, dir string, set *rule.Set) string {
	t.Helper()
	var b strings.Builder
	b.WriteString("rules:\n")
	for i := range set.Rules {
		js, err := json.Marshal(set.Rules[i].Spec())
		if err != nil {
			t.Fatal(err)
		}
		b.WriteString("  - " + string(js) + "\n")
	}
	p := filepath.Join(dir, "rules.yaml")
	if err := os.WriteFile(p, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestDryrunAgainstReference(t *testing.T) {
	dir := t.TempDir()
	for seed := uint64(1); seed <= 4; seed++ {
		// Rules that the rule-file format can express: generated, written as
		// a file, and parsed back by the command.
		src := traffic.RandomRules(seed, 30)
		var set rule.Set
		for _, r := range src.Rules {
			if r.Match.Family() == rule.FamilyAny && r.Match.NeedsL4() {
				continue // keep the file valid regardless of checkMatch's family rules
			}
			if _, err := rule.ParseRule("x", mustJSON(t, r.Spec()), traffic.Epoch); err != nil {
				continue // a combination the parser refuses as never matching
			}
			set.Rules = append(set.Rules, r)
		}
		if len(set.Rules) < 10 {
			t.Fatalf("seed %d: only %d valid rules", seed, len(set.Rules))
		}
		rules := writeRules(t, dir, &set)
		parsed, err := rule.Parse(rules, mustRead(t, rules), traffic.Epoch)
		if err != nil {
			t.Fatal(err)
		}
		frames := traffic.NewGenerator(traffic.Config{Seed: seed, Rules: parsed, RuleFraction: 0.8, Odd: true, Sizes: traffic.Sizes{Min: 64, Max: 1518}}).Frames(1500)
		want := expected(parsed, frames)
		if want.Dropped == 0 || want.Passed == want.AcceptedByRule {
			t.Fatalf("seed %d: traffic does not exercise drops and passes: %+v", seed, want)
		}
		for _, ng := range []bool{false, true} {
			capPath := filepath.Join(dir, "cap.pcap")
			if err := traffic.WriteFile(capPath, frames, ng); err != nil {
				t.Fatal(err)
			}
			// Random rules, broad ones too: the guard is lifted (its
			// own test is TestDryrunRefusesWhatTheAgentRefuses).
			rc, out, errs := runCmd("dryrun", "--rules", rules, "--pcap", capPath, "--json", "--engine", "go",
				"--min-prefix-v4", "0", "--min-prefix-v6", "0", "--allow-match-all")
			if rc != 0 {
				t.Fatalf("rc %d: %s", rc, errs)
			}
			var got dryrun.Report
			if err := json.Unmarshal([]byte(out), &got); err != nil {
				t.Fatalf("%v: %s", err, out)
			}
			if got.Packets != want.Packets || got.Dropped != want.Dropped || got.Passed != want.Passed || got.AcceptedByRule != want.AcceptedByRule {
				t.Errorf("seed %d pcapng=%v totals %+v, want %+v", seed, ng, got, want)
			}
			if len(got.Rules) != len(want.Rules) {
				t.Fatalf("%d rules, want %d", len(got.Rules), len(want.Rules))
			}
			for i := range got.Rules {
				if got.Rules[i] != want.Rules[i] {
					t.Errorf("seed %d pcapng=%v rule %d: %+v, want %+v", seed, ng, i, got.Rules[i], want.Rules[i])
				}
			}
		}
	}
}

func TestDryrunJSONShape(t *testing.T) {
	rc, out, errs := runCmd("dryrun", "--rules", "../../../deploy/examples/rules.yaml", "--pcap", "../../../deploy/examples/sample.pcap", "--json")
	if rc != 0 {
		t.Fatalf("rc %d: %s", rc, errs)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"packets", "dropped", "passed", "accepted_by_rule", "rules"} {
		if _, ok := m[k]; !ok {
			t.Errorf("JSON lacks %q: %s", k, out)
		}
	}
	if len(m) != 5 {
		t.Errorf("JSON has extra keys: %s", out)
	}
	rules := m["rules"].([]any)
	r0 := rules[0].(map[string]any)
	if len(r0) != 4 || r0["id"] != "allow-monitoring" {
		t.Errorf("rule object %v", r0)
	}
	if m["packets"].(float64) != 900 || m["dropped"].(float64) == 0 {
		t.Errorf("sample totals %v", m)
	}
	rc, out, _ = runCmd("dryrun", "--rules", "../../../deploy/examples/rules.yaml", "--pcap", "../../../deploy/examples/sample.pcap")
	if rc != 0 || !strings.Contains(out, "dns-amp") || !strings.Contains(out, "accepted_by_rule") {
		t.Errorf("text output rc %d: %s", rc, out)
	}
}

func TestDryrunErrors(t *testing.T) {
	dir := t.TempDir()
	rules := filepath.Join(dir, "r.yaml")
	os.WriteFile(rules, []byte("rules:\n  - {id: a, action: drop, match: {dst: 10.0.0.0/8, proto: udp}}\n"), 0o644)
	capPath := filepath.Join(dir, "c.pcap")
	traffic.WriteFile(capPath, traffic.NewGenerator(traffic.Config{Seed: 1}).Frames(10), false)
	rc, _, e := runCmd("dryrun", "--rules", rules, "--pcap", capPath, "--engine", "warp")
	if rc != 2 || !strings.Contains(e, `unknown engine "warp"`) || !strings.Contains(e, "available: ") || !strings.Contains(e, "go") {
		t.Errorf("unknown engine: rc %d: %s", rc, e)
	}
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte("rules:\n  - {id: a, action: drop, match: {dst_port: 70000}}\n"), 0o644)
	rc, _, e = runCmd("dryrun", "--rules", bad, "--pcap", capPath)
	if rc != 1 || !strings.Contains(e, "bad.yaml:2") || !strings.Contains(e, "match.dst_port") {
		t.Errorf("bad rules: rc %d: %s", rc, e)
	}
	notcap := filepath.Join(dir, "x.pcap")
	os.WriteFile(notcap, []byte("this is not a capture file"), 0o644)
	rc, _, e = runCmd("dryrun", "--rules", rules, "--pcap", notcap)
	if rc != 1 || !strings.Contains(e, "neither pcap nor pcapng") {
		t.Errorf("bad capture: rc %d: %s", rc, e)
	}
	exp := filepath.Join(dir, "exp.yaml")
	os.WriteFile(exp, []byte("rules:\n  - {id: old, action: drop, expires: 2001-01-01T00:00:00Z, match: {dst: 10.0.0.0/8, proto: udp}}\n  - {id: new, action: drop, match: {dst: 10.0.0.0/8, proto: tcp}}\n"), 0o644)
	rc, o, e := runCmd("dryrun", "--rules", exp, "--pcap", capPath, "--json")
	if rc != 0 || !strings.Contains(e, `rule "old" expired`) || strings.Contains(o, `"old"`) {
		t.Errorf("expired rule: rc %d: %s %s", rc, o, e)
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func mustRead(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
