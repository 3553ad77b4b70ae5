// Command genrules writes a rule file of n ClassBench-style IPv4 drop rules
// (swpath/traffic's ClassBenchRules: source and destination prefix pairs,
// mostly exact or wildcard destination ports), each with an explicit action
// and a source or destination of at least /8, for scale measurements of the
// agent: go run ./tests/scale/genrules -n 100000 > rules.yaml
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"os"

	"github.com/scrubd/scrubd/swpath/traffic"
)

func main() {
	n := flag.Int("n", 100000, "number of rules")
	seed := flag.Uint64("seed", 1, "generator seed")
	flag.Parse()
	w := bufio.NewWriter(os.Stdout)
	fmt.Fprintln(w, "rules:")
	for _, r := range traffic.ClassBenchRules(*seed, *n).Rules {
		js, err := json.Marshal(r.Spec())
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		fmt.Fprintf(w, "  - %s\n", js)
	}
	if err := w.Flush(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
