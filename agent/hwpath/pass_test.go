package hwpath

import (
	"context"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/scrubd/scrubd/agent/dataplane"
	"github.com/scrubd/scrubd/offload"
	"github.com/scrubd/scrubd/offload/compile"
	"github.com/scrubd/scrubd/offload/sim"
	"github.com/scrubd/scrubd/swpath/rule"
)

func newPassPath(caps offload.Capabilities, nic *sim.NIC) *Path {
	return New(Config{Name: "sim", Compile: compile.Config{Caps: caps, PrioV4: 10, PrioV6: 11, PassPrioV4: 8, PassPrioV6: 9},
		Owner: offload.Owner{Chain: 0, PrioLo: 8, PrioHi: 11}}, nic)
}

func tcpSeg(src, dst string, sport, dport uint16, flags uint8) *rule.Fields {
	return &rule.Fields{Family: rule.IPv4, Proto: rule.ProtoTCP, L4: true, Frag: rule.NotFragment, SrcPort: sport, DstPort: dport,
		TCPFlags: flags, Src: rule.AddrFrom(netip.MustParseAddr(src)), Dst: rule.AddrFrom(netip.MustParseAddr(dst)), Length: 64}
}

// A drop rule overlapping an accept rule goes to hardware whole, with the
// accept rule's pass entries in front of it: the accepted packets pass in
// hardware (counted on the pass entry), the rest of the drop's packets are
// dropped. The pass entries are shared, survive a restart (read back, not
// reported as a rule), and go once no hardware drop needs them.
func TestPassEntriesExceptAcceptInHardware(t *testing.T) {
	caps := offload.MLX5(64)
	nic := sim.New(sim.Config{Caps: caps, Clock: sim.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))})
	p := newPassPath(caps, nic)
	set := parse(t, `rules:
  - {id: bgp-in, priority: 0, action: accept, match: {src: 192.0.2.1/32, dst: 192.0.2.10/32, proto: tcp, dst_port: "179"}}
  - {id: bgp-out, priority: 0, action: accept, match: {src: 192.0.2.1/32, dst: 192.0.2.10/32, proto: tcp, src_port: "179"}}
  - {id: syn, action: drop, match: {dst: 192.0.2.0/24, proto: tcp, tcp_flags: {value: [syn], mask: [syn, ack]}}}
  - {id: all-tcp, action: drop, match: {dst: 192.0.2.0/24, proto: tcp}}
  - {id: udp, action: drop, match: {dst: 192.0.2.0/24, proto: udp}}
`)
	ctx := context.Background()
	for i := 2; i < 5; i++ {
		if _, err := p.Compile(&set.Rules[i], set); err != nil {
			t.Fatalf("%s: %v", set.Rules[i].ID, err)
		}
		if err := p.Install(ctx, &set.Rules[i], set); err != nil {
			t.Fatalf("%s: %v", set.Rules[i].ID, err)
		}
	}
	const syn, ack = 0x02, 0x10
	for _, tc := range []struct {
		f       *rule.Fields
		drop    bool
		pass    bool
		comment string
	}{
		{tcpSeg("192.0.2.1", "192.0.2.10", 40000, 179, syn), false, true, "the peer opens the session"},
		{tcpSeg("192.0.2.1", "192.0.2.10", 179, 40000, ack), false, true, "the peer answers our connection"},
		{tcpSeg("192.0.2.1", "192.0.2.10", 40000, 80, syn), true, false, "the peer's other SYNs"},
		{tcpSeg("198.51.100.9", "192.0.2.10", 40000, 179, syn), true, false, "anyone else to the BGP port"},
		{tcpSeg("198.51.100.9", "192.0.2.20", 1, 2, ack), true, false, "other TCP"},
	} {
		h, drop := nic.Process(tc.f, 64)
		if drop != tc.drop || h.Pass != tc.pass {
			t.Errorf("%s: drop %v pass %v, want %v %v", tc.comment, drop, h.Pass, tc.drop, tc.pass)
		}
	}
	// Two accept rules, one IPv4 pass entry each, shared by the two TCP
	// drops; the UDP drop does not overlap them. Budget counts them.
	c := nic.Capacity()
	pass := 0
	for _, tu := range c.Tables {
		if tu.Prio == 8 {
			pass = tu.Entries
		}
	}
	if pass != 2 {
		t.Fatalf("pass table holds %d entries, want 2 (%+v)", pass, c)
	}
	b, _ := p.Budget(ctx)
	if b.UsedEntries != c.Entries {
		t.Fatalf("budget %d entries, device %d", b.UsedEntries, c.Entries)
	}
	// Counters: the pass entries count under their accept rules' keys.
	st, err := p.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st[p.Key(&set.Rules[0])].Packets != 1 || st[p.Key(&set.Rules[1])].Packets != 1 {
		t.Fatalf("pass counters %v", st)
	}
	// A restart: the drops come back as rules, the pass entries as what
	// they are.
	q := newPassPath(caps, nic)
	keys, err := q.Installed(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 3 {
		t.Fatalf("installed keys %v, want the three drops", keys)
	}
	for _, k := range keys {
		if k == q.Key(&set.Rules[0]) || k == q.Key(&set.Rules[1]) {
			t.Fatalf("a pass entry was reported as a rule")
		}
	}
	// Without the TCP drops nothing needs the pass entries.
	for _, i := range []int{2, 3} {
		if err := q.Remove(ctx, q.Key(&set.Rules[i])); err != nil {
			t.Fatal(err)
		}
	}
	if err := q.PruneAccepts(ctx, set); err != nil {
		t.Fatal(err)
	}
	if c := nic.Capacity(); c.Entries != 1 {
		t.Fatalf("after prune %d entries, want the UDP drop only", c.Entries)
	}
}

