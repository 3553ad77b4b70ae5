package compile

import "github.com/scrubd/scrubd/offload"

// Budget tracks the room left on a device while placement picks rules for
// hardware: entries, and mask shapes per table against the large flow
// groups. It is conservative: a shape beyond LargeGroups would get only
// one-entry groups on mlx5, so Budget does not count on it.
type Budget struct {
	caps    offload.Capabilities
	entries int
	masks   map[TableMask]bool
	perTab  map[offload.Table]int
}

// NewBudget starts from what is installed (typically scrubd's entries read
// back from the device).
func NewBudget(caps offload.Capabilities, installed []offload.Entry) *Budget {
	b := &Budget{caps: caps, masks: map[TableMask]bool{}, perTab: map[offload.Table]int{}}
	for i := range installed {
		b.add(TableMask{installed[i].Table(), installed[i].Match.Mask()})
	}
	b.entries = len(installed)
	return b
}

func (b *Budget) add(tm TableMask) {
	if !b.masks[tm] {
		b.masks[tm] = true
		b.perTab[tm.Table]++
	}
}

// Fits reports whether r's entries fit in what is left, and if not why
// (ReasonCapacity wording in the returned text).
func (b *Budget) Fits(r *Result) (bool, string) {
	if !r.Offloadable {
		return false, "not offloadable: " + r.Reason.String()
	}
	if b.caps.MaxEntries > 0 && b.entries+len(r.Entries) > b.caps.MaxEntries {
		return false, "hardware table full: entries"
	}
	if b.caps.LargeGroups > 0 {
		extra := map[offload.Table]int{}
		for _, tm := range r.Masks {
			if !b.masks[tm] {
				extra[tm.Table]++
			}
		}
		for t, n := range extra {
			if b.perTab[t]+n > b.caps.LargeGroups {
				return false, "hardware table full: mask shapes (flow groups)"
			}
		}
	}
	return true, ""
}

// Take reserves r's entries and masks if they fit.
func (b *Budget) Take(r *Result) bool {
	if ok, _ := b.Fits(r); !ok {
		return false
	}
	for _, tm := range r.Masks {
		b.add(tm)
	}
	b.entries += len(r.Entries)
	return true
}

// Entries returns the entries counted so far.
func (b *Budget) Entries() int { return b.entries }

// Masks returns the number of mask shapes in table t.
func (b *Budget) Masks(t offload.Table) int { return b.perTab[t] }
