package classifier

import "github.com/scrubd/scrubd/swpath/rule"

// A Worker keeps a small direct-mapped cache of recent decisions (the idea
// of OVS's exact-match cache and of VPP's warm buckets): a packet whose
// fields equal a cached packet's, in every field some rule of the set looks
// at, gets the cached decision without a tuple lookup. The cache belongs to
// one worker and one Table: a Swap empties it before the next burst, so a
// cached decision is always the current set's. When the traffic has too many
// flows for the cache to hit (a high-cardinality flood), or the cache costs
// more than the lookups it spares, the worker bypasses it for a while, so
// misses do not cost twice.

const (
	cacheBits = 12
	cacheSets = 1 << cacheBits // two entries (ways) each: 8192 decisions, 512 KiB
	// minCacheTables: tables with fewer hash tables than this decide
	// faster than a cache miss costs, so they do not use the cache.
	minCacheTables = 3
	// Every cacheWindow packets that went through the cache (a burst, or
	// several single packets), a hit rate below 1/cacheMinHitFrac turns
	// the cache off for the next cacheBypass packets, and for twice as
	// many each time the window after a bypass hits too little again, up
	// to cacheBypassMax; a window that hits enough starts over at
	// cacheBypass.
	//
	// The window after a bypass is a whole burst through a cache whose
	// lines have gone cold: a probe and an insert that miss the processor
	// cache for every packet. With a fixed bypass of 8192 packets (one
	// such burst of 256 in 33) a worker on a flood of new 5-tuples
	// spent 3-11 % more than with its cache off (ClassBench-style 1k and
	// 10k rules, the two workers alternated in one process); with 65536
	// it was within 1 %.
	cacheWindow     = 32
	cacheMinHitFrac = 8
	cacheBypass     = 8192
	cacheBypassMax  = 1 << 16

	// A hit rate says what the cache spares, not what it costs: where the
	// lookup is cheap a cache that hits one packet in three still costs
	// more in probes and inserts than it spares. On the frames of `scrubd
	// bench --flows 65536` at 1k and 10k ClassBench-style rules (a flood
	// whose fully specified rules make some 5-tuples repeat: 48,160
	// distinct 5-tuples in 65,536 frames at 10k) the window after each
	// bypass hit 36 %, so the cache stayed on for 8 % of the packets and
	// the worker spent 2-12 % more than with its cache off.
	//
	// So the bursts of ClassifyBurst and ClassifyFrames, which time their
	// lookups (the cache's clock, cycles), are judged on cost too. Every
	// cacheCostWindow packets through the cache, their cycles per packet
	// are compared with those of bypassed bursts (offCost: each new
	// sample averaged half and half with the figure before).
	// costStrikes such windows in a row that cost more, while the hit
	// rate does not rise by more than 1/16 from one window to the next (a
	// cache still filling), bypass the cache as a window that missed
	// does. One costly window alone does not: the cache's lines go cold
	// whenever something else had the core (two workers alternated on one
	// core every 32 windows, on 1000 flows where the cache takes 0.44 of
	// the lookup's time at 10k rules: the first window after each switch
	// cost 2-5 times the others), and so does the window after a bypass;
	// turning off for 8192 packets a cache that saves half the time is
	// the dearer mistake. A window that passes the cost rule starts the
	// backoff over; one that only hit enough keeps it.
	//
	// offCost is measured on cacheCostWindow bypassed packets: after the
	// first cacheCostWindow through the cache, and again after every
	// cacheRefresh through it with none bypassed. A sample more than
	// costOutlier times the figure it is compared with is dropped: a
	// burst the scheduler preempted counts another thread's time.
	cacheCostWindow = 512
	cacheRefresh    = 1 << 16
	costScale       = 256 // costs are cycles per packet times costScale
	costOutlier     = 4
	costStrikes     = 2
)

// used says which packet fields any rule of a Table looks at.
type used struct {
	ports, tcpFlags, icmp, frag, length, dscp bool
}

func (u *used) add(m *rule.Match) {
	u.ports = u.ports || m.SrcPort != nil || m.DstPort != nil || m.Port != nil
	u.tcpFlags = u.tcpFlags || m.HasTCPFlags
	u.icmp = u.icmp || m.ICMPType != nil || m.ICMPCode != nil
	u.frag = u.frag || m.Fragment != 0
	u.length = u.length || m.Length != nil
	u.dscp = u.dscp || m.DSCP != 0
}

//go:generate go run github.com/scrubd/scrubd/internal/keygen/cmd/keygen -key cache -o cachekey_gen.go

// cacheKey is the flow-cache key. Table.cacheWords and cacheAddrWords
// (cachekey_gen.go, generated from rule.MatchFields) pack it.
type cacheKey [6]uint64

