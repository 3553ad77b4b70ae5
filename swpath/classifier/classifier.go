package classifier

import (
	"sync"
	"sync/atomic"

	"github.com/scrubd/scrubd/swpath/packet"
	"github.com/scrubd/scrubd/swpath/rule"
)

// Classifier holds the current compiled rule set and the per-rule counters
// of its workers. Its methods are safe for concurrent use; a Worker is not.
type Classifier struct {
	cur atomic.Pointer[Table]

	mu      sync.Mutex
	gen     uint64             // generation of the current table (1, 2, ...)
	slots   map[string]slotRef // rule id of the current set -> counter slot
	nslots  int                // counter slots in use or recyclable (high-water mark)
	free    []uint32           // recycled slots, counts zeroed, ready for reuse
	limbo   []limboSlot        // slots of removed rules, waiting for their grace period
	workers map[*Worker]struct{}
	retired []counterVal // counts of closed workers, by slot
	retPass counterVal
	retStat [3]uint64 // packets, probes, cache hits of closed workers

	// mode is the lookup Swap, Patch and a fold compile (treesAuto but in
	// tests).
	mode int
	// folding: a fold (patch.go) is compiling in the background; folds
	// waits for it. flog are the changes Patch published since it began,
	// which it replays, and flast the set of the last; foldBroken: a Swap
	// since, which it cannot.
	folding    bool
	foldBroken bool
	flog       []patchRec
	flast      *rule.Set
	folds      sync.WaitGroup
	pstat      PatchStats
}

// slotRef is a rule id's counter slot and how many rules of the current
// set carry the id (a set may hold an id twice; they share the slot).
type slotRef struct {
	slot, n uint32
}

// New compiles set and returns a classifier that uses it.
func New(set *rule.Set) (*Classifier, error) {
	c := &Classifier{slots: map[string]slotRef{}, workers: map[*Worker]struct{}{}}
	if err := c.Swap(set); err != nil {
		return nil, err
	}
	return c, nil
}

// limboSlot is the counter slot of a removed rule: tables up to generation
// gen still map a rule to it, so a worker in a burst on one of them may
// still add to it.
type limboSlot struct {
	slot uint32
	gen  uint64
}

// Swap compiles set and replaces the current rule set with it atomically:
// lookups in flight finish on the old set, later bursts use the new one, and
// none blocks. Counters follow rule IDs: a rule whose ID stays in the set
// keeps its counts; a rule whose ID leaves the set loses them, and its
// counter slot is recycled (zeroed) once no worker is still in a burst on a
// table that maps a rule to it; an ID added again later starts from zero.
// The set's holes (rule.Holes) are rules of neither set: they never
// decide, hold no counter and count nothing, whatever their IDs.
// On error the current set stays.
func (c *Classifier) Swap(set *rule.Set) error {
	t, err := compile(set, c.mode)
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.reclaim()
	if c.folding {
		c.foldBroken, c.flog, c.flast = true, nil, nil // a fold in flight is of an older set
	}
	slots := make(map[string]slotRef, len(set.Rules))
	t.prio = make([]uint32, len(set.Rules), cap(t.slot))
	t.tail = new(byRuleTail)
	t.tail.n.Store(int64(len(set.Rules)))
	for i := range set.Rules {
		t.prio[i] = set.Rules[i].Priority
		if !set.Live(i) {
			// A hole holds no slot: its ID may be a live rule's too.
			t.slot[i] = noSlot
			continue
		}
		id := set.Rules[i].ID
		ref, ok := slots[id]
		if !ok {
			old, kept := c.slots[id]
			ref.slot = old.slot
			if !kept {
				ref.slot = c.newSlot()
			}
		}
		ref.n++
		slots[id] = ref
		t.slot[i] = ref.slot
	}
	for id, ref := range c.slots {
		if _, ok := slots[id]; !ok {
			c.limbo = append(c.limbo, limboSlot{ref.slot, c.gen})
		}
	}
	c.slots = slots
	c.gen++
	t.gen = c.gen
	t.nslots = c.nslots
	c.cur.Store(t)
	// Slots freed now become reusable at once when no worker is in a
	// burst on an older table (see Worker.acquire for why that is safe).
	c.reclaim()
	return nil
}

