package cli

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	rtdebug "runtime/debug"
	"runtime/metrics"
	"strings"
	"testing"
	"time"

	"github.com/scrubd/scrubd/agent/api"
	"github.com/scrubd/scrubd/agent/config"
	"github.com/scrubd/scrubd/internal/syncbuf"
	"github.com/scrubd/scrubd/internal/testenv"
)

// `scrubd run --config` with offload.backend sim: the simulated NIC with
// the operator's rule file (found relative to the config file), no demo
// rules, plain status lines, and a clean stop.
func TestRunConfigSim(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "rules.yaml"), []byte("rules:\n  - {id: udp-flood, action: drop, match: {dst: 203.0.113.30/32, proto: udp}}\n  - {id: tiny, action: drop, match: {dst: 198.51.100.0/24, length: \"0-100\"}}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := "state_dir: " + dir + "/state\napi: {socket: " + dir + "/api.sock}\nmetrics: {listen: '127.0.0.1:0'}\n" +
		"rules: {files: [rules.yaml]}\noffload: {backend: sim, max_entries: 10}\nsoftware: {engine: dv, workers: 12, ghz: 2.13}\n" +
		"placement: {interval: 100ms, min_dwell: 1s}\n"
	path := filepath.Join(dir, "scrubd.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Chdir(t.TempDir()) // the rule file must be found relative to the config, not here
	ctx, cancel := context.WithCancel(context.Background())
	var out, errb syncbuf.Buffer
	done := make(chan int, 1)
	go func() { done <- runCmd(ctx, []string{"--config", path, "--sim-scale", "5000"}, &out, &errb) }()
	want := []string{"placement udp-flood: none -> hw", "placement tiny: none -> sw", "status (modelled):"}
	deadline := time.Now().Add(30 * time.Second)
	for {
		o := out.String()
		missing := ""
		for _, w := range want {
			if !strings.Contains(o, w) {
				missing = w
			}
		}
		if missing == "" {
			break
		}
		if time.Now().After(deadline) {
			cancel()
			<-done
			t.Fatalf("output lacks %q:\n%s\nstderr:\n%s", missing, o, errb.String())
		}
		select {
		case rc := <-done:
			t.Fatalf("run ended early: rc %d\n%s\n%s", rc, o, errb.String())
		case <-time.After(50 * time.Millisecond):
		}
	}
	cancel()
	if rc := <-done; rc != 0 {
		t.Fatalf("rc %d: %s", rc, errb.String())
	}
	if o := out.String(); strings.Contains(o, "syn-flood") && strings.Contains(o, "placement syn-flood") {
		t.Fatalf("demo rules ran with a config file:\n%s", o)
	}
}

// `scrubd run --sim` listens on the per-user socket client commands try
// when none is named: the demo's rules are listed through it, the plain
// status line names it and the real metrics port, a second --sim on the
// same socket is refused before it touches anything, and the socket goes
// at exit.
func TestRunSimListensOnUserSocket(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "run", "scrubd", "sim.sock")
	old := simSocket
	simSocket = func() string { return sock }
	defer func() { simSocket = old }()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errb syncbuf.Buffer
	done := make(chan int, 1)
	go func() {
		done <- runCmd(ctx, []string{"--sim", "--metrics", "127.0.0.1:0", "--sim-scale", "20000"}, &out, &errb)
	}()
	line := regexp.MustCompile(`scrubd --sim: metrics on http://127\.0\.0\.1:([0-9]+)/metrics, API socket (\S+)\n`)
	deadline := time.Now().Add(30 * time.Second)
	var m []string
	for m = line.FindStringSubmatch(out.String()); m == nil; m = line.FindStringSubmatch(out.String()) {
		if time.Now().After(deadline) {
			t.Fatalf("no status line naming the socket and metrics:\n%s\nstderr:\n%s", out.String(), errb.String())
		}
		select {
		case rc := <-done:
			t.Fatalf("run ended early: rc %d\n%s\n%s", rc, out.String(), errb.String())
		case <-time.After(50 * time.Millisecond):
		}
	}
	if m[1] == "0" || m[2] != sock {
		t.Fatalf("status line names metrics port %s and socket %s; want the bound port and %s", m[1], m[2], sock)
	}
	c := api.NewUnixClient(sock)
	for {
		rs, err := c.List(ctx)
		if err == nil && len(rs) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no demo rule listed through %s: %v %v", sock, rs, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	var out2, errb2 syncbuf.Buffer
	if rc := runCmd(ctx, []string{"--sim", "--metrics", "127.0.0.1:0"}, &out2, &errb2); rc != 1 || !strings.Contains(errb2.String(), "another scrubd is listening") {
		t.Fatalf("second --sim on %s: rc %d, stderr %q", sock, rc, errb2.String())
	}
	cancel()
	if rc := <-done; rc != 0 {
		t.Fatalf("rc %d: %s", rc, errb.String())
	}
	if _, err := os.Lstat(sock); !os.IsNotExist(err) {
		t.Fatalf("socket still there after exit: %v", err)
	}
}

// The --sim log file lies beside the socket, starts afresh on each run and
// stays after the file is closed.
func TestSimLogBesideSocket(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "sim.sock")
	want := filepath.Join(dir, "sim.log")
	for _, text := range []string{"first run, longer line\n", "second\n"} {
		f, err := simLog(sock)
		if err != nil {
			t.Fatal(err)
		}
		if f.Name() != want {
			t.Fatalf("log at %s, want %s", f.Name(), want)
		}
		if _, err := f.WriteString(text); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(want)
		if err != nil || string(b) != text {
			t.Fatalf("after close: %q, %v; want %q", b, err, text)
		}
	}
}

