package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
)

// Exit codes of every scrubd command.
const (
	ExitOK    = 0 // success, and -h/--help
	ExitFail  = 1 // the operation failed (an agent that does not answer, a refused config or rule file, ...)
	ExitUsage = 2 // bad usage: an unknown flag, a bad flag value, a missing or extra argument
)

// ParseArgs parses args with fs, flags allowed anywhere among the
// positional arguments (`rules list --json`, `rules add f.yaml --socket
// S`); after "--" everything is positional. It returns the positional
// arguments, or ok=false and the exit code the command returns at once:
// ExitOK after -h/--help (usage on stdout), ExitUsage after a bad flag
// (the error and the usage on stderr). fs.Usage must write to fs.Output().
func ParseArgs(fs *flag.FlagSet, args []string, stdout, stderr io.Writer) (pos []string, code int, ok bool) {
	fs.SetOutput(io.Discard)
	for {
		err := fs.Parse(args)
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(stdout)
			fs.Usage()
			return nil, ExitOK, false
		}
		if err != nil {
			fmt.Fprintf(stderr, "scrubd %s: %v\n", fs.Name(), err)
			fs.SetOutput(stderr)
			fs.Usage()
			return nil, ExitUsage, false
		}
		rest := fs.Args()
		if n := len(args) - len(rest); n > 0 && args[n-1] == "--" {
			fs.SetOutput(stderr)
			return append(pos, rest...), 0, true
		}
		if len(rest) == 0 {
			fs.SetOutput(stderr)
			return pos, 0, true
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}
