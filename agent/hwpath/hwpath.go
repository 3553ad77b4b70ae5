// Package hwpath holds the hardware path's adapters, from the agent's
// rules down to a device's flow table:
//
//   - Path: an offload.Backend as the agent's rule-level
//     dataplane.HW (below);
//   - FlowerBackend: offload.Backend over tc flower (offload/tcflower, the
//     netlink codec) on one device; Multi: every entry in each of several
//     devices' tables;
//   - NewFlower: the tc flower path the config names (offload.devices,
//     scrubd's chain and priorities, the entry budget) and the watch of
//     the devices' clsact qdisc.
//
// The simulated NIC (agent/sim) puts a Path over the simulated mlx5 table
// (offload/sim).
//
// Path adapts an offload.Backend (tc flower on a device, or the
// simulated mlx5 table) to the agent's rule-level dataplane.HW: it compiles
// rules with offload/compile, keeps hardware from dropping what an accept
// rule that decides first lets through, budgets entries and mask shapes,
// installs a rule's entries all or none, and maps entry counters back to
// rules through the cookie's rule hash.
//
// Protected traffic is excepted in hardware by pass entries: an accept rule
// that overlaps a drop rule in hardware gets its own entries (flower gact
// pass, compile.Pass) at priorities consulted before the drop tables
// (Config.Compile.PassPrioV4/V6), shared by every drop it overlaps. A drop
// rule overlapping an accept rule goes to hardware whole, with the accept
// rule's pass entries in front of it. This was chosen over splitting each
// drop around the accept (offload/compile's Set), measured on the cases
// that matter:
//
//   - the BGP session's protect rules (peer /32, local /32, TCP, one port)
//     against a drop on the local address's /24 differ from the drop in
//     three fields; the split, which narrows one field, refuses it, and a
//     general split needs an entry and a mask shape per prefix bit and port
//     bit (32 + 8 + 16 = 56 shapes, against 15 large flow groups per mlx5
//     table). One pass entry does it.
//   - a reflector protected with direction both ({src R/32} and {dst R/32},
//     any protocol) against 900 FlowSpec drops on victim /32s: every drop
//     splits into 32 entries with 32 source-prefix shapes, 28,800 entries
//     and 32 shapes in all, and not one rule fits a 4096-entry table with
//     15 large groups. With pass entries: the drops' own 900 entries and
//     one pass entry in front of them (TestSplitOrPass measures both).
//
// A pass entry costs one entry per accept rule and family and a mask shape
// in the pass table. Its traffic cost: a packet it matches ends tc
// classification. On a host NIC in legacy mode that is the normal receive
// path, where protected traffic goes anyway. In switchdev mode with OVS on
// the same ingress, mlx5 sends it to the end of the tc tables (the
// eswitch's slow path: en/tc/act/accept.c, esw_setup_accept_dest), past
// OVS's offloaded flows, so OVS forwards it in software. For the automatic
// BGP rules that is one BGP session's packets (keepalives every few
// seconds, update bursts); an operator protect entry covering high-rate
// traffic costs that rate in OVS's software path, and should be narrowed
// to what needs protecting. Drops that overlap an accept rule without pass
// entries (no pass priority configured, a rule the device cannot express,
// no room) stay in software with the reason.
//
// A Path is safe for concurrent use.
package hwpath

import (
	"cmp"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/maphash"
	"slices"
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
	// MaxEntriesPerRule bounds the entries one rule may compile to (0: no
	// bound); a rule over it stays in software with the reason, and none
	// of its entries goes in.
	MaxEntriesPerRule int
}

