package dryrun

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/scrubd/scrubd/swpath/packet"
	"github.com/scrubd/scrubd/swpath/rule"
	"github.com/scrubd/scrubd/swpath/traffic"
)

// liar decides every frame by one fixed rule index.
type liar struct{ idx int32 }

func (l *liar) Load(*rule.Set) error { return nil }
func (l *liar) Decide(frames [][]byte, out []int32) error {
	for i := range frames {
		out[i] = l.idx
	}
	return nil
}
func (l *liar) Close() error { return nil }

func capture(t *testing.T, frames [][]byte, ng bool) *traffic.Reader {
	t.Helper()
	var buf bytes.Buffer
	var err error
	if ng {
		err = traffic.WritePcapNG(&buf, frames)
	} else {
		err = traffic.WritePcap(&buf, frames)
	}
	if err != nil {
		t.Fatal(err)
	}
	r, err := traffic.NewReader(&buf)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestRunGoEngine(t *testing.T) {
	set := traffic.RandomRules(5, 80)
	frames := traffic.NewGenerator(traffic.Config{Seed: 5, Rules: set, RuleFraction: 0.8, Odd: true}).Frames(3*BatchSize + 17)
	eng, err := NewEngine("go")
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Run(set, eng, capture(t, frames, true))
	if err != nil {
		t.Fatal(err)
	}
	var f rule.Fields
	hits := make([]uint64, len(set.Rules))
	var dropped uint64
	for _, b := range frames {
		packet.Parse(b, &f)
		if d := set.Decide(&f); d >= 0 {
			hits[d]++
			if set.Rules[d].Action == rule.Drop {
				dropped++
			}
		}
	}
	if rep.Packets != uint64(len(frames)) || rep.Dropped != dropped || rep.Packets != rep.Dropped+rep.Passed {
		t.Fatalf("totals %+v, want %d packets %d dropped", rep, len(frames), dropped)
	}
	for i := range hits {
		if rep.Rules[i].Hits != hits[i] {
			t.Errorf("rule %d: %d hits, want %d", i, rep.Rules[i].Hits, hits[i])
		}
	}
	var text bytes.Buffer
	if err := rep.WriteText(&text); err != nil || !strings.Contains(text.String(), set.Rules[0].ID) {
		t.Errorf("text: %v %s", err, text.String())
	}
}

func TestRunCatchesAWrongEngine(t *testing.T) {
	set := traffic.RandomRules(6, 20)
	frames := traffic.NewGenerator(traffic.Config{Seed: 6, Odd: true}).Frames(300)
	if _, err := Run(set, &liar{idx: 0}, capture(t, frames, false)); err == nil || !strings.Contains(err.Error(), "does not match") {
		t.Errorf("an engine deciding by a non-matching rule: %v", err)
	}
	if _, err := Run(set, &liar{idx: 99}, capture(t, frames, false)); err == nil || !strings.Contains(err.Error(), "rule index 99") {
		t.Errorf("an engine deciding by a rule out of range: %v", err)
	}
}

func TestEngines(t *testing.T) {
	if got := Engines(); len(got) == 0 || got[0] != "go" {
		t.Fatalf("Engines() = %v", got)
	}
	_, err := NewEngine("nope")
	var ue *UnknownEngineError
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), "available: go") {
		t.Fatalf("NewEngine(nope) = %v", err)
	}
}
