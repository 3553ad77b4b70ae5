package store

import (
	"cmp"
	"slices"

	"github.com/scrubd/scrubd/swpath/rule"
)

// Place is where one rule id sat in the store: its source and its place in
// the store's order (seq).
type Place struct {
	Source string
	ID     string
	Seq    uint64
}

// Placed is a rule in force at its place. Rule is the store's own copy:
// read-only.
type Placed struct {
	Place
	Rule *rule.Rule
}

// SourceChanges is what became of the rule ids changed after one version,
// by place, for a state saver that writes the changes to a source's rules
// rather than all its rules (a journal).
type SourceChanges struct {
	// Version is the store version the changes reach.
	Version uint64
	// Gone are the places ids held in the changes that do not hold a rule
	// in force now: removed, moved to another place, or refused now. Each
	// place once, in the order of the log.
	Gone []Place
	// Now are the rules in force now among the ids changed, in the
	// store's order (by Seq).
	Now []Placed
}

// SourceChanges returns what became of the rules changed after version
// since, at a cost proportional to the changes. ok is false when the log
// no longer reaches back to since (Delta's bound): the caller reads whole
// sources then (SourceState).
func (s *Store) SourceChanges(since uint64) (c SourceChanges, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if since < s.logFrom || since > s.version {
		return SourceChanges{}, false
	}
	c.Version = s.version
	i, _ := slices.BinarySearchFunc(s.changes, since+1, func(c change, v uint64) int { return cmp.Compare(c.ver, v) })
	type key struct {
		src *string
		seq uint64
	}
	seenPlace := make(map[key]bool, len(s.changes)-i)
	seenID := make(map[string]bool, len(s.changes)-i)
	for _, ch := range s.changes[i:] {
		e, in := s.entries[ch.id]
		in = in && e.InForce()
		if !seenID[ch.id] {
			seenID[ch.id] = true
			if in {
				c.Now = append(c.Now, Placed{Place{*e.src, ch.id, e.seq}, e.r})
			}
		}
		if in && e.src == ch.src && e.seq == ch.seq {
			continue // the place holds the id's rule in force now
		}
		if k := (key{ch.src, ch.seq}); !seenPlace[k] {
			seenPlace[k] = true
			c.Gone = append(c.Gone, Place{*ch.src, ch.id, ch.seq})
		}
	}
	slices.SortFunc(c.Now, func(a, b Placed) int { return cmp.Compare(a.Seq, b.Seq) })
	return c, true
}

// SourceState returns the rules in force of one source, in order, with
// their places, and the store version they are at: SourceRules with the
// seqs, for a saver that goes on from them with SourceChanges.
func (s *Store) SourceState(src string) (rules []*rule.Rule, seqs []uint64, version uint64) {
	s.mu.Lock()
	es := make([]*stored, 0, s.perSource[src])
	for _, e := range s.entries {
		if e.source() == src && e.InForce() {
			es = append(es, e)
		}
	}
	version = s.version
	s.mu.Unlock()
	slices.SortFunc(es, func(a, b *stored) int { return cmp.Compare(a.seq, b.seq) })
	rules = make([]*rule.Rule, len(es))
	seqs = make([]uint64, len(es))
	for i, e := range es {
		rules[i], seqs[i] = e.r, e.seq
	}
	return rules, seqs, version
}
