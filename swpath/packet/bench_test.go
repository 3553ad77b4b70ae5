package packet_test

import (
	"runtime"
	"testing"

	"github.com/scrubd/scrubd/swpath/packet"
	"github.com/scrubd/scrubd/swpath/rule"
	"github.com/scrubd/scrubd/swpath/traffic"
)

// BenchmarkParse parses frames held in cache: the parser's own cost,
// without the memory misses of a receive ring. Each case runs Parse and
// the general parser alone (what every frame took before the fast path),
// side by side.
func BenchmarkParse(b *testing.B) {
	cases := []struct {
		name string
		fr   traffic.Frame
	}{
		{"udp4", traffic.Frame{Family: rule.IPv4, Src: s4, Dst: d4, Proto: rule.ProtoUDP, SrcPort: 53, DstPort: 1900, Size: 64}},
		{"tcp4", traffic.Frame{Family: rule.IPv4, Src: s4, Dst: d4, Proto: rule.ProtoTCP, SrcPort: 53, DstPort: 80, TCPFlags: rule.SYN, Size: 64}},
		{"udp4-vlan", traffic.Frame{Family: rule.IPv4, Src: s4, Dst: d4, Proto: rule.ProtoUDP, SrcPort: 53, DstPort: 1900, Tags: []uint16{0x8100}, Size: 64}},
		{"tcp6", traffic.Frame{Family: rule.IPv6, Src: s6, Dst: d6, Proto: rule.ProtoTCP, SrcPort: 53, DstPort: 80, Size: 80}},
	}
	parsers := []struct {
		name  string
		parse func([]byte, *rule.Fields) packet.Status
	}{{"Parse", packet.Parse}, {"general", packet.ParseSlow}}
	for _, c := range cases {
		for _, p := range parsers {
			b.Run(c.name+"/"+p.name, func(b *testing.B) { benchParse(b, c.fr, p.parse) })
		}
	}
}

// benchParse parses 64 variants of fr (source ports differ) with parse.
func benchParse(b *testing.B, fr traffic.Frame, parse func([]byte, *rule.Fields) packet.Status) {
	const n = 64
	frames := make([][]byte, n)
	for i := range frames {
		f := fr
		f.SrcPort += uint16(i)
		frames[i] = traffic.AppendFrame(nil, &f)
	}
	var fs [n]rule.Fields
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	b.ResetTimer()
	c0 := threadCPU()
	for i := 0; i < b.N; i += n {
		for j := range frames {
			parse(frames[j], &fs[j])
		}
	}
	c1 := threadCPU()
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/pkt")
	if c0 != 0 {
		b.ReportMetric(float64(c1-c0)/float64(b.N), "cpu-ns/pkt")
	}
}

// BenchmarkParseFlood parses a flood aimed at 1000 ClassBench-style rules:
// the protocols mixed as the rules name them (TCP, UDP, ICMP, SCTP, GRE
// and others), so that a parser branching on the protocol mispredicts.
// Parse and the general parser side by side. The frames are many (64k, in
// one 4 MiB slab) so that a branch predictor cannot learn their sequence.
func BenchmarkParseFlood(b *testing.B) {
	const n = 1 << 16
	g := traffic.NewGenerator(traffic.Config{Seed: 3, Rules: traffic.ClassBenchRules(1, 1000), RuleFraction: 1, Sizes: traffic.Fixed(64)})
	slab := make([]byte, 0, n*64)
	frames := make([][]byte, n)
	for i := range frames {
		at := len(slab)
		slab = g.Next(slab)
		frames[i] = slab[at:len(slab):len(slab)]
		slab = slab[:at+64]
	}
	parsers := []struct {
		name  string
		parse func([]byte, *rule.Fields) packet.Status
	}{{"Parse", packet.Parse}, {"general", packet.ParseSlow}}
	for _, p := range parsers {
		b.Run(p.name, func(b *testing.B) {
			fs := make([]rule.Fields, n)
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			b.ResetTimer()
			c0 := threadCPU()
			for i := 0; i < b.N; i += len(frames) {
				for j, fr := range frames {
					p.parse(fr, &fs[j])
				}
			}
			c1 := threadCPU()
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/pkt")
			if c0 != 0 {
				b.ReportMetric(float64(c1-c0)/float64(b.N), "cpu-ns/pkt")
			}
		})
	}
}