// newSlot returns a free counter slot (zeroed), or a new one. c.mu held.
func (c *Classifier) newSlot() uint32 {
	if n := len(c.free); n > 0 {
		s := c.free[n-1]
		c.free = c.free[:n-1]
		return s
	}
	c.nslots++
	return uint32(c.nslots - 1)
}

// reclaim moves the slots in limbo that no worker can still write to the
// free list, zeroing their counts. A worker publishes the generation of
// the table it classifies with (active) before it reads a slot of it and
// clears it after its last add, so a slot last mapped by generation g is
// safe once every worker is idle or on a generation above g. c.mu held.
func (c *Classifier) reclaim() {
	if len(c.limbo) == 0 {
		return
	}
	oldest := c.gen + 1 // oldest generation a worker is in a burst on
	for w := range c.workers {
		if g := w.active.Load(); g != 0 && g < oldest {
			oldest = g
		}
	}
	keep := c.limbo[:0]
	for _, l := range c.limbo {
		if l.gen >= oldest {
			keep = append(keep, l)
			continue
		}
		for w := range c.workers {
			ctr := *w.ctr.Load()
			if int(l.slot) < len(ctr) {
				ctr[l.slot].zero()
			}
		}
		if int(l.slot) < len(c.retired) {
			c.retired[l.slot] = counterVal{}
		}
		c.free = append(c.free, l.slot)
	}
	clear(c.limbo[len(keep):])
	c.limbo = keep
}

// Table returns the current compiled set.
func (c *Classifier) Table() *Table { return c.cur.Load() }

// counter is one rule's counts (or the passed packets') in one worker:
// packets and bytes. Only the worker adds to them (counter.add, one add per
// packet, or per rule and burst for small sets); other goroutines read them
// with counter.load, and Classifier.reclaim zeroes them (counter.zero) only
// when the worker cannot be adding to them (see Worker.acquire). So each
// word has one writer at a time, and on 64-bit processors the worker adds
// with plain loads and stores (counter_plain.go), as Linux's per-CPU
// statistics do on 64-bit (include/linux/u64_stats_sync.h); an atomic add
// (a locked instruction on amd64) cost a flood a tenth of its time.
// Under the race detector, and on 32-bit processors where a plain 64-bit
// store may tear, it adds atomically (counter_atomic.go).
type counter struct {
	_              [0]atomic.Uint64 // 64-bit aligned, for the atomics on 32-bit processors
	packets, bytes uint64
}

// load reads the counts; safe from any goroutine.
func (c *counter) load() counterVal {
	return counterVal{atomic.LoadUint64(&c.packets), atomic.LoadUint64(&c.bytes)}
}

// zero clears the counts while no one adds to them.
func (c *counter) zero() {
	atomic.StoreUint64(&c.packets, 0)
	atomic.StoreUint64(&c.bytes, 0)
}

type counterVal struct{ packets, bytes uint64 }

// stat is one of a worker's statistics: added to only by the worker, as
// a counter is (stat.add, counter_plain.go and counter_atomic.go), and
// read with an atomic load from any goroutine.
type stat struct {
	_ [0]atomic.Uint64 // 64-bit aligned, for the atomics on 32-bit processors
	n uint64
}

// load reads the statistic; safe from any goroutine.
func (s *stat) load() uint64 { return atomic.LoadUint64(&s.n) }

// Result is the outcome for one packet.
type Result struct {
	Verdict Verdict
	Rule    int32 // index of the deciding rule in the set, -1 for none
}

// Worker classifies packets for one goroutine and counts per rule. It is not
// safe for concurrent use; make one per packet-processing goroutine.
type Worker struct {
	c   *Classifier
	ctr atomic.Pointer[[]counter] // by counter slot; added to only by this worker
	// active is the generation of the table this worker is in a burst on,
	// 0 between bursts (see Classifier.reclaim).
	active atomic.Uint64
	// pass counts packets no rule decided (added to like ctr).
	pass counter
	// packets and probes feed the tuples-probed statistic; cacheHits counts
	// packets decided from the flow cache. Added to like ctr (a locked add
	// for each of the three cost Classify, one packet a call, about a
	// third of a 1k-rule lookup).
	packets, probes, cacheHits stat

	cache  flowCache
	fields []rule.Fields // scratch for ClassifyFrames
	ids    []int32       // scratch for ClassifyBurst
	hit    []int32       // scratch for countBurst
	// Scratch of ClassifyBurst's staged lookups: probes, and the packets
	// the flow cache missed (their fields, position in the burst, and
	// cache set and key).
	jobs     []stagedProbe
	tree     *treeScratch // the tree walk's, of a group of packets
	missFs   []rule.Fields
	missAt   []int32
	missSet  []uint32
	missKeys []cacheKey
	missIds  []int32
	// small counts one burst by rule index + 1 (0: passed) for sets of up
	// to smallSet rules (see countSmall).
	small [smallSet + 1]counterVal
}