// cacheMasks returns the masks of the first two cache-key words that keep
// only the fields some rule looks at: the bits rule.MatchFields gives each
// field read (the addresses fill words 2-5 and are always kept).
func (u *used) cacheMasks() (w0, w1 uint64) {
	for i := range rule.MatchFields {
		if mf := &rule.MatchFields[i]; u.reads(mf.Name) {
			w0 |= mf.CacheKey[0]
			w1 |= mf.CacheKey[1]
		}
	}
	return w0, w1
}

// reads reports whether some rule looks at the table's field name. A field
// this switch does not know is kept in the key: a cache that keys on too
// much only hits less.
func (u *used) reads(name string) bool {
	switch name {
	case "src_port", "dst_port":
		return u.ports
	case "tcp_flags":
		return u.tcpFlags
	case "icmp_type", "icmp_code":
		return u.icmp
	case "fragment":
		return u.frag
	case "length":
		return u.length
	case "dscp":
		return u.dscp
	}
	return true // family, protocol, L4 presence, addresses, and new fields
}

// cacheKeyOf packs f; fields no rule reads are masked to zero, so packets
// differing only there share an entry.
func (t *Table) cacheKeyOf(f *rule.Fields) cacheKey {
	w0, w1 := t.cacheWords(f)
	w2, w3, w4, w5 := cacheAddrWords(f)
	return cacheKey{w0, w1, w2, w3, w4, w5}
}

func (a *cacheKey) eq(b *cacheKey) bool {
	return a[0] == b[0] && a[2] == b[2] && a[4] == b[4] && a[1] == b[1] && a[3] == b[3] && a[5] == b[5]
}

type cacheEntry struct {
	k     cacheKey
	rule  int32
	valid bool
}

type flowCache struct {
	tab     *Table
	e       [][2]cacheEntry // by set; way 0 is the most recent
	bypass  int             // packets left with the cache off
	backoff int             // the next bypass (0: cacheBypass)
	winHits int             // hits and packets of the current window
	winN    int
	policy  CachePolicy // Worker.SetCachePolicy; benchmarks compare CacheNever
	cold    bool        // emptied since the last burst that used it
	hits    uint64
	lookups uint64

	// timed: begin asks the caller to time this burst (end's and
	// endOff's cycles): the cache is in use or bypassed, not off or
	// CacheAlways. Classify does not time its single packets.
	timed bool
	// offCost: bypassed bursts' cycles per packet (times costScale),
	// averaged; 0 until one is measured, and then the cost rule is off.
	offCost uint64
	// onCyc, onHits and onN: cycles, hits and packets through the cache
	// since the cost window began; lastHit: the hit rate (times
	// costScale) of the cost window before.
	onCyc   uint64
	onHits  int
	onN     int
	lastHit int
	strikes int // cost windows in a row that cost more than offCost
	// sinceOff: packets through the cache since the last bypassed burst.
	sinceOff int
	// clock replaces cycles in tests.
	clock func() uint64
}

// now reads the cache's clock: cycles, or the test's clock.
func (c *flowCache) now() uint64 {
	if c.clock != nil {
		return c.clock()
	}
	return cycles()
}

// start returns the clock at the start of a burst that begin asked to
// time, else 0.
func (c *flowCache) start() uint64 {
	if !c.timed {
		return 0
	}
	return c.now()
}

// since returns the cycles since c0 (from start) of a timed burst, else 0:
// what end and endOff take.
func (c *flowCache) since(c0 uint64) uint64 {
	if !c.timed {
		return 0
	}
	return c.now() - c0
}

// begin readies the cache for a burst of n packets against t and reports
// whether to use it. When it sets c.timed, the caller times the burst's
// lookup (not its counting): start before it, and since(start) after it
// gives the cycles for end, or for endOff when the cache was bypassed.
func (c *flowCache) begin(t *Table, n int) bool {
	c.timed = false
	if t.ntables < minCacheTables || c.policy == CacheNever {
		return false
	}
	if c.e == nil {
		c.e = make([][2]cacheEntry, cacheSets)
	}
	if c.tab != t {
		clear(c.e)
		c.tab = t
		c.cold = true
		c.offCost, c.onCyc, c.onHits, c.onN, c.lastHit, c.strikes = 0, 0, 0, 0, 0, 0
	}
	c.timed = c.policy == CacheAdaptive
	if c.bypass > 0 && c.timed {
		c.bypass -= n
		return false
	}
	return true
}

// endOff records what a bypassed burst of n packets cost (cyc 0: not
// timed, or not bypassed but off).
func (c *flowCache) endOff(n int, cyc uint64) {
	if cyc == 0 || n <= 0 {
		return
	}
	c.sinceOff = 0
	s := cyc * costScale / uint64(n)
	switch {
	case c.offCost == 0:
		c.offCost = s
	case s > costOutlier*c.offCost:
		// Preempted, most likely: not the lookup's cost.
	default:
		c.offCost = (c.offCost + s) / 2
	}
}

