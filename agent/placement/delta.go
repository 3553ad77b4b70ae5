package placement

import (
	"cmp"
	"context"
	"slices"
	"time"

	"github.com/scrubd/scrubd/agent/store"
	"github.com/scrubd/scrubd/internal/holes"
	"github.com/scrubd/scrubd/swpath/rule"
)

// applyDelta brings placement in line with the store's version d.Version
// from what changed since the version placement holds, at a cost that
// follows the change, not the set: the rules added, changed and removed
// are placed, re-placed and taken out as Apply would, and every other
// rule keeps its state untouched (not compiled again, not looked at).
//
// It places drop rules only. A delta that adds, changes or removes an
// accept rule changes what every drop may overlap, so it returns false
// with nothing changed and the caller applies a snapshot (Apply), which
// re-checks every drop. Without accept changes a drop's hardware verdict
// depends on the drop alone (its match, its priority, and the accept
// rules in front of it, which did not change), so those of unchanged
// rules still hold.
//
// A removal leaves a hole (rule.Set's Holes): the rule's slot stays in
// the arrays, which engines and the hardware path's index may be reading,
// and the set handed to software is the same array with one more hole, so
// that a patching engine is told the change (swDiff reads it from the
// holes) and one that takes whole sets is handed the array as it is. A
// rule changed in its place (the same id, the same place in the store's
// order) is, when an engine holds the array, a hole where it stood and a
// copy appended that decides at the hole's key (moveInPlace, rule.Order).
// The holes are closed (compact: a copy of the set, the rules changed in
// place back at their keys) once they pass max(holesMax, an eighth of the
// slots), so at 100k rules one removal or change in 12,500 pays a copy of
// 29 MB. What stays linear in the set: a copy of the holes' block index
// per round (a pointer per 4096 slots: rule.Holes); an engine that does
// not take changes is handed the whole set (dataplane.SW.SetRules); the
// first append after a snapshot (Apply) copies the array, whose capacity
// ends at its length; and a rule placed in the middle of the order copies
// the set's arrays once per round. The View's list of rules is edited
// where the rules changed (RuleList: a chunk of 256 copied per rule
// changed), found by place.
func (p *Placer) applyDelta(ctx context.Context, d store.Delta, ext extender) bool {
	if d.From != p.version || p.seqs == nil {
		return false
	}
	for i := range d.Upserts {
		r := &d.Upserts[i].Rule
		if r.Action != rule.Drop {
			return false
		}
		if rs := p.rules[r.ID]; rs != nil && rs.r.Action != rule.Drop {
			return false
		}
	}
	freesHW := false // the delta takes a rule out of hardware
	for _, id := range d.Removed {
		rs := p.rules[id]
		if rs != nil && rs.r.Action != rule.Drop {
			return false
		}
		freesHW = freesHW || (rs != nil && rs.path == pHW)
	}
	for i := range d.Upserts {
		rs := p.rules[d.Upserts[i].Rule.ID]
		freesHW = freesHW || (rs != nil && rs.path == pHW)
	}
	if _, ok := p.hw.(acceptSyncer); ok && p.hwUp && freesHW && p.anyOverlapHeld() {
		// A hardware path with pass entries (hwpath) refuses a drop whose
		// accept rule's pass entries did not fit, until SyncAccepts tries
		// them again: Apply does, on every round, and this round frees
		// room. Rare (the pass entries go in before any drop); Apply then.
		return false
	}
	now := p.now()
	start := time.Now()
	p.fullTables = nil
	p.version = d.Version
	p.deltas++
	var removedHW []string // hardware keys to remove
	relayout := false      // a slot emptied or a rule placed before the last
	middle := false        // a rule placed before the last, or moved
	var emptied []int      // the slots of the rules removed
	for _, id := range d.Removed {
		rs := p.rules[id]
		if rs == nil {
			continue
		}
		if rs.path == pHW {
			removedHW = append(removedHW, rs.key())
		}
		p.round.removed++
		if p.cfg.CounterMemory > 0 {
			p.retired[id] = retired{hwTot: rs.ex().hwTot, swTot: rs.ex().swTot, moves: rs.ex().moves, at: now}
		}
		if rs.path == pNone {
			p.noneDrops--
		}
		delete(p.rules, id)
		i := p.slot(rs)
		p.states[i] = nil
		emptied = append(emptied, i)
		relayout = true
	}
	var ins []insert
	var moves []insert  // rules changed in place, to append (moveInPlace)
	var movedFrom []int // their slots
	var fresh, recompile []*ruleState
	touched := 0 // upserts that change something
	last := uint64(0)
	if n := len(p.seqs); n > 0 {
		last = p.seqs[n-1]
	}
	for _, u := range d.Upserts {
		r := u.Rule
		old := p.rules[r.ID]
		if old != nil && old.seq == u.Seq && sameRule(&r, old.r) {
			continue // put again as it was: nothing to do
		}
		touched++
		rs := old
		if old != nil && sameMatch(&r.Match, &old.r.Match) && old.r.Action == r.Action {
			if old.r.Priority != r.Priority {
				old.compiled = false
			}
		} else {
			rs = &ruleState{}
			p.noneDrops++
			if old != nil && old.path == pNone {
				p.noneDrops--
			}
			if old != nil { // changed: carry counters, re-place (as Apply)
				rs.carry(old)
				if old.path == pHW {
					removedHW = append(removedHW, old.key())
				}
			} else if rt, found := p.retired[r.ID]; found {
				rs.carryRetired(rt)
			}
			delete(p.retired, r.ID)
			p.rules[r.ID] = rs
			fresh = append(fresh, rs)
		}
		if !rs.compiled {
			recompile = append(recompile, rs)
		}
		if old != nil && old.seq == u.Seq {
			// Same place in the order. In an array of the placer's own
			// the slot takes the new copy; in one an engine holds (the
			// usual case) the new copy is appended and decides at the
			// slot's key (moveInPlace), after this loop: an append may
			// move the array.
			i := p.slot(old)
			if p.shared && u.Seq != 0 {
				p.states[i] = nil
				rs.seq = u.Seq
				moves = append(moves, insert{r: r, seq: u.Seq, rs: rs})
				movedFrom = append(movedFrom, i)
				relayout = true
				continue
			}
			p.unshare()
			p.set.Rules[i] = r
			p.states[i] = rs
			rs.r, rs.seq = &p.set.Rules[i], u.Seq
			p.touch(rs)
			continue
		}
		if old != nil {
			p.states[p.slot(old)] = nil // it moves to its new place
			relayout, middle = true, true
		}
		if u.Seq <= last {
			relayout, middle = true, true
		}
		last = max(last, u.Seq)
		rs.seq = u.Seq
		ins = append(ins, insert{r: r, seq: u.Seq, rs: rs})
	}
	for id, rt := range p.retired {
		if now.Sub(rt.at) > p.cfg.CounterMemory {
			delete(p.retired, id)
		}
	}
	// The published list follows the same edits (unless Apply left it to
	// be built anew): the removed and moved rules out, the new and moved
	// ones in, each where it is.
	listOK := !p.viewAll && p.list.l.Len() == p.live()
	switch {
	case relayout && !middle:
		// Rules removed, and any new ones after the last: the removed
		// rules' slots become holes (the arrays stay where they are: an
		// engine may be reading them), the new rules are appended. Once
		// holes pass an eighth of the slots they are closed (compact), a
		// copy of the set that the removals before it pay for together.
		slices.Sort(emptied)
		if listOK {
			for k := len(emptied) - 1; k >= 0; k-- {
				p.list.remove(p.pos(emptied[k]))
			}
		}
		p.set.Holes = p.set.Holes.With(emptied...)
		p.moveInPlace(moves, movedFrom)
		if h := p.set.Holes.Count(); h > holesMax && h > len(p.set.Rules)/8 {
			p.compact(len(ins))
		}
		p.appendIns(ins, listOK, ext, d.Version)
	case relayout:
		// New arrays (the hardware path indexes a set by its array): the
		// slots still held and the new rules, merged in the store's order,
		// without holes. With room for rules added later (appended in
		// place: a round that adds a rule after one that removed one
		// copies nothing).
		if listOK {
			// Out of the list first, found by their places (the list
			// holds no holes): the rules removed and moved this round.
			for i := len(p.states) - 1; i >= 0; i-- {
				if p.states[i] == nil && p.set.Live(i) {
					p.list.remove(p.pos(i))
				}
			}
		}
		// Rules changed in place are placed again as new ones (at their
		// places in the store's order).
		ins = append(ins, moves...)
		slices.SortStableFunc(ins, func(a, b insert) int { return cmp.Compare(a.seq, b.seq) })
		n := len(p.set.Rules) - p.set.Holes.Count() - len(d.Removed) + len(ins) - len(moves)
		c := n + n/16 + 16
		rules := make([]rule.Rule, 0, c)
		seqs := make([]uint64, 0, c)
		states := make([]*ruleState, 0, c)
		j := 0
		var added []int // new places filled, ascending
		put := func(r *rule.Rule, seq uint64, rs *ruleState) {
			rules = append(rules, *r)
			seqs = append(seqs, seq)
			states = append(states, rs)
		}
		p.set.Ordered(func(i int) {
			if p.states[i] == nil {
				return
			}
			seq := p.seqOf(i)
			for ; j < len(ins) && ins[j].seq < seq; j++ {
				added = append(added, len(rules))
				put(&ins[j].r, ins[j].seq, ins[j].rs)
			}
			put(&p.set.Rules[i], seq, p.states[i])
		})
		for ; j < len(ins); j++ {
			added = append(added, len(rules))
			put(&ins[j].r, ins[j].seq, ins[j].rs)
		}
		p.set.Rules, p.set.Holes, p.set.Order, p.seqs, p.states = rules, nil, nil, seqs, states
		p.movedTo = nil
		p.shared, p.seqsOwn = false, true
		p.repoint()
		if listOK {
			for _, i := range added {
				p.list.insert(i, p.entryOf(p.states[i]))
			}
		}
	case len(ins) > 0:
		p.appendIns(ins, listOK, ext, d.Version)
	}
	if !listOK {
		p.viewAll = true
	}
	// A rule whose priority changed may now sit behind an accept rule it
	// overlaps: compiled again, and out of hardware if it no longer goes
	// there (software first).
	var demote []*ruleState
	for _, rs := range recompile {
		p.compile(rs)
		if rs.path == pHW && !rs.hwOK {
			demote = append(demote, rs)
		}
	}
	for _, rs := range demote {
		p.record(rs, HW, SW, "no longer offloadable: "+text(rs.hwReason), p.inputs(rs))
	}
	pending := map[string]bool{}
	for _, rs := range fresh {
		pending[rs.r.ID] = true
	}
	changed := touched+len(d.Removed) > 0
	backstopped := false
	if changed {
		// Software holds every new and changed rule before anything
		// leaves hardware: no gap.
		backstopped = p.pushSW(pending) == nil && p.swBackstop
	}
	for _, rs := range demote {
		p.hwRemove(ctx, rs.key())
	}
	for _, k := range removedHW {
		p.hwRemove(ctx, k)
	}
	if len(removedHW)+len(demote) > 0 || len(fresh) > 0 {
		p.refreshBudget(ctx)
	}
	for n, rs := range fresh {
		if n&255 == 255 && ctx.Err() != nil {
			return true // every fresh rule is in the software set already
		}
		p.placeFresh(ctx, rs, now)
	}
	if changed && !backstopped {
		_ = p.pushSW(nil)
	}
	if p.hw != nil && !p.hwUp {
		p.evacuate(ctx)
	}
	p.publish()
	p.endRound("delta", start, changed)
	return true
}