// smallSet is the most rules for which a burst is counted by rule index
// in Worker.small: one add per packet and no branch, then one fold per
// rule that was hit.
const smallSet = 64

// NewWorker returns a worker; Close it when done (its counts are kept).
func (c *Classifier) NewWorker() *Worker {
	w := &Worker{c: c}
	empty := []counter{}
	w.ctr.Store(&empty)
	c.mu.Lock()
	c.workers[w] = struct{}{}
	c.mu.Unlock()
	return w
}

// CacheHits returns the packets the worker's flow cache has decided; safe
// from any goroutine.
func (w *Worker) CacheHits() uint64 { return w.cacheHits.load() }

// CachePolicy says which bursts a Worker's flow cache decides.
type CachePolicy uint8

const (
	// CacheAdaptive, the default: the cache turns itself off while it
	// hits too little or, for bursts (ClassifyBurst, ClassifyFrames),
	// while it costs more cycles a packet than a lookup without it.
	CacheAdaptive CachePolicy = iota
	// CacheAlways: every packet through the cache, whatever it hits or
	// costs (tests that check its decisions; traffic known to repeat).
	CacheAlways
	// CacheNever: no packet through the cache.
	CacheNever
)

// SetCachePolicy sets the worker's flow cache policy. The cache is only
// ever used for sets of three hash tables or more, whatever the policy.
// Call it from the worker's goroutine, between bursts.
func (w *Worker) SetCachePolicy(p CachePolicy) {
	w.cache.policy = p
	w.cache.bypass, w.cache.backoff = 0, 0
}

// acquire returns the current table and publishes its generation in
// w.active until release. It stores the generation, then checks that the
// table is still current, and tries again if not: a Swap that reclaims
// slots after it published a newer table either sees the stored generation
// (and keeps the older table's slots) or made this check fail (Go's atomics
// are sequentially consistent). So no burst ever adds to a slot recycled
// for another rule.
func (w *Worker) acquire() *Table {
	t := w.c.cur.Load()
	for {
		w.active.Store(t.gen)
		n := w.c.cur.Load()
		if n == t {
			break
		}
		t = n
	}
	if len(*w.ctr.Load()) < t.nslots {
		w.ensure(t)
	}
	return t
}

// release ends a burst: the worker adds no more to the table's slots.
func (w *Worker) release() { w.active.Store(0) }

// Close folds the worker's counts into the classifier and forgets the worker.
func (w *Worker) Close() {
	c := w.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.workers[w]; !ok {
		return
	}
	delete(c.workers, w)
	ctr := *w.ctr.Load()
	if len(c.retired) < len(ctr) {
		c.retired = append(c.retired, make([]counterVal, len(ctr)-len(c.retired))...)
	}
	for i := range ctr {
		v := ctr[i].load()
		c.retired[i].packets += v.packets
		c.retired[i].bytes += v.bytes
	}
	v := w.pass.load()
	c.retPass.packets += v.packets
	c.retPass.bytes += v.bytes
	c.retStat[0] += w.packets.load()
	c.retStat[1] += w.probes.load()
	c.retStat[2] += w.cacheHits.load()
}

// ensure grows the counter arrays to t's slot count (only after a Swap). It
// holds c.mu so that a reclaim never zeroes a slot of the array it copies.
func (w *Worker) ensure(t *Table) {
	w.c.mu.Lock()
	defer w.c.mu.Unlock()
	old := *w.ctr.Load()
	if len(old) >= t.nslots {
		return
	}
	n := make([]counter, t.nslots)
	for i := range old {
		v := old[i].load()
		n[i].packets, n[i].bytes = v.packets, v.bytes
	}
	w.ctr.Store(&n)
}

