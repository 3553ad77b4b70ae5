package cli

import (
	"flag"
	"fmt"
	"io"

	"github.com/scrubd/scrubd/agent/config"
)

// Config is `scrubd config check FILE`.
func Config(args []string, stdout, stderr io.Writer) int { return configCmd(args, stdout, stderr) }

func configCmd(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("config", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: scrubd config check FILE")
		fmt.Fprintln(fs.Output(), "Validates a config as 'scrubd run --config FILE' does before it touches anything: every key,")
		fmt.Fprintln(fs.Output(), "the rule files it names (relative paths are relative to FILE's directory), the API's token and TLS files.")
	}
	rest, code, ok := ParseArgs(fs, args, stdout, stderr)
	if !ok {
		return code
	}
	if len(rest) != 2 || rest[0] != "check" {
		fs.SetOutput(stderr)
		fs.Usage()
		return ExitUsage
	}
	c, err := config.Load(rest[1])
	if err != nil {
		fmt.Fprintln(stderr, err)
		return ExitFail
	}
	fmt.Fprintf(stdout, "%s: ok (offload %s, software %s, %d rule files, flowspec %v, %d protect entries)\n",
		rest[1], c.Offload.Backend, c.Software.Engine, len(c.Rules.Files), c.FlowSpec.Enabled, len(c.Protect))
	return ExitOK
}
