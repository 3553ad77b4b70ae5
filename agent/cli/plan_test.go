package cli

import (
	"bytes"
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/scrubd/scrubd/agent/plan"
)

func TestPlanText(t *testing.T) {
	for _, tc := range []struct {
		cycles string
		no     []string
		yes    []string
	}{
		{"297", []string{"64 B"}, []string{"128 B", "256 B", "IMIX"}},
		{"435", []string{"64 B", "128 B"}, []string{"256 B", "512 B", "1500 B", "IMIX"}},
	} {
		var out, errb bytes.Buffer
		rc := planCmd([]string{"--link-gbps", "100", "--workers", "12", "--ghz", "2.13", "--cycles-per-packet", tc.cycles}, &out, &errb)
		if rc != 0 {
			t.Fatalf("rc %d: %s", rc, errb.String())
		}
		lines := strings.Split(out.String(), "\n")
		holds := func(frame string) string {
			re := regexp.MustCompile(`^\s*` + regexp.QuoteMeta(frame) + `(\s|\()`)
			for _, l := range lines {
				if re.MatchString(l) {
					f := strings.Fields(l)
					return f[len(f)-2]
				}
			}
			t.Fatalf("no row %q in\n%s", frame, out.String())
			return ""
		}
		for _, f := range tc.no {
			if h := holds(f); h != "no" {
				t.Errorf("cycles %s frame %s: %q, want no", tc.cycles, f, h)
			}
		}
		for _, f := range tc.yes {
			if h := holds(f); h != "yes" {
				t.Errorf("cycles %s frame %s: %q, want yes", tc.cycles, f, h)
			}
		}
	}
}

func TestPlanJSON(t *testing.T) {
	var out, errb bytes.Buffer
	if rc := planCmd([]string{"--workers=12", "--ghz=2.13", "--cycles-per-packet=297", "--json"}, &out, &errb); rc != 0 {
		t.Fatalf("rc %d %s", rc, errb.String())
	}
	var res plan.Result
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		t.Fatal(err)
	}
	if len(res.Rows) != 7 || res.Rows[0].HoldsLineRate || !res.Rows[1].HoldsLineRate {
		t.Fatalf("%+v", res.Rows)
	}
}

func TestPlanBadArgs(t *testing.T) {
	for _, args := range [][]string{{"--workers", "0", "--ghz", "2", "--cycles-per-packet", "3"}, {"--bogus"}, {"extra"}} {
		var out, errb bytes.Buffer
		if rc := planCmd(args, &out, &errb); rc != 2 {
			t.Errorf("%v: rc %d", args, rc)
		}
	}
}