// Path is a dataplane.HW over an offload.Backend.
type Path struct {
	cfg Config
	b   offload.Backend

	mu    sync.Mutex
	rules map[string][]offload.Entry // key -> installed entries
	// pass holds the installed pass entries by accept rule key; passErr
	// the last reason an accept rule's pass entries could not go in.
	pass    map[string][]offload.Entry
	passErr map[string]string
	// needs lists, by drop rule key, the accept rule keys whose pass
	// entries the drop relies on; needsUnknown is set while drops read back
	// from the device (Installed) have not been matched to a rule set, so
	// Remove takes no pass entry out.
	needs        map[string][]string
	needsUnknown bool
	// idx indexes the last rule set seen (its accept rules and each rule's
	// position), so that finding the accept rules a drop overlaps costs
	// the accept rules, not the whole set. idxMu guards it (shields runs
	// with p.mu held too).
	idxMu sync.Mutex
	idx   setIndex
	// capOK says used and tables count the entries of p.rules and p.pass
	// (by table, and each mask shape's entries): kept up to date as
	// entries go in and out, so that the capacity and the shapes in use
	// cost the tables, not the entries, for every rule that asks whether
	// it fits. Installed starts the count again.
	capOK  bool
	used   int
	tables map[offload.Table]*tableUse
	// masks holds one copy of each list of mask-shape keys Compile has
	// returned lately (Cost.Masks), by a hash of the list: rules with
	// the same shapes share one list. Bounded: past maxMaskLists it
	// starts over, which also keeps the table itself small (40k
	// ClassBench-style rules, keys as strings: 40.4 bytes retained per
	// mask with a list per rule, 24.5 with lists shared and the table
	// bounded at 4096, 33.5 unbounded; as dataplane.MaskShape, 9.7).
	masksMu sync.Mutex
	masks   map[uint64][]dataplane.MaskShape
	// statsIn is the backend's last counter reading and statsOut the map
	// Stats made of it, returned again while the reading is the same (an
	// idle table's counters, read every placement tick, cost no map and
	// no key per entry). A map once returned is never written.
	statsMu  sync.Mutex
	statsIn  []offload.Stats
	statsOut map[string]dataplane.Counter
}

const maxMaskLists = 4096

// tableUse is one table's entries and the entries of each mask shape.
type tableUse struct {
	entries int
	masks   map[offload.Mask]int
}

// countLocked adds (sign 1) or takes away (-1) es from the counts; the
// caller holds p.mu.
func (p *Path) countLocked(es []offload.Entry, sign int) {
	if !p.capOK {
		return
	}
	for i := range es {
		t := es[i].Table()
		u := p.tables[t]
		if u == nil {
			u = &tableUse{masks: map[offload.Mask]int{}}
			p.tables[t] = u
		}
		m := es[i].Match.Mask()
		u.entries += sign
		u.masks[m] += sign
		p.used += sign
		if u.masks[m] <= 0 {
			delete(u.masks, m)
		}
		if u.entries <= 0 {
			delete(p.tables, t)
		}
	}
}

// setIndex is the accept rules of a set with their positions, and, built
// only when a rule not in the set's array is looked up, every rule's
// position by id. It is keyed by the set and its backing array (a set's
// rules are not changed in place between calls; the placer hands a new
// array with every store snapshot, and appends new rules to the array it
// holds while there is room).
type setIndex struct {
	set     *rule.Set
	first   *rule.Rule
	n       int
	holes   *rule.Holes // the set's holes when pos was built
	pos     map[string]int
	accepts []int
}

