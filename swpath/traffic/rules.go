package traffic

import (
	"encoding/json"
	"math/rand/v2"
	"net/netip"
	"strconv"

	"github.com/scrubd/scrubd/swpath/rule"
)

// RandomRules returns n rules with every kind of condition, drawn from seed:
// both families and family-less rules, nested prefixes, protocol lists, port
// ranges and lists, ICMP type/code, TCP flags, fragment states, lengths,
// DSCP, both actions and a handful of priorities (so ties occur). Conditions
// are combined freely, including combinations the rule-file parser refuses as
// never matching: the classifier must agree with the reference on any Match.
func RandomRules(seed uint64, n int) *rule.Set {
	r := rand.New(rand.NewPCG(seed, 0xfeed))
	g := &Generator{r: r}
	bases4 := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("198.51.100.0/24"), netip.MustParsePrefix("203.0.113.0/24")}
	bases6 := []netip.Prefix{netip.MustParsePrefix("2001:db8::/32"), netip.MustParsePrefix("2001:db8:1::/48")}
	prefix := func(fam rule.Family) netip.Prefix {
		bases, max := bases4, 32
		if fam == rule.IPv6 {
			bases, max = bases6, 128
		}
		b := bases[r.IntN(len(bases))]
		bits := b.Bits() + r.IntN(max-b.Bits()+1)
		if r.IntN(4) == 0 {
			bits = r.IntN(max + 1)
		}
		a := g.addrIn(b, fam)
		p, _ := a.Prefix(bits)
		return p
	}
	ranges := func(max uint32) rule.Ranges {
		k := 1 + r.IntN(3)
		var rs rule.Ranges
		for range k {
			switch r.IntN(4) {
			case 0:
				v := uint32(r.IntN(int(max) + 1))
				rs = append(rs, rule.Range{Lo: v, Hi: v})
			case 1:
				lo := uint32(1024)
				if lo > max {
					lo = max / 2
				}
				rs = append(rs, rule.Range{Lo: lo, Hi: max})
			default:
				a, b := uint32(r.IntN(int(max)+1)), uint32(r.IntN(int(max)+1))
				if a > b {
					a, b = b, a
				}
				rs = append(rs, rule.Range{Lo: a, Hi: b})
			}
		}
		return rs
	}
	set := &rule.Set{}
	for i := range n {
		var m rule.Match
		fam := []rule.Family{rule.IPv4, rule.IPv4, rule.IPv6, rule.FamilyAny}[r.IntN(4)]
		if fam != rule.FamilyAny {
			if r.IntN(3) > 0 {
				m.Src = prefix(fam)
			}
			if r.IntN(3) > 0 || !m.Src.IsValid() {
				m.Dst = prefix(fam)
			}
		}
		if r.IntN(3) > 0 {
			k := 1 + r.IntN(2)
			if r.IntN(10) == 0 {
				k = 6
			}
			for range k {
				m.Proto = append(m.Proto, commonProtos[r.IntN(len(commonProtos))])
			}
		}
		switch r.IntN(8) {
		case 0, 1:
			m.DstPort = ranges(65535)
		case 2:
			m.SrcPort = ranges(65535)
		case 3:
			m.SrcPort, m.DstPort = ranges(65535), ranges(65535)
		case 4:
			m.Port = ranges(65535)
		case 5:
			m.ICMPType = ranges(255)
			if r.IntN(2) == 0 {
				m.ICMPCode = ranges(15)
			}
		}
		if r.IntN(6) == 0 {
			m.HasTCPFlags = true
			m.TCPFlags.Mask = uint8(1 + r.IntN(255))
			m.TCPFlags.Value = uint8(r.IntN(256)) & m.TCPFlags.Mask
		}
		if r.IntN(6) == 0 {
			m.Fragment = rule.Frag(1 + r.IntN(31))
		}
		if r.IntN(8) == 0 {
			m.Length = ranges(1600)
		}
		if r.IntN(8) == 0 {
			m.DSCP = r.Uint64()
		}
		// A rule without conditions is written "match: all" (the parser
		// refuses one that does not say so).
		m.All = m.Empty()
		act := rule.Drop
		if r.IntN(4) == 0 {
			act = rule.Accept
		}
		set.Rules = append(set.Rules, rule.Rule{ID: "r" + strconv.Itoa(i), Priority: uint32(10 * r.IntN(4)), Action: act, Match: m})
	}
	return set
}