// insert is a rule a delta places, with its place in the store's order
// and its state.
type insert struct {
	r   rule.Rule
	seq uint64
	rs  *ruleState
}

// appendIns appends ins (each after every rule held) to the set's arrays,
// in place where they have room, and to the published list unless it is
// to be built anew (!listOK).
func (p *Placer) appendIns(ins []insert, listOK bool, ext extender, version uint64) {
	if len(ins) == 0 {
		return
	}
	grown := cap(p.set.Rules) < len(p.set.Rules)+len(ins)
	adopted, seqsToo := false, false
	if grown {
		adopted, seqsToo = p.adopt(ins, ext, version)
	}
	if adopted {
		grown = false
	} else {
		for k := range ins {
			p.set.Rules = append(p.set.Rules, ins[k].r)
		}
	}
	for k := range ins {
		if !seqsToo {
			p.seqs = append(p.seqs, ins[k].seq)
		}
		p.states = append(p.states, ins[k].rs)
	}
	p.pointAppended(len(ins), grown)
	if listOK {
		for i := len(p.states) - len(ins); i < len(p.states); i++ {
			p.list.insert(p.list.l.Len(), p.entryOf(p.states[i]))
		}
	}
}

// extender is the store's Extended: the effective set when the array the
// placer holds is its beginning, extended in place by the store.
type extender interface {
	Extended(first *rule.Rule) (store.Snapshot, bool)
}

