// Package cli holds scrubd's agent subcommands: run, plan, rules, config and
// bench. Each is a function taking the arguments after the subcommand name and
// returning the process exit code, so agent/cmd/scrubd only dispatches.
//
// Exit codes: 0 success, 1 the operation failed, 2 bad usage.
package cli
