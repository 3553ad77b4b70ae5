package main

import (
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/scrubd/scrubd/agent/version"
	"github.com/scrubd/scrubd/internal/doctable"
)

// helpChecked lists the commands whose -h, flag names and exit codes are
// checked: every command.
var helpChecked = []string{"bench", "config", "dryrun", "plan", "rules", "run", "version"}

// -h and --help exit 0 with the usage on stdout and nothing on stderr, for
// the program and for every command.
func TestHelpExitsZero(t *testing.T) {
	for _, h := range []string{"-h", "--help", "-help", "help"} {
		if rc, out, errs := runCmd(h); rc != 0 || !strings.Contains(out, "usage: scrubd") || errs != "" {
			t.Errorf("scrubd %s: rc %d stdout %q stderr %q", h, rc, out, errs)
		}
	}
	for _, name := range helpChecked {
		for _, h := range []string{"-h", "--help"} {
			rc, out, errs := runCmd(name, h)
			if rc != 0 || !strings.Contains(out, "usage: scrubd "+name) || errs != "" {
				t.Errorf("scrubd %s %s: rc %d stdout %q stderr %q; want 0 and the usage on stdout", name, h, rc, out, errs)
			}
		}
	}
}

// Every registered command is either in helpChecked or run, so a new
// command cannot skip the check.
func TestEveryCommandChecked(t *testing.T) {
	var names []string
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	want := append([]string{}, helpChecked...)
	sort.Strings(want)
	if strings.Join(names, ",") != strings.Join(want, ",") {
		t.Fatalf("commands %v, checked %v", names, want)
	}
}

// The flag package takes the first `quoted` word of a usage string as the
// flag's argument name: `scrubd bench` printed "-cycles-per-packet scrubd".
// Every argument name in every command's help is a type name or a word
// chosen for it.
func TestFlagArgumentNames(t *testing.T) {
	allowed := map[string]bool{"string": true, "int": true, "uint": true, "uint64": true, "float": true, "duration": true, "value": true,
		"file": true, "socket": true, "host:port": true, "N": true, "id": true, "engine": true}
	line := regexp.MustCompile(`^  -(\S+)(?: (.+))?$`)
	for _, name := range helpChecked {
		_, out, _ := runCmd(name, "-h")
		flags := 0
		for _, l := range strings.Split(out, "\n") {
			m := line.FindStringSubmatch(l)
			if m == nil {
				continue
			}
			flags++
			if m[2] != "" && !allowed[m[2]] {
				t.Errorf("scrubd %s -h: flag -%s has the argument name %q (a backquoted word in its usage?)", name, m[1], m[2])
			}
		}
		if name != "version" && name != "config" && flags == 0 {
			t.Errorf("scrubd %s -h lists no flags:\n%s", name, out)
		}
	}
}

func TestVersionFlag(t *testing.T) {
	want := version.String() + "\n"
	for _, args := range [][]string{{"--version"}, {"-version"}, {"version"}} {
		if rc, out, errs := runCmd(args...); rc != 0 || out != want || errs != "" {
			t.Errorf("scrubd %v: rc %d stdout %q stderr %q, want %q", args, rc, out, errs, want)
		}
	}
}

// The exit codes are in the help, and each is what the commands return.
func TestExitCodes(t *testing.T) {
	_, out, _ := runCmd("help")
	for _, l := range []string{"0  success", "1  the command failed", "2  bad usage"} {
		if !strings.Contains(out, l) {
			t.Errorf("scrubd help lacks %q:\n%s", l, out)
		}
	}
	for _, tc := range []struct {
		args []string
		rc   int
	}{
		{[]string{"config", "check", "/nonexistent/scrubd.yaml"}, 1},
		{[]string{"run", "--config", "/nonexistent/scrubd.yaml"}, 1},
		{[]string{"run"}, 2},
		{[]string{"rules", "list", "--socket", "/nonexistent/api.sock"}, 1},
		{[]string{"config", "check"}, 2},
		{[]string{"rules", "list", "--bogus"}, 2},
		{[]string{"plan", "--link-gbps", "x"}, 2},
		{[]string{"bench", "--workers", "0"}, 2},
		{[]string{"frobnicate"}, 2},
	} {
		if rc, _, errs := runCmd(tc.args...); rc != tc.rc {
			t.Errorf("scrubd %v: rc %d, want %d (%s)", tc.args, rc, tc.rc, errs)
		}
	}
}

// docs/cli.md's "Every flag" has a table for each command with a row for
// each flag its -h lists, and no other; a default the help prints is the
// first `quoted` word of the row's default cell, and a row whose flag has
// no printed default gives none.
func TestCLIReferenceFlags(t *testing.T) {
	data, err := os.ReadFile("../../../docs/cli.md")
	if err != nil {
		t.Fatal(err)
	}
	_, ref, ok := strings.Cut(string(data), "\n## Every flag\n")
	if !ok {
		t.Fatal(`docs/cli.md has no "## Every flag" section`)
	}
	if i := strings.Index(ref, "\n## "); i >= 0 {
		ref = ref[:i]
	}
	sections := map[string]string{}
	for _, s := range strings.Split(ref, "\n### `scrubd ")[1:] {
		name, body, _ := strings.Cut(s, "`")
		sections[name] = body
	}
	flagLine := regexp.MustCompile(`^  -(\S+)`)
	defaultRe := regexp.MustCompile(`\(default (.+)\)$`)
	for _, name := range helpChecked {
		body, ok := sections[name]
		if !ok {
			t.Errorf("docs/cli.md: no \"### `scrubd %s`\" under \"## Every flag\"", name)
			continue
		}
		doc := map[string]string{} // flag -> default cell
		for f, c := range doctable.Rows(body, "--") {
			if len(c) > 0 {
				doc[strings.TrimPrefix(f, "--")] = c[0]
			}
		}
		_, out, _ := runCmd(name, "-h")
		help := map[string]string{} // flag -> printed default
		lines := strings.Split(out, "\n")
		for i, l := range lines {
			m := flagLine.FindStringSubmatch(l)
			if m == nil {
				continue
			}
			help[m[1]] = ""
			for j := i + 1; j < len(lines) && strings.HasPrefix(lines[j], "    \t"); j++ {
				if d := defaultRe.FindStringSubmatch(lines[j]); d != nil {
					help[m[1]] = strings.Trim(d[1], `"`)
				}
			}
		}
		for f, def := range help {
			cell, ok := doc[f]
			if !ok {
				t.Errorf("docs/cli.md: scrubd %s --%s has no row", name, f)
				continue
			}
			word := ""
			if _, after, ok := strings.Cut(cell, "`"); ok {
				word, _, _ = strings.Cut(after, "`")
			}
			if word != def {
				t.Errorf("docs/cli.md: scrubd %s --%s: default cell %q, the help prints %q", name, f, cell, def)
			}
		}
		for f := range doc {
			if _, ok := help[f]; !ok {
				t.Errorf("docs/cli.md documents scrubd %s --%s, which its -h does not list", name, f)
			}
		}
	}
}
