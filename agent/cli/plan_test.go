package cli

import (
	"bytes"
	"encoding/json"
	"os"
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

// The queue model through the command, with the VPP drop-path figures:
// 3.26 GHz, 346 cycles, 142 Mpps of 64 B random-source frames, a drain rate
// of 5.55 Mpps per queue. Expected (worked out by hand in
// agent/plan's TestSourceQueueTable): 16 queues 88.8 ring, 26 and 32
// queues 142 link, 8 queues 44.4 ring.
func TestPlanQueuesJSON(t *testing.T) {
	for _, c := range []struct {
		queues string
		tp     float64
		limit  string
		n      int
	}{{"8", 44.4, "ring", 8}, {"16", 88.8, "ring", 16}, {"26", 142, "link", 26}, {"32", 142, "link", 32}} {
		var out, errb bytes.Buffer
		rc := planCmd([]string{"--queues", c.queues, "--ghz", "3.26", "--cycles-per-packet", "346", "--queue-drain-mpps", "5.55",
			"--offered-mpps", "142", "--flows", "random", "--llc-kib", "4096", "--json"}, &out, &errb)
		if rc != 0 {
			t.Fatalf("rc %d: %s", rc, errb.String())
		}
		var m map[string]any
		if err := json.Unmarshal(out.Bytes(), &m); err != nil {
			t.Fatal(err)
		}
		tp, _ := m["throughput_mpps"].(float64)
		qs, _ := m["queues"].([]any)
		if tp < c.tp-1e-6 || tp > c.tp+1e-6 || m["limit"] != c.limit || len(qs) != c.n {
			t.Errorf("%s queues: throughput %v limit %v, %d queue rows; want %v %s %d", c.queues, m["throughput_mpps"], m["limit"], len(qs), c.tp, c.limit, c.n)
		}
		if qc, _ := m["queue_count"].(float64); int(qc) != c.n {
			t.Errorf("%s queues: queue_count %v", c.queues, m["queue_count"])
		}
		if rq, _ := m["recommended_queues"].(float64); rq != 26 {
			t.Errorf("%s queues: recommended %v, want 26", c.queues, m["recommended_queues"])
		}
	}
}

func TestPlanQueuesText(t *testing.T) {
	var out, errb bytes.Buffer
	rc := planCmd([]string{"--queues", "16", "--ghz", "3.26", "--cycles-per-packet", "346", "--queue-drain-mpps", "5.5",
		"--offered-mpps", "142", "--ring-entries", "8192", "--llc-kib", "1024"}, &out, &errb)
	if rc != 0 {
		t.Fatalf("rc %d: %s", rc, errb.String())
	}
	s := out.String()
	for _, want := range []string{
		"throughput 88.00 Mpps of 142.00 offered (62.0%), limited by ring",
		"      0              8  6.25%         8.875         5.500      3.375   ring",
		"ring: 8192 entries (CQ 16384) per queue = 1664 KiB per queue",
		"DOES NOT FIT the 1024 KiB LLC share",
		"recommended: 32 queues",
		"WARNING: rings outgrow the cache",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("missing %q in\n%s", want, s)
		}
	}
}

// --bench takes the 64 B drain rate of a bench report.
func TestPlanQueuesBench(t *testing.T) {
	f := t.TempDir() + "/bench.json"
	rep := `{"sizes":[{"frame_size":1500,"queue_drain_mpps":9},{"frame_size":64,"queue_drain_mpps":5.5,"mpps_per_worker":5.5}]}`
	if err := os.WriteFile(f, []byte(rep), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	if rc := planCmd([]string{"--queues", "16", "--ghz", "3.26", "--cycles-per-packet", "346", "--bench", f, "--offered-mpps", "142", "--llc-kib", "0", "--json"}, &out, &errb); rc != 0 {
		t.Fatalf("rc %d: %s", rc, errb.String())
	}
	var res plan.QueueResult
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		t.Fatal(err)
	}
	if res.DrainMpps != 5.5 || res.ThroughputMpps != 88 {
		t.Fatalf("drain %v throughput %v", res.DrainMpps, res.ThroughputMpps)
	}
	for _, args := range [][]string{
		{"--queues", "16", "--ghz", "3.26", "--cycles-per-packet", "346", "--bench", f + ".missing"},
		{"--queues", "16", "--ghz", "3.26", "--cycles-per-packet", "346", "--bench", f, "--queue-drain-mpps", "5"},
		{"--queues", "16", "--ghz", "3.26", "--cycles-per-packet", "346", "--flows", "some"},
		{"--queues", "16", "--workers", "8", "--ghz", "3.26", "--cycles-per-packet", "346"},
		{"--queues", "16", "--ghz", "3.26", "--cycles-per-packet", "346", "--ring-entries", "1000"},
		{"--flows", "10", "--ghz", "3.26", "--cycles-per-packet", "346"},
	} {
		var out, errb bytes.Buffer
		if rc := planCmd(args, &out, &errb); rc != 2 || errb.Len() == 0 {
			t.Errorf("%v: rc %d, stderr %q", args, rc, errb.String())
		}
	}
}
