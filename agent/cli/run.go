package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/scrubd/scrubd/agent/config"
	"github.com/scrubd/scrubd/agent/daemon"
	"github.com/scrubd/scrubd/agent/sim"
	"github.com/scrubd/scrubd/agent/view"
)

// Run is `scrubd run`: until SIGINT or SIGTERM.
func Run(args []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	return runCmd(ctx, args, stdout, stderr)
}

func runCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfgPath := fs.String("config", "", "config file (YAML); see `scrubd config check`")
	simMode := fs.Bool("sim", false, "run on the built-in simulated NIC: no hardware, no config needed")
	metricsAddr := fs.String("metrics", "", "override metrics.listen (host:port)")
	simScale := fs.Float64("sim-scale", 1000, "--sim: send one packet in N of the modelled 100G mix through the real table and engine (counts are multiplied by N)")
	debug := fs.Bool("debug", false, "debug logging")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: scrubd run --sim | scrubd run --config FILE")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if (*cfgPath == "") == !*simMode || fs.NArg() > 0 {
		fs.Usage()
		return 2
	}
	if !(*simScale >= 1) {
		fmt.Fprintf(stderr, "scrubd run: --sim-scale %v: must be at least 1\n", *simScale)
		return 2
	}
	level := slog.LevelInfo
	if *debug {
		level = slog.LevelDebug
	}
	tty := isTTY(stdout)
	logOut := stderr
	var cfg *config.Config
	opt := daemon.Options{}
	var vlog *slog.Logger // the live view logs where the agent does
	simTasks := func(n *sim.NIC, vc view.Config) []func(context.Context, *daemon.Daemon) error {
		return []func(context.Context, *daemon.Daemon) error{
			func(ctx context.Context, _ *daemon.Daemon) error { return n.Run(ctx, 10*time.Millisecond) },
			func(ctx context.Context, d *daemon.Daemon) error {
				vc.NIC, vc.Store, vc.Placer, vc.Log = n, d.Store, d.Placer, vlog
				vc.APISocket = d.APIAddr
				if d.HTTPAddr != "" {
					vc.MetricsURL = "http://" + d.HTTPAddr + "/metrics"
				}
				return view.Run(ctx, vc)
			},
		}
	}
	if *simMode {
		dir, err := os.MkdirTemp("", "scrubd-sim-")
		if err != nil {
			fmt.Fprintln(stderr, "scrubd run:", err)
			return 1
		}
		defer os.RemoveAll(dir)
		cfg = daemon.SimConfig(dir)
		n, err := newSim(cfg, *simScale)
		if err != nil {
			fmt.Fprintln(stderr, "scrubd run:", err)
			return 1
		}
		defer n.Close()
		opt.Paths = daemon.SimPaths(n)
		opt.Tasks = simTasks(n, view.Config{Out: stdout, TTY: tty})
		if tty {
			// The live view owns the terminal; logs go to a file.
			lf, err := os.Create(dir + "/scrubd.log")
			if err == nil {
				defer lf.Close()
				logOut = lf
				fmt.Fprintf(stderr, "scrubd --sim: logs in %s (removed on exit)\n", lf.Name())
			}
		}
	} else {
		c, err := config.Load(*cfgPath)
		if err != nil {
			fmt.Fprintln(stderr, "scrubd run:", err)
			return 2
		}
		cfg = c
		if cfg.Software.Engine == "none" {
			fmt.Fprintln(stderr, "scrubd run: WARNING: software.engine none: rules the hardware cannot hold are not enforced")
		}
		if cfg.Offload.Backend == "sim" {
			// The simulated NIC with the operator's rules (files, API,
			// FlowSpec) instead of the demo's.
			if cfg.Software.CyclesPerPacket.Auto() {
				cfg.Software.CyclesPerPacket = 297 // the model is a BlueField-3 with Direct Verbs
			}
			n, err := newSim(cfg, *simScale)
			if err != nil {
				fmt.Fprintln(stderr, "scrubd run:", err)
				return 1
			}
			defer n.Close()
			opt.Paths = daemon.SimPaths(n)
			opt.Tasks = simTasks(n, view.Config{Out: stdout, NoDemo: true})
		}
	}
	if *metricsAddr != "" {
		cfg.Metrics.Listen = *metricsAddr
	}
	opt.Log = slog.New(slog.NewTextHandler(logOut, &slog.HandlerOptions{Level: level}))
	vlog = opt.Log
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	reload := make(chan struct{}, 1)
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				select {
				case reload <- struct{}{}:
				default:
				}
			}
		}
	}()
	opt.Reload = reload
	if *simMode && !tty {
		fmt.Fprintf(stdout, "scrubd --sim: metrics on http://%s/metrics, API socket %s\n", cfg.Metrics.Listen, cfg.API.Socket)
	}
	if err := daemon.Run(ctx, cfg, opt); err != nil {
		fmt.Fprintln(stderr, "scrubd run:", err)
		return 1
	}
	return 0
}

// newSim builds the simulated NIC a config describes: the modelled software
// path (workers, clock, cycles per packet, the queues' drain rate), the
// receive rings (software.rx_ring_entries or the capacity model's size),
// the table budget, host or forward mode.
func newSim(cfg *config.Config, scale float64) (*sim.NIC, error) {
	ring, _ := daemon.RxRing(cfg, "/")
	return sim.New(sim.Options{Scale: scale, Workers: cfg.Software.Workers, Hz: cfg.Software.GHz * 1e9,
		CPP: float64(cfg.Software.CyclesPerPacket), HWEntries: cfg.Offload.MaxEntries, HWMasks: cfg.Offload.MaxMasks,
		HWEntriesPerRule: cfg.Offload.MaxEntriesPerRule,
		Host:             cfg.Software.ForwardTo == "", RingEntries: ring, QueueDrainPPS: cfg.Software.QueueDrainMpps * 1e6})
}

func isTTY(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
