package hwpath

import (
	"context"
	"fmt"

	"github.com/scrubd/scrubd/offload"
)

// Multi is one offload.Backend over several devices that must hold the
// same drop entries: both uplinks of a BlueField (p0 and p1), each with its
// own flow table. An entry is installed when every device holds it, and is
// read back only if every device does, so a device that lost its entries
// (its qdisc deleted) makes the rule missing and the agent reinstalls it.
// Handles differ per device, so Multi installs with handle 0 and removes by
// cookie. Counters are every device's, so a rule's hardware count is what
// it dropped on all of them.
type Multi struct {
	names []string
	devs  []offload.Backend
}

var _ offload.Backend = (*Multi)(nil)

// NewMulti returns a backend over devs (names for errors).
func NewMulti(names []string, devs []offload.Backend) *Multi {
	return &Multi{names: names, devs: devs}
}

func (m *Multi) wrap(i int, err error) error {
	return fmt.Errorf("device %s: %w", m.names[i], err)
}

// Capabilities is what every device can do: the keys all have, the
// smallest limits, the slowest insertion (an entry goes into each device in
// turn) and the slowest counter refresh.
func (m *Multi) Capabilities(ctx context.Context) (offload.Capabilities, error) {
	var out offload.Capabilities
	for i, d := range m.devs {
		c, err := d.Capabilities(ctx)
		if err != nil {
			return offload.Capabilities{}, m.wrap(i, err)
		}
		if i == 0 {
			out = c
			continue
		}
		out.Keys &= c.Keys
		out.LargeGroups = minKnown(out.LargeGroups, c.LargeGroups)
		out.MaxEntries = minKnown(out.MaxEntries, c.MaxEntries)
		out.MaxChain = min(out.MaxChain, c.MaxChain)
		out.MaxPrio = min(out.MaxPrio, c.MaxPrio)
		out.InsertRate = float64(minKnown(int(out.InsertRate), int(c.InsertRate)))
		out.StatsPeriod = max(out.StatsPeriod, c.StatsPeriod)
	}
	if len(m.devs) > 1 && out.InsertRate > 0 {
		out.InsertRate /= float64(len(m.devs))
	}
	return out, nil
}

// minKnown is the smaller of two limits where 0 means none.
func minKnown(a, b int) int {
	switch {
	case a == 0:
		return b
	case b == 0:
		return a
	}
	return min(a, b)
}

type ckey struct {
	t offload.Table
	c offload.Cookie
}

// holds reports whether device d has an entry of e's table and cookie.
func (m *Multi) holds(ctx context.Context, d offload.Backend, e *offload.Entry) bool {
	dump, err := d.Dump(ctx)
	if err != nil {
		return false
	}
	for i := range dump {
		if dump[i].Table() == e.Table() && dump[i].Cookie == e.Cookie && dump[i].Match == e.Match {
			return true
		}
	}
	return false
}

// Install puts each entry into every device. An entry a device refuses is
// taken out of the devices that accepted it; an entry a device already
// holds (same table, cookie and match: left there when another device lost
// its copy) counts as installed there.
func (m *Multi) Install(ctx context.Context, entries []offload.Entry) ([]offload.Result, error) {
	es := make([]offload.Entry, len(entries))
	for i := range entries {
		es[i] = entries[i]
		es[i].Handle = 0
	}
	res := make([]offload.Result, len(es))
	placed := make([][]bool, len(m.devs)) // placed[d][i]: this call put entry i into device d
	for di, d := range m.devs {
		rs, err := d.Install(ctx, es)
		if err != nil {
			m.undo(ctx, es, placed[:di], func(int) bool { return true })
			return nil, m.wrap(di, err)
		}
		placed[di] = make([]bool, len(es))
		for i, r := range rs {
			switch {
			case r.Err == nil:
				placed[di][i] = true
			case offload.IsExists(r.Err) && m.holds(ctx, d, &es[i]):
			default:
				if res[i].Err == nil {
					res[i].Err = r.Err
				}
			}
		}
	}
	m.undo(ctx, es, placed, func(i int) bool { return res[i].Err != nil })
	return res, nil
}