// end records a burst's hit rate and, when the caller timed it, its cost
// in cycles (0 from callers that do not time: Classify).
func (c *flowCache) end(hits, n int, cyc uint64) {
	c.hits += uint64(hits)
	c.lookups += uint64(n)
	if c.policy == CacheAlways {
		return
	}
	if c.cold {
		// An empty cache misses every packet of its first burst (misses
		// are inserted after the burst's lookup): that says nothing about
		// the traffic.
		c.cold = false
		c.winHits, c.winN = 0, 0
		c.onCyc, c.onHits, c.onN = 0, 0, 0
		return
	}
	c.winHits += hits
	c.winN += n
	c.sinceOff += n
	timed := cyc != 0
	if timed {
		c.onCyc += cyc
		c.onHits += hits
		c.onN += n
	}
	if c.winN < cacheWindow {
		return
	}
	low := c.winHits*cacheMinHitFrac < c.winN
	c.winHits, c.winN = 0, 0
	judged := false // the window passed the cost rule, not only the hit rate
	if !low && c.offCost != 0 && c.onN >= cacheCostWindow {
		on := c.onCyc * costScale / uint64(c.onN)
		hit := c.onHits * costScale / c.onN
		rising := hit > c.lastHit+costScale/16
		c.onCyc, c.onHits, c.onN, c.lastHit = 0, 0, 0, hit
		if on <= costOutlier*c.offCost {
			// A cache that is still filling (its hit rate up by more
			// than 1/16 since the window before) gets another window,
			// and so does one costly window alone: the cache's lines
			// go cold whenever something else had the core, and the
			// window after that costs what a flood does.
			if on > c.offCost && !rising {
				c.strikes++
				low = c.strikes >= costStrikes
			} else {
				c.strikes = 0
				judged = on <= c.offCost
			}
		}
	}
	if !low {
		if judged || c.offCost == 0 {
			// Without costs the hit rate alone judges; with them, a
			// window that only hit enough (short of a cost window, or
			// costly once) keeps the backoff.
			c.backoff = 0
		}
		if timed && (c.sinceOff >= cacheRefresh || c.offCost == 0 && c.sinceOff >= cacheCostWindow) {
			// The next bursts measure offCost (again).
			c.bypass = cacheCostWindow
		}
		return
	}
	c.onCyc, c.onHits, c.onN, c.strikes = 0, 0, 0, 0
	c.bypass = max(c.backoff, cacheBypass)
	c.backoff = min(2*c.bypass, cacheBypassMax)
}

// probe looks f up in the cache only: on a hit it returns the cached rule;
// on a miss, the set to insert the decision in, and the key in *miss. The
// key's words stay in registers (a key returned by value was stored and
// reloaded through the stack, a store-forwarding stall on every packet).
func (c *flowCache) probe(t *Table, f *rule.Fields, miss *cacheKey) (r int32, hit bool, set uint32) {
	w0, w1 := t.cacheWords(f)
	w2, w3, w4, w5 := cacheAddrWords(f)
	h := hash5(w0^w1*0x2545F4914F6CDD1D, w2, w3, w4, w5) >> (64 - cacheBits)
	s := &c.e[h]
	if e := &s[0]; e.valid && e.k[0] == w0 && e.k[2] == w2 && e.k[4] == w4 && e.k[1] == w1 && e.k[3] == w3 && e.k[5] == w5 {
		return e.rule, true, 0
	}
	if e := &s[1]; e.valid && e.k[0] == w0 && e.k[2] == w2 && e.k[4] == w4 && e.k[1] == w1 && e.k[3] == w3 && e.k[5] == w5 {
		s[0], s[1] = s[1], s[0]
		return s[0].rule, true, 0
	}
	*miss = cacheKey{w0, w1, w2, w3, w4, w5}
	return -1, false, uint32(h)
}

// insert caches rule r under key k in set h (from a missed probe).
func (c *flowCache) insert(h uint32, k *cacheKey, r int32) {
	s := &c.e[h]
	if s[0].valid && s[0].k.eq(k) {
		return // the same flow missed twice in one burst
	}
	s[1] = s[0]
	s[0] = cacheEntry{*k, r, true}
}

// decide returns the deciding rule of f and the tables probed, through the
// cache.
func (c *flowCache) decide(t *Table, f *rule.Fields) (r int32, probes int, hit bool) {
	k := t.cacheKeyOf(f)
	h := hash5(k[0]^k[1]*0x2545F4914F6CDD1D, k[2], k[3], k[4], k[5]) >> (64 - cacheBits)
	set := &c.e[h]
	if set[0].valid && set[0].k.eq(&k) {
		return set[0].rule, 0, true
	}
	if set[1].valid && set[1].k.eq(&k) {
		set[0], set[1] = set[1], set[0]
		return set[0].rule, 0, true
	}
	r, probes = t.lookup(f)
	set[1] = set[0]
	set[0] = cacheEntry{k, r, true}
	return r, probes, false
}
