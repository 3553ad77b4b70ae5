// Command keygen writes a key packer generated from rule.MatchFields (see
// package internal/keygen): keygen -key cache|sim -o FILE.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/scrubd/scrubd/internal/keygen"
	"github.com/scrubd/scrubd/swpath/rule"
)

func main() {
	key := flag.String("key", "", "the packer: cache (swpath/classifier) or sim (offload/sim)")
	out := flag.String("o", "", "the file to write")
	flag.Parse()
	var src []byte
	var err error
	switch *key {
	case "cache":
		src, err = keygen.Cache(rule.MatchFields)
	case "sim":
		src, err = keygen.Sim(rule.MatchFields)
	default:
		err = fmt.Errorf("-key %q: want cache or sim", *key)
	}
	if err == nil && *out == "" {
		err = fmt.Errorf("-o: no output file")
	}
	if err == nil {
		err = os.WriteFile(*out, src, 0o644)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "keygen:", err)
		os.Exit(1)
	}
}
