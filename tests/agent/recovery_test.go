package agent_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/scrubd/scrubd/agent/backend"
	"github.com/scrubd/scrubd/agent/config"
	"github.com/scrubd/scrubd/agent/daemon"
	"github.com/scrubd/scrubd/agent/dataplane"
	"github.com/scrubd/scrubd/agent/placement"
	"github.com/scrubd/scrubd/agent/sim"
)

func simConfig(t *testing.T, rules string) config.Config {
	t.Helper()
	return testConfig(t, rules, func(c *config.Config) {
		c.Place.MinDwell = 0
		c.Software.CyclesPerPacket = 297
	})
}

const twoHWRules = "rules:\n  - {id: r-dns, action: drop, match: {dst: 203.0.113.0/24, proto: udp, src_port: \"53\"}}\n" +
	"  - {id: r-gre, action: drop, match: {dst: 203.0.113.60/32, proto: gre}}\n"

func status(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// OVS restarting deletes the clsact qdisc and every filter with it. The
// simulated table's Flush models that, and its notification stands in for
// the qdisc monitor's RTM_DELQDISC: the agent reinstalls what the table
// lost, without waiting for anything else, and counts it.
func TestQdiscDeleteRecovery(t *testing.T) {
	cfg := simConfig(t, twoHWRules)
	cfg.Place.Interval = time.Hour // no placement round helps: only the flush notification
	a, n := startOnSim(t, &cfg, 50)
	inHW := func() bool {
		p1, _ := a.path("r-dns")
		p2, _ := a.path("r-gre")
		return p1 == placement.HW && p2 == placement.HW
	}
	waitFor(t, "rules in hardware", inHW)
	ctx := context.Background()
	dump, err := n.Device().Dump(ctx)
	if err != nil || len(dump) == 0 {
		t.Fatalf("dump: %d entries, %v", len(dump), err)
	}
	before := len(dump)

	n.Device().Flush()
	waitFor(t, "rules reinstalled after the flush", func() bool {
		d, _ := n.Device().Dump(ctx)
		return len(d) == before && inHW() && a.d.Placer.View().Resyncs == 1
	})
	var lost, back int
	for _, d := range a.d.Placer.View().Decisions {
		if d.To == placement.SW && strings.Contains(d.Reason, "hardware lost the rule") {
			lost++
		}
		if d.To == placement.HW && strings.Contains(d.Reason, "reinstalled after simulated flow table flushed") {
			back++
		}
	}
	if lost != 2 || back != 2 {
		t.Fatalf("decisions: %d to software, %d back; %+v", lost, back, a.d.Placer.View().Decisions)
	}
	if code, body := status(t, "http://"+a.d.HTTPAddr+"/metrics"); code != 200 || !strings.Contains(body, "scrubd_hw_resyncs_total 1") {
		t.Fatalf("metrics %d lack scrubd_hw_resyncs_total 1", code)
	}
}

// gatedHW holds the first read of the hardware table until released, so
// the agent stays in its first placement round.
type gatedHW struct {
	dataplane.HW
	gate chan struct{}
}

func (g *gatedHW) Installed(ctx context.Context) ([]string, error) {
	select {
	case <-g.gate:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return g.HW.Installed(ctx)
}

// /readyz answers 503, saying what is pending, until the first reconcile
// and placement round is done; /healthz answers throughout.
func TestReadyz(t *testing.T) {
	cfg := simConfig(t, twoHWRules)
	n, err := sim.New(sim.Options{HWEntries: 50})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	gate := make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	ready := make(chan *daemon.Daemon, 1)
	go func() {
		done <- daemon.Run(ctx, &cfg, daemon.Options{
			Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
			Paths: func(context.Context, *config.Config) (daemon.Paths, error) {
				return daemon.Paths{HW: &gatedHW{HW: n.HW(), gate: gate}, SW: n.SW()}, nil
			},
			Ready: func(d *daemon.Daemon) { ready <- d },
		})
	}()
	var d *daemon.Daemon
	select {
	case d = <-ready:
	case err := <-done:
		t.Fatalf("daemon: %v", err)
	}
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}()
	base := "http://" + d.HTTPAddr
	if code, body := status(t, base+"/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "pending the first placement round") || !strings.Contains(body, "2 rules") {
		t.Fatalf("before the first round: %d %q", code, body)
	}
	if code, _ := status(t, base+"/healthz"); code != http.StatusOK {
		t.Fatalf("healthz: %d", code)
	}
	close(gate)
	waitFor(t, "ready", func() bool { code, _ := status(t, base+"/readyz"); return code == http.StatusOK })
	if _, body := status(t, base+"/readyz"); !strings.Contains(body, "2 drop rules in hardware, 0 in software") {
		t.Fatalf("ready body %q", body)
	}
}

// software.cycles_per_packet auto: the calibration runs once at start and
// its figure is the capacity model's until the engine measures its own.
func TestCalibrationAtStart(t *testing.T) {
	cfg := simConfig(t, twoHWRules)
	cfg.Software.CyclesPerPacket = 0 // auto
	n, err := sim.New(sim.Options{HWEntries: 50})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	calls := 0
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	ready := make(chan *daemon.Daemon, 1)
	go func() {
		done <- daemon.Run(ctx, &cfg, daemon.Options{
			Log:       slog.New(slog.NewTextHandler(io.Discard, nil)),
			Paths:     backend.Sim(n),
			Calibrate: func(context.Context) (float64, error) { calls++; return 123, nil },
			Ready:     func(d *daemon.Daemon) { ready <- d },
		})
	}()
	d := <-ready
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}()
	waitFor(t, "first placement round", func() bool { return d.Placer.View().Ready })
	v := d.Placer.View()
	if calls != 1 || v.CyclesPerPacket != 123 {
		t.Fatalf("calibrate called %d times; cycles per packet %v, want 123", calls, v.CyclesPerPacket)
	}
	if w, hz := n.SW().Capacity(); v.SWCapacityPPS != float64(w)*hz/123 {
		t.Fatalf("capacity %v", v.SWCapacityPPS)
	}
}
