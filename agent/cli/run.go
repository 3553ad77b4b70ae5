package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/scrubd/scrubd/agent/apisock"
	"github.com/scrubd/scrubd/agent/backend"
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
	cfgPath := fs.String("config", "", "config `file` (YAML); see 'scrubd config check'")
	simMode := fs.Bool("sim", false, "run on the built-in simulated NIC: no hardware, no config needed")
	metricsAddr := fs.String("metrics", "", "override metrics.listen (`host:port`)")
	simScale := fs.Float64("sim-scale", 1000, "--sim: send one packet in N of the modelled 100G mix through the real table and engine (counts are multiplied by N)")
	debug := fs.Bool("debug", false, "debug logging")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: scrubd run --sim | scrubd run --config FILE")
		fs.PrintDefaults()
	}
	rest, code, ok := ParseArgs(fs, args, stdout, stderr)
	if !ok {
		return code
	}
	if (*cfgPath == "") == !*simMode || len(rest) > 0 {
		fs.Usage()
		return ExitUsage
	}
	if !(*simScale >= 1) {
		fmt.Fprintf(stderr, "scrubd run: --sim-scale %v: must be at least 1\n", *simScale)
		return ExitUsage
	}
	level := slog.LevelInfo
	if *debug {
		level = slog.LevelDebug
	}
	tty := isTTY(stdout)
	logOut := stderr
	var cfg *config.Config
	opt := daemon.Options{}
	// The dataplane comes from the config, real or simulated alike; --sim
	// is a preset config (config.Sim) with the demo rules and the live
	// view on top.
	build := backend.Builder{SimScale: *simScale}
	vc := view.Config{Out: stdout}
	if *simMode {
		dir, err := os.MkdirTemp("", "scrubd-sim-")
		if err != nil {
			fmt.Fprintln(stderr, "scrubd run:", err)
			return 1
		}
		defer os.RemoveAll(dir)
		c := config.Sim(dir)
		cfg = &c
		// The API listens on the per-user socket that client commands
		// try when none is named (agent/apisock).
		cfg.API.Socket = simSocket()
		if err := simSocketFree(cfg.API.Socket); err != nil {
			fmt.Fprintln(stderr, "scrubd run:", err)
			return 1
		}
		vc.TTY = tty
		if tty {
			// The live view owns the terminal; logs go to a file beside
			// the socket, kept after exit.
			lf, err := simLog(cfg.API.Socket)
			if err != nil {
				fmt.Fprintln(stderr, "scrubd run:", err)
				return 1
			}
			defer lf.Close()
			logOut = lf
			fmt.Fprintf(stderr, "scrubd --sim: logs in %s (kept after exit)\n", lf.Name())
		}
	} else {
		// The rule files, token and TLS files are read and checked once,
		// by the daemon before it touches anything (config.LoadForRun).
		c, err := config.LoadForRun(*cfgPath)
		if err != nil {
			// A config that does not load is a failure, not bad usage.
			fmt.Fprintln(stderr, "scrubd run:", err)
			return ExitFail
		}
		cfg = c
		opt.ConfigName = *cfgPath
		if cfg.Software.Engine == "none" {
			fmt.Fprintln(stderr, "scrubd run: WARNING: software.engine none: rules the hardware cannot hold are not enforced")
		}
		// A config with offload.backend sim: the simulated NIC with the
		// operator's rules (files, API, FlowSpec) instead of the demo's.
		vc.NoDemo = true
	}
	if cfg.Offload.Backend == "sim" {
		var nic *sim.NIC
		build.OnSim = func(n *sim.NIC) { nic = n }
		opt.Tasks = append(opt.Tasks, func(ctx context.Context, d *daemon.Daemon) error {
			vc.NIC, vc.Store, vc.Placer, vc.Log = nic, d.Store, d.Placer, opt.Log
			vc.APISocket = d.APIAddr
			if d.HTTPAddr != "" {
				vc.MetricsURL = "http://" + d.HTTPAddr + "/metrics"
			}
			return view.Run(ctx, vc)
		})
	}
	opt.Paths = build.Paths
	if *metricsAddr != "" {
		cfg.Metrics.Listen = *metricsAddr
	}
	opt.Log = slog.New(slog.NewTextHandler(logOut, &slog.HandlerOptions{Level: level}))
	defer setMemoryPolicy(cfg, opt.Log)()
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
		opt.Ready = func(d *daemon.Daemon) {
			fmt.Fprintf(stdout, "scrubd --sim: metrics on http://%s/metrics, API socket %s\n", d.HTTPAddr, d.APIAddr)
		}
	}
	if err := daemon.Run(ctx, cfg, opt); err != nil {
		fmt.Fprintln(stderr, "scrubd run:", err)
		return 1
	}
	return 0
}

// simSocket is the socket run --sim listens on (a variable for tests).
var simSocket = apisock.SimPath

// simSocketFree makes the socket's directory (refusing one another user
// owns or can write to) and refuses a socket another agent answers on,
// before the log beside it is truncated.
func simSocketFree(sock string) error {
	if err := apisock.PrepareDir(sock); err != nil {
		return err
	}
	if c, err := net.DialTimeout("unix", sock, time.Second); err == nil {
		c.Close()
		return fmt.Errorf("api socket %s: another scrubd is listening (stop it, or give this one its own config with run --config)", sock)
	}
	return nil
}

// SimLogName is the log file of run --sim on a terminal, in the
// directory of its socket; each run starts it afresh and it stays after
// exit.
const SimLogName = "sim.log"

// simLog creates the log file of run --sim beside its socket sock.
func simLog(sock string) (*os.File, error) {
	return os.OpenFile(filepath.Join(filepath.Dir(sock), SimLogName), os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
}

func isTTY(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
