package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/scrubd/scrubd/swpath/bench"
)

// scrubd bench --json runs the real measurement and prints the report the
// placement model reads; the counts in it add up.
func TestBenchJSON(t *testing.T) {
	rules := filepath.Join(t.TempDir(), "rules.yaml")
	if err := os.WriteFile(rules, []byte("rules:\n  - {id: a, action: drop, match: {dst: 203.0.113.0/24, proto: udp}}\n  - {id: b, action: drop, match: {dst: 198.51.100.0/24, proto: tcp, dst_port: \"80\"}}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	rc := benchCmd(context.Background(), []string{"--json", "--packets", "4096", "--frame-sizes", "64, 512", "--rules", rules, "--mix", "0.25", "--host", "--flows", "512"}, &out, &errb)
	if rc != 0 {
		t.Fatalf("rc %d: %s", rc, errb.String())
	}
	var rep bench.Report
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if rep.Rules != 2 || !rep.Emulated || !rep.Host || len(rep.Sizes) != 2 || rep.Sizes[0].FrameSize != 64 || rep.Sizes[1].FrameSize != 512 {
		t.Fatalf("report %+v", rep)
	}
	for _, s := range rep.Sizes {
		if s.Packets < 4096 || s.Dropped+s.Passed != s.Packets || s.CyclesPerPkt <= 0 || s.NsPerPkt <= 0 {
			t.Errorf("%d B: %+v", s.FrameSize, s)
		}
		if share := float64(s.Passed) / float64(s.Packets); share < 0.2 || share > 0.3 {
			t.Errorf("%d B: passed share %.2f, want about 0.25", s.FrameSize, share)
		}
	}
}

// scrubd bench --baseline --json times the rule file against the default
// five side by side and prints one pair a frame size.
func TestBenchBaselineJSON(t *testing.T) {
	rules := filepath.Join(t.TempDir(), "rules.yaml")
	if err := os.WriteFile(rules, []byte("rules:\n  - {id: a, action: drop, match: {dst: 203.0.113.0/24, proto: udp}}\n  - {id: b, action: drop, match: {dst: 198.51.100.0/24, proto: tcp, dst_port: \"80\"}}\n  - {id: c, action: drop, match: {src: 192.0.2.0/24}}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	rc := benchCmd(context.Background(), []string{"--baseline", "--rounds", "3", "--json", "--packets", "6144", "--frame-sizes", "64,256", "--rules", rules, "--flows", "512"}, &out, &errb)
	if rc != 0 {
		t.Fatalf("rc %d: %s", rc, errb.String())
	}
	var ps []bench.Pair
	if err := json.Unmarshal(out.Bytes(), &ps); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if len(ps) != 2 || ps[0].FrameSize != 64 || ps[1].FrameSize != 256 {
		t.Fatalf("pairs %+v", ps)
	}
	for _, p := range ps {
		if p.Rounds != 3 || p.BaseRules != 5 || p.Rules != 3 || p.CPUNsPerPkt <= 0 || p.BaseCPUNsPerPkt <= 0 || !(p.RatioMin <= p.Ratio && p.Ratio <= p.RatioMax) {
			t.Errorf("%+v", p)
		}
	}
}

func TestBenchRefusesBadFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--workers", "0"}, "--workers 0"},
		{[]string{"--frame-sizes", "64,9000"}, `"9000" is not a size`},
		{[]string{"--mix", "2"}, "--mix 2"},
		{[]string{"--flows", "0"}, "--flows 0"},
		{[]string{"--flows", "2000000"}, "--flows 2000000"},
		{[]string{"--rules", "/nonexistent/rules.yaml"}, "--rules"},
		{[]string{"extra"}, `unexpected argument "extra"`},
		{[]string{"--baseline", "--workers", "2"}, "--workers 2: --baseline times one worker"},
		{[]string{"--baseline", "--rounds", "0"}, "--rounds 0"},
	} {
		var out, errb bytes.Buffer
		if rc := benchCmd(context.Background(), tc.args, &out, &errb); rc != 2 || !strings.Contains(errb.String(), tc.want) {
			t.Errorf("%v: rc %d, stderr %q", tc.args, rc, errb.String())
		}
	}
}
