package cli

import (
	"fmt"
	"io"

	"github.com/scrubd/scrubd/agent/config"
)

// Config is `scrubd config check FILE`.
func Config(args []string, stdout, stderr io.Writer) int { return configCmd(args, stdout, stderr) }

func configCmd(args []string, stdout, stderr io.Writer) int {
	if len(args) != 2 || args[0] != "check" {
		fmt.Fprintln(stderr, "usage: scrubd config check FILE")
		return 2
	}
	c, err := config.Load(args[1])
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	fmt.Fprintf(stdout, "%s: ok (offload %s, software %s, %d rule files, flowspec %v, %d protect entries)\n",
		args[1], c.Offload.Backend, c.Software.Engine, len(c.Rules.Files), c.FlowSpec.Enabled, len(c.Protect))
	return 0
}
