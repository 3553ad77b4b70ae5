package sim

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/scrubd/scrubd/offload"
	"github.com/scrubd/scrubd/swpath/packet"
	"github.com/scrubd/scrubd/swpath/rule"
)

// Config configures a NIC. Zero fields take defaults.
type Config struct {
	// Caps are the device's capabilities; the zero value means
	// offload.MLX5(DefaultEntries).
	Caps offload.Capabilities
	// Clock drives pacing and counter refresh; nil means RealClock.
	Clock Clock
	// Dev names the device in errors; "sim" by default.
	Dev string
}

// DefaultEntries is the default entry capacity.
const DefaultEntries = 4096

// counter is one entry's hardware counter, shared by the writer's state and
// every lookup snapshot that holds the entry.
type counter struct {
	packets, bytes atomic.Uint64
	// guarded by NIC.statsMu: the values at the last refresh, and the
	// refresh time at which packets was last seen to change (mlx5 sets
	// lastuse the same way in its periodic bulk query).
	seen    uint64
	lastUse time.Time
}

type slot struct {
	entry offload.Entry
	ctr   *counter
	group *group
}

type group struct {
	mask  offload.Mask
	size  int
	used  int
	large bool
}

type table struct {
	id      offload.Table
	groups  []*group
	slots   map[uint32]*slot         // by handle
	byMatch map[offload.Match]uint32 // match -> handle
	next    uint32
	// reserved counts the slots this table's groups reserve; a table has
	// MaxEntries slots (mlx5 max_fte).
	reserved int
}

// lookup is an immutable snapshot the datapath reads.
type lookup struct {
	tables []ltable // chain 0, by priority
}

type ltable struct {
	id     offload.Table
	groups []lgroup
}

type lgroup struct {
	mask    offload.Mask
	entries map[key]*lslot
	// delta holds the changes since entries was last built: an entry
	// added or replaced, or nil for one removed. It is checked before
	// entries and folded into a new entries map once it outgrows
	// deltaMax, so one install copies a small map, not the group.
	delta map[key]*lslot
	// size counts the group's entries with delta applied.
	size int
	// A packet whose family or masked protocol no entry of the group has
	// cannot hit it: two bit tests spare the hash of a 48-byte key. Groups
	// are ordered by their lowest handle, so once a hit beats the next
	// group's lowest handle no later group can win. Between folds of the
	// delta these are bounds (a removal leaves its bits and a lower
	// minHandle standing), which keeps both tests safe.
	fams      uint64
	protos    [4]uint64
	minHandle uint32
}

// get returns the group's entry with key k.
func (g *lgroup) get(k *key) (*lslot, bool) {
	if len(g.delta) > 0 {
		if s, ok := g.delta[*k]; ok {
			return s, s != nil
		}
	}
	s, ok := g.entries[*k]
	return s, ok
}

// deltaMax is how many changes a group's delta holds before they are
// folded into its entries: the square root of the group's size (at least
// 16), so an install or removal costs O(sqrt n) map work amortized (a copy
// of the delta each time, a copy of the group every sqrt n changes) and a
// packet at most one extra lookup.
func deltaMax(size int) int {
	d := 16
	for d*d < size {
		d *= 2
	}
	return d
}

func (g *lgroup) admits(k *offload.PacketKey) bool {
	p := uint8(0)
	if g.mask.Proto {
		p = k.Proto
	}
	return g.fams&(1<<(uint8(k.Family)&63)) != 0 && g.protos[p>>6]&(1<<(p&63)) != 0
}

// key packs the values of a masked match into 48 bytes without padding, so
// the map hashes it in one pass. Within a group every mask is the same, so
// values alone identify an entry. pack (an entry's match) and packKey (a
// packet's key under a mask shape) are generated from rule.MatchFields
// into simkey_gen.go.
type key [6]uint64

//go:generate go run github.com/scrubd/scrubd/internal/keygen/cmd/keygen -key sim -o simkey_gen.go

type lslot struct {
	handle uint32
	cookie offload.Cookie
	ctr    *counter
	pass   bool
}