// note counts a packet of length bytes decided by rule r (-1: passed);
// ctr is *w.ctr.Load().
func (w *Worker) note(t *Table, ctr []counter, r int32, length uint32) {
	if r < 0 {
		w.pass.add(1, uint64(length))
		return
	}
	ctr[t.slot[r]].add(1, uint64(length))
}

// countSmall writes the results of a burst decided into ids and counts it,
// for a table of at most smallSet rules: it adds into Worker.small by rule
// index, then adds each rule that was hit to its counter.
func (w *Worker) countSmall(t *Table, ids []int32, lens []uint32, out []Result) {
	ctr := *w.ctr.Load()
	n := len(t.verdict)
	cnt := w.small[:n+1]
	vs := t.verdictAt[:n+1]
	lens, out = lens[:len(ids)], out[:len(ids)]
	for i, r := range ids {
		k := r + 1
		out[i] = Result{vs[k], r}
		c := &cnt[k]
		c.packets++
		c.bytes += uint64(lens[i])
	}
	if c := &cnt[0]; c.packets != 0 {
		w.pass.add(c.packets, c.bytes)
		*c = counterVal{}
	}
	for r := range n {
		c := &cnt[r+1]
		if c.packets == 0 {
			continue
		}
		ctr[t.slot[r]].add(c.packets, c.bytes)
		*c = counterVal{}
	}
}

// countBurst writes the results of a burst decided into ids and counts
// it, packet by packet, for a table of more than smallSet rules. hit is
// scratch as long as ids.
//
// It goes over the burst twice. The first pass writes the results, sums
// the passed packets with arithmetic and lists the packets a rule decided
// (the list grows by one or by none, without a branch); the second adds
// the listed packets to their rules' counters. On a flood whether a rule
// decides is close to a coin toss (ClassBench-style sets pass about half
// of such traffic), and a branch on it in the counting loop was
// mispredicted for about every other packet.
func (w *Worker) countBurst(t *Table, ids []int32, lens []uint32, out []Result, hit []int32) {
	ctr := *w.ctr.Load()
	slot, vs := t.slot, t.verdictAt
	lens, out, hit = lens[:len(ids)], out[:len(ids)], hit[:len(ids)]
	if len(ctr) >= counterPrefetchMin && len(ids) > 0 {
		prefetchCounters(&ctr[0], &slot[0], &ids[0], len(ids))
	}
	var pp, pb uint64
	k := 0
	for i, r := range ids {
		out[i] = Result{vs[r+1], r}
		p := uint64(uint32(r) >> 31) // 1: no rule decided
		pp += p
		pb += p * uint64(lens[i])
		hit[k] = int32(i)
		k += int(p ^ 1)
	}
	for _, i := range hit[:k] {
		ctr[slot[ids[i]]].add(1, uint64(lens[i]))
	}
	if pp != 0 {
		w.pass.add(pp, pb)
	}
}

// counterPrefetchMin: a worker with at least this many counter slots (64
// KiB of counters, past a core's first-level cache) prefetches a burst's
// counters before its first pass (prefetchCounters), so that the second
// pass's adds find their lines in the cache. On fresh 5-tuple bursts of
// 256 the counting (the worker's time beyond the burst lookup's, its
// cache off) took 8.0-11.0 ns a packet instead of 13.6-16.9 at 100k
// ClassBench-style rules (1.6 MiB of counters), 4.5-7.2 instead of
// 6.8-9.4 at 30k, 3.9-4.5 instead of 4.1-5.1 at 10k, and at 1k (16 KiB)
// 3.1-3.5 instead of 2.7-3.4 (the prefetch and no prefetch alternated
// in one process, thread CPU time). BenchmarkWorkerFlood at 100k, test
// binaries before and after alternated: the worker's time beyond the
// burst lookup's 12.3 and 13.1 ns instead of 15.1 and 15.9.
const counterPrefetchMin = 1 << 12

