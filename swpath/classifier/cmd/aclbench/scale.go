//go:build linux

package main

import (
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/scrubd/scrubd/swpath/classifier"
	"github.com/scrubd/scrubd/swpath/internal/sys"
)

// The cost of a bigger rule set is a ratio of two timings, and on a
// machine whose speed moves in phases two timings taken minutes apart (the
// table's rows) can differ by more than the sets do; so can two taken a
// second apart, one after the other. So after the table every rule
// count's classifier and fresh trace are timed again side by side, pass
// by pass (alternate): each round times every API on every count at
// once, the counts' passes over their traces taken in turn, so that a
// phase of the machine lands on every count alike, and the ratios are
// taken within each round before their median.

// scaleSet is one rule count's classifier and fresh trace, kept for the
// side-by-side rounds.
type scaleSet struct {
	rules int
	tab   *classifier.Table
	w     *classifier.Worker
	tr    *trace
	cpu   map[string][]float64 // API -> CPU ns a packet, one a round
}

// timeScaling runs o.scaleRounds rounds over sets: in each, every API
// times every set's trace, pass by pass (alternate), for o.target of
// CPU time in all.
func timeScaling(sets []*scaleSet, o *options) {
	defer pin()()
	for round := range o.scaleRounds {
		for _, api := range apis {
			passes := make([]func(), len(sets))
			pkts := make([]int, len(sets))
			for k, s := range sets {
				passes[k], pkts[k] = passOf(api, s.tab, s.w, s.tr), len(s.tr.fs)
			}
			for k, ns := range alternate(passes, pkts, o.target, sys.ThreadCPUTime) {
				sets[k].cpu[api] = append(sets[k].cpu[api], ns)
			}
		}
		fmt.Fprintf(os.Stderr, "aclbench: side by side, round %d/%d done (load %s)\n", round+1, o.scaleRounds, loadAvg())
	}
}

// alternate times passes, each one pass over a trace of pkts[k] packets,
// pass by pass: every step runs each of them in turn (in one order on
// even steps and in the reverse one on odd steps, so that none always
// follows another), first once untimed, so that the caches hold its own
// data rather than the pass's before it, then once timed by clock. It
// stops once the timed passes have taken target of clock's time in all
// and returns each one's time a packet.
func alternate(passes []func(), pkts []int, target time.Duration, clock func() time.Duration) []float64 {
	spent := make([]time.Duration, len(passes))
	runs := make([]int, len(passes))
	var total time.Duration
	for step := 0; total < target || step < 2; step++ {
		for i := range passes {
			k := i
			if step%2 == 1 {
				k = len(passes) - 1 - i
			}
			passes[k]()
			c0 := clock()
			passes[k]()
			d := clock() - c0
			spent[k] += d
			runs[k]++
			total += d
		}
	}
	ns := make([]float64, len(passes))
	for k := range passes {
		ns[k] = float64(spent[k]) / float64(runs[k]*pkts[k])
	}
	return ns
}

// roundBest returns, for each round, the least CPU ns a packet over the
// APIs: what the best API took in that round.
func roundBest(cpu map[string][]float64) []float64 {
	var best []float64
	for _, api := range apis {
		for r, v := range cpu[api] {
			if r == len(best) {
				best = append(best, v)
			}
			best[r] = min(best[r], v)
		}
	}
	return best
}

// ratios returns num[r] / den[r] for each round r, sorted.
func ratios(num, den []float64) []float64 {
	out := make([]float64, 0, len(num))
	for r := range min(len(num), len(den)) {
		if den[r] > 0 {
			out = append(out, num[r]/den[r])
		}
	}
	slices.Sort(out)
	return out
}

func printScaling(out *os.File, o *options, sets []*scaleSet) {
	first := sets[0]
	fmt.Fprintf(out, "\nThe rule counts side by side on fresh 5-tuples: %d rounds, each timing every API on every count pass by pass (the counts' passes in turn, each after an untimed pass of its own); CPU ns a packet, medians; ratios to %s taken within each round\n\n", o.scaleRounds, countName(first.rules))
	hdr := "| rules |"
	sep := "|---|"
	for _, api := range apis {
		hdr += " scrubd " + api + " |"
		sep += "---|"
	}
	hdr += fmt.Sprintf(" best API of each round | best / %s, median (least-most) | DecideBurst / %s, median (least-most) |", countName(first.rules), countName(first.rules))
	sep += "---|---|---|"
	fmt.Fprintln(out, hdr)
	fmt.Fprintln(out, sep)
	b0 := roundBest(first.cpu)
	for _, s := range sets {
		line := fmt.Sprintf("| %s |", countName(s.rules))
		for _, api := range apis {
			line += fmt.Sprintf(" %.1f |", median(s.cpu[api]))
		}
		b := roundBest(s.cpu)
		line += fmt.Sprintf(" %.1f |", median(b))
		for _, rs := range [][]float64{ratios(b, b0), ratios(s.cpu["DecideBurst"], first.cpu["DecideBurst"])} {
			if len(rs) == 0 {
				line += " – |"
				continue
			}
			line += fmt.Sprintf(" %.2f× (%.2f-%.2f) |", median(rs), rs[0], rs[len(rs)-1])
		}
		fmt.Fprintln(out, line)
	}
}
