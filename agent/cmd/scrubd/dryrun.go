package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/scrubd/scrubd/agent/cli"
	"github.com/scrubd/scrubd/swpath/dryrun"
	"github.com/scrubd/scrubd/swpath/rule"
	"github.com/scrubd/scrubd/swpath/traffic"
)

func init() {
	register("dryrun", "replay a pcap/pcapng capture against a rule file and count per rule", runDryrun)
}

func runDryrun(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("dryrun", flag.ContinueOnError)
	rulesPath := fs.String("rules", "", "rule `file` (YAML)")
	pcapPath := fs.String("pcap", "", "capture `file` to replay (pcap or pcapng, Ethernet)")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	engine := fs.String("engine", "go", "`engine` that decides packets: "+strings.Join(dryrun.Engines(), ", "))
	guard := rule.DefaultGuard
	fs.IntVar(&guard.MinPrefixV4, "min-prefix-v4", guard.MinPrefixV4, "the rule guard's rules.guard.min_prefix_v4 (0-32)")
	fs.IntVar(&guard.MinPrefixV6, "min-prefix-v6", guard.MinPrefixV6, "the rule guard's rules.guard.min_prefix_v6 (0-128)")
	fs.BoolVar(&guard.AllowMatchAll, "allow-match-all", guard.AllowMatchAll, "the rule guard's rules.guard.allow_match_all")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: scrubd dryrun --rules FILE --pcap FILE [--json] [--engine NAME]")
		fmt.Fprintln(fs.Output(), "\nPer rule: matched = packets its match matches on its own; hits = packets it")
		fmt.Fprintln(fs.Output(), "decides (lowest priority number, then file order); bytes = wire bytes of its hits.")
		fmt.Fprintln(fs.Output(), "passed = packets not dropped (accepted_by_rule of them by an accept rule).")
		fmt.Fprintln(fs.Output(), "Rules already expired are left out, with a note on stderr. The rule file must")
		fmt.Fprintln(fs.Output(), "pass the agent's rule guard (rules.guard in the config; the flags below).")
		fs.PrintDefaults()
	}
	rest, code, ok := cli.ParseArgs(fs, args, stdout, stderr)
	if !ok {
		return code
	}
	if *rulesPath == "" || *pcapPath == "" || len(rest) != 0 {
		fs.Usage()
		return cli.ExitUsage
	}
	if guard.MinPrefixV4 < 0 || guard.MinPrefixV4 > 32 || guard.MinPrefixV6 < 0 || guard.MinPrefixV6 > 128 {
		fmt.Fprintf(stderr, "scrubd dryrun: --min-prefix-v4 %d / --min-prefix-v6 %d: must be 0-32 and 0-128\n", guard.MinPrefixV4, guard.MinPrefixV6)
		return 2
	}
	rep, err := dryRun(*rulesPath, *pcapPath, *engine, guard, time.Now(), stderr)
	if err != nil {
		fmt.Fprintln(stderr, "scrubd dryrun:", err)
		var ue *dryrun.UnknownEngineError
		if errors.As(err, &ue) {
			return 2
		}
		return 1
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		err = enc.Encode(rep)
	} else {
		err = rep.WriteText(stdout)
	}
	if err != nil {
		fmt.Fprintln(stderr, "scrubd dryrun:", err)
		return 1
	}
	return 0
}

func dryRun(rulesPath, pcapPath, engine string, guard rule.Guard, now time.Time, stderr io.Writer) (*dryrun.Report, error) {
	eng, err := dryrun.NewEngine(engine)
	if err != nil {
		return nil, err
	}
	defer eng.Close()
	data, err := os.ReadFile(rulesPath)
	if err != nil {
		return nil, err
	}
	set, err := rule.Parse(rulesPath, data, now)
	if err != nil {
		return nil, err
	}
	// The agent would refuse the file: say so rather than show what it
	// would drop.
	if err := guard.CheckSet(rulesPath, set); err != nil {
		return nil, err
	}
	live := &rule.Set{}
	for _, r := range set.Rules {
		if r.Expired(now) {
			fmt.Fprintf(stderr, "scrubd dryrun: rule %q expired at %s: left out\n", r.ID, r.Expires.Format(time.RFC3339))
			continue
		}
		live.Rules = append(live.Rules, r)
	}
	f, err := os.Open(pcapPath)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	rd, err := traffic.NewReader(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", pcapPath, err)
	}
	rep, err := dryrun.Run(live, eng, rd)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", pcapPath, err)
	}
	return rep, nil
}
