// Package hwpath adapts an offload.Backend (tc flower on a device, or the
// simulated mlx5 table) to the agent's rule-level dataplane.HW: it compiles
// rules with offload/compile, keeps hardware from dropping what an accept
// rule that decides first lets through, budgets entries and mask shapes,
// installs a rule's entries all or none, and maps entry counters back to
// rules through the cookie's rule hash.
//
// A Path is safe for concurrent use.
package hwpath

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"

	"github.com/scrubd/scrubd/agent/dataplane"
	"github.com/scrubd/scrubd/offload"
	"github.com/scrubd/scrubd/offload/compile"
	"github.com/scrubd/scrubd/swpath/rule"
)

// Config sizes the path.
type Config struct {
	Name    string
	Compile compile.Config
	Owner   offload.Owner
	// MaxEntries and MaxMasks cap what scrubd uses (0: the device's
	// capabilities). MaxMasks counts mask shapes per table.
	MaxEntries int
	MaxMasks   int
}

// Path is a dataplane.HW over an offload.Backend.
type Path struct {
	cfg Config
	b   offload.Backend

	mu    sync.Mutex
	rules map[string][]offload.Entry // key -> installed entries
}

// New returns a path over b.
func New(cfg Config, b offload.Backend) *Path {
	if cfg.Name == "" {
		cfg.Name = "offload"
	}
	return &Path{cfg: cfg, b: b, rules: map[string][]offload.Entry{}}
}

// Name returns the path's name.
func (p *Path) Name() string { return p.cfg.Name }

// Key is the hex rule hash the entries' cookies carry.
func (p *Path) Key(r *rule.Rule) string {
	h := offload.RuleHash(r.ID, &r.Match)
	return hex.EncodeToString(h[:])
}

func kindOf(err error) dataplane.Kind {
	switch {
	case offload.IsDeviceGone(err):
		return dataplane.KindDeviceGone
	case offload.IsNoSpace(err):
		return dataplane.KindTableFull
	case offload.IsUnsupported(err):
		return dataplane.KindUnsupported
	}
	return dataplane.KindOther
}

func hwErr(r string, err error) error {
	var ee *offload.EntryError
	detail := err.Error()
	if errors.As(err, &ee) && ee.Extack != "" {
		detail = ee.Extack
	}
	return &dataplane.HWError{Rule: r, Kind: kindOf(err), Detail: detail, Err: err}
}

func (p *Path) compile(r *rule.Rule, set *rule.Set) (compile.Result, error) {
	res := compile.Rule(&p.cfg.Compile, r)
	if !res.Offloadable {
		k := dataplane.KindUnsupported
		return res, &dataplane.HWError{Rule: r.ID, Kind: k, Detail: res.Reason.String() + ": " + res.Detail}
	}
	i := set.Index(r.ID)
	for j := range set.Rules {
		a := &set.Rules[j]
		if a.Action != rule.Accept || (i >= 0 && !rule.Before(a, j, r, i)) {
			continue
		}
		if compile.Overlap(&a.Match, &r.Match) {
			return res, &dataplane.HWError{Rule: r.ID, Kind: dataplane.KindAcceptOverlap,
				Detail: fmt.Sprintf("overlaps accept rule %s (priority %d), which decides first", a.ID, a.Priority)}
		}
	}
	return res, nil
}

// Compile implements dataplane.HW.
func (p *Path) Compile(r *rule.Rule, set *rule.Set) (dataplane.Cost, error) {
	res, err := p.compile(r, set)
	if err != nil {
		return dataplane.Cost{}, err
	}
	c := dataplane.Cost{Entries: len(res.Entries)}
	for _, tm := range res.Masks {
		c.Masks = append(c.Masks, fmt.Sprintf("%d/%d/%v", tm.Table.Chain, tm.Table.Prio, tm.Mask))
	}
	return c, nil
}

// capacity reads the device's capacity and applies scrubd's own caps.
func (p *Path) capacity(ctx context.Context) (offload.Capacity, error) {
	caps, err := p.b.Capabilities(ctx)
	if err != nil {
		return offload.Capacity{}, err
	}
	if p.cfg.MaxEntries > 0 && (caps.MaxEntries == 0 || p.cfg.MaxEntries < caps.MaxEntries) {
		caps.MaxEntries = p.cfg.MaxEntries
	}
	if p.cfg.MaxMasks > 0 && (caps.LargeGroups == 0 || p.cfg.MaxMasks < caps.LargeGroups) {
		caps.LargeGroups = p.cfg.MaxMasks
	}
	p.mu.Lock()
	var mine []offload.Entry
	for _, es := range p.rules {
		mine = append(mine, es...)
	}
	p.mu.Unlock()
	return offload.CapacityOf(caps, mine), nil
}

