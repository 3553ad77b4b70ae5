package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// syncBuffer is a bytes.Buffer safe for the daemon's writer and the test's
// reader.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

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
	var out, errb syncBuffer
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
