package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/scrubd/scrubd/agent/api"
	"github.com/scrubd/scrubd/agent/apisock"
	"github.com/scrubd/scrubd/agent/protect"
	"github.com/scrubd/scrubd/agent/store"
	"github.com/scrubd/scrubd/internal/syncbuf"
)

// startAPI serves the agent's API (a real api.Server over a store) on a
// unix socket until the test ends, and returns the socket's path.
func startAPI(t testing.TB) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "api.sock")
	l, err := api.ListenUnix(sock)
	if err != nil {
		t.Fatal(err)
	}
	st := store.New(&protect.List{}, time.Now)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- api.Serve(ctx, l, (&api.Server{Store: st, Now: time.Now}).Handler()) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	return sock
}

func rules(args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	rc := rulesCmd(args, strings.NewReader(""), &out, &errb)
	return rc, out.String(), errb.String()
}

const oneRuleFile = "rules:\n  - {id: dns-amp, action: drop, match: {dst: 203.0.113.0/24, proto: udp, src_port: \"53\"}}\n"

func writeTemp(t *testing.T, name, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// listIDs is `rules list --json` through the given extra arguments.
func listIDs(t *testing.T, args ...string) []string {
	t.Helper()
	rc, out, errs := rules(append([]string{"list", "--json"}, args...)...)
	if rc != 0 {
		t.Fatalf("rules list --json %v: rc %d: %s", args, rc, errs)
	}
	var list []api.RuleInfo
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Fatalf("rules list --json: not JSON (%v): %q", err, out)
	}
	var ids []string
	for _, r := range list {
		ids = append(ids, r.Rule.ID)
	}
	return ids
}

// Flags may follow the command and its argument; the socket comes from
// --socket, SCRUBD_SOCKET or --config's api.socket.
func TestRulesFindsAgent(t *testing.T) {
	sock := startAPI(t)
	t.Setenv("SCRUBD_SOCKET", "")
	file := writeTemp(t, "r.yaml", oneRuleFile)
	if rc, out, errs := rules("add", file, "--socket", sock); rc != 0 || !strings.Contains(out, "added dns-amp") {
		t.Fatalf("rules add FILE --socket S: rc %d out %q err %q", rc, out, errs)
	}
	if ids := listIDs(t, "--socket", sock); len(ids) != 1 || ids[0] != "dns-amp" {
		t.Fatalf("rules list --json --socket S: %v", ids)
	}
	t.Setenv("SCRUBD_SOCKET", sock)
	if ids := listIDs(t); len(ids) != 1 {
		t.Fatalf("SCRUBD_SOCKET: %v", ids)
	}
	t.Setenv("SCRUBD_SOCKET", "")
	cfg := writeTemp(t, "scrubd.yaml", "software:\n  engine: none\napi:\n  socket: "+sock+"\n")
	if ids := listIDs(t, "--config", cfg); len(ids) != 1 {
		t.Fatalf("--config: %v", ids)
	}
	// "--" ends the flags.
	if rc, _, errs := rules("--socket", sock, "get", "--", "--json"); rc != 1 || !strings.Contains(errs, "404") {
		t.Fatalf("rules get -- --json: rc %d err %q (want the agent's 404 for the id \"--json\")", rc, errs)
	}
}

// With no agent there, the error names each path tried, where it came
// from, and how to choose one.
func TestRulesNoAgent(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "none.sock")
	t.Setenv("SCRUBD_SOCKET", missing)
	rc, _, errs := rules("list")
	if rc != ExitFail {
		t.Fatalf("rc %d, want %d", rc, ExitFail)
	}
	for _, want := range []string{missing + " (SCRUBD_SOCKET): no such socket", "--socket", "SCRUBD_SOCKET=", "--config"} {
		if !strings.Contains(errs, want) {
			t.Errorf("error %q lacks %q", errs, want)
		}
	}
}