// NIC is a simulated flow table. It is safe for concurrent use; Process
// never blocks.
type NIC struct {
	caps  offload.Capabilities
	clock Clock
	dev   string

	snap atomic.Pointer[lookup]
	gone atomic.Bool

	mu        sync.Mutex // serializes writers; guards the fields below
	tables    map[offload.Table]*table
	entries   int // installed entries, device-wide (at most MaxEntries)
	busyUntil time.Time
	// pub holds the lookup groups of the last published snapshot, per
	// chain-0 table and mask shape; they are immutable once published.
	// pending lists the changes made since, per table and shape, so a
	// publish copies only the groups it touches (see publishLocked).
	pub     map[offload.Table]map[offload.Mask]*lgroup
	pending map[tableMask][]change

	statsMu     sync.Mutex
	statsAt     time.Time
	statsCache  []offload.Stats
	statsLoaded bool

	flushMu sync.Mutex
	onFlush []func()
}

// tableMask names one lookup group: a chain-0 table and a mask shape.
type tableMask struct {
	t offload.Table
	m offload.Mask
}

// change is one pending lookup change: s set adds (or replaces) the entry
// with key k, s nil removes the entry with key k and handle h.
type change struct {
	k key
	s *lslot
	h uint32
}

var _ offload.Backend = (*NIC)(nil)

// New returns an empty simulated NIC.
func New(cfg Config) *NIC {
	n := &NIC{caps: cfg.Caps, clock: cfg.Clock, dev: cfg.Dev, tables: map[offload.Table]*table{},
		pub: map[offload.Table]map[offload.Mask]*lgroup{}}
	if n.caps.Keys == 0 {
		n.caps = offload.MLX5(DefaultEntries)
	}
	if n.clock == nil {
		n.clock = RealClock{}
	}
	if n.dev == "" {
		n.dev = "sim"
	}
	n.snap.Store(&lookup{})
	return n
}

// Capabilities returns the configured capabilities.
func (n *NIC) Capabilities(ctx context.Context) (offload.Capabilities, error) {
	if n.gone.Load() {
		return offload.Capabilities{}, n.goneErr("capabilities")
	}
	return n.caps, nil
}

func (n *NIC) goneErr(op string) error {
	return offload.NewError(op, n.dev, "", offload.KindDeviceGone, "Cannot find device \""+n.dev+"\"")
}

// SetGone simulates the device disappearing (true) or coming back (false).
// A gone device holds no entries.
func (n *NIC) SetGone(gone bool) {
	if gone {
		n.Flush()
	}
	n.gone.Store(gone)
}

// Flush removes every entry at once, as OVS deleting the ingress qdisc does,
// then calls the OnFlush callbacks (the qdisc-deleted notification a
// monitor would see).
func (n *NIC) Flush() {
	n.mu.Lock()
	n.tables = map[offload.Table]*table{}
	n.entries = 0
	n.pub = map[offload.Table]map[offload.Mask]*lgroup{}
	n.pending = nil
	n.snap.Store(&lookup{})
	n.mu.Unlock()
	n.flushMu.Lock()
	fs := slices.Clone(n.onFlush)
	n.flushMu.Unlock()
	for _, f := range fs {
		f()
	}
}

// OnFlush registers f to be called after every Flush (and SetGone(true),
// which flushes), on the flushing goroutine; f must not block.
func (n *NIC) OnFlush(f func()) {
	n.flushMu.Lock()
	n.onFlush = append(n.onFlush, f)
	n.flushMu.Unlock()
}

func (n *NIC) largeSize() int {
	if n.caps.MaxEntries == 0 {
		return 1 << 30
	}
	if n.caps.LargeGroups == 0 {
		return n.caps.MaxEntries
	}
	return max(n.caps.MaxEntries/(n.caps.LargeGroups+1), 1)
}

func (n *NIC) entryErr(op string, e *offload.Entry, k offload.ErrorKind, extack string) *offload.EntryError {
	return offload.NewError(op, n.dev, fmt.Sprintf("%s chain %d prio %d [%s]", e.Cookie, e.Chain, e.Prio, e.Match.String()), k, extack)
}

