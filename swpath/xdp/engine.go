//go:build linux

package xdp

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/scrubd/scrubd/swpath/rule"
)

// Mode says what the program does with a packet that passes.
type Mode uint32

const (
	// Host passes to the local stack (XDP_PASS).
	Host Mode = 0
	// Inline redirects to the peer port (XDP_REDIRECT through a devmap).
	Inline Mode = 1
)

// Verdict indexes the per-verdict counters.
type Verdict int

const (
	NotIP  Verdict = iota // not an IP packet: passed, no rule can match
	Passed                // IP, no rule matched
	Dropped
	Accepted // an accept (allow-list) rule decided
	numVerdicts
)

// redirectFailed is the verdicts map slot after the verdicts (V_REDIRFAIL):
// Passed packets of Inline mode that found no peer; see RedirectFailures.
const redirectFailed = numVerdicts

func (v Verdict) String() string {
	return [...]string{"not-ip", "passed", "dropped", "accepted"}[v]
}

// Counter is a packet and byte count summed over CPUs.
type Counter struct{ Packets, Bytes uint64 }

// Options configure New.
type Options struct {
	Mode Mode
	// Peer is the interface index passing traffic is redirected to in Inline
	// mode, resolved in the network namespace of the thread calling New.
	Peer int
	// PinPath is a directory on a bpffs (no dots in its name: bpffs refuses
	// them) where maps and the link are pinned;
	// an Engine created with the same PinPath takes them over. Empty: no
	// pinning.
	PinPath string
	// MaxRules is the size of the per-rule counter map (DefaultMaxRules if 0).
	MaxRules int
	// Trace loads the program for Decide (dry runs through
	// BPF_PROG_TEST_RUN): its return value then carries the verdict and the
	// deciding rule. A traced Engine cannot be attached or pinned.
	Trace bool
}

// Engine is a loaded XDP program and its maps. Its methods are safe for
// concurrent use.
type Engine struct {
	mu       sync.Mutex
	opts     Options
	prog     *ebpf.Program
	globals  *ebpf.Map // the program's .bss: generation word and port heads
	mem      *ebpf.Memory
	activeAt int64        // offset of the generation word in mem
	portsAt  int64        // offset of the port heads in mem
	bloomAt  int64        // offset of the Bloom filter in mem
	outer    [3]*ebpf.Map // masks, keys, ents
	stats    *ebpf.Map
	verdicts *ebpf.Map
	txPort   *ebpf.Map
	slotMap  *ebpf.Map          // pinned rule id -> counter slot, Go side only
	links    map[int]attachment // by ifindex

	active   uint32 // generation in force
	set      *rule.Set
	setSlots []uint32
	bySlot   map[uint32]int // slot -> index in set
	slots    map[string]uint32
	free     []uint32 // slots free for reuse now
	pending  []uint32 // slots freed by the last Replace, reusable after the next
	next     uint32   // next never-used slot
	ncpu     int
}

// AttachMode is how the program is attached.
type AttachMode string

const (
	Native  AttachMode = "native"
	Generic AttachMode = "generic"
)

// activeFast is bit 1 of the generation word (ACTIVE_FAST).
const activeFast = 2

// globalsPin is the pinned name of the program's .bss map (bpffs refuses
// names with dots, so it is pinned by hand, not by name).
const globalsPin = "globals"

const idLen = 64 // rule.ValidID allows 64 characters

var mapNames = []string{"masks", "keys", "ents", "rule_stats", "verdicts", "tx_port"}

