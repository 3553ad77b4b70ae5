package cli

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/scrubd/scrubd/agent/plan"
	"github.com/scrubd/scrubd/swpath/bench"
)

// Plan is `scrubd plan`.
func Plan(args []string, stdout, stderr io.Writer) int { return planCmd(args, stdout, stderr) }

// llcRoot is the sysfs root --llc-kib reads by default (tests change it).
var llcRoot = "/"

func planCmd(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("plan", flag.ContinueOnError)
	var p plan.Params
	fs.Float64Var(&p.LinkGbps, "link-gbps", 100, "link speed in Gb/s")
	fs.IntVar(&p.Workers, "workers", 0, "software-path workers (cores); with --queues, one per queue")
	fs.Float64Var(&p.GHz, "ghz", 0, "worker clock in GHz")
	fs.Float64Var(&p.CyclesPerPacket, "cycles-per-packet", 0, "cycles one packet costs the software path (from 'scrubd bench')")
	var q plan.QueueParams
	fs.IntVar(&q.Queues, "queues", 0, "receive queues, one worker each: model RSS, per-queue drain and rings")
	fs.Float64Var(&q.DrainMpps, "queue-drain-mpps", 0, "how fast one queue's ring drains, Mpps (default: the worker's CPU ceiling)")
	benchFile := fs.String("bench", "", "take the drain rate from the `file` of a 'scrubd bench --json' report (its 64 B queue_drain_mpps)")
	fs.Float64Var(&q.OfferedMpps, "offered-mpps", 0, "offered flood in Mpps (default: line rate at --frame)")
	flows := fs.String("flows", "random", "the flood's spread: random (a random source per packet) or a number of flows of equal rate")
	fs.IntVar(&q.RingEntries, "ring-entries", 0, "receive ring entries per queue (default: the recommended size)")
	fs.IntVar(&q.RETASize, "reta-size", plan.DefaultRETASize, "RSS indirection table entries (a power of 2)")
	fs.IntVar(&q.FrameBytes, "frame", 64, "frame size of the flood in bytes")
	llc := fs.Float64("llc-kib", -1, "last-level cache per worker core in KiB (default: this machine's LLC over the CPUs sharing it; 0: unknown)")
	fs.Float64Var(&q.AbsorbMicros, "absorb-us", plan.DefaultAbsorbMicros, "how long a ring must hold its queue's load while the worker is away, in microseconds")
	fs.IntVar(&q.MaxQueues, "max-queues", 64, "most queues the recommendation considers")
	fs.Uint64Var(&q.Seed, "seed", 1, "seed of the flow sources for --flows N")
	asJSON := fs.Bool("json", false, "print JSON")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: scrubd plan --link-gbps G --workers N --ghz F --cycles-per-packet C [--json]")
		fmt.Fprintln(fs.Output(), "       scrubd plan --queues N --ghz F --cycles-per-packet C [--queue-drain-mpps D | --bench FILE] [--offered-mpps M] [--flows random|N] [--ring-entries E] [--json]")
		fs.PrintDefaults()
	}
	rest, code, ok := ParseArgs(fs, args, stdout, stderr)
	if !ok {
		return code
	}
	if len(rest) > 0 {
		fmt.Fprintf(stderr, "scrubd plan: unexpected argument %q\n", rest[0])
		return ExitUsage
	}
	queueMode := false
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "queues", "queue-drain-mpps", "bench", "offered-mpps", "flows", "ring-entries", "reta-size", "frame", "llc-kib", "absorb-us", "max-queues", "seed":
			queueMode = true
		}
	})
	if queueMode {
		return planQueues(p, q, *flows, *benchFile, *llc, *asJSON, stdout, stderr)
	}
	res, err := plan.Compute(p)
	if err != nil {
		fmt.Fprintln(stderr, "scrubd plan:", err)
		return ExitUsage
	}
	js, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		// JSON has no infinity: a figure overflowed a float64.
		fmt.Fprintln(stderr, "scrubd plan:", overflow(p))
		return ExitUsage
	}
	if *asJSON {
		stdout.Write(append(js, '\n'))
		return ExitOK
	}
	writePlan(stdout, res)
	return ExitOK
}