// installLocked installs one entry; the caller holds n.mu.
func (n *NIC) installLocked(e offload.Entry) (uint32, error) {
	e.Match.Normalize()
	if err := n.caps.Check(&e.Match); err != nil {
		ee := err.(*offload.EntryError)
		out := n.entryErr("install", &e, offload.KindUnsupported, ee.Extack)
		out.Missing = ee.Missing
		return 0, out
	}
	if e.Chain > n.caps.MaxChain {
		return 0, n.entryErr("install", &e, offload.KindUnsupported, "Requested chain is out of supported range")
	}
	if e.Prio == 0 || e.Prio > n.caps.MaxPrio {
		return 0, n.entryErr("install", &e, offload.KindUnsupported, "Requested priority is out of supported range")
	}
	t := n.tables[e.Table()]
	if t == nil {
		t = &table{id: e.Table(), slots: map[uint32]*slot{}, byMatch: map[offload.Match]uint32{}}
		n.tables[e.Table()] = t
	}
	if _, dup := t.byMatch[e.Match]; dup {
		return 0, n.entryErr("install", &e, offload.KindExists, "Filter already exists")
	}
	if e.Handle != 0 {
		if _, used := t.slots[e.Handle]; used {
			return 0, n.entryErr("install", &e, offload.KindExists, "Filter handle already in use")
		}
	}
	if n.caps.MaxEntries > 0 && n.entries >= n.caps.MaxEntries {
		return 0, n.entryErr("install", &e, offload.KindNoSpace, fmt.Sprintf("flow table full (%d entries)", n.caps.MaxEntries))
	}
	mask := e.Match.Mask()
	var g *group
	for _, x := range t.groups {
		if x.mask == mask && x.used < x.size {
			g = x
			break
		}
	}
	if g == nil {
		large := 0
		for _, x := range t.groups {
			if x.large {
				large++
			}
		}
		size, isLarge := 1, false
		if n.caps.LargeGroups == 0 || large < n.caps.LargeGroups {
			size, isLarge = n.largeSize(), true
		}
		if n.caps.LargeGroups == 0 {
			size = 1 << 30 // no group model: one group per shape, unbounded
		} else if n.caps.MaxEntries > 0 && t.reserved+size > n.caps.MaxEntries {
			return 0, n.entryErr("install", &e, offload.KindNoSpace,
				fmt.Sprintf("no room for a flow group of %d entries (%d of %d slots reserved by %d groups in chain %d prio %d)",
					size, t.reserved, n.caps.MaxEntries, len(t.groups), e.Chain, e.Prio))
		}
		g = &group{mask: mask, size: size, large: isLarge}
		t.groups = append(t.groups, g)
		if n.caps.LargeGroups > 0 {
			t.reserved += size
		}
	}
	h := e.Handle
	if h == 0 {
		for {
			t.next++
			if t.next == 0 {
				t.next = 1
			}
			if _, used := t.slots[t.next]; !used {
				break
			}
		}
		h = t.next
	}
	e.Handle = h
	g.used++
	s := &slot{entry: e, ctr: &counter{}, group: g}
	t.slots[h] = s
	t.byMatch[e.Match] = h
	n.entries++
	if t.id.Chain == 0 {
		n.noteLocked(t.id, mask, change{k: pack(&s.entry.Match), h: h,
			s: &lslot{handle: h, cookie: e.Cookie, ctr: s.ctr, pass: e.Pass}})
	}
	return h, nil
}

