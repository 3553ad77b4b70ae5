package backend

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/scrubd/scrubd/agent/config"
	"github.com/scrubd/scrubd/agent/sim"
	"github.com/scrubd/scrubd/agent/swengine"
)

// --sim and offload.backend sim size the emulated rings from
// software.rx_ring_entries, or from the capacity model when it is 0, as
// sim.EmulatedRing scales them: the simulated 12 workers' round (4303
// packets) takes all of 1024 and of the model's size; 2 workers at scale
// 1000 need 1024 entries of a modelled 32768 (and a pool of 2 x (1024 +
// 512 send + 2 x 128 cached + 2 x 256 in flight) buffers, 10 MB, where it
// was 69120 buffers, 150 MB); at scale 1 they get the modelled 32768.
func TestSimRingFromConfig(t *testing.T) {
	cfg := config.Sim(t.TempDir())
	cfg.Software.RxRingEntries = 1024
	n, err := NewSim(&cfg, 1000)
	if err != nil {
		t.Fatal(err)
	}
	rq, cq := n.Rings()
	n.Close()
	if rq != 1024 || cq != 2048 {
		t.Fatalf("configured 1024: rings %d, CQ %d", rq, cq)
	}
	cfg.Software.RxRingEntries = 0
	want, why := swengine.RxRing(&cfg, "/")
	n, err = NewSim(&cfg, 1000)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	if rq, _ := n.Rings(); rq != want {
		t.Fatalf("auto: rings %d, want the model's %d (%s)", rq, want, why)
	}

	cfg.Software.Workers, cfg.Software.RxRingEntries = 2, 32768
	for _, c := range []struct {
		scale     float64
		ring, buf int
	}{{1000, 1024, 2 * (1024 + 512 + 2*128 + 2*256)}, {1, 32768, 2 * (32768 + 512 + 2*128 + 2*256)}} {
		n, err := NewSim(&cfg, c.scale)
		if err != nil {
			t.Fatal(err)
		}
		rq, cq := n.Rings()
		buf := 0
		for _, w := range n.SW().Stats().Workers {
			buf += w.PoolSize
		}
		n.Close()
		if rq != c.ring || cq != 2*c.ring || buf != c.buf {
			t.Errorf("2 workers, 32768 modelled, scale %g: rings %d, CQ %d, %d pool buffers; want %d, %d, %d", c.scale, rq, cq, buf, c.ring, 2*c.ring, c.buf)
		}
	}
}

// The config chooses the paths, the simulated NIC like any other backend:
// offload.backend sim gives the simulated table and the dv engine over the
// emulator (with its traffic as the dataplane's work), none and none give
// no hardware path and the engine that enforces nothing, and a backend or
// engine the build cannot wire is refused naming the key and the value.
func TestPathsFromConfig(t *testing.T) {
	ctx := context.Background()
	c := config.Sim(t.TempDir())
	var got *sim.NIC
	p, err := Builder{SimScale: 5000, OnSim: func(n *sim.NIC) { got = n }}.Paths(ctx, &c)
	if err != nil {
		t.Fatal(err)
	}
	if got == nil || p.HW == nil || p.SW == nil || p.Run == nil || p.Close == nil || p.Watch == nil {
		t.Fatalf("sim: nic %v, paths %+v", got, p)
	}
	if p.HW.Name() != "sim-mlx5" || p.SW.Name() != "dv (emulated NIC)" || got.Scale() != 5000 {
		t.Fatalf("sim: hw %q, sw %q, scale %v", p.HW.Name(), p.SW.Name(), got.Scale())
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}

	n := config.Defaults()
	n.Offload.Backend, n.Software.Engine = "none", "none"
	p, err = Paths(ctx, &n)
	if err != nil {
		t.Fatal(err)
	}
	if p.HW != nil || p.SW == nil || p.SW.Name() != "none" || p.Run != nil {
		t.Fatalf("none/none: %+v", p)
	}

	for _, bad := range []struct{ backend, engine, want string }{
		{"sim", "xdp", `software.engine "xdp"`},
		{"flowtable", "none", `offload.backend "flowtable"`},
		{"none", "go", `software.engine "go"`},
	} {
		b := config.Defaults()
		b.Offload.Backend, b.Software.Engine = bad.backend, bad.engine
		if _, err := Paths(ctx, &b); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%s/%s: err %v, want one naming %s", bad.backend, bad.engine, err, bad.want)
		}
	}
}

// A flush of the simulated table after Watch returns is reported even
// when it comes before the watch loop runs: the agent subscribes before
// placement starts, so a qdisc deleted while the first rules go in is not
// missed (the loop's goroutine may start after the placer's has placed
// them).
func TestSimWatchSubscribesBeforeItRuns(t *testing.T) {
	n, err := sim.New(sim.Options{HWEntries: 16})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	lost := make(chan string, 4)
	run := SimPaths(n).Watch(func(r string) { lost <- r })
	n.Device().Flush() // before the loop runs
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx) }()
	select {
	case r := <-lost:
		if !strings.Contains(r, "flushed") {
			t.Errorf("lost(%q), want the flush named", r)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a flush between Watch and its loop was not reported")
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