// New loads the program and its maps. With Options.PinPath set, maps already
// pinned there are reused (with their counters and the rule set in force),
// and new ones are pinned.
func New(opts Options) (*Engine, error) {
	if opts.MaxRules == 0 {
		opts.MaxRules = DefaultMaxRules
	}
	spec, err := loadScrub()
	if err != nil {
		return nil, fmt.Errorf("xdp: load spec: %w", err)
	}
	spec.Maps["rule_stats"].MaxEntries = uint32(opts.MaxRules)
	if err := spec.Variables["mode"].Set(uint32(opts.Mode)); err != nil {
		return nil, fmt.Errorf("xdp: set mode: %w", err)
	}
	if opts.Trace {
		if opts.PinPath != "" {
			return nil, errors.New("xdp: a traced engine cannot be pinned")
		}
		if err := spec.Variables["trace"].Set(uint32(1)); err != nil {
			return nil, fmt.Errorf("xdp: set trace: %w", err)
		}
	}
	var copts ebpf.CollectionOptions
	if opts.PinPath != "" {
		if err := os.MkdirAll(opts.PinPath, 0o700); err != nil {
			return nil, fmt.Errorf("xdp: pin path: %w", err)
		}
		for _, n := range mapNames {
			spec.Maps[n].Pinning = ebpf.PinByName
		}
		copts.Maps.PinPath = opts.PinPath
		// The globals of a previous agent: its generation word and port
		// heads, which go with the tables pinned beside them.
		g, err := loadPinnedGlobals(opts.PinPath)
		if err != nil {
			return nil, err
		}
		if g != nil {
			defer g.Close() // the collection holds its own reference
			copts.MapReplacements = map[string]*ebpf.Map{".bss": g}
		}
	}
	coll, err := ebpf.NewCollectionWithOptions(spec, copts)
	if err != nil {
		var ve *ebpf.VerifierError
		if errors.As(err, &ve) {
			return nil, fmt.Errorf("xdp: load: %+v", ve)
		}
		if errors.Is(err, ebpf.ErrMapIncompatible) {
			return nil, fmt.Errorf("xdp: load: maps pinned under %s have another layout (an older scrubd?): unpin them or use another pin path: %w", opts.PinPath, err)
		}
		return nil, fmt.Errorf("xdp: load: %w", err)
	}
	ncpu, err := ebpf.PossibleCPU()
	if err != nil {
		coll.Close()
		return nil, err
	}
	e := &Engine{
		opts: opts, prog: coll.Programs["scrub"], globals: coll.Maps[".bss"],
		activeAt: int64(spec.Variables["active"].Offset), portsAt: int64(spec.Variables["ports"].Offset),
		bloomAt:  int64(spec.Variables["bloom"].Offset),
		outer:    [3]*ebpf.Map{coll.Maps["masks"], coll.Maps["keys"], coll.Maps["ents"]},
		stats:    coll.Maps["rule_stats"],
		verdicts: coll.Maps["verdicts"], txPort: coll.Maps["tx_port"],
		slots: map[string]uint32{}, ncpu: ncpu, links: map[int]attachment{},
	}
	// The collection's objects are now owned by e.
	delete(coll.Programs, "scrub")
	for _, n := range append(mapNames, ".bss") {
		delete(coll.Maps, n)
	}
	coll.Close()
	if e.mem, err = e.globals.Memory(); err != nil {
		e.Close()
		return nil, fmt.Errorf("xdp: map the program's globals: %w", err)
	}
	if err := e.init(); err != nil {
		e.Close()
		return nil, err
	}
	return e, nil
}

func (e *Engine) init() error {
	slotSpec := &ebpf.MapSpec{Name: "scrub_slots", Type: ebpf.Hash, KeySize: idLen, ValueSize: 4,
		MaxEntries: uint32(e.opts.MaxRules)}
	var mopts ebpf.MapOptions
	if e.opts.PinPath != "" {
		slotSpec.Pinning = ebpf.PinByName
		mopts.PinPath = e.opts.PinPath
	}
	var err error
	if e.slotMap, err = ebpf.NewMapWithOptions(slotSpec, mopts); err != nil {
		return fmt.Errorf("xdp: slot map: %w", err)
	}
	if e.opts.PinPath != "" {
		// Pinned unless taken over from the pin (IsPinned does not
		// know that case).
		p := filepath.Join(e.opts.PinPath, globalsPin)
		if _, err := os.Stat(p); errors.Is(err, os.ErrNotExist) {
			if err := e.globals.Pin(p); err != nil {
				return fmt.Errorf("xdp: pin globals: %w", err)
			}
		}
	}
	// The generation in force (a previous agent's, with pinned maps).
	var w [4]byte
	if _, err := e.mem.ReadAt(w[:], e.activeAt); err != nil {
		return fmt.Errorf("xdp: read the generation word: %w", err)
	}
	e.active = binary.NativeEndian.Uint32(w[:]) & 1
	// Take over the slots of a previous agent (pinned maps).
	var id [idLen]byte
	var slot uint32
	used := map[uint32]bool{}
	it := e.slotMap.Iterate()
	for it.Next(&id, &slot) {
		e.slots[idString(id)] = slot
		used[slot] = true
		e.next = max(e.next, slot+1)
	}
	if err := it.Err(); err != nil {
		return fmt.Errorf("xdp: read slots: %w", err)
	}
	// Slots a previous agent freed hold counts that Verdicts must still
	// sum (until retired): count them as used, free for reuse.
	all, err := e.readSlotsBy(uint32(e.opts.MaxRules))
	if err != nil {
		return err
	}
	for s := len(all) - 1; s >= int(e.next); s-- {
		if all[s][0].Packets+all[s][1].Packets != 0 {
			e.next = uint32(s) + 1
			break
		}
	}
	for s := uint32(0); s < e.next; s++ {
		if !used[s] {
			e.free = append(e.free, s)
		}
	}
	if e.opts.Mode == Inline {
		if err := e.txPort.Put(uint32(0), uint32(e.opts.Peer)); err != nil {
			return fmt.Errorf("xdp: devmap peer ifindex %d: %w", e.opts.Peer, err)
		}
	}
	return nil
}