func (n *NIC) removeLocked(e offload.Entry) error {
	t := n.tables[e.Table()]
	var s *slot
	if t != nil {
		if e.Handle != 0 {
			s = t.slots[e.Handle]
		} else {
			for _, x := range t.slots {
				if x.entry.Cookie == e.Cookie {
					s = x
					break
				}
			}
		}
	}
	if s == nil {
		return n.entryErr("remove", &e, offload.KindNotFound, "Specified filter handle not found")
	}
	delete(t.slots, s.entry.Handle)
	delete(t.byMatch, s.entry.Match)
	n.entries--
	if t.id.Chain == 0 {
		n.noteLocked(t.id, s.group.mask, change{k: pack(&s.entry.Match), h: s.entry.Handle})
	}
	s.group.used--
	if s.group.used == 0 {
		t.groups = slices.DeleteFunc(t.groups, func(g *group) bool { return g == s.group })
		if n.caps.LargeGroups > 0 {
			t.reserved -= s.group.size
		}
	}
	if len(t.slots) == 0 {
		delete(n.tables, t.id)
	}
	return nil
}

// noteLocked records a change to the lookup group of table t and shape m
// for the next publish; the caller holds n.mu.
func (n *NIC) noteLocked(t offload.Table, m offload.Mask, c change) {
	if n.pending == nil {
		n.pending = map[tableMask][]change{}
	}
	tm := tableMask{t, m}
	n.pending[tm] = append(n.pending[tm], c)
}

// publishLocked stores a new immutable lookup snapshot with the changes
// made since the last one. Only the groups a change touched are new: their
// delta copied with the changes added, or, once the delta outgrows
// deltaMax, their entries rebuilt with it folded in (and the family and
// protocol summary and lowest handle made exact again); every other group
// is the previous snapshot's, shared. So publishing after one install
// costs O(sqrt n) amortized for a group of n entries, not a rebuild of
// every entry. The caller holds n.mu.
func (n *NIC) publishLocked() {
	if len(n.pending) == 0 {
		return
	}
	for tm, cs := range n.pending {
		gs := n.pub[tm.t]
		if gs == nil {
			gs = map[offload.Mask]*lgroup{}
			n.pub[tm.t] = gs
		}
		g := &lgroup{mask: tm.m}
		if old := gs[tm.m]; old != nil {
			*g = *old
			g.delta = make(map[key]*lslot, len(old.delta)+len(cs))
			maps.Copy(g.delta, old.delta)
		} else {
			g.entries = map[key]*lslot{}
			g.delta = make(map[key]*lslot, len(cs))
		}
		for _, c := range cs {
			cur, ok := g.get(&c.k)
			switch {
			case c.s != nil:
				if !ok {
					g.size++
				}
				g.delta[c.k] = c.s
				g.fams |= 1 << (c.k[4] >> 24 & 63) // the family, as pack places it
				p := uint8(0)
				if tm.m.Proto {
					p = uint8(c.k[4] >> 16)
				}
				g.protos[p>>6] |= 1 << (p & 63)
				if g.size == 1 || c.s.handle < g.minHandle {
					g.minHandle = c.s.handle
				}
			case ok && cur.handle == c.h:
				g.size--
				g.delta[c.k] = nil
			}
		}
		switch {
		case g.size == 0:
			delete(gs, tm.m)
			if len(gs) == 0 {
				delete(n.pub, tm.t)
			}
			continue
		case len(g.delta) > deltaMax(g.size):
			g.fold(tm.m.Proto)
		}
		gs[tm.m] = g
	}
	clear(n.pending)
	l := &lookup{tables: make([]ltable, 0, len(n.pub))}
	for id, gs := range n.pub {
		lt := ltable{id: id, groups: make([]lgroup, 0, len(gs))}
		for _, g := range gs {
			lt.groups = append(lt.groups, *g)
		}
		slices.SortFunc(lt.groups, func(a, b lgroup) int { return cmp.Compare(a.minHandle, b.minHandle) })
		l.tables = append(l.tables, lt)
	}
	slices.SortFunc(l.tables, func(a, b ltable) int { return cmp.Compare(a.id.Prio, b.id.Prio) })
	n.snap.Store(l)
}

