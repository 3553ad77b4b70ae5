package dvdryrun_test

import (
	"bytes"
	"os"
	"testing"
	"time"

	"github.com/scrubd/scrubd/swpath/dryrun"
	"github.com/scrubd/scrubd/swpath/rule"
	"github.com/scrubd/scrubd/swpath/traffic"
)

// TestSampleCapture replays the committed example capture and rule file
// (deploy/examples) through both engines: the printed reports must be
// identical, which is what `scrubd dryrun --engine dv` promises.
func TestSampleCapture(t *testing.T) {
	rb, err := os.ReadFile("../../../deploy/examples/rules.yaml")
	if err != nil {
		t.Fatal(err)
	}
	set, err := rule.Parse("rules.yaml", rb, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	pc, err := os.ReadFile("../../../deploy/examples/sample.pcap")
	if err != nil {
		t.Fatal(err)
	}
	var out [2]bytes.Buffer
	for i, name := range []string{"go", "dv"} {
		eng, err := dryrun.NewEngine(name)
		if err != nil {
			t.Fatal(err)
		}
		r, err := traffic.NewReader(bytes.NewReader(pc))
		if err != nil {
			t.Fatal(err)
		}
		rep, err := dryrun.Run(set, eng, r)
		if err != nil {
			t.Fatal(err)
		}
		if err := eng.Close(); err != nil {
			t.Fatal(err)
		}
		if err := rep.WriteText(&out[i]); err != nil {
			t.Fatal(err)
		}
	}
	if out[0].String() != out[1].String() {
		t.Fatalf("%s\n%s", out[0].String(), out[1].String())
	}
}