// overflow names the flag whose value makes the plan's figures overflow a
// float64 (+Inf Mpps, which JSON cannot carry and no table should show).
func overflow(p plan.Params) error {
	if math.IsInf(plan.LineRatePPS(p.LinkGbps*1e9, 64), 0) {
		return fmt.Errorf("--link-gbps %v: too large: the line rate overflows a float64; give the link's speed in Gb/s (e.g. 100)", p.LinkGbps)
	}
	if math.IsInf(plan.CapacityPPS(p.Workers, p.GHz*1e9, p.CyclesPerPacket), 0) {
		return fmt.Errorf("--ghz %v, --cycles-per-packet %v: the software capacity overflows a float64; give a clock in GHz (e.g. 2.1) and cycles per packet from 'scrubd bench' (e.g. 300)", p.GHz, p.CyclesPerPacket)
	}
	return fmt.Errorf("--link-gbps %v, --ghz %v, --cycles-per-packet %v: the plan's figures overflow a float64", p.LinkGbps, p.GHz, p.CyclesPerPacket)
}

func planQueues(p plan.Params, q plan.QueueParams, flows, benchFile string, llc float64, asJSON bool, stdout, stderr io.Writer) int {
	fail := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "scrubd plan: "+format+"\n", a...)
		return ExitUsage
	}
	if q.Queues == 0 {
		return fail("--queues: the queue model needs the number of receive queues")
	}
	if p.Workers != 0 && p.Workers != q.Queues {
		return fail("--workers %d: the queue model runs one worker per queue (--queues %d)", p.Workers, q.Queues)
	}
	q.LinkGbps, q.GHz, q.CyclesPerPacket = p.LinkGbps, p.GHz, p.CyclesPerPacket
	sp, err := plan.ParseSpread(flows)
	if err != nil {
		return fail("--%v", err)
	}
	q.Spread = sp
	if benchFile != "" {
		if q.DrainMpps != 0 {
			return fail("--bench and --queue-drain-mpps: give one drain rate")
		}
		d, err := drainFromBench(benchFile)
		if err != nil {
			return fail("--bench %s: %v", benchFile, err)
		}
		q.DrainMpps = d
	}
	switch {
	case llc >= 0:
		q.LLCShareKiB = llc
	default:
		if v, err := plan.LLCShareKiB(llcRoot, 0); err == nil {
			q.LLCShareKiB = v
		}
	}
	res, err := plan.QueueModel(q)
	if err != nil {
		return fail("%v", err)
	}
	js, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		// JSON has no infinity: a figure overflowed a float64.
		return fail("%v", overflow(p))
	}
	if asJSON {
		stdout.Write(append(js, '\n'))
		return ExitOK
	}
	writeQueues(stdout, res)
	return ExitOK
}

// drainFromBench reads a `scrubd bench --json` report and returns its
// per-queue drain rate at 64 B (or at its smallest frame size).
func drainFromBench(path string) (float64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	var rep bench.Report
	if err := json.Unmarshal(b, &rep); err != nil {
		return 0, fmt.Errorf("not a scrubd bench --json report: %w", err)
	}
	var pick *bench.SizeResult
	for i := range rep.Sizes {
		s := &rep.Sizes[i]
		if pick == nil || s.FrameSize < pick.FrameSize {
			pick = s
		}
	}
	if pick == nil {
		return 0, errors.New("the report has no frame sizes")
	}
	d := pick.QueueDrainMpps
	if d == 0 {
		d = pick.MppsPerWorker // reports from before queue_drain_mpps
	}
	if !(d > 0) {
		return 0, fmt.Errorf("no drain rate at %d B", pick.FrameSize)
	}
	return d, nil
}