func TestRulesHelpAndUsage(t *testing.T) {
	for _, args := range [][]string{{"-h"}, {"--help"}, {"list", "-h"}, {"add", "x.yaml", "--help"}} {
		rc, out, errs := rules(args...)
		if rc != ExitOK || !strings.Contains(out, "usage: scrubd rules") || errs != "" {
			t.Errorf("rules %v: rc %d stdout %q stderr %q; want 0 and the usage on stdout", args, rc, out, errs)
		}
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "a command is required"},
		{[]string{"frob"}, `unknown command "frob"`},
		{[]string{"list", "extra"}, "list takes 0 argument(s)"},
		{[]string{"add"}, "add takes 1 argument(s)"},
		{[]string{"list", "--nope"}, "flag provided but not defined: -nope"},
		{[]string{"list", "--limit", "-1", "--socket", "/nonexistent/s"}, "--limit -1: must not be negative"},
		{[]string{"list", "--ndjson", "--json", "--socket", "/nonexistent/s"}, "--ndjson is an output of list, and not with --json"},
		{[]string{"get", "x", "--ndjson", "--socket", "/nonexistent/s"}, "--ndjson is an output of list"},
	} {
		rc, _, errs := rules(tc.args...)
		if rc != ExitUsage || !strings.Contains(errs, tc.want) || !strings.Contains(errs, "usage: scrubd rules") {
			t.Errorf("rules %v: rc %d stderr %q; want %d and %q", tc.args, rc, errs, ExitUsage, tc.want)
		}
	}
}

// `rules add` of a typo'd file leads with the typo, and adds nothing.
func TestRulesAddTypoLeads(t *testing.T) {
	sock := startAPI(t)
	dir := t.TempDir()
	for _, tc := range []struct{ name, text, first string }{
		{"", "", "open " + filepath.Join(dir, "missing.yaml") + ": no such file or directory"},
		{"rulez.yaml", strings.Replace(oneRuleFile, "rules:", "rulez:", 1), "rulez.yaml:1: neither a rule file (a top-level 'rules:' list) nor one rule (id, action, match, priority, expires): its keys are rulez"},
		{"acton.yaml", "rules:\n  - id: a\n    acton: drop\n    match: {dst: 203.0.113.0/24}\n", `acton.yaml:3: rule "a": acton: unknown key`},
		{"one.yaml", "idd: a\naction: drop\nmatch: {dst: 203.0.113.0/24}\n", "one.yaml:1: idd: unknown key"},
		{"list.yaml", "- id: a\n", "list.yaml:1: a rule file is a mapping"},
	} {
		path := filepath.Join(dir, "missing.yaml")
		if tc.name != "" {
			path = filepath.Join(dir, tc.name)
			os.WriteFile(path, []byte(tc.text), 0o644)
		}
		rc, _, errs := rules("add", path, "--socket", sock)
		first, _, _ := strings.Cut(errs, "\n")
		if rc != ExitFail || !strings.HasPrefix(first, "scrubd rules: ") || !strings.Contains(first, tc.first) {
			t.Errorf("rules add %s: rc %d, first line %q; want rc 1 and %q", tc.name, rc, first, tc.first)
		}
		if strings.Contains(first, "id: required") {
			t.Errorf("rules add %s leads with id: required: %q", tc.name, errs)
		}
	}
	if ids := listIDs(t, "--socket", sock); len(ids) != 0 {
		t.Fatalf("typo'd files added %v", ids)
	}
	// One rule (not a file) still goes in.
	one := writeTemp(t, "one.yaml", "{id: ntp, action: drop, match: {dst: 203.0.113.0/24, proto: udp, src_port: \"123\"}}\n")
	if rc, out, errs := rules("add", one, "--socket", sock); rc != 0 || !strings.Contains(out, "added ntp") {
		t.Fatalf("rules add of one rule: rc %d %q %q", rc, out, errs)
	}
	// replace takes a rule file only.
	if rc, _, errs := rules("replace", one, "--socket", sock); rc != ExitFail || !strings.Contains(errs, "replace takes a rule file") {
		t.Fatalf("rules replace of one rule: rc %d %q", rc, errs)
	}
}

