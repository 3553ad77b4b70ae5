package placement

import (
	"encoding/json"
	"fmt"
	"iter"
	"slices"
	"sort"
)

// chunkLen is how many rules a chunk of a RuleList holds when built; a
// chunk that grows to twice that is split in two, and an empty one is
// dropped.
const chunkLen = 256

// ruleChunk is a run of consecutive rules of a RuleList, with the sums the
// View's per-path totals are made of.
type ruleChunk struct {
	rv []RuleView
	// hwPPS and swPPS sum the rules' rates, hwBps and swBps their rates
	// times their mean frame size (for the View's mean frame per path).
	hwPPS, swPPS, hwBps, swBps float64
	// hw and sw count the rules placed in hardware and in software.
	hw, sw int
	// gen is the editor generation that made the chunk: the chunk is the
	// editor's to write in place while gen is the editor's, and read-only
	// once a View holds it (publish starts a new generation).
	gen uint64
	// stale: rv changed since the sums were taken.
	stale bool
}

func (c *ruleChunk) sum() {
	c.hwPPS, c.swPPS, c.hwBps, c.swBps = 0, 0, 0, 0
	c.hw, c.sw = 0, 0
	for i := range c.rv {
		r := &c.rv[i]
		switch r.Path {
		case HW:
			c.hw++
		case SW:
			c.sw++
		}
		c.hwPPS += r.HWPPS
		c.swPPS += r.SWPPS
		c.hwBps += r.HWPPS * r.AvgFrame
		c.swBps += r.SWPPS * r.AvgFrame
	}
	c.stale = false
}

// RuleList is the published placement of every rule (View.Rules), in
// effective-set order. It is read-only and shared: a View keeps the chunks
// of the View before it that no rule of the round changed, so that a
// round that changes a few rules of 100k copies the chunks of 256 they are
// in, not one RuleView per rule. The zero value is an empty list.
type RuleList struct {
	chunks []*ruleChunk
	ends   []int // ends[k]: the rules in chunks[:k+1]
}

// RuleListOf returns a list of the rules rvs (copied).
func RuleListOf(rvs ...RuleView) RuleList {
	var l RuleList
	for i := 0; i < len(rvs); i += chunkLen {
		c := &ruleChunk{rv: slices.Clone(rvs[i:min(i+chunkLen, len(rvs))])}
		c.sum()
		l.chunks = append(l.chunks, c)
		l.ends = append(l.ends, min(i+chunkLen, len(rvs)))
	}
	return l
}

// Len is the number of rules.
func (l RuleList) Len() int {
	if len(l.ends) == 0 {
		return 0
	}
	return l.ends[len(l.ends)-1]
}

// find returns the chunk holding rule i and i's place in it.
func (l RuleList) find(i int) (k, j int) {
	k = sort.SearchInts(l.ends, i+1) // the first chunk ending past i
	if k > 0 {
		j = i - l.ends[k-1]
	} else {
		j = i
	}
	return k, j
}

// At returns rule i (0 <= i < Len). The RuleView is shared: read it, do
// not write it.
func (l RuleList) At(i int) *RuleView {
	if i < 0 || i >= l.Len() {
		panic(fmt.Sprintf("placement.RuleList.At(%d) of %d rules", i, l.Len()))
	}
	k, j := l.find(i)
	return &l.chunks[k].rv[j]
}

// All yields every rule with its position, in order.
func (l RuleList) All() iter.Seq2[int, RuleView] {
	return func(yield func(int, RuleView) bool) {
		i := 0
		for _, c := range l.chunks {
			for k := range c.rv {
				if !yield(i, c.rv[k]) {
					return
				}
				i++
			}
		}
	}
}

// Slice returns the rules in a new slice.
func (l RuleList) Slice() []RuleView {
	out := make([]RuleView, 0, l.Len())
	for _, c := range l.chunks {
		out = append(out, c.rv...)
	}
	return out
}

// MarshalJSON writes the list as a JSON array of rules.
func (l RuleList) MarshalJSON() ([]byte, error) { return json.Marshal(l.Slice()) }

// String prints the rules as a slice would (%v in test failures).
func (l RuleList) String() string { return fmt.Sprint(l.Slice()) }

