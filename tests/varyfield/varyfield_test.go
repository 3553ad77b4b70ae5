// Package varyfield is the vary-one-field differential test: for every
// field of rule.MatchFields it changes that field alone in packets that
// match a rule and in packets that do not, and requires every engine to
// decide each packet as rule.Set.Decide (the linear reference) does.
package varyfield

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/scrubd/scrubd/internal/testenv"
	"github.com/scrubd/scrubd/offload"
	"github.com/scrubd/scrubd/offload/compile"
	"github.com/scrubd/scrubd/offload/sim"
	"github.com/scrubd/scrubd/swpath/classifier"
	"github.com/scrubd/scrubd/swpath/dryrun"
	_ "github.com/scrubd/scrubd/swpath/dv/dvdryrun"
	"github.com/scrubd/scrubd/swpath/packet"
	"github.com/scrubd/scrubd/swpath/rule"
	"github.com/scrubd/scrubd/swpath/traffic"
	_ "github.com/scrubd/scrubd/swpath/xdp/xdpdryrun"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func pfx(s string) netip.Prefix { return netip.MustParsePrefix(s) }

// rules constrain every field of the table in at least one rule: a TCP
// rule with addresses, ports, flags and DSCP; an ICMP rule; a fragment
// rule; an IPv6 UDP rule with a length range; and an accept rule that a
// drop overlaps (ties are by priority, then order).
func rules() *rule.Set {
	return &rule.Set{Rules: []rule.Rule{
		{ID: "accept-one", Priority: 5, Action: rule.Accept, Match: rule.Match{
			Src: pfx("192.0.2.7/32"), Proto: []uint8{rule.ProtoTCP}, DstPort: rule.Ranges{{Lo: 81, Hi: 81}}}},
		{ID: "tcp", Priority: 10, Action: rule.Drop, Match: rule.Match{
			Src: pfx("192.0.2.0/24"), Dst: pfx("198.51.100.0/24"), Proto: []uint8{rule.ProtoTCP},
			SrcPort: rule.Ranges{{Lo: 1000, Hi: 1999}}, DstPort: rule.Ranges{{Lo: 80, Hi: 81}},
			TCPFlags: rule.TCPFlags{Value: 0x02, Mask: 0x12}, HasTCPFlags: true, DSCP: 1<<10 | 1<<46}},
		{ID: "icmp", Priority: 20, Action: rule.Drop, Match: rule.Match{
			Src: pfx("192.0.2.0/24"), Dst: pfx("198.51.100.0/24"), Proto: []uint8{rule.ProtoICMP},
			ICMPType: rule.Ranges{{Lo: 8, Hi: 8}}, ICMPCode: rule.Ranges{{Lo: 0, Hi: 0}}}},
		{ID: "fragments", Priority: 30, Action: rule.Drop, Match: rule.Match{
			Dst: pfx("198.51.100.0/24"), Fragment: rule.IsFragment}},
		{ID: "udp6-length", Priority: 40, Action: rule.Drop, Match: rule.Match{
			Src: pfx("2001:db8::/32"), Proto: []uint8{rule.ProtoUDP}, DstPort: rule.Ranges{{Lo: 53, Hi: 53}},
			Length: rule.Ranges{{Lo: 100, Hi: 600}}}},
	}}
}

// bases are packets each variant starts from: ones that match a rule and
// ones that miss it by one field.
func bases() map[string]traffic.Frame {
	a := netip.MustParseAddr
	return map[string]traffic.Frame{
		"tcp-match": {Family: rule.IPv4, Src: a("192.0.2.9"), Dst: a("198.51.100.20"), Proto: rule.ProtoTCP,
			SrcPort: 1500, DstPort: 80, TCPFlags: 0x02, DSCP: 46, Size: 120},
		"tcp-miss": {Family: rule.IPv4, Src: a("192.0.2.9"), Dst: a("198.51.100.20"), Proto: rule.ProtoTCP,
			SrcPort: 999, DstPort: 82, TCPFlags: 0x12, DSCP: 11, Size: 120},
		"accept-match": {Family: rule.IPv4, Src: a("192.0.2.7"), Dst: a("198.51.100.20"), Proto: rule.ProtoTCP,
			SrcPort: 1500, DstPort: 81, TCPFlags: 0x02, DSCP: 46, Size: 120},
		"icmp-match": {Family: rule.IPv4, Src: a("192.0.2.9"), Dst: a("198.51.100.20"), Proto: rule.ProtoICMP,
			ICMPType: 8, ICMPCode: 0, Size: 98},
		"udp6-match": {Family: rule.IPv6, Src: a("2001:db8::9"), Dst: a("2001:db8:1::1"), Proto: rule.ProtoUDP,
			SrcPort: 4000, DstPort: 53, Size: 200},
	}
}

