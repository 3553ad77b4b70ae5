package offload

import (
	"context"
	"fmt"
)

// Owner says which entries of a device are scrubd's: those with scrubd's
// cookie magic in Chain at a priority in [PrioLo, PrioHi]. Reconcile never
// removes anything else (OVS's filters at priorities 1-4 on a BlueField
// uplink, an operator's own filters, scrubd-looking cookies elsewhere).
type Owner struct {
	Chain          uint32
	PrioLo, PrioHi uint16
	// Software makes Reconcile count an entry that is installed but not in
	// hardware as in place: for software-only backends (skip_hw flower in
	// the lab), whose entries are never in hardware.
	Software bool
}

// Owns reports whether e is scrubd's under o.
func (o Owner) Owns(e *Entry) bool {
	return e.Cookie.Ours() && e.Chain == o.Chain && e.Prio >= o.PrioLo && e.Prio <= o.PrioHi
}

// Failure is an entry Reconcile could not install or remove.
type Failure struct {
	Entry Entry
	Err   error
}

// ReconcileReport says what Reconcile did.
type ReconcileReport struct {
	Kept    int // wanted entries already in hardware, left alone
	Added   int // wanted entries installed
	Removed int // stale scrubd entries removed
	Failed  []Failure
	// Installed are the wanted entries now in hardware, with handles.
	Installed []Entry
}

// Reconcile brings the device to the wanted entries: it dumps the device,
// keeps every wanted entry already in hardware (same cookie, table and
// match, in_hw), installs the missing ones, and only then removes scrubd's
// stale entries (owned by o and not wanted), so the device never drops less
// than before or than wanted. Installs refused for lack of space are tried
// again after the removals. Entries of others are never touched.
//
// Every wanted entry must be owned by o (scrubd's cookie, o's chain and
// priorities); otherwise nothing is done and an error is returned. Failures
// of single entries are reported in the report, not as the error.
func Reconcile(ctx context.Context, b Backend, o Owner, wanted []Entry) (ReconcileReport, error) {
	var rep ReconcileReport
	for i := range wanted {
		if !o.Owns(&wanted[i]) {
			return rep, fmt.Errorf("reconcile: wanted entry %d (%s, chain %d prio %d) is not owned by chain %d prio %d-%d",
				i, wanted[i].Cookie, wanted[i].Chain, wanted[i].Prio, o.Chain, o.PrioLo, o.PrioHi)
		}
	}
	dump, err := b.Dump(ctx)
	if err != nil {
		return rep, fmt.Errorf("reconcile: %w", err)
	}
	ours := map[Cookie][]int{} // cookie -> indexes into dump
	for i := range dump {
		if o.Owns(&dump[i].Entry) {
			ours[dump[i].Cookie] = append(ours[dump[i].Cookie], i)
		}
	}
	kept := make([]bool, len(dump))
	seen := map[Cookie]bool{}
	var add, later []Entry
	for _, w := range wanted {
		if seen[w.Cookie] {
			continue
		}
		seen[w.Cookie] = true
		found, conflict := -1, false
		for _, i := range ours[w.Cookie] {
			d := &dump[i]
			if d.Table() != w.Table() || d.Match != w.Match {
				continue
			}
			if !o.Software && (d.NotInHW || !d.InHW) {
				conflict = true // same filter but not in hardware: replace after removal
				continue
			}
			if found < 0 {
				found = i
			}
		}
		switch {
		case found >= 0:
			kept[found] = true
			w.Handle = dump[found].Handle
			rep.Kept++
			rep.Installed = append(rep.Installed, w)
		case conflict:
			w.Handle = 0
			later = append(later, w)
		default:
			w.Handle = 0
			add = append(add, w)
		}
	}

	retry, err := install(ctx, b, add, &rep, false)
	if err != nil {
		return rep, err
	}
	var stale []Entry
	for i := range dump {
		if !kept[i] && o.Owns(&dump[i].Entry) {
			stale = append(stale, dump[i].Entry)
		}
	}
	if len(stale) > 0 {
		res, err := b.Remove(ctx, stale)
		if err != nil {
			return rep, fmt.Errorf("reconcile: remove: %w", err)
		}
		for i, r := range res {
			if r.Err != nil && !IsNotFound(r.Err) {
				rep.Failed = append(rep.Failed, Failure{stale[i], r.Err})
				continue
			}
			rep.Removed++
		}
	}
	later = append(later, retry...)
	if _, err := install(ctx, b, later, &rep, true); err != nil {
		return rep, err
	}
	return rep, nil
}

// install installs es and records the results in rep. Unless final, the
// entries refused for lack of space are returned instead of recorded.
func install(ctx context.Context, b Backend, es []Entry, rep *ReconcileReport, final bool) ([]Entry, error) {
	if len(es) == 0 {
		return nil, nil
	}
	res, err := b.Install(ctx, es)
	if err != nil {
		return nil, fmt.Errorf("reconcile: install: %w", err)
	}
	var nospace []Entry
	for i, r := range res {
		switch {
		case r.Err == nil:
			e := es[i]
			e.Handle = r.Handle
			rep.Added++
			rep.Installed = append(rep.Installed, e)
		case IsNoSpace(r.Err) && !final:
			nospace = append(nospace, es[i])
		default:
			rep.Failed = append(rep.Failed, Failure{es[i], r.Err})
		}
	}
	return nospace, nil
}
