package placement

import (
	"encoding/json"
	"fmt"
	"iter"
	"slices"
	"sort"
	"time"

	"github.com/scrubd/scrubd/agent/dataplane"
	"github.com/scrubd/scrubd/swpath/rule"
)

// ruleEntry is one rule of a RuleList as the list holds it, 56 bytes
// where its RuleView is 160: the RuleView is built when read. The figures
// of a rule with traffic or moves are in a ruleFigures of their own (nil
// for none), which the copies of the entry share and nothing writes.
type ruleEntry struct {
	id     string
	reason *string
	fig    *ruleFigures
	since  int64  // nanoseconds from the list's epoch, with placed
	seq    uint64 // the rule's place in the store's order (Find); 0 outside the placer
	action uint8  // actionNone, or a rule.Action plus one, or actionOther
	path   place
	placed bool
}

// ruleEntry.action values beside a rule.Action plus one: no action text,
// and a text held in fig.action.
const (
	actionNone  = 0
	actionOther = 255
)

// ruleFigures are the figures of a RuleView that are zero for most rules.
type ruleFigures struct {
	hw, sw                      dataplane.Counter
	pps, hwPPS, swPPS, avgFrame float64
	moves                       uint64
	action                      string // with actionOther
	path                        Path   // with pOther
}

// pOther is the place of an entry whose Path is none of HW, SW, None (""
// in a RuleView made outside the placer): held in fig.path.
const pOther place = 255

// view is e as a RuleView, its since counted from epoch.
func (e *ruleEntry) view(epoch time.Time) RuleView {
	rv := RuleView{ID: e.id, Reason: text(e.reason), Path: e.path.Path()}
	if e.path == pOther {
		rv.Path = e.figures().path
	}
	switch e.action {
	case actionNone:
	case actionOther:
		rv.Action = e.fig.action
	default:
		rv.Action = rule.Action(e.action - 1).String()
	}
	if e.placed {
		rv.Since = epoch.Add(time.Duration(e.since))
	}
	if f := e.fig; f != nil {
		rv.HW, rv.SW, rv.PPS, rv.HWPPS, rv.SWPPS, rv.AvgFrame, rv.Moves = f.hw, f.sw, f.pps, f.hwPPS, f.swPPS, f.avgFrame, f.moves
	}
	return rv
}

// entryOf is rv as a list entry, its Since counted from epoch.
func entryOf(rv RuleView, epoch time.Time) ruleEntry {
	e := ruleEntry{id: rv.ID, path: placeOf(rv.Path)}
	f := ruleFigures{hw: rv.HW, sw: rv.SW, pps: rv.PPS, hwPPS: rv.HWPPS, swPPS: rv.SWPPS, avgFrame: rv.AvgFrame, moves: rv.Moves}
	if e.path.Path() != rv.Path {
		e.path, f.path = pOther, rv.Path
	}
	if rv.Reason != "" {
		e.reason = &rv.Reason
	}
	if !rv.Since.IsZero() {
		e.since, e.placed = int64(rv.Since.Sub(epoch)), true
	}
	switch rv.Action {
	case "":
	case rule.Drop.String():
		e.action = uint8(rule.Drop) + 1
	case rule.Accept.String():
		e.action = uint8(rule.Accept) + 1
	default:
		e.action, f.action = actionOther, rv.Action
	}
	if f != (ruleFigures{}) {
		e.fig = &f
	}
	return e
}

// figures are e's figures (zero for none).
func (e *ruleEntry) figures() *ruleFigures {
	if e.fig == nil {
		return &noFigures
	}
	return e.fig
}

var noFigures ruleFigures

// chunkLen is how many rules a chunk of a RuleList holds when built; a
// chunk that grows to twice that is split in two, and an empty one is
// dropped.
const chunkLen = 256

// ruleChunk is a run of consecutive rules of a RuleList, with the sums the
// View's per-path totals are made of.
type ruleChunk struct {
	rv []ruleEntry
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
		switch r.path {
		case pHW:
			c.hw++
		case pSW:
			c.sw++
		}
		if f := r.fig; f != nil {
			c.hwPPS += f.hwPPS
			c.swPPS += f.swPPS
			c.hwBps += f.hwPPS * f.avgFrame
			c.swBps += f.swPPS * f.avgFrame
		}
	}
	c.stale = false
}

// RuleList is the published placement of every rule (View.Rules), in
// effective-set order. It is read-only and shared: a View keeps the chunks
// of the View before it that no rule of the round changed, so that a
// round that changes a few rules of 100k copies the chunks of 256 they are
// in, not one RuleView per rule. The list holds each rule compactly and
// builds its RuleView when read. The zero value is an empty list.
type RuleList struct {
	chunks []*ruleChunk
	ends   []int // ends[k]: the rules in chunks[:k+1]
	// epoch is the time the rules' Since count from.
	epoch time.Time
}

