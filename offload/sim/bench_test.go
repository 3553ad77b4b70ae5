package sim

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/scrubd/scrubd/offload"
	"github.com/scrubd/scrubd/offload/compile"
	"github.com/scrubd/scrubd/swpath/rule"
	"github.com/scrubd/scrubd/swpath/traffic"
)

// BenchmarkProcess measures the simulated NIC's lookup per packet with the
// entries of a ClassBench-style rule set (as many as the budget admits,
// so at most 15 mask shapes per table; and all of them, unbudgeted) and
// packets aimed at the rules' destinations.
func BenchmarkProcess(b *testing.B) {
	set := traffic.ClassBenchRules(1, 2000)
	caps := offload.MLX5(1 << 20)
	caps.InsertRate = 0
	res := compile.Set(&compile.Config{Caps: caps, PrioV4: 1, PrioV6: 2}, set)
	for _, c := range []struct {
		name     string
		budgeted bool
	}{{"budget15", true}, {"all", false}} {
		b.Run(c.name, func(b *testing.B) {
			n := New(Config{Caps: caps, Clock: NewFakeClock(t0)})
			bud := compile.NewBudget(offload.MLX5(4096), nil)
			var es []offload.Entry
			for i := range res {
				if res[i].Offloadable && (!c.budgeted || bud.Take(&res[i])) {
					es = append(es, res[i].Entries...)
				}
			}
			if _, err := n.Install(context.Background(), es); err != nil {
				b.Fatal(err)
			}
			r := rand.New(rand.NewPCG(1, 1))
			pk := make([]rule.Fields, 4096)
			for i := range pk {
				ru := &set.Rules[r.IntN(len(set.Rules))]
				f := &pk[i]
				f.Family, f.Proto, f.L4, f.Frag = rule.IPv4, rule.ProtoTCP, true, rule.NotFragment
				if ru.Match.Dst.IsValid() {
					f.Dst = rule.AddrFrom(ru.Match.Dst.Addr())
				}
				if ru.Match.Src.IsValid() {
					f.Src = rule.AddrFrom(ru.Match.Src.Addr())
				}
				if len(ru.Match.Proto) == 1 {
					f.Proto = ru.Match.Proto[0]
				}
				if ru.Match.DstPort != nil {
					f.DstPort = uint16(ru.Match.DstPort[0].Lo)
				}
				f.SrcPort = uint16(r.IntN(65536))
			}
			masks := 0
			for _, t := range n.Capacity().Tables {
				masks += t.Masks
			}
			hits := 0
			i := 0
			for b.Loop() {
				if _, ok := n.Process(&pk[i&4095], 64); ok {
					hits++
				}
				i++
			}
			b.ReportMetric(float64(len(es)), "entries")
			b.ReportMetric(float64(masks), "masks")
			b.ReportMetric(float64(hits)/float64(i), "hit-ratio")
		})
	}
}

// BenchmarkInstallOne measures one install and one removal of a single
// entry on a table that holds n entries (one mask shape, UDP to distinct
// /32s, as FlowSpec routes compile), the way the placer installs a rule at
// a time during a burst: each iteration installs an entry with a new match
// and removes the oldest one, and each call publishes a new lookup.
func BenchmarkInstallOne(b *testing.B) {
	for _, size := range []int{100, 1000, 3800} {
		b.Run(fmt.Sprint(size), func(b *testing.B) {
			caps := offload.MLX5(4096)
			caps.InsertRate = 0
			n := New(Config{Caps: caps, Clock: NewFakeClock(t0)})
			ctx := context.Background()
			mk := func(i int) offload.Entry {
				return entry(fmt.Sprintf("10.%d.%d.%d/32", i>>16&255, i>>8&255, i&255), rule.ProtoUDP, 53)
			}
			var q []offload.Entry
			for i := range size {
				q = append(q, mk(i))
			}
			res, err := n.Install(ctx, q)
			if err != nil {
				b.Fatal(err)
			}
			for i := range q {
				q[i].Handle = res[i].Handle
			}
			next := size
			for b.Loop() {
				res, err := n.Install(ctx, []offload.Entry{mk(next)})
				if err != nil || res[0].Err != nil {
					b.Fatal(err, res[0].Err)
				}
				e := mk(next)
				e.Handle = res[0].Handle
				next++
				q = append(q, e)
				if res, err := n.Remove(ctx, q[:1]); err != nil || res[0].Err != nil {
					b.Fatal(err, res[0].Err)
				}
				q = q[1:]
			}
		})
	}
}