// vary returns the variants of base for one field of the table, each
// differing from base in that field only: every single-bit flip of the
// field's value (a key that drops a bit then shares a decision with the
// base) and the boundary values of the rules' ranges.
func vary(name string, base traffic.Frame) []traffic.Frame {
	var out []traffic.Frame
	with := func(f func(*traffic.Frame)) {
		v := base
		f(&v)
		out = append(out, v)
	}
	flips := func(width int, get func(*traffic.Frame) uint64, set func(*traffic.Frame, uint64), extra ...uint64) {
		b := get(&base)
		for bit := 0; bit < width; bit++ {
			with(func(v *traffic.Frame) { set(v, b^1<<bit) })
		}
		for _, x := range extra {
			with(func(v *traffic.Frame) { set(v, x) })
		}
	}
	addr := func(get func(*traffic.Frame) netip.Addr, set func(*traffic.Frame, netip.Addr)) {
		b := get(&base).AsSlice()
		for bit := 0; bit < 8*len(b); bit++ {
			c := slices.Clone(b)
			c[bit/8] ^= 0x80 >> (bit % 8)
			x, _ := netip.AddrFromSlice(c)
			with(func(v *traffic.Frame) { set(v, x) })
		}
	}
	switch name {
	case "family":
		// The same addresses as IPv4-mapped IPv6 (they stay IPv6).
		if base.Family == rule.IPv4 {
			with(func(v *traffic.Frame) {
				v.Family = rule.IPv6
				v.Src = netip.AddrFrom16(base.Src.As16())
				v.Dst = netip.AddrFrom16(base.Dst.As16())
				if v.Proto == rule.ProtoICMP {
					v.Proto = rule.ProtoICMPv6
				}
			})
		}
	case "protocol":
		for _, p := range []uint8{rule.ProtoTCP, rule.ProtoUDP, rule.ProtoSCTP, rule.ProtoICMP, rule.ProtoICMPv6, 47, 0} {
			if p != base.Proto {
				with(func(v *traffic.Frame) { v.Proto = p })
			}
		}
	case "l4", "fragment":
		// L4 presence follows the fragment state: a non-first fragment
		// has no upper-layer header.
		with(func(v *traffic.Frame) { v.MF = true })
		with(func(v *traffic.Frame) { v.FragOffset = 1 })
		with(func(v *traffic.Frame) { v.MF, v.FragOffset = true, 1 })
		with(func(v *traffic.Frame) { v.DF = true })
		if base.Family == rule.IPv6 {
			for i := range out {
				out[i].Ext = []traffic.Ext{{Type: 44}}
			}
		}
	case "dscp":
		flips(6, func(v *traffic.Frame) uint64 { return uint64(v.DSCP) }, func(v *traffic.Frame, x uint64) { v.DSCP = uint8(x) }, 10, 46, 0, 63)
	case "tcp_flags":
		flips(8, func(v *traffic.Frame) uint64 { return uint64(v.TCPFlags) }, func(v *traffic.Frame, x uint64) { v.TCPFlags = uint8(x) }, 0x02, 0x12, 0, 0xff)
	case "icmp_type":
		flips(8, func(v *traffic.Frame) uint64 { return uint64(v.ICMPType) }, func(v *traffic.Frame, x uint64) { v.ICMPType = uint8(x) }, 7, 8, 9)
	case "icmp_code":
		flips(8, func(v *traffic.Frame) uint64 { return uint64(v.ICMPCode) }, func(v *traffic.Frame, x uint64) { v.ICMPCode = uint8(x) }, 0, 1)
	case "src_port":
		flips(16, func(v *traffic.Frame) uint64 { return uint64(v.SrcPort) }, func(v *traffic.Frame, x uint64) { v.SrcPort = uint16(x) }, 999, 1000, 1999, 2000, 0, 65535)
	case "dst_port":
		flips(16, func(v *traffic.Frame) uint64 { return uint64(v.DstPort) }, func(v *traffic.Frame, x uint64) { v.DstPort = uint16(x) }, 52, 53, 54, 79, 80, 81, 82, 0, 65535)
	case "length":
		// Frame size = IP length + 14 (untagged); 60 bytes at least.
		for _, ipLen := range []int{99, 100, 101, 599, 600, 601, 64, 128, 256, 512, 1024, 1500} {
			with(func(v *traffic.Frame) { v.Size = ipLen + 14 })
		}
	case "source":
		addr(func(v *traffic.Frame) netip.Addr { return v.Src }, func(v *traffic.Frame, x netip.Addr) { v.Src = x })
	case "destination":
		addr(func(v *traffic.Frame) netip.Addr { return v.Dst }, func(v *traffic.Frame, x netip.Addr) { v.Dst = x })
	default:
		panic("vary: no variants for field " + name + ": add them here with the field")
	}
	return out
}

