package sim

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/scrubd/scrubd/offload"
	"github.com/scrubd/scrubd/offload/compile"
	"github.com/scrubd/scrubd/swpath/packet"
	"github.com/scrubd/scrubd/swpath/rule"
	"github.com/scrubd/scrubd/swpath/traffic"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func entry(dst string, proto uint8, dport uint16) offload.Entry {
	p := netip.MustParsePrefix(dst)
	m := offload.Match{Family: rule.IPv4, HasProto: true, Proto: proto}
	if p.Addr().Is6() {
		m.Family = rule.IPv6
	}
	m.Dst, m.DstMask = rule.PrefixAddr(p)
	if dport != 0 {
		m.DstPort, m.DstPortMask = dport, 0xffff
	}
	e := offload.Entry{Prio: 1, Match: m}
	e.SetCookie(offload.RuleHash(dst, &rule.Match{}))
	return e
}

func pkt(dst string, proto uint8, dport uint16) rule.Fields {
	a := netip.MustParseAddr(dst)
	f := rule.Fields{Family: rule.IPv4, Proto: proto, L4: true, Frag: rule.NotFragment, Dst: rule.AddrFrom(a), DstPort: dport, Length: 100}
	if a.Is6() {
		f.Family = rule.IPv6
	}
	return f
}