func idKey(s string) [idLen]byte {
	var b [idLen]byte
	copy(b[:], s)
	return b
}

func idString(b [idLen]byte) string {
	n := 0
	for n < idLen && b[n] != 0 {
		n++
	}
	return string(b[:n])
}

// Program returns the XDP program (owned by e).
func (e *Engine) Program() *ebpf.Program { return e.prog }

// Replace compiles s and puts it in force atomically: the inactive
// generation's maps are built from scratch, then one word flips. On error
// (a *LimitError for a rule that does not fit) the set in force stays.
func (e *Engine) Replace(s *rule.Set) error {
	s = s.Compact() // the program knows no holes: the rules alone
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(s.Rules) > e.opts.MaxRules {
		return &LimitError{RuleID: s.Rules[e.opts.MaxRules].ID, Limit: "MaxRules", Max: e.opts.MaxRules,
			Need: len(s.Rules), Reason: "more rules than counter slots"}
	}
	// Slots: keep a rule id's slot; reuse slots only a full generation
	// after they were freed, so an in-flight packet of the old set never
	// counts into a new rule.
	seen := make(map[string]bool, len(s.Rules))
	slots := make([]uint32, len(s.Rules))
	next := e.next
	avail := e.free
	for i := range s.Rules {
		id := s.Rules[i].ID
		if seen[id] {
			return fmt.Errorf("xdp: duplicate rule id %q", id)
		}
		seen[id] = true
		if sl, ok := e.slots[id]; ok {
			slots[i] = sl
			continue
		}
		switch {
		case len(avail) > 0:
			slots[i], avail = avail[0], avail[1:]
		case int(next) < e.opts.MaxRules:
			slots[i] = next
			next++
		default:
			return &LimitError{RuleID: id, Limit: "MaxRules", Max: e.opts.MaxRules, Need: e.opts.MaxRules + 1,
				Reason: "no free counter slot (slots of removed rules are reused one replacement later)"}
		}
	}
	t, err := compile(s, slots)
	if err != nil {
		return err
	}
	// Zero the counters of slots handed to new ids, retiring what a slot
	// used before holds into the verdict counters (see retire).
	zero := make([]rctr, e.ncpu)
	var retired [2][]ctr
	for i := range s.Rules {
		if _, ok := e.slots[s.Rules[i].ID]; !ok {
			if slots[i] < e.next {
				if err := e.retire(slots[i], &retired); err != nil {
					return err
				}
			}
			if err := e.stats.Put(slots[i], zero); err != nil {
				return fmt.Errorf("xdp: zero counters of %q: %w", s.Rules[i].ID, err)
			}
		}
	}
	if err := e.addRetired(&retired); err != nil {
		return err
	}
	gen := 1 - e.active
	inner, err := e.build(t)
	if err != nil {
		return err
	}
	for i, m := range inner {
		err := e.outer[i].Put(gen, m)
		m.Close() // the outer map holds its own reference
		if err != nil {
			for _, m := range inner[i+1:] {
				m.Close()
			}
			return fmt.Errorf("xdp: install generation %d: %w", gen, err)
		}
	}
	// The port heads and the Bloom filter are rewritten in place, in the
	// inactive halves of their arrays. A packet that read the generation
	// word before the last flip may still read these halves; the updates of
	// the outer arrays above each wait for an RCU grace period (the kernel
	// synchronizes after every update of an array of maps), and every XDP
	// program runs inside an RCU read-side section, so no such packet is
	// left once they return.
	if err := e.fillPorts(gen, t); err != nil {
		return err
	}
	if err := e.fillBloom(gen, t); err != nil {
		return err
	}
	// The flip: the program's generation word, the generation and whether
	// its fast path may decide, both in the low byte. It is pinned with the
	// tables, so a restarted agent goes on with the same generation.
	word := gen
	if t.fastBound() != 0 {
		word |= activeFast
	}
	if err := e.setActive(word); err != nil {
		return err
	}
	e.active = gen

	// Bookkeeping after the flip.
	newSlots := make(map[string]uint32, len(s.Rules))
	for i := range s.Rules {
		newSlots[s.Rules[i].ID] = slots[i]
	}
	var freed []uint32
	for id, sl := range e.slots {
		if _, ok := newSlots[id]; !ok {
			freed = append(freed, sl)
			k := idKey(id)
			if err := e.slotMap.Delete(&k); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
				return fmt.Errorf("xdp: slot map: %w", err)
			}
		}
	}
	for id, sl := range newSlots {
		if old, ok := e.slots[id]; ok && old == sl {
			continue
		}
		k := idKey(id)
		if err := e.slotMap.Put(&k, sl); err != nil {
			return fmt.Errorf("xdp: slot map: %w", err)
		}
	}
	e.free = append(avail, e.pending...)
	e.pending = freed
	e.next = next
	e.slots = newSlots
	e.set = s
	e.setSlots = slots
	e.bySlot = make(map[uint32]int, len(slots))
	for i, sl := range slots {
		e.bySlot[sl] = i
	}
	return nil
}