// adopt takes, for rules ins appended after the last, the store's array
// of version in place of a copy of the placer's own grown by them: when
// the placer holds the store's array (Apply took it; at 100k rules 29 MB)
// and the store wrote the same rules after its end, the set is that array,
// longer, and the rules already placed stay where they are. It reports
// false, with nothing changed, when the store's set is not that. The
// places in the store's order are taken the same way when the placer's
// are still the store's array (seqsToo; else the caller appends to its
// own): at 100k rules 0.8 MB not copied.
func (p *Placer) adopt(ins []insert, ext extender, version uint64) (ok, seqsToo bool) {
	n := len(p.set.Rules)
	if ext == nil || n == 0 || p.set.Holes.Count() > 0 {
		return false, false // the store's array has no holes
	}
	snap, ok := ext.Extended(&p.set.Rules[0])
	if !ok || snap.Version != version || len(snap.Set.Rules) != n+len(ins) || len(snap.Seqs) != len(snap.Set.Rules) {
		return false, false
	}
	for k := range ins {
		if snap.Set.Rules[n+k].ID != ins[k].r.ID || snap.Seqs[n+k] != ins[k].seq {
			return false, false
		}
	}
	p.set.Rules = snap.Set.Rules
	p.shared = true // the store's array: copied before a write (unshare)
	if !p.seqsOwn && len(p.seqs) == n && &p.seqs[0] == &snap.Seqs[0] {
		p.seqs = snap.Seqs // the store's: appended to in a new array, closed in a copy
		seqsToo = true
	}
	return true, seqsToo
}