// The new user's session: `scrubd run --sim` in one terminal, `scrubd rules
// list` and `scrubd rules add` in another, with no flags. Both sides take
// the socket from apisock for the same (test) user: uid 1000 with
// XDG_RUNTIME_DIR in a temporary directory, no SCRUBD_SOCKET.
func TestRulesFindRunSimWithNoFlags(t *testing.T) {
	xdg := t.TempDir()
	user := apisock.Env{
		UID:    func() int { return 1000 },
		Getenv: func(k string) string { return map[string]string{"XDG_RUNTIME_DIR": xdg}[k] },
	}
	oldSim, oldEnv := simSocket, sockEnv
	simSocket, sockEnv = user.SimPath, user
	defer func() { simSocket, sockEnv = oldSim, oldEnv }()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errb syncbuf.Buffer
	done := make(chan int, 1)
	go func() {
		done <- runCmd(ctx, []string{"--sim", "--metrics", "127.0.0.1:0", "--sim-scale", "20000"}, &out, &errb)
	}()
	want := filepath.Join(xdg, "scrubd", "sim.sock")
	deadline := time.Now().Add(30 * time.Second)
	for {
		rc, list, errs := rules("list")
		if rc == ExitOK && strings.Contains(list, "ID") && strings.Count(list, "\n") > 1 {
			break
		}
		select {
		case rc := <-done:
			t.Fatalf("run --sim ended: rc %d\n%s\n%s", rc, out.String(), errb.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("rules list with no flags never listed the sim's rules (want its socket %s): rc %d %q %q", want, rc, list, errs)
		}
		time.Sleep(100 * time.Millisecond)
	}
	file := writeTemp(t, "r.yaml", oneRuleFile)
	// The API answers before the placer's next round, as a rule: the rule
	// is not placed yet, and the line says so rather than "none". A round
	// that ends in between (a loaded machine) places it in hw or sw.
	if rc, o, errs := rules("add", file); rc != ExitOK || (o != "added dns-amp: not placed yet (scrubd rules list shows where it goes)\n" &&
		!strings.HasPrefix(o, "added dns-amp: hw") && !strings.HasPrefix(o, "added dns-amp: sw")) {
		t.Fatalf("rules add with no flags: rc %d %q %q", rc, o, errs)
	}
	if rc, o, _ := rules("list"); rc != ExitOK || !strings.Contains(o, "dns-amp") {
		t.Fatalf("rules list after add: rc %d %q", rc, o)
	}
	cancel()
	if rc := <-done; rc != 0 {
		t.Fatalf("run --sim: rc %d: %s", rc, errb.String())
	}
	// The agent is gone: the error names the socket it tried.
	if rc, _, errs := rules("list"); rc != ExitFail || !strings.Contains(errs, want+" (run --sim)") {
		t.Fatalf("rules list after the agent stopped: rc %d %q", rc, errs)
	}
}

// The line rules add prints for each state the API can answer with: not
// placed yet (path none, no reason), placed, and an accept rule, which
// stays on path none with its reason.
func TestAddedLine(t *testing.T) {
	for _, c := range []struct{ path, why, want string }{
		{"none", "", "added r: not placed yet (scrubd rules list shows where it goes)"},
		{"", "", "added r: not placed yet (scrubd rules list shows where it goes)"},
		{"hw", "offload first", "added r: hw: offload first"},
		{"none", "accept rule: enforced by software", "added r: none: accept rule: enforced by software"},
	} {
		if got := addedLine("r", c.path, c.why); got != c.want {
			t.Errorf("addedLine(%q, %q) = %q, want %q", c.path, c.why, got, c.want)
		}
	}
}