// A new accept rule overlapping a drop already in hardware gets its pass
// entries from SyncAccepts before anything else; an accept rule that cannot
// have pass entries (a packet length) keeps the drops it overlaps out of
// hardware, with the reason; without pass priorities the old behaviour
// holds (the drop stays in software).
func TestSyncAcceptsAndFallback(t *testing.T) {
	caps := offload.MLX5(64)
	nic := sim.New(sim.Config{Caps: caps, Clock: sim.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))})
	p := newPassPath(caps, nic)
	ctx := context.Background()
	before := parse(t, `rules:
  - {id: flood, action: drop, match: {dst: 203.0.113.0/24, proto: udp}}
`)
	if err := p.Install(ctx, &before.Rules[0], before); err != nil {
		t.Fatal(err)
	}
	after := parse(t, `rules:
  - {id: dns, priority: 0, action: accept, match: {src: 198.51.100.53/32, proto: udp, src_port: "53"}}
  - {id: flood, action: drop, match: {dst: 203.0.113.0/24, proto: udp}}
`)
	f := udpFrom("198.51.100.53", "203.0.113.5", 53, 5000)
	if _, drop := nic.Process(f, 100); !drop {
		t.Fatal("before the accept rule: not dropped")
	}
	p.SyncAccepts(ctx, after)
	if h, drop := nic.Process(f, 100); drop || !h.Pass {
		t.Fatalf("after SyncAccepts: drop %v pass %v", drop, h.Pass)
	}
	if _, err := p.Compile(&after.Rules[1], after); err != nil {
		t.Fatalf("flood with the accept rule in hardware: %v", err)
	}
	// An accept rule the device cannot express.
	lenSet := parse(t, `rules:
  - {id: small, priority: 0, action: accept, match: {dst: 203.0.113.7/32, length: "0-100"}}
  - {id: flood, action: drop, match: {dst: 203.0.113.0/24, proto: udp}}
`)
	_, err := p.Compile(&lenSet.Rules[1], lenSet)
	if dataplane.KindOf(err) != dataplane.KindAcceptOverlap || !strings.Contains(err.Error(), "packet-length") {
		t.Fatalf("accept with length: %v", err)
	}
	// No pass priorities: software, as before.
	old, _, _ := newPath(caps, 0)
	_, err = old.Compile(&after.Rules[1], after)
	if dataplane.KindOf(err) != dataplane.KindAcceptOverlap {
		t.Fatalf("without pass priorities: %v", err)
	}
}

func udpFrom(src, dst string, sport, dport uint16) *rule.Fields {
	f := udpTo(dst, sport, dport)
	f.Src = rule.AddrFrom(netip.MustParseAddr(src))
	return f
}