// RuleListOf returns a list of the rules rvs (copied).
func RuleListOf(rvs ...RuleView) RuleList {
	var l RuleList
	for _, rv := range rvs {
		if !rv.Since.IsZero() {
			l.epoch = rv.Since
			break
		}
	}
	for i := 0; i < len(rvs); i += chunkLen {
		c := &ruleChunk{rv: make([]ruleEntry, 0, min(chunkLen, len(rvs)-i))}
		for _, rv := range rvs[i:min(i+chunkLen, len(rvs))] {
			c.rv = append(c.rv, entryOf(rv, l.epoch))
		}
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

// At returns rule i (0 <= i < Len), built anew: a copy of the caller's.
func (l RuleList) At(i int) *RuleView {
	rv := l.entry(i).view(l.epoch)
	return &rv
}

// ID returns the id of rule i (0 <= i < Len), without building its
// RuleView.
func (l RuleList) ID(i int) string { return l.entry(i).id }

// entry returns the entry of rule i.
func (l RuleList) entry(i int) *ruleEntry {
	if i < 0 || i >= l.Len() {
		panic(fmt.Sprintf("placement.RuleList.At(%d) of %d rules", i, l.Len()))
	}
	k, j := l.find(i)
	return &l.chunks[k].rv[j]
}

// Find returns the rule id whose place in the store's order is seq
// (store.Entry.Seq), and false when the list does not hold it. The list
// is in the store's order, so this is a binary search, over the chunks and
// within one, not a pass over the rules (at 100k rules a pass took about
// a millisecond): then a walk over the rules of that place, which is one
// rule but for the protect rules, which share place 0. A list without
// places (RuleListOf, or a placer given a set with an id twice, which has
// no order to place by: every place 0) is walked whole, whatever seq.
func (l RuleList) Find(id string, seq uint64) (*RuleView, bool) {
	if n := len(l.chunks); n > 0 {
		if last := l.chunks[n-1].rv; last[len(last)-1].seq == 0 {
			seq = 0 // no places
		}
	}
	k := sort.Search(len(l.chunks), func(k int) bool {
		c := l.chunks[k].rv
		return c[len(c)-1].seq >= seq
	})
	for ; k < len(l.chunks); k++ {
		c := l.chunks[k].rv
		j := sort.Search(len(c), func(j int) bool { return c[j].seq >= seq })
		for ; j < len(c); j++ {
			if c[j].seq != seq {
				return nil, false
			}
			if c[j].id == id {
				rv := c[j].view(l.epoch)
				return &rv, true
			}
		}
	}
	return nil, false
}

// indexSeq returns the position of the first rule whose place in the
// store's order is seq or after it (Len when none): a binary search, as
// Find's. The placer finds a rule's position in the list by its place,
// since the list holds no entry for the set's holes.
func (l RuleList) indexSeq(seq uint64) int {
	k := sort.Search(len(l.chunks), func(k int) bool {
		c := l.chunks[k].rv
		return c[len(c)-1].seq >= seq
	})
	if k == len(l.chunks) {
		return l.Len()
	}
	c := l.chunks[k].rv
	j := sort.Search(len(c), func(j int) bool { return c[j].seq >= seq })
	if k > 0 {
		j += l.ends[k-1]
	}
	return j
}

// All yields every rule with its position, in order.
func (l RuleList) All() iter.Seq2[int, RuleView] {
	return func(yield func(int, RuleView) bool) {
		i := 0
		for _, c := range l.chunks {
			for k := range c.rv {
				if !yield(i, c.rv[k].view(l.epoch)) {
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
		for k := range c.rv {
			out = append(out, c.rv[k].view(l.epoch))
		}
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
		rv := make([]ruleEntry, len(c.rv), len(c.rv)+1)
		copy(rv, c.rv)
		c = &ruleChunk{rv: rv, gen: e.gen}
		e.l.chunks[k] = c
	}
	c.stale = true
	return c
}

// reset makes the list rvs (taken, not copied: the caller's array is the
// list's from now on, and is not written again).
func (e *listEditor) reset(rvs []ruleEntry) {
	e.l = RuleList{epoch: e.l.epoch}
	e.shared = false
	for i := 0; i < len(rvs); i += chunkLen {
		end := min(i+chunkLen, len(rvs))
		e.l.chunks = append(e.l.chunks, &ruleChunk{rv: rvs[i:end:end], gen: e.gen, stale: true})
		e.l.ends = append(e.l.ends, end)
	}
}

// set makes rule i rv.
func (e *listEditor) set(i int, rv ruleEntry) {
	e.own()
	k, j := e.l.find(i)
	e.chunk(k).rv[j] = rv
}

// insert puts rv at position i (0 <= i <= Len), after the rules before it.
func (e *listEditor) insert(i int, rv ruleEntry) {
	e.own()
	if len(e.l.chunks) == 0 {
		e.l.chunks = []*ruleChunk{{rv: []ruleEntry{rv}, gen: e.gen, stale: true}}
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
