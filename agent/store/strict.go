package store

import (
	"errors"
	"fmt"

	"github.com/scrubd/scrubd/swpath/rule"
)

// ErrExists is returned by Add for a rule id that is already stored.
var ErrExists = errors.New("rule id exists")

// admission modes of admit.
const (
	addNew     = iota // every id must be new
	upsert            // ids of src may be replaced
	replaceSrc        // the rules become the whole of src
)

// Add adds rules to source src, all or nothing: every id must be new (not
// stored under any source) and appear once, and every rule must pass the
// guard and be in force (not refused by the protect list, not already
// expired). If any rule fails, nothing changes and the error names each
// failing rule by position and id, and the field at fault. Refused rules
// are never stored.
func (s *Store) Add(src string, rules []rule.Rule) ([]Entry, error) {
	return s.admit(src, rules, addNew)
}

// PutInForce adds or replaces one rule of src like Put, except that a rule
// the protect list refuses, or one already expired, is not stored: the
// error says why and nothing changes.
func (s *Store) PutInForce(src string, r rule.Rule) (Entry, error) {
	es, err := s.admit(src, []rule.Rule{r}, upsert)
	if err != nil {
		return Entry{}, err
	}
	return es[0], nil
}

// ReplaceInForce makes rules the whole content of src like Replace, except
// that it is all or nothing for refused rules too: if any rule would be
// refused (protect list, expired, guard) or its id is another source's,
// nothing changes and the error names each failing rule.
func (s *Store) ReplaceInForce(src string, rules []rule.Rule) ([]Entry, error) {
	return s.admit(src, rules, replaceSrc)
}

func (s *Store) admit(src string, rules []rule.Rule, mode int) ([]Entry, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	seen := make(map[string]int, len(rules))
	built := make([]*stored, 0, len(rules))
	var errs []error
	for i := range rules {
		r := &rules[i]
		name := fmt.Sprintf("rules[%d] (id %q)", i, r.ID)
		if j, dup := seen[r.ID]; dup {
			errs = append(errs, fmt.Errorf("%s: id: the same id as rules[%d]", name, j))
			continue
		}
		seen[r.ID] = i
		if old, ok := s.entries[r.ID]; ok {
			if old.source() != src {
				errs = append(errs, fmt.Errorf("%s: id: %w: owned by %s", name, ErrIDInUse, old.source()))
				continue
			}
			if mode == addNew {
				errs = append(errs, fmt.Errorf("%s: id: %w (PUT /v1/rules/%s replaces it)", name, ErrExists, r.ID))
				continue
			}
		}
		if err := s.guardLocked(r); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", name, err))
			continue
		}
		e := s.makeEntry(src, *r, &now)
		if !e.InForce() {
			field := "match"
			if r.Expired(now) {
				field = "expires"
			}
			errs = append(errs, fmt.Errorf("%s: %s: %w", name, field, entryErr(e)))
			continue
		}
		built = append(built, e)
	}
	if errs != nil {
		return nil, errors.Join(errs...)
	}
	n := len(rules)
	if mode != replaceSrc {
		n = s.perSource[src]
		for _, e := range built {
			if _, ok := s.entries[e.r.ID]; !ok {
				n++
			}
		}
	}
	if err := s.tooManyLocked(src, n); err != nil {
		return nil, err
	}
	if mode == replaceSrc {
		for id, e := range s.entries {
			if _, keep := seen[id]; e.source() == src && !keep {
				s.delLocked(id)
			}
		}
	}
	out := make([]Entry, 0, len(built))
	for _, e := range built {
		if old, ok := s.entries[e.r.ID]; ok { // a replaced rule keeps its place
			e.seq, e.added = old.seq, old.added
		}
		s.setLocked(e)
		out = append(out, e.entry())
	}
	s.bumpLocked()
	return out, nil
}
