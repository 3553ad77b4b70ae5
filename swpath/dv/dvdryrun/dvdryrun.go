// Package dvdryrun registers the Direct Verbs engine with swpath/dryrun as
// "dv": `scrubd dryrun --engine dv` replays a capture through the NIC
// emulator (swpath/nicemu) into a dv worker (swpath/dv) in host mode, and
// reports the rule each packet was decided by, exactly as the worker's
// classifier decided it on the receive path. Import it for its side
// effect:
//
//	import _ "github.com/scrubd/scrubd/swpath/dv/dvdryrun"
//
// The run is synchronous and deterministic: frames are delivered (as
// compressed sessions where the NIC would compress them, and as regular
// completions otherwise) only into posted receive buffers, and the worker
// is stepped until it has received them all, so no frame is lost to
// out-of-buffer and the order is kept.
package dvdryrun

import (
	"errors"
	"fmt"

	"github.com/scrubd/scrubd/swpath/classifier"
	"github.com/scrubd/scrubd/swpath/dryrun"
	"github.com/scrubd/scrubd/swpath/dv/dvsim"
	"github.com/scrubd/scrubd/swpath/pool"
	"github.com/scrubd/scrubd/swpath/rule"
)

// BufSize is the receive buffer size of the emulated queue: large enough
// for a 9216-byte jumbo frame in one buffer.
const BufSize = 16384

func init() {
	dryrun.Register("dv", func() (dryrun.Engine, error) { return &Engine{}, nil })
}

// Engine is the dryrun adapter over dvsim.
type Engine struct {
	sim  *dvsim.Sim
	got  []int32
	want int
}

// Load builds a fresh emulated queue and worker for set.
func (e *Engine) Load(set *rule.Set) error {
	if err := e.Close(); err != nil {
		return err
	}
	sim, err := dvsim.New(dvsim.Config{
		Rules: set, Host: true, RQLog2: 8, CQLog2: 9,
		Tap: e.tap,
		Pool: &pool.Config{HugePages: pool.HugeOff, Bind: pool.BindOff,
			BufSize: BufSize, BuffersPerNode: 1024, CacheSize: 128, Batch: 32},
	})
	if err != nil {
		return err
	}
	e.sim = sim
	sim.Workers[0].Step() // post the first receive buffers
	return nil
}

func (e *Engine) tap(_ []byte, r classifier.Result) {
	if len(e.got) < e.want {
		e.got = append(e.got, r.Rule)
	}
}

// Decide delivers frames through the emulated NIC and reports the worker's
// decisions.
func (e *Engine) Decide(frames [][]byte, out []int32) error {
	if e.sim == nil {
		return errors.New("dv engine: no rule set loaded")
	}
	for i, f := range frames {
		if len(f) > BufSize {
			return fmt.Errorf("dv engine: frame %d is %d bytes; the emulated receive buffers hold %d", i, len(f), BufSize)
		}
	}
	e.got, e.want = e.got[:0], len(frames)
	q, w := e.sim.RX[0], e.sim.Workers[0]
	// The run is synchronous: a step that neither places nor receives
	// anything can only repeat. maxStalls of them in a row means the rings
	// are stuck (a driver or device bug); report their state, not hang.
	const maxStalls = 1000
	stalls := 0
	for i := 0; i < len(frames); {
		k := min(q.Room(), len(frames)-i)
		if k > 0 {
			q.DeliverBurst(frames[i:i+k], true, 64)
			i += k
		}
		if w.Step() == 0 && k == 0 {
			if stalls++; stalls == maxStalls {
				return fmt.Errorf("dv engine: rings stuck after %d of %d frames delivered (%d steps without progress); rings:\n%s",
					i, len(frames), maxStalls, e.sim.RingState())
			}
		} else {
			stalls = 0
		}
	}
	for len(e.got) < len(frames) {
		if w.Step() == 0 {
			break
		}
	}
	if err := e.sim.ProtocolErr(); err != nil {
		return err
	}
	if len(e.got) != len(frames) {
		c := w.Snapshot()
		return fmt.Errorf("dv engine: %d of %d frames received (error completions %d)", len(e.got), len(frames), c.RxErrors)
	}
	copy(out, e.got)
	return nil
}

// Close releases the emulated queue and its buffers.
func (e *Engine) Close() error {
	if e.sim == nil {
		return nil
	}
	err := e.sim.Close()
	if e.sim.Leaked != 0 && err == nil {
		err = fmt.Errorf("dv engine: %d receive buffers leaked", e.sim.Leaked)
	}
	e.sim = nil
	return err
}