// undo removes, from each device, the entries this call placed there for
// which failed reports true.
func (m *Multi) undo(ctx context.Context, es []offload.Entry, placed [][]bool, failed func(int) bool) {
	for di, p := range placed {
		var back []offload.Entry
		for i := range es {
			if p[i] && failed(i) {
				back = append(back, es[i])
			}
		}
		if len(back) > 0 {
			_, _ = m.devs[di].Remove(ctx, back)
		}
	}
}

// Remove deletes each entry from every device by cookie. It fails for an
// entry only if a device failed other than by not having it; it is not
// found only if no device had it.
func (m *Multi) Remove(ctx context.Context, entries []offload.Entry) ([]offload.Result, error) {
	es := make([]offload.Entry, len(entries))
	for i := range entries {
		es[i] = entries[i]
		es[i].Handle = 0
	}
	res := make([]offload.Result, len(es))
	missing := make([]int, len(es))
	var firstErr error
	for di, d := range m.devs {
		rs, err := d.Remove(ctx, es)
		if err != nil {
			if firstErr == nil {
				firstErr = m.wrap(di, err)
			}
			continue
		}
		for i, r := range rs {
			switch {
			case r.Err == nil:
			case offload.IsNotFound(r.Err):
				missing[i]++
				if missing[i] == len(m.devs) {
					res[i].Err = r.Err
				}
			default:
				if res[i].Err == nil || offload.IsNotFound(res[i].Err) {
					res[i].Err = r.Err
				}
			}
		}
	}
	if firstErr != nil {
		return nil, firstErr
	}
	return res, nil
}

// Dump returns the entries every device holds, with handle 0; in hardware
// when every device says so.
func (m *Multi) Dump(ctx context.Context) ([]offload.Installed, error) {
	type agg struct {
		in    offload.Installed
		count int
		inHW  bool
	}
	seen := map[ckey]*agg{}
	var order []ckey
	for di, d := range m.devs {
		dump, err := d.Dump(ctx)
		if err != nil {
			return nil, m.wrap(di, err)
		}
		for _, x := range dump {
			k := ckey{x.Table(), x.Cookie}
			a := seen[k]
			if a == nil {
				if di > 0 {
					continue // not on the first device: not on all
				}
				x.Handle = 0
				a = &agg{in: x, inHW: x.InHW}
				a.in.InHWCount = 0
				seen[k] = a
				order = append(order, k)
			}
			if a.count != di || a.in.Match != x.Match {
				continue // counted already on this device, or a different entry
			}
			a.count++
			a.inHW = a.inHW && x.InHW
			a.in.NotInHW = a.in.NotInHW || x.NotInHW
			a.in.InHWCount += x.InHWCount
		}
	}
	var out []offload.Installed
	for _, k := range order {
		if a := seen[k]; a.count == len(m.devs) {
			a.in.InHW = a.inHW
			out = append(out, a.in)
		}
	}
	return out, nil
}

// Stats returns every device's counters (handle 0); the agent sums them per
// rule.
func (m *Multi) Stats(ctx context.Context) ([]offload.Stats, error) {
	var out []offload.Stats
	for di, d := range m.devs {
		st, err := d.Stats(ctx)
		if err != nil {
			return nil, m.wrap(di, err)
		}
		for _, s := range st {
			s.Handle = 0
			out = append(out, s)
		}
	}
	return out, nil
}

// NICCounters sums the devices' own counters when they report any.
func (m *Multi) NICCounters(ctx context.Context) (map[string]uint64, error) {
	var out map[string]uint64
	for di, d := range m.devs {
		n, ok := d.(interface {
			NICCounters(context.Context) (map[string]uint64, error)
		})
		if !ok {
			continue
		}
		c, err := n.NICCounters(ctx)
		if err != nil {
			return nil, m.wrap(di, err)
		}
		if out == nil {
			out = map[string]uint64{}
		}
		for k, v := range c {
			out[k] += v
		}
	}
	return out, nil
}
