package dvdryrun_test

import (
	"bytes"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/scrubd/scrubd/swpath/dryrun"
	_ "github.com/scrubd/scrubd/swpath/dv/dvdryrun"
	"github.com/scrubd/scrubd/swpath/traffic"
)

// TestSameAsGoEngine replays one capture through --engine go and
// --engine dv and requires identical reports, on random rules and odd
// traffic (tags, extension chains, fragments, truncated and non-IP frames,
// sizes up to 1518).
func TestSameAsGoEngine(t *testing.T) {
	for seed := uint64(1); seed <= 3; seed++ {
		set := traffic.RandomRules(seed, 60)
		gen := traffic.NewGenerator(traffic.Config{Seed: seed, Rules: set, RuleFraction: 0.7, Odd: true,
			Sizes: traffic.Sizes{Min: 64, Max: 1518}})
		var capture bytes.Buffer
		if err := traffic.WritePcap(&capture, gen.Frames(3000)); err != nil {
			t.Fatal(err)
		}
		reports := map[string]*dryrun.Report{}
		for _, name := range []string{"go", "dv"} {
			eng, err := dryrun.NewEngine(name)
			if err != nil {
				t.Fatal(err)
			}
			r, err := traffic.NewReader(bytes.NewReader(capture.Bytes()))
			if err != nil {
				t.Fatal(err)
			}
			rep, err := dryrun.Run(set, eng, r)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if err := eng.Close(); err != nil {
				t.Fatalf("%s: close: %v", name, err)
			}
			reports[name] = rep
		}
		if d := cmp.Diff(reports["go"], reports["dv"]); d != "" {
			t.Fatalf("seed %d: dv report differs from go (-go +dv):\n%s", seed, d)
		}
		if reports["dv"].Dropped == 0 || reports["dv"].Passed == 0 {
			t.Fatalf("seed %d: degenerate traffic: %+v", seed, reports["dv"])
		}
		var text [2]bytes.Buffer
		_ = reports["go"].WriteText(&text[0])
		_ = reports["dv"].WriteText(&text[1])
		if text[0].String() != text[1].String() {
			t.Fatalf("printed reports differ:\n%s\n---\n%s", text[0].String(), text[1].String())
		}
	}
}