func mustInstall(t *testing.T, n *NIC, es ...offload.Entry) []offload.Result {
	t.Helper()
	res, err := n.Install(context.Background(), es)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func TestInstallProcessRemove(t *testing.T) {
	n := New(Config{Clock: NewFakeClock(t0)})
	res := mustInstall(t, n, entry("203.0.113.0/24", rule.ProtoUDP, 53), entry("2001:db8::/32", rule.ProtoTCP, 0))
	for _, r := range res {
		if r.Err != nil || r.Handle == 0 {
			t.Fatalf("install: %+v", r)
		}
	}
	for _, tt := range []struct {
		f    rule.Fields
		drop bool
	}{
		{pkt("203.0.113.9", rule.ProtoUDP, 53), true},
		{pkt("203.0.113.9", rule.ProtoUDP, 54), false},
		{pkt("203.0.114.9", rule.ProtoUDP, 53), false},
		{pkt("2001:db8::1", rule.ProtoTCP, 1), true},
		{pkt("2001:db9::1", rule.ProtoTCP, 1), false},
	} {
		if _, got := n.Process(&tt.f, 100); got != tt.drop {
			t.Errorf("%+v: drop %v, want %v", tt.f, got, tt.drop)
		}
	}
	d, _ := n.Dump(context.Background())
	if len(d) != 2 || !d[0].InHW || d[0].InHWCount != 1 {
		t.Fatalf("dump %+v", d)
	}
	rr, err := n.Remove(context.Background(), []offload.Entry{d[0].Entry})
	if err != nil || rr[0].Err != nil {
		t.Fatal(err, rr)
	}
	if f := pkt("203.0.113.9", rule.ProtoUDP, 53); func() bool { _, ok := n.Process(&f, 100); return ok }() {
		t.Error("removed entry still drops")
	}
	rr, _ = n.Remove(context.Background(), []offload.Entry{d[0].Entry})
	if !offload.IsNotFound(rr[0].Err) || !errors.Is(rr[0].Err, syscall.ENOENT) {
		t.Errorf("second remove: %v", rr[0].Err)
	}
	if res := mustInstall(t, n, d[1].Entry); !offload.IsExists(res[0].Err) {
		t.Errorf("duplicate install: %v", res[0].Err)
	}
}

func TestUnsupportedKeys(t *testing.T) {
	n := New(Config{Clock: NewFakeClock(t0)}) // mlx5
	sctp := entry("10.0.0.0/8", rule.ProtoSCTP, 80)
	ff := entry("10.0.0.0/8", rule.ProtoUDP, 0)
	ff.Match.Flags, ff.Match.FlagsMask = offload.FlagFrag|offload.FlagFirstFrag, offload.FlagFrag|offload.FlagFirstFrag
	prio := entry("10.0.0.0/8", rule.ProtoUDP, 0)
	prio.Prio = 17
	res := mustInstall(t, n, sctp, ff, prio)
	for i, want := range []string{"Only UDP and TCP transports", "frag first/later", "priority is out of supported range"} {
		err := res[i].Err
		var ee *offload.EntryError
		if !offload.IsUnsupported(err) || !errors.Is(err, syscall.EOPNOTSUPP) || !errors.As(err, &ee) || !strings.Contains(ee.Extack, want) {
			t.Errorf("entry %d: %v, want EOPNOTSUPP with %q", i, err, want)
		}
	}
	if c := n.Capacity(); c.Entries != 0 {
		t.Errorf("refused entries occupy the table: %+v", c)
	}
}

// TestFlowGroups checks the mlx5 auto-group model: LargeGroups shapes get
// large groups, later shapes one-entry groups, and ENOSPC when no room.
func TestFlowGroups(t *testing.T) {
	caps := offload.MLX5(40) // 3 large groups below -> size 40/4 = 10
	caps.LargeGroups = 3
	caps.InsertRate = 0
	n := New(Config{Caps: caps, Clock: NewFakeClock(t0)})
	var es []offload.Entry
	// shape A: /32 dst + dport; 25 entries -> 3 large groups (30 slots)
	for i := range 25 {
		e := entry("10.0.0.1/32", rule.ProtoUDP, uint16(1000+i))
		es = append(es, e)
	}
	for _, r := range mustInstall(t, n, es...) {
		if r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	c := n.Capacity()
	if c.Entries != 25 || c.Tables[0].Groups != 3 || c.Tables[0].Masks != 1 || c.FreeMasks(offload.Table{Prio: 1}) != 0 {
		t.Fatalf("capacity %+v", c)
	}
	// shape A fills its 30 slots; the 31st entry of shape A needs a new
	// group: one-entry groups from the remaining 10 slots.
	es = es[:0]
	for i := range 15 {
		es = append(es, entry("10.0.0.1/32", rule.ProtoUDP, uint16(2000+i)))
	}
	res := mustInstall(t, n, es...)
	for i, r := range res {
		if i < 15 && r.Err != nil {
			t.Fatalf("entry %d: %v", i, r.Err)
		}
	}
	// the table now holds 40 entries in 40 slots: any new shape is ENOSPC,
	// and so is the device-wide entry count
	res = mustInstall(t, n, entry("10.1.0.0/16", rule.ProtoTCP, 0))
	if !offload.IsNoSpace(res[0].Err) || !errors.Is(res[0].Err, syscall.ENOSPC) {
		t.Fatalf("full table: %v", res[0].Err)
	}
	// removing the entries of one large group frees it
	d, _ := n.Dump(context.Background())
	if _, err := n.Remove(context.Background(), []offload.Entry{d[0].Entry}); err != nil {
		t.Fatal(err)
	}
	res = mustInstall(t, n, entry("10.1.0.0/16", rule.ProtoTCP, 0))
	if !offload.IsNoSpace(res[0].Err) {
		t.Fatalf("a group with a free slot is not a free group: %v", res[0].Err)
	}
}

func TestGroupsSecondTableIndependent(t *testing.T) {
	caps := offload.MLX5(40)
	caps.LargeGroups, caps.InsertRate = 1, 0 // large = 20
	n := New(Config{Caps: caps, Clock: NewFakeClock(t0)})
	a, b := entry("10.0.0.0/8", rule.ProtoUDP, 0), entry("2001:db8::/32", rule.ProtoUDP, 0)
	b.Prio = 2
	c := entry("10.0.0.0/16", rule.ProtoUDP, 0) // second shape in prio 1: one-entry group
	for _, r := range mustInstall(t, n, a, b, c) {
		if r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	cp := n.Capacity()
	if len(cp.Tables) != 2 || cp.Tables[0].Masks != 2 || cp.Tables[0].Groups != 1 || cp.Tables[1].Groups != 1 {
		t.Fatalf("capacity %+v", cp)
	}
}

func TestInsertRatePacedOnClock(t *testing.T) {
	for _, tt := range []struct {
		rate float64
		want time.Duration
	}{{offload.RateDMFS, 2 * time.Second}, {offload.RateSMFS, 10000 * time.Second / 33000}} {
		clk := NewFakeClock(t0)
		caps := offload.MLX5(20000)
		caps.InsertRate = tt.rate
		n := New(Config{Caps: caps, Clock: clk})
		var es []offload.Entry
		for i := range 10000 {
			es = append(es, entry("10.0.0.1/32", rule.ProtoTCP, uint16(i+1)))
		}
		mustInstall(t, n, es...)
		if got := clk.Now().Sub(t0); got < tt.want-time.Millisecond || got > tt.want+time.Millisecond {
			t.Errorf("rate %v: 10000 entries took %v, want %v", tt.rate, got, tt.want)
		}
	}
}

func TestCancelledInstallReportsRest(t *testing.T) {
	caps := offload.MLX5(4096)
	n := New(Config{Caps: caps, Clock: NewFakeClock(t0)})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	res, err := n.Install(ctx, []offload.Entry{entry("10.0.0.0/8", rule.ProtoTCP, 0)})
	if err != nil || !errors.Is(res[0].Err, context.Canceled) {
		t.Fatalf("%v %v", err, res)
	}
	if n.Capacity().Entries != 0 {
		t.Error("cancelled entry installed")
	}
}

func TestStatsRefreshOncePerPeriod(t *testing.T) {
	clk := NewFakeClock(t0)
	n := New(Config{Clock: clk})
	mustInstall(t, n, entry("203.0.113.0/24", rule.ProtoUDP, 53))
	base := clk.Now() // after the paced install
	ctx := context.Background()
	f := pkt("203.0.113.1", rule.ProtoUDP, 53)
	st, _ := n.Stats(ctx) // first read loads the cache
	if st[0].Packets != 0 || !st[0].LastUsed.IsZero() {
		t.Fatalf("%+v", st)
	}
	for range 3 {
		n.Process(&f, 200)
	}
	clk.Advance(500 * time.Millisecond)
	if st, _ = n.Stats(ctx); st[0].Packets != 0 {
		t.Fatalf("counters refreshed early: %+v", st[0])
	}
	clk.Advance(500 * time.Millisecond)
	st, _ = n.Stats(ctx)
	if st[0].Packets != 3 || st[0].Bytes != 600 || !st[0].LastUsed.Equal(base.Add(time.Second)) {
		t.Fatalf("after 1s: %+v", st[0])
	}
	clk.Advance(time.Second)
	st, _ = n.Stats(ctx)
	if !st[0].LastUsed.Equal(base.Add(time.Second)) {
		t.Fatalf("lastuse moved without traffic: %+v", st[0])
	}
}

func TestDeviceGone(t *testing.T) {
	n := New(Config{Clock: NewFakeClock(t0)})
	mustInstall(t, n, entry("203.0.113.0/24", rule.ProtoUDP, 53))
	n.SetGone(true)
	ctx := context.Background()
	_, err1 := n.Install(ctx, []offload.Entry{entry("10.0.0.0/8", rule.ProtoUDP, 0)})
	_, err2 := n.Dump(ctx)
	_, err3 := n.Stats(ctx)
	for _, err := range []error{err1, err2, err3} {
		if !offload.IsDeviceGone(err) || !errors.Is(err, syscall.ENODEV) {
			t.Errorf("gone: %v", err)
		}
	}
	f := pkt("203.0.113.1", rule.ProtoUDP, 53)
	if _, ok := n.Process(&f, 1); ok {
		t.Error("a gone device drops")
	}
}

// TestProcessAgainstLinearScan installs compiled entries of random rules
// and checks that the tuple-space lookup hits exactly the entry a linear
// scan with offload.Match.Matches finds (lowest priority, then handle).
func TestProcessAgainstLinearScan(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	caps := offload.SoftwareFlower()
	caps.MaxEntries = 100000
	n := New(Config{Caps: caps, Clock: NewFakeClock(t0)})
	cfg := &compile.Config{Caps: caps, PrioV4: 3, PrioV6: 4}
	var set rule.Set
	for i := range 300 {
		set.Rules = append(set.Rules, randRule(r, i))
	}
	var es []offload.Entry
	for _, res := range compile.Set(cfg, &set) {
		es = append(es, res.Entries...)
	}
	for _, res := range mustInstall(t, n, es...) {
		if res.Err != nil && !offload.IsExists(res.Err) {
			t.Fatal(res.Err)
		}
	}
	dump, _ := n.Dump(context.Background())
	if len(dump) < 80 {
		t.Fatalf("only %d entries installed", len(dump))
	}
	hits := 0
	for range 50000 {
		f := randFields(r)
		k, _ := offload.KeyOf(&f)
		var want *offload.Installed
		for i := range dump {
			d := &dump[i]
			if d.Match.Matches(&k) && (want == nil || d.Prio < want.Prio || d.Prio == want.Prio && d.Handle < want.Handle) {
				want = d
			}
		}
		hit, ok := n.Process(&f, 64)
		if ok != (want != nil) || ok && (hit.Handle != want.Handle || hit.Table != want.Table()) {
			t.Fatalf("packet %+v: Process %v %+v, linear %+v", f, ok, hit, want)
		}
		if ok {
			hits++
		}
	}
	if hits < 1000 {
		t.Fatalf("only %d hits", hits)
	}
}

// TestSimDropsOnlyWhatTheRulesDrop is the agent's path end to end: compile
// a rule set for mlx5, install what is offloadable, then every packet the
// simulated NIC drops must be one the reference decision drops, and every
// packet decided by an offloaded rule must be dropped by the NIC.
func TestSimDropsOnlyWhatTheRulesDrop(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	for round := range 60 {
		n := New(Config{Caps: offload.MLX5(100000), Clock: NewFakeClock(t0)})
		cfg := &compile.Config{Caps: offload.MLX5(100000), PrioV4: 1, PrioV6: 2}
		var set rule.Set
		for i := range 8 {
			set.Rules = append(set.Rules, randRule(r, round*100+i))
		}
		results := compile.Set(cfg, &set)
		for _, res := range results {
			if res.Offloadable {
				for _, ir := range mustInstall(t, n, res.Entries...) {
					if ir.Err != nil && !offload.IsExists(ir.Err) {
						t.Fatalf("rule %s: %v", res.RuleID, ir.Err)
					}
				}
			}
		}
		for range 5000 {
			f := randFields(r)
			d := set.Decide(&f)
			_, dropped := n.Process(&f, 64)
			if dropped && (d < 0 || set.Rules[d].Action != rule.Drop) {
				t.Fatalf("round %d: NIC drops %+v, rules decide %d", round, f, d)
			}
			if d >= 0 && results[d].Offloadable && !dropped {
				t.Fatalf("round %d: rule %s (offloaded) decides %+v but the NIC passes it", round, set.Rules[d].ID, f)
			}
		}
	}
}

func TestProcessNoAllocs(t *testing.T) {
	n := New(Config{Clock: NewFakeClock(t0)})
	mustInstall(t, n, entry("203.0.113.0/24", rule.ProtoUDP, 53), entry("2001:db8::/32", rule.ProtoTCP, 0))
	f1, f2 := pkt("203.0.113.9", rule.ProtoUDP, 53), pkt("198.51.100.1", rule.ProtoUDP, 53)
	if a := testing.AllocsPerRun(1000, func() { n.Process(&f1, 64); n.Process(&f2, 64) }); a != 0 {
		t.Fatalf("Process allocates %v per run", a)
	}
}

// TestConcurrentProcessWhileInstalling runs the datapath in goroutines
// while entries come and go; run with -race. An entry installed before the
// readers start and never removed must always drop.
func TestConcurrentProcessWhileInstalling(t *testing.T) {
	n := New(Config{Caps: offload.MLX5(4096), Clock: NewFakeClock(t0)})
	mustInstall(t, n, entry("192.0.2.0/24", rule.ProtoUDP, 0))
	stable := pkt("192.0.2.1", rule.ProtoUDP, 9)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	errc := make(chan string, 4)
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f := pkt("10.0.0.1", rule.ProtoTCP, uint16(w))
			for ctx.Err() == nil {
				n.Process(&f, 64)
				if _, ok := n.Process(&stable, 64); !ok {
					errc <- "stable entry missed"
					return
				}
			}
		}()
	}
	for i := range 200 {
		e := entry("10.0.0.0/8", rule.ProtoTCP, uint16(i%4))
		mustInstall(t, n, e)
		d, _ := n.Dump(ctx)
		for _, x := range d {
			if x.Match == e.Match {
				n.Remove(ctx, []offload.Entry{x.Entry})
			}
		}
		_, _ = n.Stats(ctx)
	}
	cancel()
	wg.Wait()
	close(errc)
	for e := range errc {
		t.Fatal(e)
	}
}

// TestProcessFrame runs generated frames (every kind the traffic generator
// makes, including odd L2/L3) through the NIC and checks that the verdict
// and the counted bytes follow the parsed fields.
func TestProcessFrame(t *testing.T) {
	set := traffic.RandomRules(5, 30)
	caps := offload.MLX5(100000)
	n := New(Config{Caps: caps, Clock: NewFakeClock(t0)})
	var hw []offload.Entry
	for _, res := range compile.Set(&compile.Config{Caps: caps, PrioV4: 1, PrioV6: 2}, set) {
		if res.Offloadable {
			hw = append(hw, res.Entries...)
		}
	}
	mustInstall(t, n, hw...)
	g := traffic.NewGenerator(traffic.Config{Seed: 3, Rules: set, RuleFraction: 0.7, Odd: true})
	drops, bytes := 0, uint64(0)
	for range 20000 {
		fr := g.Next(nil)
		var f rule.Fields
		want := false
		if packet.Parse(fr, &f) == packet.OK {
			k, _ := offload.KeyOf(&f)
			for i := range hw {
				want = want || hw[i].Match.Matches(&k)
			}
		}
		if _, got := n.ProcessFrame(fr); got != want {
			t.Fatalf("frame %x: dropped %v, want %v (%+v)", fr, got, want, f)
		} else if got {
			drops++
			bytes += uint64(len(fr))
		}
	}
	clk := n.clock.(*FakeClock)
	clk.Advance(time.Second)
	st, _ := n.Stats(context.Background())
	var sp, sb uint64
	for _, s := range st {
		sp += s.Packets
		sb += s.Bytes
	}
	if drops < 100 || sp != uint64(drops) || sb != bytes {
		t.Fatalf("drops %d bytes %d, counters %d/%d", drops, bytes, sp, sb)
	}
	fr := g.Next(nil)
	if a := testing.AllocsPerRun(200, func() { n.ProcessFrame(fr) }); a != 0 {
		t.Fatalf("ProcessFrame allocates %v", a)
	}
}

// Flush empties the table (as a deleted qdisc does) and tells whoever
// registered, after the table is empty.
func TestFlushNotifies(t *testing.T) {
	n := New(Config{Clock: NewFakeClock(t0)})
	mustInstall(t, n, entry("203.0.113.0/24", rule.ProtoUDP, 53))
	var seen []int
	n.OnFlush(func() {
		d, _ := n.Dump(context.Background())
		seen = append(seen, len(d))
	})
	n.Flush()
	f := pkt("203.0.113.9", rule.ProtoUDP, 53)
	if _, ok := n.Process(&f, 100); ok {
		t.Error("flushed entry still drops")
	}
	n.SetGone(true)
	if len(seen) != 2 || seen[0] != 0 {
		t.Fatalf("notifications %v, want two, the first after the table emptied", seen)
	}
}

// TestIncrementalPublishAgainstLinearScan installs and removes entries one
// call at a time, in random order, so the lookup is published after every
// change through the groups' deltas and their folds; after each call the
// packets of a fixed sample must get what a linear scan over Dump gives
// (lowest priority, then lowest handle, of the matching entries).
func TestIncrementalPublishAgainstLinearScan(t *testing.T) {
	r := rand.New(rand.NewPCG(31, 32))
	caps := offload.SoftwareFlower()
	caps.MaxEntries = 100000
	caps.InsertRate = 0
	n := New(Config{Caps: caps, Clock: NewFakeClock(t0)})
	cfg := &compile.Config{Caps: caps, PrioV4: 3, PrioV6: 4}
	var set rule.Set
	for i := range 400 {
		set.Rules = append(set.Rules, randRule(r, i))
	}
	var pool []offload.Entry
	for _, res := range compile.Set(cfg, &set) {
		pool = append(pool, res.Entries...)
	}
	pkts := make([]rule.Fields, 400)
	for i := range pkts {
		pkts[i] = randFields(r)
	}
	// And one large group of a single shape (UDP to distinct /32s, port
	// 53) whose delta fills and folds many times.
	for i := range 1500 {
		dst := fmt.Sprintf("198.18.%d.%d", i>>8, i&255)
		pool = append(pool, entry(dst+"/32", rule.ProtoUDP, 53))
		if i%5 == 0 {
			pkts = append(pkts, pkt(dst, rule.ProtoUDP, 53))
		}
	}
	check := func(step int) {
		t.Helper()
		dump, _ := n.Dump(context.Background())
		for i := range pkts {
			f := &pkts[i]
			k, _ := offload.KeyOf(f)
			var want *offload.Installed
			for j := range dump {
				d := &dump[j]
				if d.Match.Matches(&k) && (want == nil || d.Prio < want.Prio || d.Prio == want.Prio && d.Handle < want.Handle) {
					want = d
				}
			}
			hit, ok := n.Process(f, 64)
			if ok != (want != nil) || ok && (hit.Handle != want.Handle || hit.Table != want.Table()) {
				t.Fatalf("step %d, packet %+v: Process %v %+v, linear %+v", step, *f, ok, hit, want)
			}
		}
	}
	every := 20 // steps between checks; -short (the race run) checks less often
	if testing.Short() {
		every = 250
	}
	var in []offload.Entry // installed, with handles
	installs, removes := 0, 0
	for step := range 6000 {
		if len(in) > 0 && (r.IntN(3) == 0 || len(pool) == 0) {
			i := r.IntN(len(in))
			res, err := n.Remove(context.Background(), in[i:i+1])
			if err != nil || res[0].Err != nil {
				t.Fatalf("step %d: remove: %v %v", step, err, res[0].Err)
			}
			pool = append(pool, in[i])
			pool[len(pool)-1].Handle = 0
			in = slices.Delete(in, i, i+1)
			removes++
		} else if len(pool) > 0 {
			i := r.IntN(len(pool))
			e := pool[i]
			res, err := n.Install(context.Background(), []offload.Entry{e})
			if err != nil {
				t.Fatal(err)
			}
			if res[0].Err == nil {
				e.Handle = res[0].Handle
				in = append(in, e)
				installs++
			}
			pool = slices.Delete(pool, i, i+1)
		}
		if step%every == 0 {
			check(step)
		}
	}
	check(6000)
	if installs < 2000 || removes < 1000 {
		t.Fatalf("only %d installs and %d removals", installs, removes)
	}
}