// setActive writes the program's generation word in the memory-mapped
// globals: a 4-byte copy of which only the low byte ever changes, so a
// reader sees the old word or the new one even if the copy is split.
func (e *Engine) setActive(word uint32) error {
	var w [4]byte
	binary.NativeEndian.PutUint32(w[:], word)
	if _, err := e.mem.WriteAt(w[:], e.activeAt); err != nil {
		return fmt.Errorf("xdp: flip to generation %d: %w", word&1, err)
	}
	return nil
}

// fillPorts writes generation gen's half of the port heads (every port, see
// portHeads) in the memory-mapped globals.
func (e *Engine) fillPorts(gen uint32, t *tables) error {
	heads := t.portHeads()
	buf := make([]byte, 0, len(heads)*pentSize)
	for _, h := range heads {
		buf = binary.NativeEndian.AppendUint32(buf, h.Rule)
		buf = binary.NativeEndian.AppendUint32(buf, h.Rank)
		buf = binary.NativeEndian.AppendUint32(buf, h.Ent)
		buf = append(buf, h.Action, h.Need, h.Proto, h.Flags)
	}
	if _, err := e.mem.WriteAt(buf, e.portsAt+int64(gen)*int64(len(buf))); err != nil {
		return fmt.Errorf("xdp: fill ports of generation %d: %w", gen, err)
	}
	return nil
}

// fillBloom writes generation gen's half of the Bloom filter over the keys
// in the memory-mapped globals.
func (e *Engine) fillBloom(gen uint32, t *tables) error {
	buf := make([]byte, 0, bloomWords*8)
	for _, w := range t.bloom() {
		buf = binary.NativeEndian.AppendUint64(buf, w)
	}
	if _, err := e.mem.WriteAt(buf, e.bloomAt+int64(gen)*int64(len(buf))); err != nil {
		return fmt.Errorf("xdp: fill the Bloom filter of generation %d: %w", gen, err)
	}
	return nil
}

// loadPinnedGlobals returns the globals map pinned under dir, or nil when
// there is none. Tables pinned by an older layout, whose generation and port
// heads it cannot take over, are an error.
func loadPinnedGlobals(dir string) (*ebpf.Map, error) {
	p := filepath.Join(dir, globalsPin)
	m, err := ebpf.LoadPinnedMap(p, nil)
	switch {
	case err == nil:
		return m, nil
	case !errors.Is(err, os.ErrNotExist):
		return nil, fmt.Errorf("xdp: load pinned %s: %w", p, err)
	}
	// Maps only older layouts pinned: "ports" (the port heads, before they
	// became globals) and "cfg" (the generation word and attach mode).
	for _, old := range []string{"ports", "cfg"} {
		if _, err := os.Stat(filepath.Join(dir, old)); err == nil {
			return nil, fmt.Errorf("xdp: maps pinned under %s are an older scrubd's layout (%s, no %s): unpin them or use another pin path", dir, old, globalsPin)
		}
	}
	return nil, nil
}