// fold builds a new entries map with the delta applied, empties the delta,
// and recomputes the summary from the entries.
func (g *lgroup) fold(proto bool) {
	es := make(map[key]*lslot, g.size)
	for k, s := range g.entries {
		if _, changed := g.delta[k]; !changed {
			es[k] = s
		}
	}
	for k, s := range g.delta {
		if s != nil {
			es[k] = s
		}
	}
	g.entries, g.delta = es, nil
	g.fams, g.protos, g.minHandle = 0, [4]uint64{}, 0
	first := true
	for k, s := range es {
		g.fams |= 1 << (k[4] >> 24 & 63)
		p := uint8(0)
		if proto {
			p = uint8(k[4] >> 16)
		}
		g.protos[p>>6] |= 1 << (p & 63)
		if first || s.handle < g.minHandle {
			g.minHandle, first = s.handle, false
		}
	}
}

// batch runs op over es in paced chunks, publishing after each chunk.
func (n *NIC) batch(ctx context.Context, opName string, es []offload.Entry, op func(offload.Entry) (uint32, error)) ([]offload.Result, error) {
	if n.gone.Load() {
		return nil, n.goneErr(opName)
	}
	res := make([]offload.Result, len(es))
	chunk := len(es)
	if n.caps.InsertRate > 0 {
		chunk = max(int(n.caps.InsertRate/10), 1)
	}
	for lo := 0; lo < len(es); lo += chunk {
		hi := min(lo+chunk, len(es))
		if n.caps.InsertRate > 0 {
			if err := n.pace(ctx, hi-lo); err != nil {
				for i := lo; i < len(es); i++ {
					res[i].Err = err
				}
				return res, nil
			}
		}
		n.mu.Lock()
		for i := lo; i < hi; i++ {
			res[i].Handle, res[i].Err = op(es[i])
		}
		n.publishLocked()
		n.mu.Unlock()
	}
	return res, nil
}

// pace waits until the device has time for k more operations.
func (n *NIC) pace(ctx context.Context, k int) error {
	d := time.Duration(float64(k) / n.caps.InsertRate * float64(time.Second))
	n.mu.Lock()
	now := n.clock.Now()
	start := n.busyUntil
	if start.Before(now) {
		start = now
	}
	n.busyUntil = start.Add(d)
	wait := n.busyUntil.Sub(now)
	n.mu.Unlock()
	return n.clock.Sleep(ctx, wait)
}

// Install adds entries, paced at the insertion rate.
func (n *NIC) Install(ctx context.Context, es []offload.Entry) ([]offload.Result, error) {
	return n.batch(ctx, "install", es, n.installLocked)
}

// Remove deletes entries by handle (or cookie when the handle is 0).
func (n *NIC) Remove(ctx context.Context, es []offload.Entry) ([]offload.Result, error) {
	return n.batch(ctx, "remove", es, func(e offload.Entry) (uint32, error) { return e.Handle, n.removeLocked(e) })
}

