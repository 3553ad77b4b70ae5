package offload

import (
	"context"
	"time"
)

// Backend is one device's hardware flow table. Implementations are safe for
// concurrent use.
//
// Install and Remove take batches and return one Result per entry, in
// order, when the batch as a whole could be attempted (err == nil); a
// per-entry failure is an *EntryError in Result.Err whose kind tells an
// unsupported match from a full table. A non-nil err means nothing of the
// batch is known to have happened (for example the device is gone).
type Backend interface {
	// Capabilities reports what the device's table can hold.
	Capabilities(ctx context.Context) (Capabilities, error)
	// Install adds drop entries. An entry with Handle 0 gets a handle
	// chosen by the backend, returned in its Result.
	Install(ctx context.Context, entries []Entry) ([]Result, error)
	// Remove deletes entries, found by (Chain, Prio, Handle) when Handle is
	// set, else by (Chain, Prio, Cookie).
	Remove(ctx context.Context, entries []Entry) ([]Result, error)
	// Dump reads back every entry in the device's tables (scrubd's and
	// anyone else's), with where it really is.
	Dump(ctx context.Context) ([]Installed, error)
	// Stats reads the hardware counters of every entry. They may be as old
	// as Capabilities.StatsPeriod.
	Stats(ctx context.Context) ([]Stats, error)
}

// Result is the outcome for one entry of a batch.
type Result struct {
	Handle uint32 // the entry's handle after Install
	Err    error  // nil, or an *EntryError
}

// Installed is an entry read back from the device.
type Installed struct {
	Entry
	InHW      bool   // the device reports the entry in hardware (TCA_CLS_FLAGS_IN_HW)
	NotInHW   bool   // the device reports it is not (TCA_CLS_FLAGS_NOT_IN_HW)
	InHWCount uint32 // number of hardware tables holding it
}

// Stats are the hardware counters of one entry.
type Stats struct {
	Table
	Handle   uint32
	Cookie   Cookie
	Packets  uint64
	Bytes    uint64
	LastUsed time.Time // zero if never hit
}
