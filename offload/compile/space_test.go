package compile

import (
	"math/rand/v2"
	"net/netip"

	"github.com/scrubd/scrubd/offload"
	"github.com/scrubd/scrubd/swpath/rule"
)

// space draws packets (rule.Fields) from the edge values of a rule set:
// every boundary of every range and prefix, one off each side, and a few
// fixed values, for every field, in every consistent combination of
// family, protocol, L4 presence and fragment state.
type space struct {
	rng                   *rand.Rand
	ports, types, lengths []uint32
	flags, dscps          []uint8
	addrs                 map[rule.Family][]rule.Addr
	protos                []uint8
}

func addEdges(dst []uint32, rs rule.Ranges, max uint32) []uint32 {
	for _, r := range rs {
		for _, v := range []int64{int64(r.Lo) - 1, int64(r.Lo), int64(r.Lo) + 1, int64(r.Hi) - 1, int64(r.Hi), int64(r.Hi) + 1} {
			if v >= 0 && v <= int64(max) {
				dst = append(dst, uint32(v))
			}
		}
	}
	return dst
}

func addPrefix(sp *space, p netip.Prefix) {
	if !p.IsValid() {
		return
	}
	fam := rule.IPv4
	bitsN := 32
	if p.Addr().Is6() {
		fam, bitsN = rule.IPv6, 128
	}
	a, m := rule.PrefixAddr(p)
	last := rule.Addr{Hi: a.Hi | ^m.Hi, Lo: a.Lo | ^m.Lo}
	if fam == rule.IPv4 {
		last.Hi &= 0xffffffff00000000
		last.Lo = 0
	}
	dec := func(x rule.Addr) rule.Addr {
		if fam == rule.IPv4 {
			return rule.Addr{Hi: x.Hi - 1<<32}
		}
		if x.Lo == 0 {
			return rule.Addr{Hi: x.Hi - 1, Lo: ^uint64(0)}
		}
		return rule.Addr{Hi: x.Hi, Lo: x.Lo - 1}
	}
	inc := func(x rule.Addr) rule.Addr {
		if fam == rule.IPv4 {
			return rule.Addr{Hi: x.Hi + 1<<32}
		}
		if x.Lo == ^uint64(0) {
			return rule.Addr{Hi: x.Hi + 1}
		}
		return rule.Addr{Hi: x.Hi, Lo: x.Lo + 1}
	}
	_ = bitsN
	sp.addrs[fam] = append(sp.addrs[fam], a, last, dec(a), inc(last))
}

func newSpace(seed uint64, rules []rule.Rule) *space {
	sp := &space{rng: rand.New(rand.NewPCG(seed, 7)), addrs: map[rule.Family][]rule.Addr{}}
	sp.ports = []uint32{0, 1, 80, 443, 1023, 1024, 65535}
	sp.types = []uint32{0, 3, 8, 255}
	sp.lengths = []uint32{20, 40, 64, 1500, 9000}
	sp.flags = []uint8{0, 0xff, rule.SYN, rule.SYN | rule.ACK, rule.ACK, rule.RST}
	sp.dscps = []uint8{0, 1, 10, 46, 63}
	sp.protos = []uint8{rule.ProtoICMP, rule.ProtoTCP, rule.ProtoUDP, rule.ProtoICMPv6, rule.ProtoSCTP, rule.ProtoGRE}
	for _, a := range []string{"10.0.0.1", "192.0.2.1", "0.0.0.0", "255.255.255.255"} {
		sp.addrs[rule.IPv4] = append(sp.addrs[rule.IPv4], rule.AddrFrom(netip.MustParseAddr(a)))
	}
	for _, a := range []string{"2001:db8::1", "::", "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"} {
		sp.addrs[rule.IPv6] = append(sp.addrs[rule.IPv6], rule.AddrFrom(netip.MustParseAddr(a)))
	}
	for i := range rules {
		m := &rules[i].Match
		sp.ports = addEdges(sp.ports, m.SrcPort, 0xffff)
		sp.ports = addEdges(sp.ports, m.DstPort, 0xffff)
		sp.ports = addEdges(sp.ports, m.Port, 0xffff)
		sp.types = addEdges(sp.types, m.ICMPType, 255)
		sp.types = addEdges(sp.types, m.ICMPCode, 255)
		sp.lengths = addEdges(sp.lengths, m.Length, 0xffff)
		sp.protos = append(sp.protos, m.Proto...)
		if m.HasTCPFlags {
			v, mk := m.TCPFlags.Value, m.TCPFlags.Mask
			sp.flags = append(sp.flags, v, v|^mk, v&mk)
			for b := 0; b < 8; b++ {
				sp.flags = append(sp.flags, v^(1<<b), (v|^mk)^(1<<b))
			}
		}
		for d := 0; d < 64; d++ {
			if m.DSCP&(1<<d) != 0 {
				sp.dscps = append(sp.dscps, uint8(d))
				if d > 0 {
					sp.dscps = append(sp.dscps, uint8(d-1))
				}
				if d < 63 {
					sp.dscps = append(sp.dscps, uint8(d+1))
				}
			}
		}
		addPrefix(sp, m.Src)
		addPrefix(sp, m.Dst)
	}
	return sp
}

func pick[T any](r *rand.Rand, s []T) T { return s[r.IntN(len(s))] }

// packet draws one consistent packet.
func (sp *space) packet() rule.Fields {
	r := sp.rng
	var f rule.Fields
	f.Family = rule.IPv4
	if r.IntN(2) == 0 {
		f.Family = rule.IPv6
	}
	f.Proto = pick(r, sp.protos)
	f.Src, f.Dst = pick(r, sp.addrs[f.Family]), pick(r, sp.addrs[f.Family])
	df := f.Family == rule.IPv4 && r.IntN(2) == 0
	mf := r.IntN(3) == 0
	var off uint16
	if r.IntN(3) == 0 {
		off = 8
	}
	f.Frag = rule.FragState(df, mf, off)
	// L4 present unless a later fragment, or (rarely) a header cut short.
	f.L4 = off == 0 && r.IntN(8) != 0
	if f.L4 {
		if f.HasPorts() {
			f.SrcPort, f.DstPort = uint16(pick(r, sp.ports)), uint16(pick(r, sp.ports))
		}
		if f.Proto == rule.ProtoTCP {
			f.TCPFlags = pick(r, sp.flags)
		}
		if f.HasICMP() {
			f.ICMPType, f.ICMPCode = uint8(pick(r, sp.types)), uint8(pick(r, sp.types))
		}
	}
	f.DSCP = pick(r, sp.dscps)
	f.Length = pick(r, sp.lengths)
	return f
}

// entriesMatch reports whether any entry matches f, through the entry
// semantics (offload.KeyOf, offload.Match.Matches).
func entriesMatch(es []offload.Entry, f *rule.Fields) bool {
	k, ok := offload.KeyOf(f)
	if !ok {
		return false
	}
	for i := range es {
		if es[i].Match.Matches(&k) {
			return true
		}
	}
	return false
}

// wantHW is what rule i's entries must match for packet f: the rule's
// match, minus the accept rules it was split around.
func wantHW(s *rule.Set, res *Result, i int, f *rule.Fields) bool {
	if !s.Rules[i].Match.Matches(f) {
		return false
	}
	for _, id := range res.SplitBy {
		if j := s.Index(id); j >= 0 && s.Rules[j].Match.Matches(f) {
			return false
		}
	}
	return true
}