// Install implements dataplane.HW: the entries go in as one batch; if any
// fails, the ones that went in are removed again.
func (p *Path) Install(ctx context.Context, r *rule.Rule, set *rule.Set) error {
	res, err := p.compile(r, set)
	if err != nil {
		return err
	}
	capa, err := p.capacity(ctx)
	if err != nil {
		return hwErr(r.ID, err)
	}
	if free := capa.FreeEntries(); free >= 0 && free < len(res.Entries) {
		return &dataplane.HWError{Rule: r.ID, Kind: dataplane.KindTableFull,
			Detail: fmt.Sprintf("needs %d entries, %d of %d free", len(res.Entries), free, capa.MaxEntries)}
	}
	newMasks := map[offload.Table]map[offload.Mask]bool{}
	for _, tm := range res.Masks {
		if newMasks[tm.Table] == nil {
			newMasks[tm.Table] = map[offload.Mask]bool{}
		}
		newMasks[tm.Table][tm.Mask] = true
	}
	p.mu.Lock()
	for _, es := range p.rules {
		for i := range es {
			delete(newMasks[es[i].Table()], es[i].Match.Mask())
		}
	}
	p.mu.Unlock()
	for t, ms := range newMasks {
		if free := capa.FreeMasks(t); free >= 0 && free < len(ms) {
			return &dataplane.HWError{Rule: r.ID, Kind: dataplane.KindMaskBudget,
				Detail: fmt.Sprintf("needs %d new mask shapes in chain %d prio %d, %d left", len(ms), t.Chain, t.Prio, free)}
		}
	}
	results, err := p.b.Install(ctx, res.Entries)
	if err != nil {
		return hwErr(r.ID, err)
	}
	var done []offload.Entry
	var first error
	for i, rr := range results {
		if rr.Err != nil {
			if first == nil {
				first = rr.Err
			}
			continue
		}
		e := res.Entries[i]
		e.Handle = rr.Handle
		done = append(done, e)
	}
	if first != nil {
		if len(done) > 0 {
			_, _ = p.b.Remove(ctx, done)
		}
		return hwErr(r.ID, first)
	}
	p.mu.Lock()
	p.rules[p.Key(r)] = done
	p.mu.Unlock()
	return nil
}

// Remove implements dataplane.HW.
func (p *Path) Remove(ctx context.Context, key string) error {
	p.mu.Lock()
	es := p.rules[key]
	p.mu.Unlock()
	if len(es) == 0 {
		return nil
	}
	results, err := p.b.Remove(ctx, es)
	if err != nil {
		return hwErr(key, err)
	}
	var left []offload.Entry
	var first error
	for i, rr := range results {
		if rr.Err != nil && !offload.IsNotFound(rr.Err) {
			left = append(left, es[i])
			if first == nil {
				first = rr.Err
			}
		}
	}
	p.mu.Lock()
	if len(left) == 0 {
		delete(p.rules, key)
	} else {
		p.rules[key] = left
	}
	p.mu.Unlock()
	if first != nil {
		return hwErr(key, first)
	}
	return nil
}

// Installed dumps the device and returns the keys of scrubd's rules there
// (owned by the configured Owner), remembering their entries so Remove and
// Stats work for them after a restart, and forgetting rules the device
// lost.
func (p *Path) Installed(ctx context.Context) ([]string, error) {
	dump, err := p.b.Dump(ctx)
	if err != nil {
		return nil, hwErr("", err)
	}
	found := map[string][]offload.Entry{}
	var keys []string
	for i := range dump {
		e := dump[i].Entry
		if !p.cfg.Owner.Owns(&e) {
			continue
		}
		h := e.Cookie.RuleHash()
		k := hex.EncodeToString(h[:])
		if found[k] == nil {
			keys = append(keys, k)
		}
		found[k] = append(found[k], e)
	}
	// The device is the truth: rules it no longer holds (a flushed table,
	// a deleted qdisc) are forgotten, so they count against no budget.
	p.mu.Lock()
	p.rules = found
	p.mu.Unlock()
	return keys, nil
}

// Budget implements dataplane.HW.
func (p *Path) Budget(ctx context.Context) (dataplane.Budget, error) {
	c, err := p.capacity(ctx)
	if err != nil {
		return dataplane.Budget{}, hwErr("", err)
	}
	b := dataplane.Budget{MaxEntries: c.MaxEntries, UsedEntries: c.Entries, MaxMasks: c.LargeGroups}
	for _, t := range c.Tables {
		b.UsedMasks = max(b.UsedMasks, t.Groups)
	}
	return b, nil
}

// Stats implements dataplane.HW.
func (p *Path) Stats(ctx context.Context) (map[string]dataplane.Counter, error) {
	st, err := p.b.Stats(ctx)
	if err != nil {
		return nil, hwErr("", err)
	}
	out := map[string]dataplane.Counter{}
	for _, s := range st {
		if !s.Cookie.Ours() {
			continue
		}
		h := s.Cookie.RuleHash()
		k := hex.EncodeToString(h[:])
		c := out[k]
		c.Packets += s.Packets
		c.Bytes += s.Bytes
		out[k] = c
	}
	return out, nil
}

// NICCounters returns the backend's device counters when it has any.
func (p *Path) NICCounters(ctx context.Context) (map[string]uint64, error) {
	if n, ok := p.b.(interface {
		NICCounters(context.Context) (map[string]uint64, error)
	}); ok {
		return n.NICCounters(ctx)
	}
	return nil, nil
}
