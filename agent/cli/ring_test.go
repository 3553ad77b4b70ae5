package cli

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/scrubd/scrubd/internal/syncbuf"
)

// Through the daemon on the simulated NIC (`scrubd run --config` with
// offload.backend sim): 16 workers of 3.26 GHz at 346 cycles per packet (a
// CPU capacity of 150.75 Mpps: the built-in mix's ~106 Mpps to software is
// below its 80 % high water) but a drain rate of 5.5 Mpps per queue (88
// Mpps for 16 queues, less the spread's imbalance). The one-entry table
// takes the GRE rule first; the SYN flood's rule goes to software and
// then, by the ring limit and not the CPU, to hardware.
func TestRunConfigSimRingLimit(t *testing.T) {
	dir := t.TempDir()
	rules := "rules:\n  - {id: gre-bulk, action: drop, match: {dst: 203.0.113.60/32, proto: gre}}\n" +
		"  - {id: syn-flood, action: drop, match: {dst: 203.0.113.20/32, proto: tcp, dst_port: \"80\", tcp_flags: {value: [syn], mask: [syn, ack]}}}\n"
	if err := os.WriteFile(filepath.Join(dir, "rules.yaml"), []byte(rules), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := "state_dir: " + dir + "/state\napi: {socket: " + dir + "/api.sock}\nmetrics: {listen: '127.0.0.1:0'}\n" +
		"rules: {files: [rules.yaml]}\noffload: {backend: sim, max_entries: 1}\n" +
		"software: {engine: dv, workers: 16, ghz: 3.26, cycles_per_packet: 346, queue_drain_mpps: 5.5, rx_ring_entries: 512}\n" +
		"placement: {interval: 200ms, min_dwell: 1s}\n"
	path := filepath.Join(dir, "scrubd.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errb syncbuf.Buffer
	done := make(chan int, 1)
	go func() { done <- runCmd(ctx, []string{"--config", path, "--sim-scale", "20000"}, &out, &errb) }()
	want := "placement syn-flood: sw -> hw: software load"
	deadline := time.Now().Add(60 * time.Second)
	for !strings.Contains(out.String(), want) {
		if time.Now().After(deadline) {
			cancel()
			<-done
			t.Fatalf("output lacks %q:\n%s\nstderr:\n%s", want, out.String(), errb.String())
		}
		select {
		case rc := <-done:
			t.Fatalf("run ended early: rc %d\n%s\n%s", rc, out.String(), errb.String())
		case <-time.After(50 * time.Millisecond):
		}
	}
	cancel()
	<-done
	var line string
	for _, l := range strings.Split(out.String(), "\n") {
		if strings.HasPrefix(l, want) {
			line = l
		}
	}
	if !strings.Contains(line, "limit ring") || !strings.Contains(line, "below the CPU's 150.75 Mpps") {
		t.Fatalf("the move was not the ring's: %s", line)
	}
	t.Log(line)
}
