package classifier

import (
	"fmt"
	"net/netip"
	"testing"

	"github.com/scrubd/scrubd/swpath/rule"
	"github.com/scrubd/scrubd/swpath/traffic"
)

// TestDifferentialSlotForms covers the decisions taken without a bucket's
// entries (a slot whose first entry checks nothing, or only that the packet
// has ports) and the 32-byte entry checks (address bits finer than the
// table's, ports, a full check): sets of several tables whose exact-shape
// port rules sit above broader rules with the same key, on traffic with
// fragments (no ports, so port fields 0) steered at them, against the
// linear reference.
func TestDifferentialSlotForms(t *testing.T) {
	pfx := netip.MustParsePrefix
	udp, tcp := []uint8{rule.ProtoUDP}, []uint8{rule.ProtoTCP}
	base := []rule.Rule{
		{ID: "dns", Priority: 10, Match: rule.Match{Src: pfx("192.0.2.0/24"), Proto: udp, DstPort: rule.Ranges{{Lo: 53, Hi: 53}}}},
		{ID: "udp-any", Priority: 20, Action: rule.Accept, Match: rule.Match{Src: pfx("192.0.2.0/24"), Proto: udp}},
		{ID: "host", Priority: 5, Match: rule.Match{Src: pfx("192.0.2.77/32"), Dst: pfx("203.0.113.0/24")}},
		{ID: "web", Priority: 10, Match: rule.Match{Dst: pfx("198.51.100.0/24"), Proto: tcp, DstPort: rule.Ranges{{Lo: 80, Hi: 80}, {Lo: 443, Hi: 443}}}},
		{ID: "web-syn", Priority: 8, Match: rule.Match{Dst: pfx("198.51.100.128/25"), Proto: tcp, HasTCPFlags: true, TCPFlags: rule.TCPFlags{Value: rule.SYN, Mask: rule.SYN | rule.ACK}}},
		{ID: "dst", Priority: 30, Match: rule.Match{Dst: pfx("198.51.100.0/24")}},
		{ID: "frag", Priority: 1, Match: rule.Match{Dst: pfx("203.0.113.0/25"), Fragment: rule.IsFragment}},
		{ID: "v6", Priority: 10, Match: rule.Match{Src: pfx("2001:db8:1::/48"), Proto: udp, DstPort: rule.Ranges{{Lo: 53, Hi: 53}}}},
		{ID: "v6-long", Priority: 9, Match: rule.Match{Dst: pfx("2001:db8::1:0/112"), Proto: udp}},
		// IPv6 prefixes finer than their table (48 bits): the scan check's
		// bits 32-63 and then the full check.
		{ID: "v6-56", Priority: 7, Match: rule.Match{Src: pfx("2001:db8:1:ab00::/56")}},
		{ID: "v6-52", Priority: 6, Match: rule.Match{Src: pfx("2001:db8:1:a000::/52"), Dst: pfx("2001:db8:2::/49")}},
		{ID: "net10", Priority: 40, Match: rule.Match{Src: pfx("10.0.0.0/8")}},
		// Port prefixes that hold port 0, the value of a packet without
		// ports: only the ports check tells a fragment from port 80.
		{ID: "port-0", Priority: 3, Match: rule.Match{Src: pfx("192.0.2.0/24"), Proto: udp, DstPort: rule.Ranges{{Lo: 0, Hi: 0}}}},
		{ID: "low-ports", Priority: 3, Match: rule.Match{Src: pfx("192.0.2.0/24"), Proto: udp, DstPort: rule.Ranges{{Lo: 0, Hi: 1023}}}},
		{ID: "low-sports", Priority: 4, Match: rule.Match{Dst: pfx("198.51.100.0/24"), Proto: tcp, SrcPort: rule.Ranges{{Lo: 0, Hi: 4095}}}},
	}
	quick := [3]int{}
	total, matched := 0, 0
	for variant := range 6 {
		set := &rule.Set{}
		for i, r := range base {
			if variant%2 == 1 {
				r.Priority = uint32(100 - 10*i) // reversed ranks
			}
			if variant >= 2 && i%3 == variant%3 {
				continue
			}
			set.Rules = append(set.Rules, r)
		}
		tab, err := compile(set, treesOff)
		if err != nil {
			t.Fatal(err)
		}
		if len(tab.tables) < 2 {
			t.Fatalf("variant %d: %d tables; the burst path needs several", variant, len(tab.tables))
		}
		for ti := range tab.tables {
			for _, s := range tab.tables[ti].slots {
				if s.n > 0 {
					quick[s.quick]++
				}
			}
		}
		g := traffic.NewGenerator(traffic.Config{Seed: uint64(variant), Rules: set, RuleFraction: 0.9, Odd: true})
		fs := parseAll(g.Frames(3000))
		matched += checkAgainstReference(t, fmt.Sprintf("variant %d", variant), set, fs)
		total += len(fs)
	}
	if quick[quickAny] == 0 || quick[quickPorts] == 0 || quick[0] == 0 {
		t.Fatalf("slot forms seen (entries, any, ports): %v; the test must cover each", quick)
	}
	if matched < total/5 || matched > total*9/10 {
		t.Fatalf("%d of %d packets matched", matched, total)
	}
}

// TestScanCheckIPv6TopBits: an IPv6 entry in a table whose mask covers
// fewer than its top 32 bits (here /16) is told apart from packets that
// differ only there by the full check, not by the scan check (which
// compares bits 32-63 of IPv6 addresses).
func TestScanCheckIPv6TopBits(t *testing.T) {
	pfx := netip.MustParsePrefix
	set := &rule.Set{Rules: []rule.Rule{
		// Keys its table on 16 bits; its length condition is checked after
		// the hit, so the test packets (length 100) never match it.
		{ID: "wide", Priority: 1, Match: rule.Match{Src: pfx("2001::/16"), Length: rule.Ranges{{Lo: 1, Hi: 2}}}},
		{ID: "narrow", Priority: 2, Match: rule.Match{Src: pfx("2001:db9:0:ab00::/56")}},
		{ID: "other", Priority: 3, Match: rule.Match{Dst: pfx("192.0.2.0/24")}},
		{ID: "other2", Priority: 4, Match: rule.Match{Src: pfx("198.51.100.0/24"), Proto: []uint8{rule.ProtoUDP}}},
	}}
	tab, err := compile(set, treesOff)
	if err != nil {
		t.Fatal(err)
	}
	narrowShared := false
	for ti := range tab.tables {
		for _, s := range tab.tables[ti].slots {
			if s.n > 1 && tab.tables[ti].shape.src < 32 {
				narrowShared = true
			}
		}
	}
	if !narrowShared {
		t.Fatalf("the /56 rule did not share the /16 table; the test needs it there")
	}
	var fs []rule.Fields
	for _, src := range []string{"2001:db9:0:ab00::1", "2001:db8:0:ab00::1", "2001:db9:0:ab01::1", "2001:1db9:0:ab00::1", "2001:db8:ffff::1"} {
		for _, dst := range []string{"2001:db8:ffff::2", "2001:db8:fffe::2"} {
			fs = append(fs, rule.Fields{Family: rule.IPv6, Proto: rule.ProtoUDP, L4: true, Frag: rule.NotFragment, SrcPort: 1, DstPort: 2, Length: 100,
				Src: rule.AddrFrom(netip.MustParseAddr(src)), Dst: rule.AddrFrom(netip.MustParseAddr(dst))})
		}
	}
	checkAgainstReference(t, "ipv6 top bits", set, fs)
}