// RandomValidRules is RandomRules restricted to rules the rule-file parser
// accepts (each rule's Spec parses back), n of them: rule sets an operator
// could write, where few conditions are contradictory.
func RandomValidRules(seed uint64, n int) *rule.Set {
	out := &rule.Set{}
	for batch := uint64(0); len(out.Rules) < n; batch++ {
		for _, r := range RandomRules(seed*7919+batch, 2*n).Rules {
			js, err := json.Marshal(r.Spec())
			if err != nil {
				continue
			}
			if _, err := rule.ParseRule("random", js, Epoch); err != nil {
				continue
			}
			r.ID = "v" + strconv.Itoa(len(out.Rules))
			out.Rules = append(out.Rules, r)
			if len(out.Rules) == n {
				break
			}
		}
	}
	return out
}

// ClassBenchRules returns n IPv4 drop rules shaped like ClassBench ACL sets:
// source and destination prefix pairs (lengths mostly 24..32 and 0, nested
// under a few hundred bases), destination ports that are mostly exact or
// wildcard with some ranges (1024-65535 and arbitrary), source ports mostly
// wildcard, protocol mostly TCP or UDP. Priority is the file order.
func ClassBenchRules(seed uint64, n int) *rule.Set {
	r := rand.New(rand.NewPCG(seed, 0xc1a55))
	nb := 64 + n/64
	bases := make([]uint32, nb)
	for i := range bases {
		bases[i] = r.Uint32()
	}
	plen := func() int {
		switch x := r.IntN(100); {
		case x < 12:
			return 0
		case x < 20:
			return 8 + r.IntN(8)
		case x < 45:
			return 16 + r.IntN(8)
		case x < 70:
			return 24 + r.IntN(8)
		default:
			return 32
		}
	}
	pfx := func() netip.Prefix {
		l := plen()
		if l == 0 {
			return netip.Prefix{}
		}
		a := bases[r.IntN(nb)]
		if l > 16 {
			a ^= r.Uint32() & (1<<(32-16) - 1) // nest under the base's /16
		}
		var b [4]byte
		b[0], b[1], b[2], b[3] = byte(a>>24), byte(a>>16), byte(a>>8), byte(a)
		p, _ := netip.AddrFrom4(b).Prefix(l)
		return p
	}
	well := []uint32{20, 21, 22, 23, 25, 53, 80, 110, 123, 143, 161, 389, 443, 445, 1433, 3306, 3389, 5060, 8080, 11211}
	set := &rule.Set{Rules: make([]rule.Rule, 0, n)}
	for i := range n {
		var m rule.Match
		m.Src, m.Dst = pfx(), pfx()
		if !m.Src.IsValid() && !m.Dst.IsValid() {
			m.Dst = netip.PrefixFrom(netip.AddrFrom4([4]byte{byte(i >> 24), byte(i >> 16), byte(i >> 8), byte(i)}), 32)
		}
		switch x := r.IntN(100); {
		case x < 50:
			m.Proto = []uint8{rule.ProtoTCP}
		case x < 80:
			m.Proto = []uint8{rule.ProtoUDP}
		case x < 85:
			m.Proto = []uint8{rule.ProtoICMP}
		}
		if len(m.Proto) == 1 && m.Proto[0] != rule.ProtoICMP {
			switch x := r.IntN(100); {
			case x < 45:
				p := well[r.IntN(len(well))]
				if r.IntN(3) == 0 {
					p = uint32(r.IntN(65536))
				}
				m.DstPort = rule.Ranges{{Lo: p, Hi: p}}
			case x < 55:
				m.DstPort = rule.Ranges{{Lo: 1024, Hi: 65535}}
			case x < 65:
				lo := uint32(r.IntN(60000))
				m.DstPort = rule.Ranges{{Lo: lo, Hi: lo + uint32(r.IntN(5000))}}
			}
			if r.IntN(10) == 0 {
				m.SrcPort = rule.Ranges{{Lo: 1024, Hi: 65535}}
			}
		}
		set.Rules = append(set.Rules, rule.Rule{ID: "cb" + strconv.Itoa(i), Priority: rule.DefaultPriority, Action: rule.Drop, Match: m})
	}
	return set
}

// SourceWorkload returns the source material's workload: five drop rules on
// UDP destination-port ranges (reflection ports of common amplification
// attacks). Generate its traffic with Config{Rules: set, RuleFraction: 1} and
// keep the frames the set drops, so that every packet matches.
func SourceWorkload() *rule.Set {
	ports := []rule.Range{{Lo: 17, Hi: 19}, {Lo: 53, Hi: 53}, {Lo: 111, Hi: 123}, {Lo: 1900, Hi: 1900}, {Lo: 11211, Hi: 11211}}
	set := &rule.Set{}
	for _, p := range ports {
		set.Rules = append(set.Rules, rule.Rule{ID: "udp-" + p.String(), Priority: rule.DefaultPriority, Action: rule.Drop,
			Match: rule.Match{Proto: []uint8{rule.ProtoUDP}, DstPort: rule.Ranges{p}}})
	}
	return set
}