// holesMax is the number of holes a set keeps whatever its size: below
// it, or below an eighth of the set's slots, removals leave holes.
var holesMax = 64

// compact closes the set's holes, leaving room for room more rules to be
// appended in place. The rules go into a new array (the software engine
// and the hardware path's index may hold the old one, and an engine's set
// must not change under it), copied run by run between the holes, and
// every rule state is pointed at it: that copy is in proportion to the set
// (at 100k rules about 29 MB, at memory speed), which is why removals
// leave holes and one compaction closes many. The other arrays are the
// placer's own and are closed in place (seqs once copied when it is still
// the store's snapshot's). The published list holds no holes: it stays.
func (p *Placer) compact(room int) {
	gone := make([]int, 0, p.set.Holes.Count())
	p.set.Holes.Each(len(p.set.Rules), func(i int) { gone = append(gone, i) })
	if len(gone) == 0 {
		p.set.Holes = nil
		return
	}
	p.compactions++
	p.log.Debug("closing the rule set's holes (rules removed or changed in place)", "holes", len(gone), "rules", len(p.set.Rules)-len(gone))
	n := len(p.set.Rules) - len(gone)
	c := n + room + (n+room)/16 + 16
	if p.set.Order.Moved() > 0 {
		// Rules changed in place sit at the end: each goes back to its
		// key's place, one by one.
		rules := make([]rule.Rule, 0, c)
		seqs := make([]uint64, 0, c)
		states := make([]*ruleState, 0, c)
		p.set.Ordered(func(i int) {
			if p.states[i] != nil {
				rules = append(rules, p.set.Rules[i])
				seqs = append(seqs, p.seqOf(i))
				states = append(states, p.states[i])
			}
		})
		p.set.Rules, p.set.Holes, p.set.Order, p.seqs, p.states = rules, nil, nil, seqs, states
		p.movedTo = nil
		p.shared, p.seqsOwn = false, true
		p.repoint()
		return
	}
	rules := make([]rule.Rule, n, c)
	holes.Close(rules, p.set.Rules, gone)
	p.set.Rules, p.set.Holes = rules, nil
	p.shared = false
	if !p.seqsOwn {
		p.seqs = append(make([]uint64, 0, c), p.seqs...)
		p.seqsOwn = true
	}
	p.seqs = closeInPlace(p.seqs, gone)
	p.states = closeInPlace(p.states, gone)
	p.repoint()
}