// Classify decides one parsed packet of length bytes and counts it.
func (w *Worker) Classify(f *rule.Fields, length uint32) Result {
	t := w.acquire()
	defer w.release()
	var r int32
	var n int
	hits := 0
	if w.cache.begin(t, 1) {
		var hit bool
		r, n, hit = w.cache.decide(t, f)
		if hit {
			hits = 1
		}
		w.cache.end(hits, 1, 0)
	} else {
		r, n = t.lookup(f)
	}
	w.note(t, *w.ctr.Load(), r, length)
	w.packets.add(1)
	w.probes.add(uint64(n))
	w.cacheHits.add(uint64(hits))
	return Result{t.Verdict(int(r)), r}
}

// ClassifyBurst decides fs[i] (of lens[i] bytes) into out[i], all against the
// same rule set, and counts them. out and lens must be at least as long as fs.
//
// Without the flow cache (small sets, and high-cardinality floods while the
// cache is bypassed) the burst goes through the staged lookup as a whole.
// With it, the packets the cache misses are gathered and go through the
// staged lookup together, then into the cache: a miss costs the cache
// probe and insert on top of the same lookup a bypassed burst does.
func (w *Worker) ClassifyBurst(fs []rule.Fields, lens []uint32, out []Result) {
	t := w.acquire()
	defer w.release()
	out, lens = out[:len(fs)], lens[:len(fs)]
	if cap(w.ids) < len(fs) {
		w.ids = make([]int32, len(fs))
		w.hit = make([]int32, len(fs))
	}
	if w.jobs == nil {
		w.jobs = make([]stagedProbe, stagedJobs)
		w.tree = new(treeScratch)
	}
	ids := w.ids[:len(fs)]
	probes, hits := 0, 0
	useCache := w.cache.begin(t, len(fs))
	c0 := w.cache.start()
	if !useCache {
		probes = t.decideBurst(fs, ids, w.jobs, w.tree)
		w.cache.endOff(len(fs), w.cache.since(c0))
	} else {
		if cap(w.missFs) < len(fs) {
			w.missFs = make([]rule.Fields, len(fs))
			w.missAt = make([]int32, len(fs))
			w.missSet = make([]uint32, len(fs))
			w.missKeys = make([]cacheKey, len(fs))
			w.missIds = make([]int32, len(fs))
		}
		nm := 0
		missKeys := w.missKeys[:len(fs)]
		for i := range fs {
			r, hit, set := w.cache.probe(t, &fs[i], &missKeys[nm])
			if hit {
				ids[i] = r
				hits++
				continue
			}
			w.missFs[nm], w.missAt[nm], w.missSet[nm] = fs[i], int32(i), set
			nm++
		}
		if nm > 0 {
			res := w.missIds[:nm]
			probes = t.decideBurst(w.missFs[:nm], res, w.jobs, w.tree)
			for j, at := range w.missAt[:nm] {
				ids[at] = res[j]
				w.cache.insert(w.missSet[j], &w.missKeys[j], res[j])
			}
		}
		w.cache.end(hits, len(fs), w.cache.since(c0))
	}
	if len(t.verdict) <= smallSet {
		w.countSmall(t, ids, lens, out)
	} else {
		w.countBurst(t, ids, lens, out, w.hit)
	}
	w.packets.add(uint64(len(fs)))
	w.probes.add(uint64(probes))
	w.cacheHits.add(uint64(hits))
}

// ClassifyFrames parses and classifies a burst of Ethernet frames; each
// frame's counted length is len(frame). out must be at least as long as
// frames.
func (w *Worker) ClassifyFrames(frames [][]byte, out []Result) {
	t := w.acquire()
	defer w.release()
	out = out[:len(frames)]
	if cap(w.fields) < 1 {
		w.fields = make([]rule.Fields, 1)
	}
	f := &w.fields[0]
	probes, hits := 0, 0
	useCache := w.cache.begin(t, len(frames))
	c0 := w.cache.start()
	ctr := *w.ctr.Load()
	for i, b := range frames {
		packet.Parse(b, f)
		var r int32
		var n int
		if useCache {
			var hit bool
			r, n, hit = w.cache.decide(t, f)
			if hit {
				hits++
			}
		} else {
			r, n = t.lookup(f)
		}
		probes += n
		v := Pass
		if r >= 0 {
			v = t.verdict[r]
		}
		out[i] = Result{v, r}
		w.note(t, ctr, r, uint32(len(b)))
	}
	if useCache {
		w.cache.end(hits, len(frames), w.cache.since(c0))
	} else {
		w.cache.endOff(len(frames), w.cache.since(c0))
	}
	w.packets.add(uint64(len(frames)))
	w.probes.add(uint64(probes))
	w.cacheHits.add(uint64(hits))
}

