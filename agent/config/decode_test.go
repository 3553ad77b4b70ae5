package config

import (
	"strings"
	"testing"
)

// Decoding errors name the key by its full path and say what it wants in
// words; each expected message is written out by hand.
func TestDecodeErrorsNameTheKey(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{"link_gbps: 100\nsoftware:\n  engine: dv\n  interfaces: [p0]\n  ghz: fast\n", `type-str.yaml:5: software.ghz: want a number, got "fast"`},
		{"software:\n  workers: two\n", `type-str.yaml:2: software.workers: want a whole number, got "two"`},
		{"placement:\n  interval: banana\n", `type-str.yaml:2: placement.interval: want a duration such as 500ms, 2s or 5m, got "banana"`},
		{"offload:\n  keep_on_shutdown: maybe\n", `type-str.yaml:2: offload.keep_on_shutdown: want true or false, got "maybe"`},
		{"software:\n  interfaces: p0\n", `type-str.yaml:2: software.interfaces: want a list, got "p0"`},
		{"api: [a, b]\n", `type-str.yaml:1: api: want a mapping, got a list`},
		// The decoder quotes at most 7 bytes of a long value; the message has it whole.
		{"link_gbps: hundred-gigabit\n", `type-str.yaml:1: link_gbps: want a number, got "hundred-gigabit"`},
		// In a list, and in a flow mapping with two values on the line.
		{"flowspec:\n  neighbors:\n    - {address: 192.0.2.2, asn: 65001}\n    - {address: 192.0.2.3, asn: sixty}\n", `type-str.yaml:4: flowspec.neighbors[1].asn: want a whole number, got "sixty"`},
		{"software:\n  ghz: 2.1\n  sockit: 1\n", `type-str.yaml:3: software.sockit: unknown key`},
		{"api:\n  sockit: /x\n", `type-str.yaml:2: api.sockit: unknown key; did you mean socket?`},
		{"offload:\n  keep_on_shutdwn: true\n", `type-str.yaml:2: offload.keep_on_shutdwn: unknown key; did you mean keep_on_shutdown?`},
		{"flowspec:\n  neighbors:\n    - {address: 192.0.2.2, asm: 65001}\n", `type-str.yaml:3: flowspec.neighbors[0].asm: unknown key; did you mean asn?`},
		{"metrcs:\n  listen: a\n", `type-str.yaml:1: metrcs: unknown key; did you mean metrics?`},
		{"metrics:\n  listen: a\n  listen: b\n", `type-str.yaml:3: metrics.listen: repeated key (first on line 2)`},
	} {
		_, err := Parse("type-str.yaml", []byte(tc.yaml), false)
		if err == nil {
			t.Errorf("%q: accepted", tc.yaml)
			continue
		}
		first, _, _ := strings.Cut(err.Error(), "\n")
		if first != tc.want {
			t.Errorf("%q:\n got %s\nwant %s", tc.yaml, err, tc.want)
		}
	}
}
