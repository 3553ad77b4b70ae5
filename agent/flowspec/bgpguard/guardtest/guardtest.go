// Package guardtest holds test inputs for package bgpguard and for the
// speaker that runs behind it.
package guardtest

import (
	_ "embed"
	"encoding/hex"
	"strings"
)

//go:embed testdata/crash-update.hex
var crashUpdateHex string

// CrashUpdate returns a BGP UPDATE that GoBGP v3.37's decoder panics on
// (testdata/crash-update.hex says how).
func CrashUpdate() []byte {
	var b strings.Builder
	for _, line := range strings.Split(crashUpdateHex, "\n") {
		if !strings.HasPrefix(line, "#") {
			b.WriteString(strings.ReplaceAll(line, " ", ""))
		}
	}
	out, err := hex.DecodeString(b.String())
	if err != nil {
		panic("guardtest: testdata/crash-update.hex: " + err.Error())
	}
	return out
}