// Pass entries go with the last hardware drop that relies on them, not
// before: removing one of two drops behind an accept rule keeps its pass
// entry, removing the other takes it out.
func TestPassEntriesFollowTheirDrops(t *testing.T) {
	caps := offload.MLX5(64)
	nic := sim.New(sim.Config{Caps: caps, Clock: sim.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))})
	p := newPassPath(caps, nic)
	set := parse(t, `rules:
  - {id: rr, priority: 0, action: accept, match: {src: 192.0.2.254/32}}
  - {id: a, action: drop, match: {dst: 203.0.113.1/32, proto: udp}}
  - {id: b, action: drop, match: {dst: 203.0.113.2/32, proto: tcp}}
`)
	ctx := context.Background()
	for i := 1; i < 3; i++ {
		if err := p.Install(ctx, &set.Rules[i], set); err != nil {
			t.Fatal(err)
		}
	}
	passEntries := func() int {
		n := 0
		d, _ := nic.Dump(ctx)
		for _, x := range d {
			if x.Pass {
				n++
			}
		}
		return n
	}
	if n := passEntries(); n != 1 {
		t.Fatalf("%d pass entries, want 1 shared", n)
	}
	if err := p.Remove(ctx, p.Key(&set.Rules[1])); err != nil {
		t.Fatal(err)
	}
	if n := passEntries(); n != 1 {
		t.Fatalf("after removing a: %d pass entries, want 1 (b still needs it)", n)
	}
	f := tcpSeg("192.0.2.254", "203.0.113.2", 1, 2, 0x10)
	if h, drop := nic.Process(f, 64); drop || !h.Pass {
		t.Fatalf("the reflector's packet to b: drop %v pass %v", drop, h.Pass)
	}
	if err := p.Remove(ctx, p.Key(&set.Rules[2])); err != nil {
		t.Fatal(err)
	}
	if n := passEntries(); n != 0 {
		t.Fatalf("after removing b: %d pass entries, want 0", n)
	}
}

// TestSplitOrPass measures what the two ways of excepting protected
// traffic in hardware cost, on the cases the package doc names: an exact
// split of each drop around the accept rule (offload/compile's Set) and
// pass entries (compile.Pass). The figures in the package doc are these.
func TestSplitOrPass(t *testing.T) {
	caps := offload.MLX5(4096)
	cfg := compile.Config{Caps: caps, PrioV4: 10, PrioV6: 11, PassPrioV4: 8, PassPrioV6: 9}
	// A reflector protected with direction both, 900 FlowSpec drops.
	y := "rules:\n  - {id: rr-src, priority: 0, action: accept, match: {src: 192.0.2.254/32}}\n  - {id: rr-dst, priority: 0, action: accept, match: {dst: 192.0.2.254/32}}\n"
	for i := range 900 {
		y += "  - {id: fs-" + itoa(i) + ", priority: 500, action: drop, match: {dst: 198.18." + itoa(i/200) + "." + itoa(1+i%200) + "/32, proto: tcp}}\n"
	}
	set := parse(t, y)
	entries := 0
	shapes := map[compile.TableMask]bool{}
	for _, res := range compile.Set(&cfg, set) {
		if !res.Offloadable {
			continue
		}
		entries += len(res.Entries)
		for _, m := range res.Masks {
			shapes[m] = true
		}
	}
	if entries != 900*32 || len(shapes) != 32 {
		t.Fatalf("split: %d entries, %d mask shapes; the doc says 28800 and 32", entries, len(shapes))
	}
	b := compile.NewBudget(caps, nil)
	fit := 0
	for _, res := range compile.Set(&cfg, set) {
		if res.Offloadable && b.Take(&res) {
			fit++
		}
	}
	pres := compile.Pass(&cfg, &set.Rules[0])
	if !pres.Offloadable || len(pres.Entries) != 1 || len(pres.Masks) != 1 {
		t.Fatalf("pass: %+v", pres)
	}
	t.Logf("reflector, 900 drops: split %d entries, %d mask shapes (%d rules fit a 4096-entry table with 15 large groups); pass: %d entry, %d shape, and the 900 drops' own 900 entries",
		entries, len(shapes), fit, len(pres.Entries), len(pres.Masks))
	if fit != 0 {
		t.Fatalf("%d split rules fit; the doc says none", fit)
	}
	// The BGP session's rule against a drop on the local address's prefix:
	// three fields differ, and the split refuses.
	bgp := parse(t, `rules:
  - {id: bgp-in, priority: 0, action: accept, match: {src: 192.0.2.1/32, dst: 203.0.113.1/32, proto: tcp, dst_port: "179"}}
  - {id: syn, action: drop, match: {dst: 203.0.113.0/24, proto: tcp, tcp_flags: {value: [syn], mask: [syn, ack]}}}
`)
	if res := compile.Set(&cfg, bgp)[1]; res.Offloadable || res.Reason != compile.ReasonAllowList {
		t.Fatalf("split of the SYN drop around the BGP rule: offloadable %v (%s)", res.Offloadable, res.Reason)
	}
	if res := compile.Pass(&cfg, &bgp.Rules[0]); !res.Offloadable || len(res.Entries) != 1 {
		t.Fatalf("pass entry for the BGP rule: %+v", res)
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

// A drop that has no room together with its accept rule's pass entry is
// refused whole (table full) and leaves nothing behind; once room is made
// it goes in.
func TestPassEntriesNeedRoomWithTheDrop(t *testing.T) {
	caps := offload.MLX5(2)
	nic := sim.New(sim.Config{Caps: caps, Clock: sim.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))})
	p := newPassPath(caps, nic)
	ctx := context.Background()
	set := parse(t, `rules:
  - {id: rr, priority: 0, action: accept, match: {src: 192.0.2.254/32}}
  - {id: filler, action: drop, match: {dst: 198.51.100.0/24, proto: udp}}
  - {id: a, action: drop, match: {dst: 203.0.113.0/24, proto: udp}}
`)
	if err := p.Install(ctx, &set.Rules[1], set); err != nil { // overlaps rr: pass + drop, the table is full
		t.Fatal(err)
	}
	err := p.Install(ctx, &set.Rules[2], set) // rr's pass entry is there: needs 1, 0 free
	if dataplane.KindOf(err) != dataplane.KindTableFull {
		t.Fatalf("third entry: %v, want table full", err)
	}
	if c := nic.Capacity(); c.Entries != 2 {
		t.Fatalf("%d entries after the refusal, want 2", c.Entries)
	}
	if err := p.Remove(ctx, p.Key(&set.Rules[1])); err != nil {
		t.Fatal(err)
	}
	if c := nic.Capacity(); c.Entries != 0 {
		t.Fatalf("%d entries after removing the only drop, want 0", c.Entries)
	}
	if err := p.Install(ctx, &set.Rules[2], set); err != nil {
		t.Fatalf("with room: %v", err)
	}
	small := offload.MLX5(1)
	nic2 := sim.New(sim.Config{Caps: small, Clock: sim.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))})
	q := newPassPath(small, nic2)
	if err := q.Install(ctx, &set.Rules[2], set); dataplane.KindOf(err) != dataplane.KindTableFull {
		t.Fatalf("drop and pass entry in a one-entry table: %v, want table full", err)
	}
	if c := nic2.Capacity(); c.Entries != 0 {
		t.Fatalf("%d entries left behind, want 0", c.Entries)
	}
}

