//go:build linux

package xdp

import (
	"bytes"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"

	"github.com/scrubd/scrubd/swpath/packet"
	"github.com/scrubd/scrubd/swpath/rule"
	"github.com/scrubd/scrubd/swpath/traffic"
)

// BenchmarkVethPipapo compares the XDP engine's general path with
// nftables' own classifier for multi-field rules: the same drop-only
// ClassBench-style sets (1k and 10k rules) as nftables sets with
// `flags interval` over ip saddr . ip daddr . meta l4proto . th sport .
// th dport (the kernel's pipapo set, net/netfilter/nft_set_pipapo.c) on
// netdev ingress, and as the XDP engine's rules, on veth with the in-kernel
// live-frames sender on CPU 0 (as BenchmarkVethDrop).
//
// Two streams, the same for both receivers: "1flow", one frame that a rule
// drops, over and over (a single flow); "fresh", a ring of 65536 frames
// with distinct 5-tuples, 95 % of them dropped by a rule of the set and 5 %
// by none (freshRing), written over the sent frame by the ring program
// before each send: a spoofed flood, every frame a new 5-tuple until the
// ring comes round. The baselines "nft-drop" (a netdev ingress chain whose
// one rule drops everything) and "xdp-drop" (an XDP program that only
// drops) take each stream first: what the sender, veth and the hook cost
// without a classifier.
//
// Mpps is what the receiver dropped per second of sending, Mpps/cpu-s per
// second of the sending thread's CPU time (the receive path runs on its
// core), drop-frac what it dropped per frame sent (0.95 on the fresh
// stream when it drops what the set says), ns/frame-cpu the core's time
// per dropped frame and filter-ns that less the baseline's for the same
// stream: what the classifier adds per dropped frame (on the fresh stream,
// with the 5 % of passed frames' trip up the stack spread over the dropped
// ones, alike for both receivers). x-pipapo and x-pipapo-cpu are the XDP
// engine's figures over nftables' for the same set and stream, measured
// right before it, x-pipapo-filter the ratio of their filter-ns.
func BenchmarkVethPipapo(b *testing.B) {
	l, vb, vaMAC, gen := newBenchLab(b)
	type stream struct {
		name  string
		gen   *liveGen
		frame []byte
	}
	streams := func(set *rule.Set) []stream {
		frames, _ := freshRing(b, set, 1<<16, vaMAC, l.vbMAC)
		r := newRing(b, frames)
		return []stream{
			{"1flow", gen, pipapoFrame(b, set, vaMAC, l.vbMAC)},
			{"fresh", newGen(b, r.program(b, ringTX, nil), r), frames[0]},
		}
	}
	report := func(b *testing.B, m [3]float64, base float64) {
		b.ReportMetric(m[0], "Mpps")
		b.ReportMetric(m[1], "Mpps/cpu-s")
		b.ReportMetric(m[2], "drop-frac")
		b.ReportMetric(1e3/m[1], "ns/frame-cpu")
		if base > 0 {
			b.ReportMetric(1e3/m[1]-1e3/base, "filter-ns")
		}
		b.ReportMetric(0, "ns/op")
	}
	measure := func(b *testing.B, st stream, count func() uint64) [3]float64 {
		mpps, cpu, frac := sendMeasure(b, l, st.gen, st.frame, count)
		return [3]float64{mpps, cpu, frac}
	}
	xdpOn := func(b *testing.B, prog *ebpf.Program) func() {
		var lk link.Link
		var err error
		l.in(b, l.fdB, func() {
			lk, err = link.AttachXDP(link.XDPOptions{Program: prog, Interface: l.vb, Flags: link.XDPDriverMode})
		})
		if err != nil {
			b.Fatal(err)
		}
		return func() { lk.Close() }
	}
	// Baselines, on the 1k set's streams (no classifier reads the set).
	nftBase, xdpBase := map[string]float64{}, map[string]float64{}
	for _, st := range streams(traffic.ClassBenchRules(1000, 1000)) {
		b.Run("nft-drop/"+st.name, func(b *testing.B) {
			count, teardown := nftLoad(b, l.nsB, []byte(fmt.Sprintf(
				"table netdev scrubbench {\n counter c { }\n chain ingress {\n  type filter hook ingress device %q priority -500; policy accept;\n  counter name \"c\" drop\n }\n}\n", vb)))
			defer teardown()
			m := measure(b, st, count)
			nftBase[st.name] = m[1]
			report(b, m, 0)
		})
		b.Run("xdp-drop/"+st.name, func(b *testing.B) {
			counts, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.PerCPUArray, KeySize: 4, ValueSize: 8, MaxEntries: 1})
			if err != nil {
				b.Fatal(err)
			}
			defer counts.Close()
			prog := dropCounter(b, counts)
			defer xdpOn(b, prog)()
			m := measure(b, st, func() uint64 {
				var per []uint64
				if err := counts.Lookup(uint32(0), &per); err != nil {
					b.Fatal(err)
				}
				var s uint64
				for _, v := range per {
					s += v
				}
				return s
			})
			xdpBase[st.name] = m[1]
			report(b, m, 0)
		})
	}
	for _, n := range []int{1000, 10000} {
		set := traffic.ClassBenchRules(uint64(n), n)
		label := strconv.Itoa(n/1000) + "k"
		for _, st := range streams(set) {
			var nft [3]float64
			b.Run("nft-pipapo/"+label+"/"+st.name, func(b *testing.B) {
				count, teardown := nftPipapoSetup(b, l.nsB, vb, set)
				defer teardown()
				nft = measure(b, st, count)
				report(b, nft, nftBase[st.name])
			})
			b.Run("xdp/"+label+"/"+st.name, func(b *testing.B) {
				e, err := New(Options{})
				if err != nil {
					b.Fatal(err)
				}
				defer e.Close()
				if err := e.Replace(set); err != nil {
					b.Fatal(err)
				}
				l.in(b, l.fdB, func() { _, err = e.Attach(l.vb, false) })
				if err != nil {
					b.Fatal(err)
				}
				defer e.Detach()
				m := measure(b, st, func() uint64 {
					v, err := e.Verdicts()
					if err != nil {
						b.Fatal(err)
					}
					return v[Dropped].Packets
				})
				report(b, m, xdpBase[st.name])
				if nft[0] > 0 {
					b.ReportMetric(m[0]/nft[0], "x-pipapo")
					b.ReportMetric(m[1]/nft[1], "x-pipapo-cpu")
					if bn, bx := nftBase[st.name], xdpBase[st.name]; bn > 0 && bx > 0 {
						b.ReportMetric((1e3/nft[1]-1e3/bn)/(1e3/m[1]-1e3/bx), "x-pipapo-filter")
					}
				}
			})
		}
	}
}