// totals are the sums over every rule: rates per path and rate times mean
// frame size per path.
func (l RuleList) totals() (hwPPS, swPPS, hwBps, swBps float64) {
	for _, c := range l.chunks {
		hwPPS += c.hwPPS
		swPPS += c.swPPS
		hwBps += c.hwBps
		swBps += c.swBps
	}
	return
}

// paths counts the rules placed in hardware and in software.
func (l RuleList) paths() (hw, sw int) {
	for _, c := range l.chunks {
		hw += c.hw
		sw += c.sw
	}
	return hw, sw
}

// listEditor is the placer's side of the published RuleList: it edits the
// list in place where no View holds what it writes, and copies a chunk
// (or the chunk index) the first time a round writes what a View holds.
type listEditor struct {
	l      RuleList
	gen    uint64
	shared bool // l.chunks and l.ends are held by a View
}

// published returns the list for a View: from now on what the View holds
// is not written (the next edit copies what it touches). Sums are taken
// of the chunks that changed.
func (e *listEditor) published() RuleList {
	for _, c := range e.l.chunks {
		if c.stale {
			c.sum()
		}
	}
	e.shared = true
	e.gen++
	return e.l
}

// own copies the chunk index if a View holds it.
func (e *listEditor) own() {
	if e.shared {
		e.l.chunks = slices.Clone(e.l.chunks)
		e.l.ends = slices.Clone(e.l.ends)
		e.shared = false
	}
}

// chunk returns chunk k, copied first if a View holds it.
func (e *listEditor) chunk(k int) *ruleChunk {
	c := e.l.chunks[k]
	if c.gen != e.gen {
		rv := make([]RuleView, len(c.rv), len(c.rv)+1)
		copy(rv, c.rv)
		c = &ruleChunk{rv: rv, gen: e.gen}
		e.l.chunks[k] = c
	}
	c.stale = true
	return c
}

// reset makes the list rvs (taken, not copied: the caller's array is the
// list's from now on, and is not written again).
func (e *listEditor) reset(rvs []RuleView) {
	e.l = RuleList{}
	e.shared = false
	for i := 0; i < len(rvs); i += chunkLen {
		end := min(i+chunkLen, len(rvs))
		e.l.chunks = append(e.l.chunks, &ruleChunk{rv: rvs[i:end:end], gen: e.gen, stale: true})
		e.l.ends = append(e.l.ends, end)
	}
}

// set makes rule i rv.
func (e *listEditor) set(i int, rv RuleView) {
	e.own()
	k, j := e.l.find(i)
	e.chunk(k).rv[j] = rv
}

// insert puts rv at position i (0 <= i <= Len), after the rules before it.
func (e *listEditor) insert(i int, rv RuleView) {
	e.own()
	if len(e.l.chunks) == 0 {
		e.l.chunks = []*ruleChunk{{rv: []RuleView{rv}, gen: e.gen, stale: true}}
		e.l.ends = []int{1}
		return
	}
	k, j := e.l.find(i)
	if k == len(e.l.chunks) { // at the end: the last chunk grows
		k--
		j = len(e.l.chunks[k].rv)
	}
	c := e.chunk(k)
	c.rv = slices.Insert(c.rv, j, rv)
	for m := k; m < len(e.l.ends); m++ {
		e.l.ends[m]++
	}
	if len(c.rv) < 2*chunkLen {
		return
	}
	// Split in two halves, each a chunk of its own array.
	h := len(c.rv) / 2
	tail := &ruleChunk{rv: slices.Clone(c.rv[h:]), gen: e.gen, stale: true}
	c.rv = c.rv[:h:h]
	e.l.chunks = slices.Insert(e.l.chunks, k+1, tail)
	e.l.ends = slices.Insert(e.l.ends, k, e.l.ends[k]-len(tail.rv))
}

// remove takes out rule i.
func (e *listEditor) remove(i int) {
	e.own()
	k, j := e.l.find(i)
	c := e.chunk(k)
	c.rv = slices.Delete(c.rv, j, j+1)
	for m := k; m < len(e.l.ends); m++ {
		e.l.ends[m]--
	}
	if len(c.rv) == 0 {
		e.l.chunks = slices.Delete(e.l.chunks, k, k+1)
		e.l.ends = slices.Delete(e.l.ends, k, k+1)
	}
}
