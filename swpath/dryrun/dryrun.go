// Package dryrun replays a capture against a rule set and reports, per rule,
// how many packets its match matches on its own (matched) and how many it
// decides (hits, with their bytes), plus the totals. It is what an operator
// runs before enforcing a rule set, and how every engine is checked against
// the others: the decisions come from a pluggable Engine (the Go classifier
// here; the XDP, Direct Verbs and kernel flower engines register themselves
// from their own packages), while matched counts and totals are computed
// the same way for every engine.
package dryrun

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"sync"
	"text/tabwriter"

	"github.com/scrubd/scrubd/swpath/classifier"
	"github.com/scrubd/scrubd/swpath/packet"
	"github.com/scrubd/scrubd/swpath/rule"
	"github.com/scrubd/scrubd/swpath/traffic"
)

// Engine decides batches of frames against a loaded rule set.
type Engine interface {
	// Load makes set the engine's rule set, replacing any earlier one.
	Load(set *rule.Set) error
	// Decide writes into out[i] the index (in the loaded set) of the rule
	// that decides frames[i], or -1 when no rule does (the frame passes).
	// out is at least as long as frames.
	Decide(frames [][]byte, out []int32) error
	// Close releases what the engine holds.
	Close() error
}

// Factory makes an engine.
type Factory func() (Engine, error)

var (
	regMu    sync.Mutex
	registry = map[string]Factory{}
)

// Register makes an engine available under name. It panics on a duplicate
// name (a programming error at init time).
func Register(name string, f Factory) {
	regMu.Lock()
	defer regMu.Unlock()
	if _, dup := registry[name]; dup {
		panic("dryrun: engine " + name + " registered twice")
	}
	registry[name] = f
}

// Engines returns the registered engine names, sorted.
func Engines() []string {
	regMu.Lock()
	defer regMu.Unlock()
	var out []string
	for n := range registry {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// UnknownEngineError is returned for an engine name nobody registered.
type UnknownEngineError struct {
	Name      string
	Available []string
}

func (e *UnknownEngineError) Error() string {
	return fmt.Sprintf("unknown engine %q (available: %s)", e.Name, strings.Join(e.Available, ", "))
}

// NewEngine makes the engine registered under name.
func NewEngine(name string) (Engine, error) {
	regMu.Lock()
	f := registry[name]
	regMu.Unlock()
	if f == nil {
		return nil, &UnknownEngineError{Name: name, Available: Engines()}
	}
	return f()
}

func init() {
	Register("go", func() (Engine, error) { return &goEngine{}, nil })
}

// goEngine is the Go tuple-space classifier.
type goEngine struct {
	tab *classifier.Table
	fs  []rule.Fields
}

func (g *goEngine) Load(set *rule.Set) error {
	t, err := classifier.Compile(set)
	if err != nil {
		return err
	}
	g.tab = t
	return nil
}

func (g *goEngine) Decide(frames [][]byte, out []int32) error {
	if g.tab == nil {
		return errors.New("go engine: no rule set loaded")
	}
	if cap(g.fs) < len(frames) {
		g.fs = make([]rule.Fields, len(frames))
	}
	fs := g.fs[:len(frames)]
	for i, b := range frames {
		packet.Parse(b, &fs[i])
	}
	g.tab.DecideBurst(fs, out)
	return nil
}

func (g *goEngine) Close() error { return nil }

// RuleReport is one rule's line of a Report.
type RuleReport struct {
	ID      string `json:"id"`
	Action  string `json:"-"`
	Matched uint64 `json:"matched"` // packets its match matches on its own
	Hits    uint64 `json:"hits"`    // packets it decided
	Bytes   uint64 `json:"bytes"`   // wire bytes of the packets it decided
}

// Report is the result of a dry run. Passed counts every packet not dropped
// (AcceptedByRule of them were passed by an accept rule, the rest by no
// rule), so Packets == Dropped + Passed.
type Report struct {
	Packets        uint64       `json:"packets"`
	Dropped        uint64       `json:"dropped"`
	Passed         uint64       `json:"passed"`
	AcceptedByRule uint64       `json:"accepted_by_rule"`
	Rules          []RuleReport `json:"rules"`
}

// BatchSize is how many frames Run hands an engine at a time.
const BatchSize = 256

// Run replays every packet r yields against set, with eng deciding. The
// matched counts are computed by the Go classifier's all-matches lookup,
// whatever the engine. eng must not have a set loaded yet: Run loads set.
func Run(set *rule.Set, eng Engine, r *traffic.Reader) (*Report, error) {
	if err := eng.Load(set); err != nil {
		return nil, fmt.Errorf("loading the rule set: %w", err)
	}
	tab, err := classifier.Compile(set)
	if err != nil {
		return nil, err
	}
	rep := &Report{Rules: make([]RuleReport, len(set.Rules))}
	for i := range set.Rules {
		rep.Rules[i].ID, rep.Rules[i].Action = set.Rules[i].ID, set.Rules[i].Action.String()
	}
	frames := make([][]byte, 0, BatchSize)
	lens := make([]int, 0, BatchSize)
	out := make([]int32, BatchSize)
	var f rule.Fields
	var matching []int32
	flush := func() error {
		if len(frames) == 0 {
			return nil
		}
		for i := range out[:len(frames)] {
			out[i] = -2
		}
		if err := eng.Decide(frames, out); err != nil {
			return err
		}
		for i, b := range frames {
			packet.Parse(b, &f)
			matching = tab.AppendMatching(matching[:0], &f)
			for _, m := range matching {
				rep.Rules[m].Matched++
			}
			rep.Packets++
			d := out[i]
			switch {
			case d == -1:
				rep.Passed++
			case d < -1 || int(d) >= len(set.Rules):
				return fmt.Errorf("engine decided packet %d by rule index %d (set has %d rules)", rep.Packets, d, len(set.Rules))
			default:
				rr := &rep.Rules[d]
				if !slices.Contains(matching, d) {
					return fmt.Errorf("engine decided packet %d by rule %s, whose match does not match it", rep.Packets, rr.ID)
				}
				rr.Hits++
				rr.Bytes += uint64(lens[i])
				if set.Rules[d].Action == rule.Accept {
					rep.AcceptedByRule++
					rep.Passed++
				} else {
					rep.Dropped++
				}
			}
		}
		frames, lens = frames[:0], lens[:0]
		return nil
	}
	for {
		p, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("packet %d: %w", rep.Packets+uint64(len(frames))+1, err)
		}
		frames = append(frames, p.Data)
		lens = append(lens, p.Length)
		if len(frames) == BatchSize {
			if err := flush(); err != nil {
				return nil, err
			}
		}
	}
	if err := flush(); err != nil {
		return nil, err
	}
	return rep, nil
}

// WriteText writes the report as a table for people.
func (r *Report) WriteText(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "packets\tdropped\taccepted_by_rule\tpassed\t\n")
	fmt.Fprintf(tw, "%d\t%d\t%d\t%d\t\n", r.Packets, r.Dropped, r.AcceptedByRule, r.Passed)
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "rule\taction\tmatched\thits\tbytes\n")
	for _, rr := range r.Rules {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\n", rr.ID, rr.Action, rr.Matched, rr.Hits, rr.Bytes)
	}
	return tw.Flush()
}
