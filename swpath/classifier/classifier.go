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
	slots   map[string]uint32 // rule id -> counter slot, never reused
	workers map[*Worker]struct{}
	retired []counterVal // counts of closed workers, by slot
	retPass counterVal
	retStat [3]uint64 // packets, probes, cache hits of closed workers
}

// New compiles set and returns a classifier that uses it.
func New(set *rule.Set) (*Classifier, error) {
	c := &Classifier{slots: map[string]uint32{}, workers: map[*Worker]struct{}{}}
	if err := c.Swap(set); err != nil {
		return nil, err
	}
	return c, nil
}

// Swap compiles set and replaces the current rule set with it atomically:
// lookups in flight finish on the old set, later bursts use the new one, and
// none blocks. Counters follow rule IDs. On error the current set stays.
func (c *Classifier) Swap(set *rule.Set) error {
	t, err := Compile(set)
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := range set.Rules {
		id := set.Rules[i].ID
		s, ok := c.slots[id]
		if !ok {
			s = uint32(len(c.slots))
			c.slots[id] = s
		}
		t.slot[i] = s
	}
	t.nslots = len(c.slots)
	c.cur.Store(t)
	return nil
}

// Table returns the current compiled set.
func (c *Classifier) Table() *Table { return c.cur.Load() }

type counter struct {
	packets, bytes atomic.Uint64
}

type counterVal struct{ packets, bytes uint64 }

// Result is the outcome for one packet.
type Result struct {
	Verdict Verdict
	Rule    int32 // index of the deciding rule in the set, -1 for none
}

// Worker classifies packets for one goroutine and counts per rule. It is not
// safe for concurrent use; make one per packet-processing goroutine.
type Worker struct {
	c   *Classifier
	ctr atomic.Pointer[[]counter] // by counter slot; written only by this worker
	// pass counts packets no rule decided.
	pass counter
	// packets and probes feed the tuples-probed statistic; cacheHits counts
	// packets decided from the flow cache.
	packets, probes, cacheHits atomic.Uint64

	cache    flowCache
	pending  []counterVal // by slot, this burst
	pendPass counterVal
	touched  []uint32
	fields   []rule.Fields // scratch for ClassifyFrames
	ids      []int32       // scratch for ClassifyBurst
}

// NewWorker returns a worker; Close it when done (its counts are kept).
func (c *Classifier) NewWorker() *Worker {
	w := &Worker{c: c}
	empty := []counter{}
	w.ctr.Store(&empty)
	c.mu.Lock()
	c.workers[w] = struct{}{}
	c.mu.Unlock()
	w.ensure(c.cur.Load())
	return w
}

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
		c.retired[i].packets += ctr[i].packets.Load()
		c.retired[i].bytes += ctr[i].bytes.Load()
	}
	c.retPass.packets += w.pass.packets.Load()
	c.retPass.bytes += w.pass.bytes.Load()
	c.retStat[0] += w.packets.Load()
	c.retStat[1] += w.probes.Load()
	c.retStat[2] += w.cacheHits.Load()
}

// ensure grows the counter arrays to t's slot count (only after a Swap).
func (w *Worker) ensure(t *Table) {
	old := *w.ctr.Load()
	if len(old) >= t.nslots {
		return
	}
	n := make([]counter, t.nslots)
	for i := range old {
		n[i].packets.Store(old[i].packets.Load())
		n[i].bytes.Store(old[i].bytes.Load())
	}
	w.ctr.Store(&n)
	w.pending = append(w.pending, make([]counterVal, t.nslots-len(w.pending))...)
}

func (w *Worker) note(t *Table, r int32, length uint32) {
	if r < 0 {
		w.pendPass.packets++
		w.pendPass.bytes += uint64(length)
		return
	}
	s := t.slot[r]
	p := &w.pending[s]
	if p.packets == 0 {
		w.touched = append(w.touched, s)
	}
	p.packets++
	p.bytes += uint64(length)
}

func (w *Worker) flush() {
	ctr := *w.ctr.Load()
	for _, s := range w.touched {
		p := &w.pending[s]
		ctr[s].packets.Add(p.packets)
		ctr[s].bytes.Add(p.bytes)
		*p = counterVal{}
	}
	w.touched = w.touched[:0]
	if w.pendPass.packets != 0 {
		w.pass.packets.Add(w.pendPass.packets)
		w.pass.bytes.Add(w.pendPass.bytes)
		w.pendPass = counterVal{}
	}
}