// RuleCount is one rule's counters in a Snapshot.
type RuleCount struct {
	ID      string
	Verdict Verdict // Drop or Accept: what its hits did
	Packets uint64  // packets it decided
	Bytes   uint64
}

// Snapshot is a sum of all workers' counters.
type Snapshot struct {
	// Rules are the current set's rules, indexed like its Rules: a
	// hole's (rule.Holes) is zero, without ID or verdict.
	Rules        []RuleCount
	PassPackets  uint64 // packets no rule decided
	PassBytes    uint64
	Packets      uint64 // packets classified
	TablesProbed uint64 // hash tables probed, summed over packets
	CacheHits    uint64 // packets decided from a worker's flow cache
}

// Snapshot sums the counters of every worker, open or closed, for the rules
// of the current set. Counts of a burst in flight may be partly included.
func (c *Classifier) Snapshot() Snapshot {
	var s Snapshot
	c.SnapshotInto(&s)
	return s
}

// Count is one rule's packets and bytes (CountsInto).
type Count struct {
	Packets uint64
	Bytes   uint64
}

// CountsInto writes the per-rule counters of Snapshot, without ids or
// verdicts, into dst's array when it has room (else a new one), indexed
// like the current set's Rules (a hole's zero), and returns the set and
// the counts. A caller that reads every second with its last slice
// allocates nothing.
func (c *Classifier) CountsInto(dst []Count) (*rule.Set, []Count) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := c.cur.Load()
	n := len(t.set.Rules)
	if cap(dst) < n {
		dst = make([]Count, n)
	}
	dst = dst[:n]
	holes := t.set.Holes
	for i := range dst {
		dst[i] = Count{}
		if sl := t.slot[i]; !holes.Dead(i) && int(sl) < len(c.retired) {
			dst[i] = Count{c.retired[sl].packets, c.retired[sl].bytes}
		}
	}
	for w := range c.workers {
		ctr := *w.ctr.Load()
		for i := range dst {
			if sl := t.slot[i]; !holes.Dead(i) && int(sl) < len(ctr) {
				v := ctr[sl].load()
				dst[i].Packets += v.packets
				dst[i].Bytes += v.bytes
			}
		}
	}
	return t.set, dst
}

// SnapshotInto is Snapshot written into s, in s.Rules' array when it has
// room: a caller that reads the counters every second with the same s
// allocates nothing per rule.
func (c *Classifier) SnapshotInto(s *Snapshot) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := c.cur.Load()
	rules := s.Rules[:0]
	if n := len(t.set.Rules); cap(rules) < n {
		rules = make([]RuleCount, n)
	} else {
		rules = rules[:n]
		clear(rules)
	}
	*s = Snapshot{Rules: rules, PassPackets: c.retPass.packets, PassBytes: c.retPass.bytes,
		Packets: c.retStat[0], TablesProbed: c.retStat[1], CacheHits: c.retStat[2]}
	holes := t.set.Holes
	for i := range t.set.Rules {
		sl := t.slot[i]
		if holes.Dead(i) {
			continue // a hole: zero, no ID (its slot entry may be stale)
		}
		rc := &s.Rules[i]
		rc.ID, rc.Verdict = t.set.Rules[i].ID, t.verdict[i]
		if int(sl) < len(c.retired) {
			rc.Packets, rc.Bytes = c.retired[sl].packets, c.retired[sl].bytes
		}
	}
	for w := range c.workers {
		ctr := *w.ctr.Load()
		for i := range s.Rules {
			if sl := t.slot[i]; !holes.Dead(i) && int(sl) < len(ctr) {
				v := ctr[sl].load()
				s.Rules[i].Packets += v.packets
				s.Rules[i].Bytes += v.bytes
			}
		}
		v := w.pass.load()
		s.PassPackets += v.packets
		s.PassBytes += v.bytes
		s.Packets += w.packets.load()
		s.TablesProbed += w.probes.load()
		s.CacheHits += w.cacheHits.load()
	}
}
