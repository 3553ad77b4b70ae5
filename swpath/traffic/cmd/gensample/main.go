// Command gensample writes the sample capture committed under
// deploy/examples: deterministic traffic steered at the rules of a rule file
// (plus random background, VLAN-tagged, fragmented and odd frames), so that
// `scrubd dryrun` on a fresh clone has something to show.
//
//	go run ./swpath/traffic/cmd/gensample -rules deploy/examples/rules.yaml -out deploy/examples/sample.pcap
package main

import (
	"flag"
	"fmt"
	"net/netip"
	"os"

	"github.com/scrubd/scrubd/swpath/rule"
	"github.com/scrubd/scrubd/swpath/traffic"
)

func main() {
	rulesPath := flag.String("rules", "deploy/examples/rules.yaml", "rule file to steer traffic at")
	out := flag.String("out", "deploy/examples/sample.pcap", "capture to write")
	n := flag.Int("n", 900, "frames")
	seed := flag.Uint64("seed", 2026, "generator seed")
	ng := flag.Bool("pcapng", false, "write pcapng instead of pcap")
	flag.Parse()
	if err := gen(*rulesPath, *out, *n, *seed, *ng); err != nil {
		fmt.Fprintln(os.Stderr, "gensample:", err)
		os.Exit(1)
	}
}

func gen(rulesPath, out string, n int, seed uint64, ng bool) error {
	data, err := os.ReadFile(rulesPath)
	if err != nil {
		return err
	}
	set, err := rule.Parse(rulesPath, data, traffic.Epoch)
	if err != nil {
		return err
	}
	// Steer most traffic at the protected prefixes, as an attack would be.
	steer := &rule.Set{Rules: append([]rule.Rule(nil), set.Rules...)}
	steer.Rules = append(steer.Rules, rule.Rule{ID: "web", Match: rule.Match{Dst: netip.MustParsePrefix("203.0.113.0/24"), Proto: []uint8{rule.ProtoTCP}}})
	g := traffic.NewGenerator(traffic.Config{Seed: seed, Rules: steer, RuleFraction: 0.75, Odd: true, Sizes: traffic.Sizes{Min: 64, Max: 200}})
	return traffic.WriteFile(out, g.Frames(n), ng)
}