// dropCounter is an XDP program that counts every frame in counts (a
// one-element per-CPU array) and drops it: the XDP baseline.
func dropCounter(b *testing.B, counts *ebpf.Map) *ebpf.Program {
	insns := asm.Instructions{asm.StoreImm(asm.RFP, -4, 0, asm.Word)}
	insns = append(insns, countAt(counts, -4, "out")...)
	insns = append(insns,
		asm.Mov.Imm(asm.R0, XDPDrop).WithSymbol("out"),
		asm.Return(),
	)
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{Type: ebpf.XDP, License: "GPL", Instructions: insns})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { prog.Close() })
	return prog
}

// pipapoFrame returns a UDP or TCP frame va -> vb that set drops (a rule
// with ports, so that every field of the concatenation is looked at).
func pipapoFrame(b *testing.B, set *rule.Set, src, dst net.HardwareAddr) []byte {
	g := traffic.NewGenerator(traffic.Config{Seed: 3, Rules: set, RuleFraction: 1, IPv6Fraction: 1e-12, Sizes: traffic.Fixed(64)})
	var f rule.Fields
	for range 100000 {
		fr := g.Next(nil)
		packet.Parse(fr, &f)
		d := set.Decide(&f)
		if d < 0 || !f.HasPorts() || f.Frag != rule.NotFragment || set.Rules[d].Match.DstPort == nil {
			continue
		}
		copy(fr[0:], dst)
		copy(fr[6:], src)
		return fr
	}
	b.Fatal("no frame with ports that the set drops")
	return nil
}

// pipapoElem is a rule as a pipapo set element: an inclusive range per
// field (source, destination, protocol, source port, destination port).
type pipapoElem [5][2]uint32

