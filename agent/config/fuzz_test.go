package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// FuzzParse gives the config parser arbitrary text, starting from the
// example configs. It must not panic; an error must name the file (and
// so the place); a config it accepts must survive being written out and
// read back: accepted again, and written out the same.
func FuzzParse(f *testing.F) {
	files, _ := filepath.Glob("testdata/*.yaml")
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte("software:\n  workers: 2\n  interfaces: [p0, p1]\nflowspec:\n  neighbors:\n    - {address: 192.0.2.2, asn: 65001}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse("fuzz.yaml", data, false)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "fuzz.yaml") {
				t.Fatalf("%q: error without the file's name: %v", data, err)
			}
			return
		}
		out, err := yaml.Marshal(c)
		if err != nil {
			t.Fatalf("%q: accepted, but does not write out: %v", data, err)
		}
		c2, err := Parse("fuzz.yaml", out, false)
		if err != nil {
			t.Fatalf("%q: accepted, written out as\n%s\nand refused: %v", data, out, err)
		}
		out2, err := yaml.Marshal(c2)
		if err != nil || string(out2) != string(out) {
			t.Fatalf("%q: accepted, written out as\n%s\nread back and written out as\n%s(%v)", data, out, out2, err)
		}
	})
}
