package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// A link speed or clock whose figures overflow a float64 is refused with
// the flag and its value, in text and JSON (JSON cannot carry +Inf: the
// command used to exit 1 with no output at all).
func TestPlanOverflowNamesTheFlag(t *testing.T) {
	base := []string{"--workers", "12", "--ghz", "2.13", "--cycles-per-packet", "297"}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--link-gbps", "1e308", "--json"}, "--link-gbps 1e+308: too large"},
		{[]string{"--link-gbps", "1e308"}, "--link-gbps 1e+308: too large"},
		{[]string{"--ghz", "1e308", "--json"}, "--ghz 1e+308, --cycles-per-packet 297: the software capacity overflows"},
		{[]string{"--cycles-per-packet", "1e-310", "--json"}, "--cycles-per-packet 1e-310: the software capacity overflows"},
		{[]string{"--workers", "4", "--queues", "4", "--link-gbps", "1e308", "--json"}, "--link-gbps 1e+308: too large"},
	} {
		var out, errb bytes.Buffer
		// A later --workers overrides the base's.
		rc := planCmd(append(append([]string{}, base...), tc.args...), &out, &errb)
		if rc != ExitUsage || out.Len() != 0 || !strings.Contains(errb.String(), tc.want) {
			t.Errorf("plan %v: rc %d stdout %q stderr %q; want rc 2, no output, and %q", tc.args, rc, out.String(), errb.String(), tc.want)
		}
	}
	// A large but finite link still plans: 1e6 Gb/s of 64 B frames (84 B
	// on the wire) is 1e15 / (84 * 8) = 1.488095238e12 packets/s.
	var out, errb bytes.Buffer
	if rc := planCmd(append(base, "--link-gbps", "1e6", "--json"), &out, &errb); rc != ExitOK || !strings.Contains(out.String(), `"line_rate_mpps": 1488095.238`) {
		t.Errorf("plan --link-gbps 1e6: rc %d %q %q", rc, out.String(), errb.String())
	}
}

// `--frame-sizes ,` is one bad flag: one message.
func TestBenchFrameSizesErrorOnce(t *testing.T) {
	var out, errb bytes.Buffer
	rc := benchCmd(context.Background(), []string{"--frame-sizes", ","}, &out, &errb)
	want := "scrubd bench: --frame-sizes \",\": \"\" is not a size from 64 to 2048 bytes\n"
	if rc != ExitUsage || errb.String() != want {
		t.Fatalf("rc %d stderr %q, want rc 2 and %q", rc, errb.String(), want)
	}
}

// More workers than CPUs: the figures come with a warning, before and after
// the report, that the total is no throughput of this machine.
func TestBenchWarnsWorkersAboveCPUs(t *testing.T) {
	defer func(f func() int) { numCPU = f }(numCPU)
	numCPU = func() int { return 1 }
	var out, errb bytes.Buffer
	rc := benchCmd(context.Background(), []string{"--workers", "2", "--packets", "2048", "--frame-sizes", "64", "--flows", "64"}, &out, &errb)
	if rc != ExitOK {
		t.Fatalf("rc %d: %s", rc, errb.String())
	}
	warn := "scrubd bench: WARNING: --workers 2 exceeds the 1 CPUs this process may use: workers share CPUs, so the total Mpps is not a throughput of this machine (use --workers 1 or fewer)"
	if n := strings.Count(errb.String(), warn); n != 2 {
		t.Fatalf("warning printed %d times, want 2 (before and after the report); stderr %q", n, errb.String())
	}
	// Within the CPUs: no warning.
	numCPU = func() int { return 2 }
	errb.Reset()
	out.Reset()
	if rc := benchCmd(context.Background(), []string{"--workers", "2", "--packets", "2048", "--frame-sizes", "64", "--flows", "64"}, &out, &errb); rc != ExitOK || strings.Contains(errb.String(), "WARNING") {
		t.Fatalf("2 workers on 2 CPUs: rc %d stderr %q", rc, errb.String())
	}
}
