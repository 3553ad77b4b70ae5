package offload

import "slices"

// TableUsage is how much of one (chain, priority) table is used.
type TableUsage struct {
	Table
	Entries int
	// Masks is the number of distinct mask shapes; each needs at least one
	// flow group.
	Masks int
	// Groups is the number of large flow groups in use where the backend
	// knows it (the simulator: a full group of one shape takes another);
	// otherwise equal to Masks.
	Groups int
}

// Capacity is the used and free room of a device's tables.
type Capacity struct {
	MaxEntries  int // 0: unknown
	Entries     int
	LargeGroups int // per table; 0: no limit
	Tables      []TableUsage
}

// FreeEntries returns the entries left, or -1 when unknown.
func (c *Capacity) FreeEntries() int {
	if c.MaxEntries == 0 {
		return -1
	}
	return max(c.MaxEntries-c.Entries, 0)
}

// FreeMasks returns how many more mask shapes table t can take in large
// groups, or -1 when there is no limit.
func (c *Capacity) FreeMasks(t Table) int {
	if c.LargeGroups == 0 {
		return -1
	}
	for _, u := range c.Tables {
		if u.Table == t {
			return max(c.LargeGroups-u.Groups, 0)
		}
	}
	return c.LargeGroups
}

// CapacityOf computes the capacity view from the device's capabilities and
// the entries installed on it (typically a Dump).
func CapacityOf(caps Capabilities, installed []Entry) Capacity {
	c := Capacity{MaxEntries: caps.MaxEntries, Entries: len(installed), LargeGroups: caps.LargeGroups}
	masks := map[Table]map[Mask]bool{}
	count := map[Table]int{}
	for i := range installed {
		t := installed[i].Table()
		if masks[t] == nil {
			masks[t] = map[Mask]bool{}
		}
		masks[t][installed[i].Match.Mask()] = true
		count[t]++
	}
	for t, ms := range masks {
		c.Tables = append(c.Tables, TableUsage{Table: t, Entries: count[t], Masks: len(ms), Groups: len(ms)})
	}
	slices.SortFunc(c.Tables, func(a, b TableUsage) int {
		if a.Chain != b.Chain {
			return int(int64(a.Chain) - int64(b.Chain))
		}
		return int(a.Prio) - int(b.Prio)
	})
	return c
}
