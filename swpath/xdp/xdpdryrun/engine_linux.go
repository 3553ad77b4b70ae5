package xdpdryrun

import (
	"errors"

	"github.com/scrubd/scrubd/swpath/dryrun"
	"github.com/scrubd/scrubd/swpath/rule"
	"github.com/scrubd/scrubd/swpath/xdp"
)

func init() { dryrun.Register("xdp", New) }

// engine adapts a traced xdp.Engine to dryrun.Engine.
type engine struct{ e *xdp.Engine }

// New loads the XDP program for dry runs (xdp.Options.Trace, not attached
// anywhere).
func New() (dryrun.Engine, error) {
	e, err := xdp.New(xdp.Options{Trace: true})
	if err != nil {
		return nil, err
	}
	return &engine{e: e}, nil
}

// Load compiles set into the program's maps; a rule beyond the program's
// limits refuses the whole set with an *xdp.LimitError.
func (g *engine) Load(set *rule.Set) error { return g.e.Replace(set) }

// Decide runs each frame through the program.
func (g *engine) Decide(frames [][]byte, out []int32) error {
	if g.e.Set() == nil {
		return errors.New("xdp engine: no rule set loaded")
	}
	for i, b := range frames {
		d, _, err := g.e.Decide(b)
		if err != nil {
			return err
		}
		out[i] = int32(d)
	}
	return nil
}

func (g *engine) Close() error { return g.e.Close() }