// `scrubd run --config` with a rule file that does not parse exits 1 with
// the config file, the key and the parser's complaint: the rule files are
// checked once, by the daemon's start-up check, before anything is
// touched (no socket is left behind).
func TestRunConfigBadRuleFile(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "rules.yaml"), []byte("rules:\n  - id: x\n    action: explode\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := "state_dir: " + dir + "/state\napi: {socket: " + dir + "/api.sock}\nmetrics: {listen: '127.0.0.1:0'}\n" +
		"rules: {files: [rules.yaml]}\noffload: {backend: sim, max_entries: 10}\nsoftware: {engine: dv, workers: 2}\n"
	path := filepath.Join(dir, "scrubd.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errb syncbuf.Buffer
	rc := runCmd(context.Background(), []string{"--config", path}, &out, &errb)
	if rc != 1 || !strings.Contains(errb.String(), "scrubd run: "+path+": rules.files[0]") || !strings.Contains(errb.String(), "explode") {
		t.Fatalf("rc %d, stderr:\n%s", rc, errb.String())
	}
	if _, err := os.Stat(filepath.Join(dir, "api.sock")); err == nil {
		t.Fatal("the API socket was created for a config that does not load")
	}
}

// memory_limit_mb sets the Go runtime's soft memory limit while scrubd run
// runs, and the previous limit is back once it returns.
// memory_limit_mb and gc_percent are the runtime's while the agent runs,
// logged, and put back after.
func TestRunConfigMemoryLimit(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "rules.yaml"), []byte("rules:\n  - {id: a, action: drop, match: {dst: 203.0.113.30/32, proto: udp}}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := "state_dir: " + dir + "/state\napi: {socket: " + dir + "/api.sock}\nmetrics: {listen: '127.0.0.1:0'}\n" +
		"rules: {files: [rules.yaml]}\noffload: {backend: sim, max_entries: 10}\nsoftware: {engine: dv, workers: 2}\nmemory_limit_mb: 300\ngc_percent: 30\n"
	path := filepath.Join(dir, "scrubd.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	before := rtdebug.SetMemoryLimit(-1)
	gcBefore := gogcPercent()
	ctx, cancel := context.WithCancel(context.Background())
	var out, errb syncbuf.Buffer
	done := make(chan int, 1)
	go func() { done <- runCmd(ctx, []string{"--config", path, "--sim-scale", "5000"}, &out, &errb) }()
	deadline := time.Now().Add(30 * time.Second)
	for rtdebug.SetMemoryLimit(-1) != 300<<20 {
		if time.Now().After(deadline) {
			cancel()
			<-done
			t.Fatalf("memory limit %d while running, want %d\n%s", rtdebug.SetMemoryLimit(-1), 300<<20, errb.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	gcRun := gogcPercent()
	cancel()
	if rc := <-done; rc != 0 {
		t.Fatalf("rc %d\n%s", rc, errb.String())
	}
	if got := rtdebug.SetMemoryLimit(-1); got != before {
		t.Fatalf("memory limit %d after run, want the previous %d", got, before)
	}
	if gcRun != 30 || gogcPercent() != gcBefore {
		t.Fatalf("gc percent %d before, %d while running (want 30), %d after", gcBefore, gcRun, gogcPercent())
	}
	for _, want := range []string{"memory_limit_mb=300", "gc_percent=30 from=gc_percent"} {
		if !strings.Contains(errb.String(), want) {
			t.Fatalf("no log line with %s:\n%s", want, errb.String())
		}
	}
}

// gogcPercent reads the collector's target from runtime/metrics.
func gogcPercent() int64 {
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(s)
	return int64(s[0].Value.Uint64())
}

// Where scrubd run's collector target comes from: gc_percent, else GOGC
// (which the runtime applied at start: scrubd leaves it), else
// config.DefaultGCPercent; a GOGC the runtime cannot read is ignored.
func TestGCPercentSource(t *testing.T) {
	for _, c := range []struct {
		cfg  int
		gogc string
		pct  int
		from string
		set  bool
	}{
		{0, "", config.DefaultGCPercent, "default", true},
		{0, "200", 200, "GOGC", false},
		{0, "off", -1, "GOGC", false},
		{0, "lots", config.DefaultGCPercent, "default", true},
		{30, "200", 30, "gc_percent", true},
		{400, "", 400, "gc_percent", true},
	} {
		pct, from, set := gcPercent(&config.Config{GCPercent: c.cfg}, c.gogc)
		if pct != c.pct || from != c.from || set != c.set {
			t.Errorf("gc_percent %d, GOGC %q: %d from %s (set %v), want %d from %s (set %v)", c.cfg, c.gogc, pct, from, set, c.pct, c.from, c.set)
		}
	}
}

// `scrubd run --config` opens (and so parses) each rule file once at
// start: the config load leaves the rule files to the daemon's check,
// whose parse the daemon loads. Before, the config load parsed them and
// the check parsed them again (at 100k rules, seconds and 430 MB each).
// The kernel counts the opens (inotify IN_OPEN); the poll is an hour, so
// every open is the start's.
func TestRunConfigReadsRuleFileOnce(t *testing.T) {
	dir := t.TempDir()
	rules := filepath.Join(dir, "rules.yaml")
	if err := os.WriteFile(rules, []byte("rules:\n  - {id: udp-flood, action: drop, match: {dst: 203.0.113.30/32, proto: udp}}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	opens := testenv.WatchOpens(t, rules)
	cfg := "state_dir: " + dir + "/state\napi: {socket: " + dir + "/api.sock}\nmetrics: {listen: '127.0.0.1:0'}\n" +
		"rules: {files: [rules.yaml], poll: 1h}\noffload: {backend: sim, max_entries: 10}\nsoftware: {engine: dv, workers: 2}\n" +
		"placement: {interval: 100ms}\n"
	path := filepath.Join(dir, "scrubd.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var out, errb syncbuf.Buffer
	done := make(chan int, 1)
	go func() { done <- runCmd(ctx, []string{"--config", path, "--sim-scale", "5000"}, &out, &errb) }()
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(out.String(), "placement udp-flood: none -> hw") {
		if time.Now().After(deadline) {
			cancel()
			<-done
			t.Fatalf("the rule was not placed:\n%s\n%s", out.String(), errb.String())
		}
		select {
		case rc := <-done:
			t.Fatalf("run ended early: rc %d\n%s", rc, errb.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
	cancel()
	if rc := <-done; rc != 0 {
		t.Fatalf("rc %d\n%s", rc, errb.String())
	}
	if n := opens(); n != 1 {
		t.Fatalf("the rule file was opened %d times, want 1", n)
	}
}