func (e *pipapoElem) holds(p [5]uint32) bool {
	for i := range e {
		if p[i] < e[i][0] || p[i] > e[i][1] {
			return false
		}
	}
	return true
}

func pipapoElemOf(m *rule.Match) pipapoElem {
	addr := func(p netip.Prefix) [2]uint32 {
		if !p.IsValid() {
			return [2]uint32{0, ^uint32(0)}
		}
		a := p.Masked().Addr().As4()
		lo := uint32(a[0])<<24 | uint32(a[1])<<16 | uint32(a[2])<<8 | uint32(a[3])
		return [2]uint32{lo, lo | ^uint32(0)>>p.Bits()}
	}
	ports := func(rs rule.Ranges) [2]uint32 {
		if rs == nil {
			return [2]uint32{0, 65535}
		}
		return [2]uint32{rs[0].Lo, rs[0].Hi}
	}
	proto := [2]uint32{0, 255}
	if len(m.Proto) == 1 {
		proto = [2]uint32{uint32(m.Proto[0]), uint32(m.Proto[0])}
	}
	return pipapoElem{addr(m.Src), addr(m.Dst), proto, ports(m.SrcPort), ports(m.DstPort)}
}

// nftPipapoSetup loads set as netdev ingress rules looking the 5-tuple up
// in interval sets (pipapo), every element a rule. The kernel refuses an
// element whose first or last tuple lies in an element already in the set
// (nft_pipapo_insert: EEXIST), and ClassBench-style rules overlap, so the
// rules are spread greedily over as few sets as that allows, one lookup
// rule each (all drop: the first set that holds the packet decides).
func nftPipapoSetup(b *testing.B, ns, dev string, set *rule.Set) (func() uint64, func()) {
	var groups [][]int
	var elems [][]pipapoElem
	for i := range set.Rules {
		e := pipapoElemOf(&set.Rules[i].Match)
		var first, last [5]uint32
		for f := range e {
			first[f], last[f] = e[f][0], e[f][1]
		}
		placed := false
		for g := range groups {
			clash := false
			for k := range elems[g] {
				o := &elems[g][k]
				var ofirst, olast [5]uint32
				for f := range o {
					ofirst[f], olast[f] = o[f][0], o[f][1]
				}
				if o.holds(first) || o.holds(last) || e.holds(ofirst) || e.holds(olast) {
					clash = true
					break
				}
			}
			if !clash {
				groups[g] = append(groups[g], i)
				elems[g] = append(elems[g], e)
				placed = true
				break
			}
		}
		if !placed {
			groups = append(groups, []int{i})
			elems = append(elems, []pipapoElem{e})
		}
	}
	b.Logf("%d rules in %d pipapo sets", len(set.Rules), len(groups))
	var buf bytes.Buffer
	fmt.Fprintf(&buf, "table netdev scrubbench {\n counter c { }\n")
	for g, idx := range groups {
		fmt.Fprintf(&buf, " set cb%d {\n  type ipv4_addr . ipv4_addr . inet_proto . inet_service . inet_service\n  flags interval\n  elements = {\n", g)
		for k, i := range idx {
			e := &elems[g][k]
			m := &set.Rules[i].Match
			sep := ","
			if k == len(idx)-1 {
				sep = ""
			}
			pfx := func(p netip.Prefix) string {
				if !p.IsValid() {
					return "0.0.0.0/0"
				}
				return p.Masked().String()
			}
			fmt.Fprintf(&buf, "   %s . %s . %d-%d . %d-%d . %d-%d%s\n", pfx(m.Src), pfx(m.Dst), e[2][0], e[2][1], e[3][0], e[3][1], e[4][0], e[4][1], sep)
		}
		buf.WriteString("  }\n }\n")
	}
	fmt.Fprintf(&buf, " chain ingress {\n  type filter hook ingress device %q priority -500; policy accept;\n", dev)
	for g := range groups {
		fmt.Fprintf(&buf, "  ip saddr . ip daddr . meta l4proto . th sport . th dport @cb%d counter name \"c\" drop\n", g)
	}
	buf.WriteString(" }\n}\n")
	return nftLoad(b, ns, buf.Bytes())
}