func writeQueues(w io.Writer, r plan.QueueResult) {
	spread := "random sources (every packet from a random IPv4 source)"
	if !r.Spread.Random {
		spread = fmt.Sprintf("%d flows of equal rate (sources from seed %d)", r.Spread.Flows, r.Seed)
	}
	fmt.Fprintf(w, "%d receive queues, one worker each; RSS: Toeplitz (Microsoft key) over the IPv4 addresses, %d-entry indirection table, entry i to queue i mod %d\n",
		r.Queues, r.RETASize, r.Queues)
	fmt.Fprintf(w, "offered %.2f Mpps of %d B frames (%g Gb/s line rate %.2f Mpps), spread: %s\n", r.OfferedMpps, r.FrameBytes, r.LinkGbps, r.LineRateMpps, spread)
	fmt.Fprintf(w, "per queue: drain rate %.2f Mpps, CPU ceiling %.2f Mpps (%g GHz / %g cycles per packet)\n\n", r.DrainMpps, r.CPUCeilingMpps, r.GHz, r.CyclesPerPacket)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "queue\ttable entries\tshare\toffered Mpps\tcarried Mpps\tlost Mpps\tlimit\t")
	for _, l := range r.PerQueue {
		lim := "-"
		if l.Limit != "" {
			lim = l.Limit
		}
		fmt.Fprintf(tw, "%d\t%d\t%.2f%%\t%.3f\t%.3f\t%.3f\t%s\t\n", l.Queue, l.RETAEntries, 100*l.Share, l.OfferedMpps, l.CarriedMpps, l.LostMpps, lim)
	}
	tw.Flush()
	fmt.Fprintf(w, "\nthroughput %.2f Mpps of %.2f offered (%.1f%%), limited by %s\n", r.ThroughputMpps, r.OfferedMpps, 100*r.ThroughputMpps/r.OfferedMpps, r.Limit)
	fmt.Fprintf(w, "busiest queue %.3f Mpps, %.3f x the mean\n", r.BusiestMpps, r.Imbalance)
	if !r.Spread.Random {
		fmt.Fprintf(w, "mean over random sets of %d flows: %.2f Mpps (this set: %.2f)\n", r.Spread.Flows, r.ExpectedMpps, r.ThroughputMpps)
	}
	llc := "LLC share unknown (--llc-kib)"
	if r.Ring.LLCShareKiB > 0 {
		fits := "fits"
		if !r.Ring.Fits {
			fits = "DOES NOT FIT"
		}
		llc = fmt.Sprintf("%s the %.0f KiB LLC share of a worker's core", fits, r.Ring.LLCShareKiB)
	}
	fmt.Fprintf(w, "ring: %d entries (CQ %d) per queue = %.0f KiB per queue, %.1f MiB for %d queues; %s\n",
		r.Ring.Entries, r.Ring.CQEntries, float64(r.Ring.BytesPerQueue)/1024, float64(r.Ring.Bytes)/(1<<20), r.Queues, llc)
	why := fmt.Sprintf("the fewest that carry %.2f Mpps", r.OfferedMpps)
	if !r.RecommendedHolds {
		why = fmt.Sprintf("none up to %d carries %.2f Mpps with this spread; these carry the most", r.MaxQueues, r.OfferedMpps)
	}
	fmt.Fprintf(w, "\nrecommended: %d queues (%s; the dv engine takes a power of 2 per interface: %d); ring %d entries (%s)\n",
		r.RecommendedQueues, why, pow2ceil(r.RecommendedQueues), r.Ring.Recommended, r.Ring.Why)
	for _, warn := range r.Warnings {
		fmt.Fprintln(w, "WARNING:", warn)
	}
	if r.Limit == "ring" {
		fmt.Fprintln(w, strings.TrimSpace(`
The busiest queues are offered more than their rings drain: more queues (a
better spread), not more CPU, raise this; rules hit by the flood belong in
hardware until then.`))
	}
}

func pow2ceil(n int) int {
	p := 1
	for p < n {
		p <<= 1
	}
	return p
}

func writePlan(w io.Writer, res plan.Result) {
	fmt.Fprintf(w, "link %g Gb/s; software %d workers x %g GHz / %g cycles per packet = %.2f Mpps\n\n",
		res.LinkGbps, res.Workers, res.GHz, res.CyclesPerPacket, res.SWCapMpps)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "frame\tline rate Mpps\tsw capacity Mpps\tsw load\tholds line rate\tsw carries Gb/s\t")
	for _, r := range res.Rows {
		frame := r.Frame + " B"
		if r.Frame == "IMIX" {
			frame = fmt.Sprintf("IMIX (%.0f B)", r.AvgFrameBytes)
		}
		holds := "no"
		if r.HoldsLineRate {
			holds = "yes"
		}
		fmt.Fprintf(tw, "%s\t%.2f\t%.2f\t%.0f%%\t%s\t%.1f\t\n", frame, r.LineRateMpps, r.SWCapMpps, r.LoadPercent, holds, r.SWGbps)
	}
	tw.Flush()
	fmt.Fprintln(w, "\nWhere software does not hold line rate, rules hit by floods of that size belong in hardware.")
	fmt.Fprintln(w, "This table assumes the load spreads evenly and the rings drain as fast as the CPU works; `scrubd plan --queues N --queue-drain-mpps D` models RSS over the queues and each ring's drain rate.")
}
