package hwpath

import (
	"cmp"
	"slices"
	"sync"

	"github.com/scrubd/scrubd/offload/nlerr"
	"github.com/scrubd/scrubd/offload/tcflower"
	"golang.org/x/sys/unix"
)

// fakeKernel is an in-memory tc: it validates and encodes every filter with
// tcflower's codec and keeps what decodes back, with cls_flower's rules
// for handles, duplicate keys and one protocol per priority. refuse, when
// set, plays a driver that refuses some skip_sw filters.
type fakeKernel struct {
	mu      sync.Mutex
	filters []tcflower.Filter
	next    uint32
	gone    bool
	qdisc   bool
	refuse  func(*tcflower.Filter) error
}

func (k *fakeKernel) EnsureQdisc(ifindex int) (tcflower.QdiscState, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.gone {
		return tcflower.QdiscState{}, nlerr.New("qdisc-add clsact", "eth0", "", unix.ENODEV, "Cannot find device", 0)
	}
	created := !k.qdisc
	k.qdisc = true
	return tcflower.QdiscState{Kind: "clsact", Created: created}, nil
}

func (k *fakeKernel) Batch(ops []tcflower.Op, o tcflower.BatchOptions) []tcflower.Result {
	k.mu.Lock()
	defer k.mu.Unlock()
	res := make([]tcflower.Result, len(ops))
	for i := range ops {
		f := ops[i].Filter
		switch ops[i].Kind {
		case tcflower.OpAdd:
			res[i].Filter, res[i].Err = k.add(f)
			if !o.Echo {
				res[i].Filter = tcflower.Filter{}
			}
		case tcflower.OpDelete:
			res[i].Err = k.del(f)
		}
	}
	return res
}

func (k *fakeKernel) add(f tcflower.Filter) (tcflower.Filter, error) {
	if err := f.Validate(); err != nil {
		return tcflower.Filter{}, err
	}
	if k.gone {
		return tcflower.Filter{}, nlerr.New("install", "eth0", f.ID(), unix.ENODEV, "", 0)
	}
	if !k.qdisc {
		return tcflower.Filter{}, nlerr.New("install", "eth0", f.ID(), unix.EINVAL, "Parent Qdisc doesn't exists", 0)
	}
	b, err := f.MarshalBinary()
	if err != nil {
		return tcflower.Filter{}, err
	}
	var g tcflower.Filter
	if err := g.UnmarshalBinary(b); err != nil {
		return tcflower.Filter{}, err
	}
	for _, x := range k.filters {
		if x.Chain != g.Chain || x.Prio != g.Prio {
			continue
		}
		if x.Protocol != g.Protocol {
			return tcflower.Filter{}, nlerr.New("install", "eth0", f.ID(), unix.EINVAL, "Cannot change protocol of this filter kind", 0)
		}
		if x.Key == g.Key || g.Handle != 0 && x.Handle == g.Handle {
			return tcflower.Filter{}, nlerr.New("install", "eth0", f.ID(), unix.EEXIST, "Filter already exists", 0)
		}
	}
	if g.Flags&tcflower.SkipSW != 0 && k.refuse != nil {
		if err := k.refuse(&g); err != nil {
			return tcflower.Filter{}, err
		}
	}
	if g.Handle == 0 {
		k.next++
		g.Handle = k.next
	}
	if g.Flags&tcflower.SkipHW != 0 {
		g.Flags |= tcflower.NotInHW
	} else {
		g.Flags |= tcflower.InHW
		g.InHWCount = 1
	}
	k.filters = append(k.filters, g)
	return g, nil
}

func (k *fakeKernel) del(f tcflower.Filter) error {
	if k.gone {
		return nlerr.New("delete", "eth0", f.ID(), unix.ENODEV, "", 0)
	}
	for i, x := range k.filters {
		if x.Chain == f.Chain && x.Prio == f.Prio && x.Handle == f.Handle && x.Protocol == f.Protocol {
			k.filters = slices.Delete(k.filters, i, i+1)
			return nil
		}
	}
	return nlerr.New("delete", "eth0", f.ID(), unix.ENOENT, "Specified filter handle not found", 0)
}

func (k *fakeKernel) Dump(q tcflower.DumpQuery) ([]tcflower.Filter, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.gone {
		return nil, nlerr.New("dump", "eth0", "", unix.ENODEV, "", 0)
	}
	out := slices.Clone(k.filters)
	slices.SortFunc(out, func(a, b tcflower.Filter) int {
		return cmp.Or(cmp.Compare(a.Chain, b.Chain), cmp.Compare(a.Prio, b.Prio), cmp.Compare(a.Handle, b.Handle))
	})
	return out, nil
}