// A drop already in hardware that a new accept rule overlaps compiles only
// once that rule's pass entries are in: without SyncAccepts (a wrapper that
// hides it) placement sees the drop as no longer offloadable and takes it
// out, instead of leaving it dropping the accepted packets.
func TestDropInHardwareNeedsItsPassEntries(t *testing.T) {
	caps := offload.MLX5(64)
	nic := sim.New(sim.Config{Caps: caps, Clock: sim.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))})
	p := newPassPath(caps, nic)
	ctx := context.Background()
	before := parse(t, "rules:\n  - {id: flood, action: drop, match: {dst: 203.0.113.0/24, proto: udp}}\n")
	if err := p.Install(ctx, &before.Rules[0], before); err != nil {
		t.Fatal(err)
	}
	after := parse(t, `rules:
  - {id: dns, priority: 0, action: accept, match: {src: 198.51.100.53/32, proto: udp, src_port: "53"}}
  - {id: flood, action: drop, match: {dst: 203.0.113.0/24, proto: udp}}
`)
	if _, err := p.Compile(&after.Rules[1], after); dataplane.KindOf(err) != dataplane.KindAcceptOverlap {
		t.Fatalf("in hardware, new accept rule without pass entries: %v, want accept overlap", err)
	}
	fresh := parse(t, `rules:
  - {id: dns, priority: 0, action: accept, match: {src: 198.51.100.53/32, proto: udp, src_port: "53"}}
  - {id: other, action: drop, match: {dst: 198.18.0.0/24, proto: udp, src_port: "50-60"}}
`)
	if _, err := p.Compile(&fresh.Rules[1], fresh); err != nil {
		t.Fatalf("a drop not yet in hardware whose accept rule can have pass entries: %v", err)
	}
	p.SyncAccepts(ctx, after)
	if _, err := p.Compile(&after.Rules[1], after); err != nil {
		t.Fatalf("after SyncAccepts: %v", err)
	}
}
