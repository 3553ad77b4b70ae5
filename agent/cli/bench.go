package cli

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/scrubd/scrubd/swpath/bench"
	"github.com/scrubd/scrubd/swpath/rule"
)

// Bench is `scrubd bench`: the software path (the Direct Verbs engine over
// the NIC emulator, swpath/bench) measured on this machine.
func Bench(args []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	return benchCmd(ctx, args, stdout, stderr)
}

// Frame sizes must fit one receive buffer of the emulated rings.
const (
	minBenchFrame = 64
	maxBenchFrame = 2048
	// maxBenchFlows bounds the frames held in memory (up to 2 KiB each).
	maxBenchFlows = 1 << 20
)

// numCPU is the CPUs this process may run on (tests change it).
var numCPU = runtime.NumCPU

func benchCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	asJSON := fs.Bool("json", false, "print the report as JSON (what the placement model reads)")
	workers := fs.Int("workers", 1, "workers, one receive queue each, pinned to CPUs 0..N-1 when N > 1")
	sizes := fs.String("frame-sizes", "64,128,256,512,1024,1500", "frame sizes in bytes on the wire, comma-separated")
	rulesFile := fs.String("rules", "", "rule `file` to classify against (default: the source material's five UDP drop rules)")
	packets := fs.Int("packets", 1<<20, "packets per worker per frame size")
	flows := fs.Int("flows", 4096, "distinct frames cycled; above the classifier's flow cache (8192 decisions), e.g. 65536, every packet misses it as in a flood of new 5-tuples")
	mix := fs.Float64("mix", 0, "share of frames (0..1) no rule drops: forwarded to the peer port (or counted with --host)")
	host := fs.Bool("host", false, "host mode: passed frames are counted, not forwarded")
	compress := fs.Bool("compress", false, "deliver completions as compressed CQE sessions")
	baseline := fs.Bool("baseline", false, "time the default five rules too, side by side with --rules on one worker thread, round by round, and print the cost of --rules against theirs")
	rounds := fs.Int("rounds", 9, "rounds of a --baseline run: each times both sets for --packets/rounds packets; the ratio printed is the median round's")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: scrubd bench [--json] [--workers N] [--frame-sizes 64,128,...] [--rules FILE] [--packets N] [--flows N] [--mix F] [--host] [--compress] [--baseline [--rounds N]]")
		fmt.Fprintln(fs.Output(), "Measures receive + classify + drop/forward of the Direct Verbs engine on emulated rings (no NIC: an upper bound for the software's own cost).")
		fmt.Fprintln(fs.Output(), "More workers than CPUs run, with a warning: they share CPUs, and the total Mpps is then no throughput of this machine.")
		fs.PrintDefaults()
	}
	rest, code, ok := ParseArgs(fs, args, stdout, stderr)
	if !ok {
		return code
	}
	if len(rest) > 0 {
		fmt.Fprintf(stderr, "scrubd bench: unexpected argument %q\n", rest[0])
		return ExitUsage
	}
	cfg := bench.Config{Workers: *workers, Packets: *packets, Flows: *flows, Mix: *mix, Host: *host, Compress: *compress}
	var bad []string
	if *workers < 1 {
		bad = append(bad, fmt.Sprintf("--workers %d: must be at least 1", *workers))
	}
	if *packets < 1 {
		bad = append(bad, fmt.Sprintf("--packets %d: must be at least 1", *packets))
	}
	if *flows < 1 || *flows > maxBenchFlows {
		bad = append(bad, fmt.Sprintf("--flows %d: must be from 1 to %d", *flows, maxBenchFlows))
	}
	if *baseline && *workers != 1 {
		bad = append(bad, fmt.Sprintf("--workers %d: --baseline times one worker", *workers))
	}
	if *rounds < 1 {
		bad = append(bad, fmt.Sprintf("--rounds %d: must be at least 1", *rounds))
	}
	if !(*mix >= 0 && *mix <= 1) {
		bad = append(bad, fmt.Sprintf("--mix %v: must be in [0, 1]", *mix))
	}
	for _, s := range strings.Split(*sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < minBenchFrame || n > maxBenchFrame {
			// One message for the flag, naming its first bad element.
			bad = append(bad, fmt.Sprintf("--frame-sizes %q: %q is not a size from %d to %d bytes", *sizes, s, minBenchFrame, maxBenchFrame))
			break
		}
		cfg.FrameSizes = append(cfg.FrameSizes, n)
	}
	if *rulesFile != "" {
		data, err := os.ReadFile(*rulesFile)
		if err != nil {
			bad = append(bad, "--rules: "+err.Error())
		} else if set, err := rule.Parse(*rulesFile, data, time.Now()); err != nil {
			bad = append(bad, "--rules: "+err.Error())
		} else {
			cfg.Rules = set
		}
	}
	if len(bad) > 0 {
		for _, b := range bad {
			fmt.Fprintln(stderr, "scrubd bench:", b)
		}
		return ExitUsage
	}
	// Workers beyond the CPUs time-share them: each worker's rate is
	// measured over its own CPU time, so their sum is no throughput.
	var warn string
	if n := numCPU(); *workers > n {
		warn = fmt.Sprintf("scrubd bench: WARNING: --workers %d exceeds the %d CPUs this process may use: workers share CPUs, so the total Mpps is not a throughput of this machine (use --workers %d or fewer)", *workers, n, n)
		fmt.Fprintln(stderr, warn)
		defer fmt.Fprintln(stderr, warn)
	}
	if *baseline {
		return pairedCmd(ctx, cfg, *rounds, *asJSON, stdout, stderr)
	}
	rep, err := bench.Run(ctx, cfg)
	if err != nil {
		fmt.Fprintln(stderr, "scrubd bench:", err)
		return 1
	}
	if *asJSON {
		return printJSON(stdout, rep)
	}
	if err := rep.WriteText(stdout); err != nil {
		return ExitFail
	}
	fmt.Fprintln(stdout, "\nFeed a cycles/pkt figure to `scrubd plan --cycles-per-packet C`, or set software.cycles_per_packet (auto runs a short version of this at start).")
	fmt.Fprintln(stdout, "drain/q is the per-queue drain rate (one worker emptying its own ring): give it to `scrubd plan --queue-drain-mpps D` or set software.queue_drain_mpps; `scrubd plan --bench FILE` reads it from this command's --json report.")
	return ExitOK
}

// pairedCmd is `scrubd bench --baseline`: cfg's rules against the default
// five, side by side (bench.RunPaired).
func pairedCmd(ctx context.Context, cfg bench.Config, rounds int, asJSON bool, stdout, stderr io.Writer) int {
	ps, err := bench.RunPaired(ctx, cfg, nil, rounds)
	if err != nil {
		fmt.Fprintln(stderr, "scrubd bench:", err)
		return 1
	}
	if asJSON {
		return printJSON(stdout, ps)
	}
	fmt.Fprintln(stdout, "software path (dv engine on the NIC emulator; no NIC): the rules against the default five, side by side on one worker thread, thread CPU ns a packet")
	if err := bench.WritePairs(stdout, ps); err != nil {
		return ExitFail
	}
	return ExitOK
}

// printJSON writes v to w as indented JSON and returns the exit code.
func printJSON(w io.Writer, v any) int {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return ExitFail
	}
	return ExitOK
}