// closeInPlace takes the elements at positions gone (ascending) out of s,
// moving the runs after each hole down, and clears the tail it leaves.
func closeInPlace[T any](s []T, gone []int) []T {
	k := gone[0]
	for j, g := range gone {
		end := len(s)
		if j+1 < len(gone) {
			end = gone[j+1]
		}
		k += copy(s[k:], s[g+1:end])
	}
	clear(s[k:])
	return s[:k]
}

// slot returns the position of rs in the set (by its place in the store's
// order: a binary search; a rule changed in place is found at its key's
// slot, which it left, and followed to where it went: movedTo).
func (p *Placer) slot(rs *ruleState) int {
	i, ok := slices.BinarySearchFunc(p.seqs, rs.seq, func(a, b uint64) int { return cmp.Compare(a, b) })
	if ok && p.states[i] != rs {
		if j, moved := p.movedTo[i]; moved && p.states[j] == rs {
			return j
		}
	}
	if !ok || p.states[i] != rs {
		// The protect rules share seq 0; look among them.
		i = slices.Index(p.states, rs)
	}
	return i
}

// moveInPlace appends the rules changed in place (moves, which left the
// slots from: their states are nil there) to the set's arrays, each
// deciding at the key of the slot it left (rule.Order), and makes those
// slots holes. The array an engine holds is not written (appends go past
// the length every holder's set has, or into a new array), so the engine
// is told the change as a removal and an add (swDiff), and no copy of the
// set is made: at 100k rules a change in place copied 30 MB.
//
// seqs takes, at the appended slot, the place before it (seqs stays
// ascending for slot's search); the rule's own place is at its key (seqOf).
func (p *Placer) moveInPlace(moves []insert, from []int) {
	if len(moves) == 0 {
		return
	}
	p.set.Holes = p.set.Holes.With(from...)
	grown := cap(p.set.Rules) < len(p.set.Rules)+len(moves)
	if !p.seqsOwn {
		// The store's array (capped): appended to in a new one.
		p.seqs = slices.Clip(p.seqs)
	}
	if p.movedTo == nil {
		p.movedTo = make(map[int]int, len(moves))
	}
	for k, m := range moves {
		key := p.set.Key(from[k])
		j := len(p.set.Rules)
		p.set.Rules = append(p.set.Rules, m.r)
		p.seqs = append(p.seqs, p.seqs[j-1])
		p.states = append(p.states, m.rs)
		p.set.Order = p.set.Order.With(j, key)
		p.movedTo[key] = j
		m.rs.seq = m.seq
		p.touch(m.rs)
		p.movedInPlace++
	}
	p.seqsOwn = true
	p.pointAppended(len(moves), grown)
}

// pointAppended points the states of the last n slots, just appended, at
// their rules; when the appends grew the array into a new one (grown),
// every state, and the array is the placer's own.
func (p *Placer) pointAppended(n int, grown bool) {
	if grown {
		p.shared = false // a new array
		p.repoint()
		return
	}
	for i := len(p.set.Rules) - n; i < len(p.set.Rules); i++ {
		p.states[i].r = &p.set.Rules[i]
	}
}

// seqOf is the place in the store's order of the rule at slot i: seqs at
// its key.
func (p *Placer) seqOf(i int) uint64 { return p.seqs[p.set.Key(i)] }

// repoint makes every rule state point at its rule in the current array.
func (p *Placer) repoint() {
	for i, rs := range p.states {
		if rs != nil {
			rs.r = &p.set.Rules[i]
		}
	}
}

// pos returns the position in the published list of the rule at slot i
// (of a rule still in the list): i itself when the set has no holes, else
// found by its place in the store's order (the list holds no holes). The
// protect rules, which share place 0, come before every hole.
func (p *Placer) pos(i int) int {
	if p.set.Holes.Count() == 0 || p.seqs == nil || p.seqOf(i) == 0 {
		return i
	}
	return p.list.l.indexSeq(p.seqOf(i))
}

// live is the number of rules of the set: its slots less its holes.
func (p *Placer) live() int { return len(p.states) - p.set.Holes.Count() }