// build creates the three inner maps of one generation.
func (e *Engine) build(t *tables) ([3]*ebpf.Map, error) {
	var out [3]*ebpf.Map
	fail := func(err error) ([3]*ebpf.Map, error) {
		for _, m := range out {
			if m != nil {
				m.Close()
			}
		}
		return [3]*ebpf.Map{}, err
	}
	specs := [3]*ebpf.MapSpec{
		{Name: "scrub_masks", Type: ebpf.Array, KeySize: 4, ValueSize: maskSize * MaxMasks, MaxEntries: 1},
		{Name: "scrub_keys", Type: ebpf.Hash, KeySize: tupleSize, ValueSize: entSize, MaxEntries: uint32(max(len(t.keys), 1))},
		{Name: "scrub_ents", Type: ebpf.Array, KeySize: 4, ValueSize: entSize, MaxEntries: uint32(max(len(t.ents), 1)),
			Flags: unix.BPF_F_INNER_MAP},
	}
	for i, s := range specs {
		m, err := ebpf.NewMap(s)
		if err != nil {
			return fail(fmt.Errorf("xdp: create %s (%d entries): %w", s.Name, s.MaxEntries, err))
		}
		out[i] = m
	}
	masks := t.maskArray()
	if err := out[0].Put(uint32(0), &masks); err != nil {
		return fail(fmt.Errorf("xdp: fill masks: %w", err))
	}
	if len(t.keys) > 0 {
		ks := make([]tuple, 0, len(t.keys))
		vs := make([]entVal, 0, len(t.keys))
		for k, v := range t.keys {
			ks = append(ks, k)
			vs = append(vs, t.ents[v.Head]) // the list's first entry itself
		}
		if _, err := out[1].BatchUpdate(ks, vs, nil); err != nil {
			return fail(fmt.Errorf("xdp: fill keys: %w", err))
		}
	}
	if len(t.ents) > 0 {
		ek := make([]uint32, len(t.ents))
		for i := range ek {
			ek[i] = uint32(i)
		}
		if _, err := out[2].BatchUpdate(ek, t.ents, nil); err != nil {
			return fail(fmt.Errorf("xdp: fill entries: %w", err))
		}
	}
	return out, nil
}

// Set returns the rule set in force (nil before the first Replace of this
// Engine).
func (e *Engine) Set() *rule.Set {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.set
}

// Counters returns the per-rule counters of the set in force, indexed like
// its Rules, with one batch read of the per-CPU map.
func (e *Engine) Counters() ([]Counter, error) {
	e.mu.Lock()
	slots := e.setSlots
	hi := uint32(0)
	for _, s := range slots {
		hi = max(hi, s+1)
	}
	e.mu.Unlock()
	all, err := e.readSlots(hi)
	if err != nil {
		return nil, err
	}
	out := make([]Counter, len(slots))
	for i, s := range slots {
		out[i] = all[s]
	}
	return out, nil
}

// retire adds the per-CPU counts of slot sl, by action, to *acc. The
// program counts a packet a rule decides only in the rule's counter (struct
// rctr), so before a slot is zeroed for a new rule its counts move into the
// Dropped and Accepted verdict slots, which the program never writes.
func (e *Engine) retire(sl uint32, acc *[2][]ctr) error {
	var per []rctr
	if err := e.stats.Lookup(sl, &per); err != nil {
		return fmt.Errorf("xdp: read counters of slot %d: %w", sl, err)
	}
	for a := range acc {
		if acc[a] == nil {
			acc[a] = make([]ctr, e.ncpu)
		}
		for cpu, v := range per {
			acc[a][cpu].Packets += v.By[a].Packets
			acc[a][cpu].Bytes += v.By[a].Bytes
		}
	}
	return nil
}