// Dump returns every installed entry, in hardware.
func (n *NIC) Dump(ctx context.Context) ([]offload.Installed, error) {
	if n.gone.Load() {
		return nil, n.goneErr("dump")
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	var out []offload.Installed
	for _, t := range n.tables {
		for _, s := range t.slots {
			out = append(out, offload.Installed{Entry: s.entry, InHW: true, InHWCount: 1})
		}
	}
	slices.SortFunc(out, func(a, b offload.Installed) int {
		return cmp.Or(cmp.Compare(a.Chain, b.Chain), cmp.Compare(a.Prio, b.Prio), cmp.Compare(a.Handle, b.Handle))
	})
	return out, nil
}

// Stats returns every entry's counters as of the last refresh; a refresh
// happens when StatsPeriod has passed since the previous one. LastUsed is
// the refresh at which the entry's packet count was last seen to grow.
func (n *NIC) Stats(ctx context.Context) ([]offload.Stats, error) {
	if n.gone.Load() {
		return nil, n.goneErr("stats")
	}
	now := n.clock.Now()
	n.statsMu.Lock()
	defer n.statsMu.Unlock()
	if !n.statsLoaded || now.Sub(n.statsAt) >= n.caps.StatsPeriod {
		n.statsCache = n.readCounters(now)
		n.statsAt, n.statsLoaded = now, true
	}
	return slices.Clone(n.statsCache), nil
}

// readCounters reads every counter; the caller holds statsMu.
func (n *NIC) readCounters(now time.Time) []offload.Stats {
	n.mu.Lock()
	defer n.mu.Unlock()
	var out []offload.Stats
	for _, t := range n.tables {
		for _, s := range t.slots {
			st := offload.Stats{Table: t.id, Handle: s.entry.Handle, Cookie: s.entry.Cookie,
				Packets: s.ctr.packets.Load(), Bytes: s.ctr.bytes.Load()}
			if st.Packets != s.ctr.seen {
				s.ctr.seen, s.ctr.lastUse = st.Packets, now
			}
			st.LastUsed = s.ctr.lastUse
			out = append(out, st)
		}
	}
	slices.SortFunc(out, func(a, b offload.Stats) int {
		return cmp.Or(cmp.Compare(a.Chain, b.Chain), cmp.Compare(a.Prio, b.Prio), cmp.Compare(a.Handle, b.Handle))
	})
	return out
}

// Capacity returns the exact use of the device: entries, and per table the
// entries, mask shapes and flow groups.
func (n *NIC) Capacity() offload.Capacity {
	n.mu.Lock()
	defer n.mu.Unlock()
	c := offload.Capacity{MaxEntries: n.caps.MaxEntries, Entries: n.entries, LargeGroups: n.caps.LargeGroups}
	for _, t := range n.tables {
		masks := map[offload.Mask]bool{}
		large := 0
		for _, g := range t.groups {
			masks[g.mask] = true
			if g.large {
				large++
			}
		}
		c.Tables = append(c.Tables, offload.TableUsage{Table: t.id, Entries: len(t.slots), Masks: len(masks), Groups: large})
	}
	slices.SortFunc(c.Tables, func(a, b offload.TableUsage) int {
		return cmp.Or(cmp.Compare(a.Chain, b.Chain), cmp.Compare(a.Prio, b.Prio))
	})
	return c
}

// Hit is the entry a packet matched; Pass when it is a pass entry (the
// packet goes on to the host, and no later priority sees it).
type Hit struct {
	Table  offload.Table
	Handle uint32
	Cookie offload.Cookie
	Pass   bool
}

// Process matches one packet of the given length (bytes, for the byte
// counter) against the hardware table, counts it on the entry it hits and
// reports whether the NIC drops it: the first table by priority that holds
// a matching entry decides, a drop entry dropping it and a pass entry
// letting it through (Hit.Pass) before any later table's drop. It never
// blocks and never allocates.
func (n *NIC) Process(f *rule.Fields, length uint32) (Hit, bool) {
	if n.gone.Load() {
		return Hit{}, false
	}
	k, ok := offload.KeyOf(f)
	if !ok {
		return Hit{}, false
	}
	l := n.snap.Load()
	for ti := range l.tables {
		t := &l.tables[ti]
		var best *lslot
		for gi := range t.groups {
			g := &t.groups[gi]
			if best != nil && best.handle < g.minHandle {
				break
			}
			if !g.admits(&k) {
				continue
			}
			pk := packKey(&k, &g.mask)
			if s, ok := g.get(&pk); ok && (best == nil || s.handle < best.handle) {
				best = s
			}
		}
		if best != nil {
			best.ctr.packets.Add(1)
			best.ctr.bytes.Add(uint64(length))
			return Hit{Table: t.id, Handle: best.handle, Cookie: best.cookie, Pass: best.pass}, !best.pass
		}
	}
	return Hit{}, false
}

// ProcessFrame parses an Ethernet frame with the shared parser
// (swpath/packet) and processes it like Process, counting len(frame) bytes.
// A frame that is not IP is never dropped. It never allocates.
func (n *NIC) ProcessFrame(frame []byte) (Hit, bool) {
	var f rule.Fields
	if packet.Parse(frame, &f) != packet.OK {
		return Hit{}, false
	}
	return n.Process(&f, uint32(len(frame)))
}