type sample struct {
	field, base string
	frame       []byte
	variant     bool
}

// engine decides frames in order (the flow cache sees each variant right
// after its base).
type engine struct {
	name   string
	decide func(frames [][]byte, out []int32) error
	close  func() error
	// dropOnly: the engine reports only whether it dropped (offload/sim),
	// and only rules it could offload are held to the reference.
	dropOnly    bool
	offloadable map[int32]bool
}

func TestVaryOneField(t *testing.T) {
	set := rules()
	var samples []sample
	for _, mf := range rule.MatchFields {
		for bname, b := range bases() {
			vs := vary(mf.Name, b)
			base := traffic.AppendFrame(nil, &b)
			for _, v := range vs {
				// The base again before each variant: a cache that keys
				// the two alike hands the variant the base's decision.
				samples = append(samples, sample{mf.Name, bname, base, false},
					sample{mf.Name, bname, traffic.AppendFrame(nil, &v), true})
			}
		}
	}
	frames := make([][]byte, len(samples))
	want := make([]int32, len(samples))
	for i, s := range samples {
		frames[i] = s.frame
		var f rule.Fields
		packet.Parse(s.frame, &f)
		want[i] = int32(set.Decide(&f))
	}
	// The samples reach every rule and the pass verdict.
	hit := map[int32]int{}
	for _, w := range want {
		hit[w]++
	}
	for i := -1; i < len(set.Rules); i++ {
		if hit[int32(i)] == 0 {
			t.Fatalf("no sample is decided by %d (hits %v): the test would not see that rule's fields", i, hit)
		}
	}

	engines := []engine{tableEngine(t, set), cacheEngine(t, set), simEngine(t, set)}
	for _, name := range []string{"go", "dv", "xdp"} {
		if e, ok := dryrunEngine(t, name, set); ok {
			engines = append(engines, e)
		}
	}
	// coverage[engine][field] = variants compared.
	coverage := map[string]map[string]int{}
	for _, e := range engines {
		got := make([]int32, len(frames))
		if err := e.decide(frames, got); err != nil {
			t.Fatalf("%s: %v", e.name, err)
		}
		if e.close != nil {
			if err := e.close(); err != nil {
				t.Errorf("%s: close: %v", e.name, err)
			}
		}
		coverage[e.name] = map[string]int{}
		bad := 0
		for i, s := range samples {
			ok := got[i] == want[i]
			if e.dropOnly {
				refDrop := want[i] >= 0 && set.Rules[want[i]].Action == rule.Drop
				dropped := got[i] == 1
				ok = !(dropped && !refDrop) && !(refDrop && e.offloadable[want[i]] && !dropped)
			}
			if s.variant {
				coverage[e.name][s.field]++
			}
			if !ok {
				bad++
				if bad <= 5 {
					var f rule.Fields
					packet.Parse(s.frame, &f)
					t.Errorf("%s: field %s, base %s, sample %d (%+v): engine %d, reference %d", e.name, s.field, s.base, i, f, got[i], want[i])
				}
			}
		}
		if bad > 5 {
			t.Errorf("%s: %d samples differ in all", e.name, bad)
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%-12s", "field")
	for _, e := range engines {
		fmt.Fprintf(&b, " %8s", e.name)
	}
	for _, mf := range rule.MatchFields {
		fmt.Fprintf(&b, "\n%-12s", mf.Name)
		for _, e := range engines {
			n := coverage[e.name][mf.Name]
			if n == 0 {
				t.Errorf("%s: no variant of field %s compared", e.name, mf.Name)
			}
			fmt.Fprintf(&b, " %8d", n)
		}
	}
	t.Logf("variants compared (engines x fields), %d samples with their bases:\n%s", len(samples), b.String())
}

// tableEngine decides with the compiled Table alone (no cache).
func tableEngine(t *testing.T, set *rule.Set) engine {
	c, err := classifier.New(set)
	if err != nil {
		t.Fatal(err)
	}
	return engine{name: "table", decide: func(frames [][]byte, out []int32) error {
		var f rule.Fields
		for i, fr := range frames {
			packet.Parse(fr, &f)
			out[i] = int32(c.Table().Decide(&f))
		}
		return nil
	}}
}

// cacheEngine decides through a classifier worker, whose flow cache the
// set's tables turn on, in bursts of 32 in sample order, every packet
// through the cache (CacheAlways: not bypassed where this machine finds
// it costs more than it spares).
func cacheEngine(t *testing.T, set *rule.Set) engine {
	c, err := classifier.New(set)
	if err != nil {
		t.Fatal(err)
	}
	w := c.NewWorker()
	w.SetCachePolicy(classifier.CacheAlways)
	return engine{name: "cache", decide: func(frames [][]byte, out []int32) error {
		fs := make([]rule.Fields, len(frames))
		lens := make([]uint32, len(frames))
		for i, fr := range frames {
			packet.Parse(fr, &fs[i])
			lens[i] = uint32(len(fr))
		}
		res := make([]classifier.Result, len(frames))
		for i := 0; i < len(fs); i += 32 {
			j := min(i+32, len(fs))
			w.ClassifyBurst(fs[i:j], lens[i:j], res[i:j])
		}
		for i := range res {
			out[i] = res[i].Rule
		}
		if s := c.Snapshot(); s.CacheHits < uint64(len(frames))/4 {
			return fmt.Errorf("the flow cache hit %d of %d packets: it was not exercised", s.CacheHits, len(frames))
		}
		return nil
	}, close: func() error { w.Close(); return nil }}
}

// simEngine installs what offload/compile makes of the set into the
// simulated NIC and reports 1 for a frame the NIC drops, 0 otherwise.
func simEngine(t *testing.T, set *rule.Set) engine {
	// Every flower key (the kernel's software flower has them all; mlx5
	// lacks first-fragment), with mlx5's table limits. Accept rules go in
	// as pass entries in front of the drops (as hwpath installs them), and
	// each drop is compiled on its own, as hwpath does while the pass
	// entries of the accept rules it overlaps are installed.
	caps := offload.MLX5(100000)
	caps.Keys = offload.AllKeys
	cfg := &compile.Config{Caps: caps, PassPrioV4: 1, PassPrioV6: 2, PrioV4: 3, PrioV6: 4}
	n := sim.New(sim.Config{Caps: caps, Clock: sim.NewFakeClock(t0)})
	e := engine{name: "sim", dropOnly: true, offloadable: map[int32]bool{}}
	for i := range set.Rules {
		r := &set.Rules[i]
		var res compile.Result
		if r.Action == rule.Accept {
			if res = compile.Pass(cfg, r); !res.Offloadable {
				t.Fatalf("accept rule %s gets no pass entries: %s", r.ID, res.Detail)
			}
		} else if res = compile.Rule(cfg, r); !res.Offloadable {
			t.Logf("rule %s stays out of the simulated table: %s", r.ID, res.Detail)
			continue
		} else {
			e.offloadable[int32(i)] = true
		}
		rs, err := n.Install(context.Background(), res.Entries)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rs {
			if r.Err != nil && !offload.IsExists(r.Err) {
				t.Fatalf("rule %s: %v", res.RuleID, r.Err)
			}
		}
	}
	if len(e.offloadable) < 3 {
		t.Fatalf("only %d rules offloadable: the simulated table would see too few fields", len(e.offloadable))
	}
	e.decide = func(frames [][]byte, out []int32) error {
		for i, fr := range frames {
			out[i] = 0
			if _, dropped := n.ProcessFrame(fr); dropped {
				out[i] = 1
			}
		}
		return nil
	}
	return e
}

// dryrunEngine opens a registered dryrun engine (go, dv, xdp) loaded with
// set. XDP needs root and bpf(2): missing, it skips (fails under CI).
func dryrunEngine(t *testing.T, name string, set *rule.Set) (engine, bool) {
	eng, err := dryrun.NewEngine(name)
	if err == nil {
		err = eng.Load(set)
	}
	if err != nil {
		if name == "xdp" && (errors.Is(err, unix.ENOSYS) || errors.Is(err, ebpf.ErrNotSupported) || os.Geteuid() != 0) {
			// Not a skip of the whole test: the other engines still run.
			// CI runs as root on a real kernel in its amd64 pass: there
			// the XDP engine must run.
			if testenv.CI() && runtime.GOARCH == "amd64" {
				t.Fatalf("CI=true, but the xdp engine cannot run: %v", err)
			}
			t.Logf("xdp engine not run here (needs root and bpf(2)): %v", err)
			return engine{}, false
		}
		t.Fatalf("%s: %v", name, err)
	}
	return engine{name: name, decide: eng.Decide, close: eng.Close}, true
}