// addRetired adds acc (by action) to the Dropped and Accepted verdict slots.
func (e *Engine) addRetired(acc *[2][]ctr) error {
	for a, v := range [2]Verdict{Dropped, Accepted} {
		if acc[a] == nil {
			continue
		}
		var per []ctr
		if err := e.verdicts.Lookup(uint32(v), &per); err != nil {
			return fmt.Errorf("xdp: read verdict %s: %w", v, err)
		}
		for cpu := range per {
			per[cpu].Packets += acc[a][cpu].Packets
			per[cpu].Bytes += acc[a][cpu].Bytes
		}
		if err := e.verdicts.Put(uint32(v), per); err != nil {
			return fmt.Errorf("xdp: retire counters into verdict %s: %w", v, err)
		}
	}
	return nil
}

// readSlots sums slots [0, n) over CPUs.
func (e *Engine) readSlots(n uint32) ([]Counter, error) {
	by, err := e.readSlotsBy(n)
	if err != nil {
		return nil, err
	}
	out := make([]Counter, n)
	for i, c := range by {
		out[i] = Counter{c[0].Packets + c[1].Packets, c[0].Bytes + c[1].Bytes}
	}
	return out, nil
}

// readSlotsBy sums slots [0, n) over CPUs, by action (rctr.By).
func (e *Engine) readSlotsBy(n uint32) ([][2]Counter, error) {
	out := make([][2]Counter, n)
	if n == 0 {
		return out, nil
	}
	keys := make([]uint32, n)
	vals := make([]rctr, int(n)*e.ncpu)
	var cursor ebpf.MapBatchCursor
	got, err := e.stats.BatchLookup(&cursor, keys, vals, nil)
	if err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
		return nil, fmt.Errorf("xdp: read rule counters: %w", err)
	}
	for i := 0; i < got; i++ {
		var c [2]Counter
		for _, v := range vals[i*e.ncpu : (i+1)*e.ncpu] {
			for a := range c {
				c[a].Packets += v.By[a].Packets
				c[a].Bytes += v.By[a].Bytes
			}
		}
		out[keys[i]] = c
	}
	return out, nil
}

// RedirectFailures counts, in Inline mode, the packets that passed but could
// not be redirected because the devmap held no peer (its interface was
// removed): the program passes them to the local stack instead. Transmit
// errors after a successful redirect are the kernel's to count (ethtool -S
// of the peer, tracepoint xdp:xdp_redirect_err).
func (e *Engine) RedirectFailures() (Counter, error) {
	var out Counter
	var per []ctr
	if err := e.verdicts.Lookup(uint32(redirectFailed), &per); err != nil {
		return out, fmt.Errorf("xdp: read redirect failures: %w", err)
	}
	for _, c := range per {
		out.Packets += c.Packets
		out.Bytes += c.Bytes
	}
	return out, nil
}

// Verdicts returns the per-verdict counters, indexed by Verdict. Dropped
// and Accepted are summed from the rule counters (every slot ever used, by
// action) plus the counts retired from reused slots.
func (e *Engine) Verdicts() ([numVerdicts]Counter, error) {
	var out [numVerdicts]Counter
	// Under the lock: Replace moves counts from slots into the verdict
	// map, which must not be seen in both places.
	e.mu.Lock()
	defer e.mu.Unlock()
	all, err := e.readSlotsBy(e.next)
	if err != nil {
		return out, err
	}
	for _, c := range all {
		for a, v := range [2]Verdict{Dropped, Accepted} {
			out[v].Packets += c[a].Packets
			out[v].Bytes += c[a].Bytes
		}
	}
	var per []ctr
	for v := range out {
		if err := e.verdicts.Lookup(uint32(v), &per); err != nil {
			return out, fmt.Errorf("xdp: read verdict %s: %w", Verdict(v), err)
		}
		for _, c := range per {
			out[v].Packets += c.Packets
			out[v].Bytes += c.Bytes
		}
	}
	return out, nil
}