// New returns a path over b.
func New(cfg Config, b offload.Backend) *Path {
	if cfg.Name == "" {
		cfg.Name = "offload"
	}
	return &Path{cfg: cfg, b: b, rules: map[string][]offload.Entry{}, pass: map[string][]offload.Entry{}, passErr: map[string]string{},
		needs: map[string][]string{}}
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

// index returns set's index, bringing it up to date when set is not the
// one last indexed: a set that grew in place (the same array, rules
// appended) is read from where the last one ended; another set is read
// once for its accept rules, a pass that allocates nothing. A rule added
// to 100k costs a read of the rules added, or of every rule's action,
// not a map of every rule's id (about 7 ms and 5 MB at 100k).
func (p *Path) index(set *rule.Set) *setIndex {
	p.idxMu.Lock()
	defer p.idxMu.Unlock()
	var first *rule.Rule
	if len(set.Rules) > 0 {
		first = &set.Rules[0]
	}
	x := &p.idx
	if x.set == set && x.first == first && x.n == len(set.Rules) {
		if x.holes != set.Holes {
			// New holes (rules removed in place; holes are drop rules,
			// the accepts stay): the map of ids is out of date.
			x.pos, x.holes = nil, set.Holes
		}
		return x
	}
	from := x.n
	if x.set != set || x.first != first || x.n > len(set.Rules) || x.n == 0 {
		// Another set: a new accepts array (a caller may still read the
		// last one outside the lock).
		*x = setIndex{set: set, first: first}
		from = 0
	}
	x.n, x.pos, x.holes = len(set.Rules), nil, set.Holes
	for j := from; j < len(set.Rules); j++ {
		if set.Rules[j].Action == rule.Accept && set.Live(j) {
			x.accepts = append(x.accepts, j)
		}
	}
	return x
}

// position returns r's place in set: where r is when it points into the
// set's array (a rule the placer hands in always does), else the first
// rule of its id (Set.Index), from a map of every id built on the first
// such lookup for the set; -1 if set has none.
func (p *Path) position(r *rule.Rule, set *rule.Set) int {
	if i, ok := posIn(set, r); ok {
		return i
	}
	x := p.index(set)
	p.idxMu.Lock()
	defer p.idxMu.Unlock()
	if x.pos == nil {
		x.pos = make(map[string]int, len(set.Rules))
		for j := range set.Rules {
			if !set.Live(j) {
				continue // a hole: no rule
			}
			if _, dup := x.pos[set.Rules[j].ID]; !dup {
				x.pos[set.Rules[j].ID] = j // the first, as Set.Index
			}
		}
	}
	if i, ok := x.pos[r.ID]; ok {
		return i
	}
	return -1
}

// shields returns the accept rules of set that decide before r and overlap
// it: the rules whose pass entries must be in front of r's drops.
func (p *Path) shields(r *rule.Rule, set *rule.Set) []*rule.Rule {
	x := p.index(set)
	p.idxMu.Lock()
	accepts := x.accepts
	p.idxMu.Unlock()
	if len(accepts) == 0 {
		return nil
	}
	i := p.position(r, set)
	var out []*rule.Rule
	for _, j := range accepts {
		a := &set.Rules[j]
		if !set.Live(j) || (i >= 0 && !rule.Before(a, set.Key(j), r, set.Key(i))) {
			continue
		}
		if compile.Overlap(&a.Match, &r.Match) {
			out = append(out, a)
		}
	}
	return out
}

// passFor says why accept rule a cannot have pass entries ("" if it can):
// none configured, not expressible, or the last attempt to install them
// failed.
func (p *Path) passFor(a *rule.Rule) (compile.Result, string) {
	res := compile.Pass(&p.cfg.Compile, a)
	if !res.Offloadable {
		return res, res.Reason.String() + ": " + res.Detail
	}
	p.mu.Lock()
	why := p.passErr[p.Key(a)]
	p.mu.Unlock()
	return res, why
}

func (p *Path) compile(r *rule.Rule, set *rule.Set) (compile.Result, []*rule.Rule, error) {
	res := compile.Rule(&p.cfg.Compile, r)
	if !res.Offloadable {
		k := dataplane.KindUnsupported
		return res, nil, &dataplane.HWError{Rule: r.ID, Kind: k, Detail: res.Reason.String() + ": " + res.Detail}
	}
	if m := p.cfg.MaxEntriesPerRule; m > 0 && len(res.Entries) > m {
		return res, nil, &dataplane.HWError{Rule: r.ID, Kind: dataplane.KindUnsupported,
			Detail: fmt.Sprintf("compiles to %d hardware entries, more than the %d of offload.max_entries_per_rule", len(res.Entries), m)}
	}
	sh := p.shields(r, set)
	p.mu.Lock()
	_, inHW := p.rules[p.Key(r)]
	p.mu.Unlock()
	for _, a := range sh {
		_, why := p.passFor(a)
		if why == "" && inHW {
			// Already dropping in hardware: only safe if the pass entries
			// are there now (SyncAccepts puts them in first); otherwise it
			// must leave hardware.
			p.mu.Lock()
			if _, ok := p.pass[p.Key(a)]; !ok {
				why = "not in hardware yet"
			}
			p.mu.Unlock()
		}
		if why != "" {
			return res, nil, &dataplane.HWError{Rule: r.ID, Kind: dataplane.KindAcceptOverlap,
				Detail: fmt.Sprintf("overlaps accept rule %s (priority %d), which decides first, and it has no pass entries in hardware (%s)", a.ID, a.Priority, why)}
		}
	}
	return res, sh, nil
}

// fits checks that res's entries and new mask shapes fit in what is left.
func (p *Path) fits(ctx context.Context, id string, res *compile.Result) error {
	capa, err := p.capacity(ctx)
	if err != nil {
		return hwErr(id, err)
	}
	if free := capa.FreeEntries(); free >= 0 && free < len(res.Entries) {
		return &dataplane.HWError{Rule: id, Kind: dataplane.KindTableFull,
			Detail: fmt.Sprintf("needs %d entries, %d of %d free", len(res.Entries), free, capa.MaxEntries)}
	}
	newMasks := map[offload.Table]map[offload.Mask]bool{}
	p.mu.Lock()
	for _, tm := range res.Masks {
		if u := p.tables[tm.Table]; u != nil && u.masks[tm.Mask] > 0 {
			continue // a shape already in use
		}
		if newMasks[tm.Table] == nil {
			newMasks[tm.Table] = map[offload.Mask]bool{}
		}
		newMasks[tm.Table][tm.Mask] = true
	}
	p.mu.Unlock()
	for t, ms := range newMasks {
		if free := capa.FreeMasks(t); free >= 0 && free < len(ms) {
			return &dataplane.HWError{Rule: id, Kind: dataplane.KindMaskBudget,
				Detail: fmt.Sprintf("needs %d new mask shapes in chain %d prio %d, %d left", len(ms), t.Chain, t.Prio, free)}
		}
	}
	return nil
}

// installAll installs es as one batch, removing what went in if any
// entry fails.
func (p *Path) installAll(ctx context.Context, id string, es []offload.Entry) ([]offload.Entry, error) {
	results, err := p.b.Install(ctx, es)
	if err != nil {
		return nil, hwErr(id, err)
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
		e := es[i]
		e.Handle = rr.Handle
		done = append(done, e)
	}
	if first != nil {
		if len(done) > 0 {
			_, _ = p.b.Remove(ctx, done)
		}
		return nil, hwErr(id, first)
	}
	return done, nil
}

// ensurePass puts accept rule a's pass entries in hardware unless they are
// there; a failure is remembered (Compile refuses the drops a shields until
// a later attempt succeeds).
func (p *Path) ensurePass(ctx context.Context, a *rule.Rule) error {
	k := p.Key(a)
	p.mu.Lock()
	_, have := p.pass[k]
	p.mu.Unlock()
	if have {
		return nil
	}
	res := compile.Pass(&p.cfg.Compile, a)
	err := error(nil)
	var done []offload.Entry
	if !res.Offloadable {
		err = &dataplane.HWError{Rule: a.ID, Kind: dataplane.KindUnsupported, Detail: res.Reason.String() + ": " + res.Detail}
	} else if err = p.fits(ctx, a.ID, &res); err == nil {
		done, err = p.installAll(ctx, a.ID, res.Entries)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if err != nil {
		p.passErr[k] = "pass entries: " + err.Error()
		return err
	}
	delete(p.passErr, k)
	p.countLocked(p.pass[k], -1)
	p.pass[k] = done
	p.countLocked(done, 1)
	return nil
}

// SyncAccepts puts in front of the drops in hardware the pass entries of
// every accept rule of set that overlaps one of them and decides first:
// called when the rule set changes, before the drops are re-checked, so a
// new accept rule is excepted in hardware before anything else happens (a
// drop whose accept rule gets no pass entries then fails Compile and goes
// to software). It changes nothing else.
//
// Earlier failures are forgotten first: every rule set change tries again
// (a drop kept out of hardware by one then compiles, and its Install puts
// the pass entries in or fails with the reason).
func (p *Path) SyncAccepts(ctx context.Context, set *rule.Set) {
	p.mu.Lock()
	clear(p.passErr)
	p.mu.Unlock()
	for _, a := range p.acceptsInUse(set) {
		_ = p.ensurePass(ctx, a)
	}
}

// PruneAccepts removes the pass entries no drop in hardware needs any more
// (its accept rule is gone, or overlaps no hardware drop), and learns which
// accept rules each hardware drop of set relies on (so that Remove can take
// out what only that drop needed): called after the set's drops have been
// placed and removed.
func (p *Path) PruneAccepts(ctx context.Context, set *rule.Set) error {
	keep := map[string]bool{}
	for _, a := range p.acceptsInUse(set) {
		keep[p.Key(a)] = true
	}
	p.mu.Lock()
	known := map[string]bool{}
	for i := range set.Rules {
		d := &set.Rules[i]
		if d.Action != rule.Drop || !set.Live(i) {
			continue
		}
		k := p.Key(d)
		if p.rules[k] == nil {
			continue
		}
		known[k] = true
		var ks []string
		for _, a := range p.shields(d, set) {
			ks = append(ks, p.Key(a))
		}
		p.needs[k] = ks
	}
	p.needsUnknown = false
	for k := range p.rules {
		if !known[k] {
			p.needsUnknown = true // a drop of no rule in set: leave the pass entries
		}
	}
	var drop []string
	for k := range p.pass {
		if !keep[k] {
			drop = append(drop, k)
		}
	}
	unknown := p.needsUnknown
	p.mu.Unlock()
	if unknown {
		return nil
	}
	var first error
	for _, k := range drop {
		first = cmpOr(first, p.removePass(ctx, k))
	}
	return first
}

// removePass takes accept rule key k's pass entries out of hardware.
func (p *Path) removePass(ctx context.Context, k string) error {
	p.mu.Lock()
	es := p.pass[k]
	p.mu.Unlock()
	if len(es) == 0 {
		return nil
	}
	results, err := p.b.Remove(ctx, es)
	if err != nil {
		return hwErr(k, err)
	}
	var left []offload.Entry
	var first error
	for i, rr := range results {
		if rr.Err != nil && !offload.IsNotFound(rr.Err) {
			left = append(left, es[i])
			first = cmpOr(first, hwErr(k, rr.Err))
		}
	}
	p.mu.Lock()
	p.countLocked(p.pass[k], -1)
	p.countLocked(left, 1)
	if len(left) == 0 {
		delete(p.pass, k)
	} else {
		p.pass[k] = left
	}
	p.mu.Unlock()
	return first
}

func cmpOr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// acceptsInUse returns the accept rules of set that decide before, and
// overlap, a drop rule of set that is in hardware now.
func (p *Path) acceptsInUse(set *rule.Set) []*rule.Rule {
	p.mu.Lock()
	inHW := map[string]bool{}
	for k := range p.rules {
		inHW[k] = true
	}
	p.mu.Unlock()
	// With few accept rules, finding a drop's shields costs less than its
	// key (a hash of its match: about 1 µs and 7 allocations; 0.26 µs and
	// none for the shields against 2 accept rules), and most drops have
	// none: the key is only computed for those that do. This runs twice a
	// placement round over every rule of the set.
	x := p.index(set)
	p.idxMu.Lock()
	accepts := len(x.accepts)
	p.idxMu.Unlock()
	if accepts == 0 {
		return nil
	}
	shieldsFirst := accepts <= 16
	seen := map[string]bool{}
	var out []*rule.Rule
	for i := range set.Rules {
		d := &set.Rules[i]
		if d.Action != rule.Drop || !set.Live(i) {
			continue
		}
		var sh []*rule.Rule
		if shieldsFirst {
			if sh = p.shields(d, set); len(sh) == 0 || !inHW[p.Key(d)] {
				continue
			}
		} else {
			if !inHW[p.Key(d)] {
				continue
			}
			sh = p.shields(d, set)
		}
		for _, a := range sh {
			if !seen[a.ID] {
				seen[a.ID] = true
				out = append(out, a)
			}
		}
	}
	return out
}

// Compile implements dataplane.HW. The cost's Masks may be shared with
// other rules' costs: read it, do not write it.
func (p *Path) Compile(r *rule.Rule, set *rule.Set) (dataplane.Cost, error) {
	res, _, err := p.compile(r, set)
	if err != nil {
		return dataplane.Cost{}, err
	}
	c := dataplane.Cost{Entries: len(res.Entries)}
	if len(res.Masks) > 0 {
		var buf [8]dataplane.MaskShape
		keys := buf[:0]
		for _, tm := range res.Masks {
			keys = append(keys, maskKey(tm))
		}
		c.Masks = p.internMasks(keys)
	}
	return c, nil
}

// internMasks returns the one copy of the list keys (a copy of keys, the
// first time: keys itself is not kept).
func (p *Path) internMasks(keys []dataplane.MaskShape) []dataplane.MaskShape {
	k := uint64(len(keys))
	for _, m := range keys {
		k = (k*0x100000001b3 ^ m.Hash) + uint64(m.Chain)<<16 + uint64(m.Prio)
	}
	p.masksMu.Lock()
	defer p.masksMu.Unlock()
	if m, ok := p.masks[k]; ok && slices.Equal(m, keys) {
		return m
	}
	if p.masks == nil || len(p.masks) >= maxMaskLists {
		p.masks = map[uint64][]dataplane.MaskShape{}
	}
	own := slices.Clip(slices.Clone(keys))
	p.masks[k] = own // a list of the same hash is replaced: not shared
	return own
}

// maskSeed seeds the mask shapes' hashes (keys are compared within one
// process only).
var maskSeed = maphash.MakeSeed()

// maskKey returns the key of a mask shape in its table: the table and a
// 64-bit hash of the shape, 16 bytes. Placement keeps every rule's Cost:
// at 100k rules the shape printed in full (%v of the mask, about 100
// bytes) per rule and shape was 29 MB of the live heap, and as a string
// ("chain/prio/" and the hash in hex) 40 bytes a shape. Two shapes of
// one table that hash alike would look like one to placement, which then
// tries a rule it could have skipped and gets the table's mask-budget
// refusal: the budget itself counts the masks, not the keys.
func maskKey(tm compile.TableMask) dataplane.MaskShape {
	return dataplane.MaskShape{Hash: maphash.Comparable(maskSeed, tm.Mask), Chain: tm.Table.Chain, Prio: tm.Table.Prio}
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
	defer p.mu.Unlock()
	if !p.capOK {
		p.capOK, p.used, p.tables = true, 0, map[offload.Table]*tableUse{}
		for _, es := range p.rules {
			p.countLocked(es, 1)
		}
		for _, es := range p.pass {
			p.countLocked(es, 1)
		}
	}
	// What offload.CapacityOf gives for the entries counted.
	c := offload.Capacity{MaxEntries: caps.MaxEntries, Entries: p.used, LargeGroups: caps.LargeGroups}
	for t, u := range p.tables {
		c.Tables = append(c.Tables, offload.TableUsage{Table: t, Entries: u.entries, Masks: len(u.masks), Groups: len(u.masks)})
	}
	slices.SortFunc(c.Tables, func(a, b offload.TableUsage) int {
		if a.Chain != b.Chain {
			return cmp.Compare(a.Chain, b.Chain)
		}
		return cmp.Compare(a.Prio, b.Prio)
	})
	return c, nil
}

// Install implements dataplane.HW: the pass entries of the accept rules
// the rule overlaps go in first (if they are not there), then the rule's
// entries as one batch; if any fails, the ones that went in are removed
// again.
func (p *Path) Install(ctx context.Context, r *rule.Rule, set *rule.Set) error {
	res, sh, err := p.compile(r, set)
	if err != nil {
		return err
	}
	// Room for the drop and the pass entries still missing, together, so a
	// drop that does not fit leaves no pass entry behind.
	all := res
	all.Entries, all.Masks = slices.Clone(res.Entries), slices.Clone(res.Masks)
	for _, a := range sh {
		p.mu.Lock()
		_, have := p.pass[p.Key(a)]
		p.mu.Unlock()
		if pr, _ := p.passFor(a); !have && pr.Offloadable {
			all.Entries = append(all.Entries, pr.Entries...)
			all.Masks = append(all.Masks, pr.Masks...)
		}
	}
	if err := p.fits(ctx, r.ID, &all); err != nil {
		return err
	}
	for _, a := range sh {
		if err := p.ensurePass(ctx, a); err != nil {
			var he *dataplane.HWError
			if errors.As(err, &he) {
				return &dataplane.HWError{Rule: r.ID, Kind: he.Kind, Detail: fmt.Sprintf("pass entries for accept rule %s: %s", a.ID, he.Detail), Err: he.Err}
			}
			return err
		}
	}
	if err := p.fits(ctx, r.ID, &res); err != nil {
		return err
	}
	done, err := p.installAll(ctx, r.ID, res.Entries)
	if err != nil {
		return err
	}
	var ks []string
	for _, a := range sh {
		ks = append(ks, p.Key(a))
	}
	p.mu.Lock()
	p.countLocked(p.rules[p.Key(r)], -1)
	p.rules[p.Key(r)] = done
	p.countLocked(done, 1)
	p.needs[p.Key(r)] = ks
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
	var orphans []string
	p.countLocked(p.rules[key], -1)
	p.countLocked(left, 1)
	if len(left) == 0 {
		delete(p.rules, key)
		// Pass entries only this drop relied on go too (never while drops
		// read back from the device are not yet matched to rules).
		for _, ak := range p.needs[key] {
			if !p.needsUnknown && !p.neededLocked(ak, key) {
				orphans = append(orphans, ak)
			}
		}
		delete(p.needs, key)
	} else {
		p.rules[key] = left
	}
	p.mu.Unlock()
	if first != nil {
		return hwErr(key, first)
	}
	for _, ak := range orphans {
		if err := p.removePass(ctx, ak); err != nil {
			return err
		}
	}
	return nil
}

// neededLocked reports whether a drop other than except relies on accept
// key ak's pass entries; the caller holds p.mu.
func (p *Path) neededLocked(ak, except string) bool {
	for k, ks := range p.needs {
		if k != except && slices.Contains(ks, ak) {
			return true
		}
	}
	return false
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
	pass := map[string][]offload.Entry{}
	var keys []string
	for i := range dump {
		e := dump[i].Entry
		if !p.cfg.Owner.Owns(&e) {
			continue
		}
		h := e.Cookie.RuleHash()
		k := hex.EncodeToString(h[:])
		if e.Pass {
			pass[k] = append(pass[k], e) // an accept rule's, kept by SyncAccepts
			continue
		}
		if found[k] == nil {
			keys = append(keys, k)
		}
		found[k] = append(found[k], e)
	}
	// The device is the truth: rules it no longer holds (a flushed table,
	// a deleted qdisc) are forgotten, so they count against no budget.
	p.mu.Lock()
	p.rules = found
	p.pass = pass
	p.capOK = false
	p.needs = map[string][]string{}
	p.needsUnknown = len(found) > 0
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

// Stats implements dataplane.HW. The map may be the one the last call
// returned (no counter moved): read it, do not write it.
func (p *Path) Stats(ctx context.Context) (map[string]dataplane.Counter, error) {
	st, err := p.b.Stats(ctx)
	if err != nil {
		return nil, hwErr("", err)
	}
	p.statsMu.Lock()
	defer p.statsMu.Unlock()
	if p.statsOut != nil && slices.Equal(st, p.statsIn) {
		return p.statsOut, nil
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
	p.statsIn, p.statsOut = st, out
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
