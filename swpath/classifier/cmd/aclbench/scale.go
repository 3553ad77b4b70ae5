//go:build linux

package main

import (
	"fmt"
	"os"
	"slices"

	"github.com/scrubd/scrubd/swpath/classifier"
)

// The cost of a bigger rule set is a ratio of two timings, and on a
// machine whose speed moves in phases two timings taken minutes apart (the
// table's rows) can differ by more than the sets do. So after the table
// every rule count's classifier and fresh trace are timed again side by
// side: each round times every count and API once, the counts in one
// order and then in the reverse one (so that a drift in speed favours no
// count), and the ratios are taken within each round before their median.

// scaleSet is one rule count's classifier and fresh trace, kept for the
// side-by-side rounds.
type scaleSet struct {
	rules int
	tab   *classifier.Table
	w     *classifier.Worker
	tr    *trace
	cpu   map[string][]float64 // API -> CPU ns a packet, one a round
}

// timeScaling runs o.scaleRounds rounds over sets.
func timeScaling(sets []*scaleSet, o *options) {
	for round := range o.scaleRounds {
		for k := range sets {
			s := sets[k]
			if round%2 == 1 {
				s = sets[len(sets)-1-k]
			}
			for _, api := range apis {
				cpuNs, _ := timeOurs(api, s.tab, s.w, s.tr, o.target)
				s.cpu[api] = append(s.cpu[api], cpuNs)
			}
		}
		fmt.Fprintf(os.Stderr, "aclbench: side by side, round %d/%d done (load %s)\n", round+1, o.scaleRounds, loadAvg())
	}
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
	fmt.Fprintf(out, "\nThe rule counts side by side on fresh 5-tuples: %d rounds, each timing every count and API once (counts in reverse order every other round); CPU ns a packet, medians; ratios to %s taken within each round\n\n", o.scaleRounds, countName(first.rules))
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