// Classify decides one parsed packet of length bytes and counts it.
func (w *Worker) Classify(f *rule.Fields, length uint32) Result {
	t := w.c.cur.Load()
	w.ensure(t)
	var r int32
	var n int
	hits := 0
	if w.cache.begin(t) {
		var hit bool
		r, n, hit = w.cache.decide(t, f)
		if hit {
			hits = 1
		}
		w.cache.end(hits, 1)
	} else {
		_, r, n = t.lookup(f)
	}
	w.note(t, r, length)
	w.flush()
	w.packets.Add(1)
	w.probes.Add(uint64(n))
	w.cacheHits.Add(uint64(hits))
	return Result{t.Verdict(int(r)), r}
}

// ClassifyBurst decides fs[i] (of lens[i] bytes) into out[i], all against the
// same rule set, and counts them. out and lens must be at least as long as fs.
func (w *Worker) ClassifyBurst(fs []rule.Fields, lens []uint32, out []Result) {
	t := w.c.cur.Load()
	w.ensure(t)
	out, lens = out[:len(fs)], lens[:len(fs)]
	probes, hits := 0, 0
	useCache := w.cache.begin(t)
	if !useCache {
		// No cache: decide the burst table by table.
		if cap(w.ids) < len(fs) {
			w.ids = make([]int32, len(fs))
		}
		ids := w.ids[:len(fs)]
		probes = t.DecideBurst(fs, ids)
		for i, r := range ids {
			out[i] = Result{t.Verdict(int(r)), r}
			w.note(t, r, lens[i])
		}
	}
	for i := range fs {
		if !useCache {
			break
		}
		r, n, hit := w.cache.decide(t, &fs[i])
		if hit {
			hits++
		}
		probes += n
		v := Pass
		if r >= 0 {
			v = t.verdict[r]
		}
		out[i] = Result{v, r}
		w.note(t, r, lens[i])
	}
	if useCache {
		w.cache.end(hits, len(fs))
	}
	w.flush()
	w.packets.Add(uint64(len(fs)))
	w.probes.Add(uint64(probes))
	w.cacheHits.Add(uint64(hits))
}

// ClassifyFrames parses and classifies a burst of Ethernet frames; each
// frame's counted length is len(frame). out must be at least as long as
// frames.
func (w *Worker) ClassifyFrames(frames [][]byte, out []Result) {
	t := w.c.cur.Load()
	w.ensure(t)
	out = out[:len(frames)]
	if cap(w.fields) < 1 {
		w.fields = make([]rule.Fields, 1)
	}
	f := &w.fields[0]
	probes, hits := 0, 0
	useCache := w.cache.begin(t)
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
			_, r, n = t.lookup(f)
		}
		probes += n
		v := Pass
		if r >= 0 {
			v = t.verdict[r]
		}
		out[i] = Result{v, r}
		w.note(t, r, uint32(len(b)))
	}
	if useCache {
		w.cache.end(hits, len(frames))
	}
	w.flush()
	w.packets.Add(uint64(len(frames)))
	w.probes.Add(uint64(probes))
	w.cacheHits.Add(uint64(hits))
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
	Rules        []RuleCount // the current set's rules, in set order
	PassPackets  uint64      // packets no rule decided
	PassBytes    uint64
	Packets      uint64 // packets classified
	TablesProbed uint64 // hash tables probed, summed over packets
	CacheHits    uint64 // packets decided from a worker's flow cache
}

// Snapshot sums the counters of every worker, open or closed, for the rules
// of the current set. Counts of a burst in flight may be partly included.
func (c *Classifier) Snapshot() Snapshot {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := c.cur.Load()
	s := Snapshot{Rules: make([]RuleCount, len(t.set.Rules)), PassPackets: c.retPass.packets, PassBytes: c.retPass.bytes,
		Packets: c.retStat[0], TablesProbed: c.retStat[1], CacheHits: c.retStat[2]}
	for i := range t.set.Rules {
		rc := &s.Rules[i]
		rc.ID, rc.Verdict = t.set.Rules[i].ID, t.verdict[i]
		if sl := int(t.slot[i]); sl < len(c.retired) {
			rc.Packets, rc.Bytes = c.retired[sl].packets, c.retired[sl].bytes
		}
	}
	for w := range c.workers {
		ctr := *w.ctr.Load()
		for i := range s.Rules {
			if sl := int(t.slot[i]); sl < len(ctr) {
				s.Rules[i].Packets += ctr[sl].packets.Load()
				s.Rules[i].Bytes += ctr[sl].bytes.Load()
			}
		}
		s.PassPackets += w.pass.packets.Load()
		s.PassBytes += w.pass.bytes.Load()
		s.Packets += w.packets.Load()
		s.TablesProbed += w.probes.Load()
		s.CacheHits += w.cacheHits.Load()
	}
	return s
}
