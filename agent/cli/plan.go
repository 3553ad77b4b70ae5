package cli

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/scrubd/scrubd/agent/plan"
)

// Plan is `scrubd plan`.
func Plan(args []string, stdout, stderr io.Writer) int { return planCmd(args, stdout, stderr) }

func planCmd(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("plan", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var p plan.Params
	fs.Float64Var(&p.LinkGbps, "link-gbps", 100, "link speed in Gb/s")
	fs.IntVar(&p.Workers, "workers", 0, "software-path workers (cores)")
	fs.Float64Var(&p.GHz, "ghz", 0, "worker clock in GHz")
	fs.Float64Var(&p.CyclesPerPacket, "cycles-per-packet", 0, "cycles one packet costs the software path (from `scrubd bench`)")
	asJSON := fs.Bool("json", false, "print JSON")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: scrubd plan --link-gbps G --workers N --ghz F --cycles-per-packet C [--json]")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "scrubd plan: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	res, err := plan.Compute(p)
	if err != nil {
		fmt.Fprintln(stderr, "scrubd plan:", err)
		return 2
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(res); err != nil {
			return 1
		}
		return 0
	}
	writePlan(stdout, res)
	return 0
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
}
