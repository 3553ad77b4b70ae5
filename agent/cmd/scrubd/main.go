// Command scrubd is the scrubd agent and its tools. The first argument names
// a subcommand (see usage); each subcommand lives in its own file and
// registers itself in an init function.
package main

import (
	"fmt"
	"io"
	"os"
	"sort"

	"github.com/scrubd/scrubd/agent/version"
)

// command is one subcommand. run gets the arguments after the subcommand's
// name and returns the exit status (see exitCodes).
type command struct {
	summary string
	run     func(args []string, stdout, stderr io.Writer) int
}

var commands = map[string]command{}

func register(name, summary string, run func(args []string, stdout, stderr io.Writer) int) {
	if _, dup := commands[name]; dup {
		panic("scrubd: subcommand " + name + " registered twice")
	}
	commands[name] = command{summary, run}
}

func init() {
	register("version", "print the build version", func(args []string, stdout, stderr io.Writer) int {
		if len(args) == 1 && (args[0] == "-h" || args[0] == "-help" || args[0] == "--help") {
			fmt.Fprintln(stdout, "usage: scrubd version (or scrubd --version)")
			return 0
		}
		if len(args) != 0 {
			fmt.Fprintln(stderr, "usage: scrubd version (or scrubd --version)")
			return 2
		}
		fmt.Fprintln(stdout, version.String())
		return 0
	})
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: scrubd <command> [arguments]\n\ncommands:")
	var names []string
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-10s %s\n", n, commands[n].summary)
	}
	fmt.Fprintln(w, "\nRun 'scrubd <command> -h' for a command's flags; flags may follow its arguments.")
	fmt.Fprintln(w, "'scrubd --version' prints the version.")
	fmt.Fprint(w, exitCodes)
}

// exitCodes documents every command's exit status (docs/cli.md has the same).
const exitCodes = `
exit codes:
  0  success (and -h/--help)
  1  the command failed: an agent that does not answer, a config or rule file refused, a failed run
  2  bad usage: unknown command or flag, a bad flag value, a missing or extra argument
`

// run dispatches args (without the program name) and returns the exit status.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return 2
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		usage(stdout)
		return 0
	case "-version", "--version":
		args = []string{"version"}
	}
	c, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "scrubd: unknown command %q\n\n", args[0])
		usage(stderr)
		return 2
	}
	return c.run(args[1:], stdout, stderr)
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}