// Attach attaches the program to ifindex in native mode, or, when native is
// refused and allowGeneric is set, in generic mode; the mode used is
// returned. One Engine may be attached to several interfaces: they share the
// rule set and the counters. With a link pinned for ifindex by an earlier
// agent the program is swapped into that link instead, so filtering never
// stops. Links are pinned under PinPath when set, one per interface, named
// for the interface index and the mode ("link-7-native").
func (e *Engine) Attach(ifindex int, allowGeneric bool) (AttachMode, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if a, ok := e.links[ifindex]; ok {
		return a.mode, fmt.Errorf("xdp: already attached to ifindex %d (%s)", ifindex, a.mode)
	}
	if e.opts.Trace {
		return "", errors.New("xdp: a traced engine cannot be attached")
	}
	if e.opts.PinPath != "" {
		for _, mode := range []AttachMode{Native, Generic} {
			lp := e.linkPin(ifindex, mode)
			l, err := link.LoadPinnedLink(lp, nil)
			if err != nil {
				continue
			}
			if err := l.Update(e.prog); err != nil {
				if !errors.Is(err, unix.ENOLINK) {
					l.Close()
					return "", fmt.Errorf("xdp: update pinned link %s: %w", lp, err)
				}
				// The interface of that link is gone: attach afresh.
				l.Unpin()
				l.Close()
				continue
			}
			e.links[ifindex] = attachment{l, mode}
			return mode, nil
		}
	}
	l, err := link.AttachXDP(link.XDPOptions{Program: e.prog, Interface: ifindex, Flags: link.XDPDriverMode})
	mode := Native
	if err != nil {
		if !allowGeneric {
			return "", fmt.Errorf("xdp: native attach to ifindex %d: %w", ifindex, err)
		}
		var gerr error
		l, gerr = link.AttachXDP(link.XDPOptions{Program: e.prog, Interface: ifindex, Flags: link.XDPGenericMode})
		if gerr != nil {
			return "", fmt.Errorf("xdp: attach to ifindex %d: native: %v; generic: %w", ifindex, err, gerr)
		}
		mode = Generic
	}
	if e.opts.PinPath != "" {
		if err := l.Pin(e.linkPin(ifindex, mode)); err != nil {
			l.Close()
			return "", fmt.Errorf("xdp: pin link: %w", err)
		}
	}
	e.links[ifindex] = attachment{l, mode}
	return mode, nil
}

// attachment is one interface's link.
type attachment struct {
	l    link.Link
	mode AttachMode
}

// linkPin is where the link of ifindex in mode is pinned: the name says the
// mode to the next agent (bpffs holds no plain files).
func (e *Engine) linkPin(ifindex int, mode AttachMode) string {
	return filepath.Join(e.opts.PinPath, fmt.Sprintf("link-%d-%s", ifindex, mode))
}

// Detach removes the program from every interface it is attached to (and
// their pinned links).
func (e *Engine) Detach() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	var errs []error
	for ifindex, a := range e.links {
		if e.opts.PinPath != "" {
			if err := a.l.Unpin(); err != nil && !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, fmt.Errorf("xdp: unpin link of ifindex %d: %w", ifindex, err))
				continue // stays attached and known: a later Detach retries
			}
		}
		if err := a.l.Close(); err != nil {
			errs = append(errs, fmt.Errorf("xdp: detach from ifindex %d: %w", ifindex, err))
		}
		delete(e.links, ifindex)
	}
	return errors.Join(errs...)
}

// Unpin removes every pinned object of e (the program stays attached only
// while e holds its link).
func (e *Engine) Unpin() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	var errs []error
	for _, m := range e.maps() {
		if m != nil && m.IsPinned() {
			errs = append(errs, m.Unpin())
		}
	}
	if e.opts.PinPath != "" {
		// Taken over from a pin, the globals map does not know its path.
		if err := os.Remove(filepath.Join(e.opts.PinPath, globalsPin)); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	for _, a := range e.links {
		if err := a.l.Unpin(); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (e *Engine) maps() []*ebpf.Map {
	return []*ebpf.Map{e.outer[0], e.outer[1], e.outer[2], e.globals, e.stats, e.verdicts, e.txPort, e.slotMap}
}

// Close releases e's file descriptors. A pinned link keeps the program
// attached and its pinned maps alive for the next agent; without pinning the
// program is detached.
func (e *Engine) Close() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	var errs []error
	for ifindex, a := range e.links {
		errs = append(errs, a.l.Close())
		delete(e.links, ifindex)
	}
	for _, m := range e.maps() {
		if m != nil {
			errs = append(errs, m.Close())
		}
	}
	if e.prog != nil {
		errs = append(errs, e.prog.Close())
	}
	return errors.Join(errs...)
}
