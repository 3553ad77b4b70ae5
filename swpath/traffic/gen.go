package traffic

import (
	"math/rand/v2"
	"net/netip"

	"github.com/scrubd/scrubd/swpath/rule"
)

// Sizes is a frame-size mix (sizes include the 4-byte FCS, as link rates are
// quoted: a "64-byte" frame is 60 bytes in a capture).
type Sizes struct {
	// Min and Max give a uniform mix; Min == Max a fixed size. Zero means 64.
	Min, Max int
	// IMIX uses the simple IMIX: 7 x 64, 4 x 594, 1 x 1518 bytes.
	IMIX bool
}

// Fixed returns a mix of one size.
func Fixed(n int) Sizes { return Sizes{Min: n, Max: n} }

func (s Sizes) pick(r *rand.Rand) int {
	var n int
	switch {
	case s.IMIX:
		switch x := r.IntN(12); {
		case x < 7:
			n = 64
		case x < 11:
			n = 594
		default:
			n = 1518
		}
	case s.Min == 0 && s.Max == 0:
		n = 64
	case s.Max <= s.Min:
		n = s.Min
	default:
		n = s.Min + r.IntN(s.Max-s.Min+1)
	}
	return n - 4
}

// Config sets up a Generator.
type Config struct {
	Seed uint64
	// Rules, when set, steer frames to the edges of the rules' conditions.
	Rules *rule.Set
	// RuleFraction of frames (0..1) are built from a rule; the rest are
	// random. Ignored without Rules.
	RuleFraction float64
	// Odd enables odd frames: VLAN tags (one, two, three), IPv6 extension
	// chains (including chains longer than rule.MaxIPv6ExtHeaders and a
	// fragment header), IPv4 options, truncated captures, malformed IP
	// headers and non-IP frames.
	Odd bool
	// IPv6Fraction of random frames are IPv6 (default 0.3 when zero).
	IPv6Fraction float64
	// Sizes is the frame-size mix (sizes of frames whose length a rule's
	// length condition steers are set by that condition instead).
	Sizes Sizes
	// Flows, when > 0, makes every frame one of Flows fixed frame
	// descriptions (low cardinality), half of them with a new size from
	// Sizes; 0 makes every frame new.
	Flows int
}

// Generator makes a deterministic stream of frames. It is not safe for
// concurrent use.
type Generator struct {
	cfg   Config
	r     *rand.Rand
	flows []Frame
}

// NewGenerator returns a generator for cfg.
func NewGenerator(cfg Config) *Generator {
	if cfg.IPv6Fraction == 0 {
		cfg.IPv6Fraction = 0.3
	}
	g := &Generator{cfg: cfg, r: rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x5ca1ab1e))}
	for range cfg.Flows {
		g.flows = append(g.flows, g.frame())
	}
	return g
}

// NextFrame returns the description of the next frame.
func (g *Generator) NextFrame() Frame {
	if len(g.flows) > 0 {
		fr := g.flows[g.r.IntN(len(g.flows))]
		if g.r.IntN(2) == 0 {
			// Packets of a flow vary in size; half keep the flow's first
			// size (which a rule's length condition may have steered).
			fr.Size = g.cfg.Sizes.pick(g.r) + 4*len(fr.Tags)
		}
		return fr
	}
	return g.frame()
}

// Next appends the next frame to dst.
func (g *Generator) Next(dst []byte) []byte {
	fr := g.NextFrame()
	return AppendFrame(dst, &fr)
}

// Frames returns the next n frames, each in its own slice.
func (g *Generator) Frames(n int) [][]byte {
	out := make([][]byte, n)
	for i := range out {
		out[i] = g.Next(nil)
	}
	return out
}

func (g *Generator) chance(p float64) bool { return g.r.Float64() < p }

var commonProtos = []uint8{rule.ProtoTCP, rule.ProtoUDP, rule.ProtoICMP, rule.ProtoICMPv6, rule.ProtoSCTP, rule.ProtoGRE}

func (g *Generator) frame() Frame {
	var fr Frame
	var m *rule.Match
	if g.cfg.Rules != nil && len(g.cfg.Rules.Rules) > 0 && g.chance(g.cfg.RuleFraction) {
		m = &g.cfg.Rules.Rules[g.r.IntN(len(g.cfg.Rules.Rules))].Match
	}
	if g.cfg.Odd && g.chance(0.03) {
		fr.EtherType = []uint16{0x0806, 0x88cc, 0x8847, 0x0800 + 1}[g.r.IntN(4)]
		fr.Size = g.cfg.Sizes.pick(g.r)
		g.oddL2(&fr)
		return fr
	}
	fam := rule.IPv4
	if m != nil && m.Family() != rule.FamilyAny {
		fam = m.Family()
	} else if g.chance(g.cfg.IPv6Fraction) {
		fam = rule.IPv6
	}
	fr.Family = fam
	if m != nil {
		fr.Src, fr.Dst = g.addrIn(m.Src, fam), g.addrIn(m.Dst, fam)
	} else {
		fr.Src, fr.Dst = g.randAddr(fam), g.randAddr(fam)
	}
	// Protocol.
	switch {
	case m != nil && m.Proto != nil && g.chance(0.9):
		fr.Proto = m.Proto[g.r.IntN(len(m.Proto))]
	case g.chance(0.9):
		fr.Proto = commonProtos[g.r.IntN(len(commonProtos))]
		if fam == rule.IPv6 && fr.Proto == rule.ProtoICMP && g.chance(0.8) {
			fr.Proto = rule.ProtoICMPv6
		}
		if fam == rule.IPv4 && fr.Proto == rule.ProtoICMPv6 && g.chance(0.8) {
			fr.Proto = rule.ProtoICMP
		}
	default:
		fr.Proto = uint8(g.r.IntN(256))
	}
	// L4.
	fr.SrcPort, fr.DstPort = uint16(g.r.IntN(65536)), uint16(g.r.IntN(65536))
	if g.chance(0.3) {
		fr.SrcPort = []uint16{53, 123, 0, 65535, 80, 443, 1900, 11211}[g.r.IntN(8)]
	}
	fr.TCPFlags = uint8(g.r.IntN(256))
	fr.ICMPType, fr.ICMPCode = uint8(g.r.IntN(256)), uint8(g.r.IntN(16))
	if m != nil {
		if m.SrcPort != nil {
			fr.SrcPort = uint16(g.inRanges(m.SrcPort, 65535))
		}
		if m.DstPort != nil {
			fr.DstPort = uint16(g.inRanges(m.DstPort, 65535))
		}
		if m.Port != nil {
			if g.chance(0.5) {
				fr.SrcPort = uint16(g.inRanges(m.Port, 65535))
			} else {
				fr.DstPort = uint16(g.inRanges(m.Port, 65535))
			}
		}
		if m.ICMPType != nil {
			fr.ICMPType = uint8(g.inRanges(m.ICMPType, 255))
		}
		if m.ICMPCode != nil {
			fr.ICMPCode = uint8(g.inRanges(m.ICMPCode, 255))
		}
		if m.HasTCPFlags && g.chance(0.8) {
			fr.TCPFlags = fr.TCPFlags&^m.TCPFlags.Mask | m.TCPFlags.Value
			if g.chance(0.3) {
				fr.TCPFlags ^= 1 << g.r.IntN(8) // one bit off
			}
		}
		if m.DSCP != 0 && g.chance(0.8) {
			for {
				d := uint8(g.r.IntN(64))
				if m.DSCP&(1<<d) != 0 {
					fr.DSCP = d
					break
				}
			}
		} else {
			fr.DSCP = uint8(g.r.IntN(64))
		}
	} else if g.chance(0.5) {
		fr.DSCP = uint8(g.r.IntN(64))
	}
	// Fragments: first, middle, last.
	fragP := 0.1
	if m != nil && m.Fragment != 0 {
		fragP = 0.6
	}
	if g.chance(fragP) {
		switch g.r.IntN(3) {
		case 0:
			fr.MF = true
		case 1:
			fr.MF, fr.FragOffset = true, uint16(1+g.r.IntN(8000))
		default:
			fr.FragOffset = uint16(1 + g.r.IntN(8000))
		}
		if fam == rule.IPv6 {
			fr.Ext = append(fr.Ext, Ext{Type: 44})
		}
	}
	fr.DF = g.chance(0.3)
	fr.Size = g.cfg.Sizes.pick(g.r)
	if g.cfg.Odd {
		g.oddL2(&fr)
		g.oddL3(&fr)
	}
	if m != nil && m.Length != nil && g.chance(0.8) {
		l := g.inRanges(m.Length, 65535+40)
		if l > 1600 {
			l = 1500 + uint32(g.r.IntN(101)) // stay near Ethernet sizes
		}
		fr.Size = 14 + 4*len(fr.Tags) + int(l)
	}
	return fr
}

func (g *Generator) oddL2(fr *Frame) {
	switch x := g.r.IntN(20); {
	case x < 3:
		fr.Tags = []uint16{0x8100}
	case x < 4:
		fr.Tags = []uint16{0x88a8}
	case x < 6:
		fr.Tags = []uint16{0x88a8, 0x8100}
	case x < 7:
		fr.Tags = []uint16{0x8100, 0x8100, 0x8100}
	}
	if fr.Size < 0 {
		fr.Size = 0
	}
}

var extTypes = []uint8{0, 43, 60, 60, 43, 44}

func (g *Generator) oddL3(fr *Frame) {
	if fr.Family == rule.IPv6 && g.chance(0.25) {
		n := 1 + g.r.IntN(rule.MaxIPv6ExtHeaders+2) // some chains too long
		for range n {
			t := extTypes[g.r.IntN(len(extTypes))]
			if t == 44 && g.chance(0.5) {
				fr.MF, fr.FragOffset = g.chance(0.5), uint16(g.r.IntN(3)) // mostly offset 0
			}
			fr.Ext = append(fr.Ext, Ext{Type: t, Len: 8 * (1 + g.r.IntN(3))})
		}
	}
	if fr.Family == rule.IPv4 && g.chance(0.1) {
		fr.IPv4Options = 4 * (1 + g.r.IntN(10))
	}
	switch x := g.r.IntN(100); {
	case x < 6: // truncated capture somewhere in the headers
		fr.Truncate = 14 + len(fr.Tags)*4 + g.r.IntN(80)
	case x < 7:
		fr.Version = uint8(g.r.IntN(16))
	case x < 8 && fr.Family == rule.IPv4:
		fr.IHL = uint8(g.r.IntN(5))
	}
}

// inRanges picks a value at or near a range of rs: an end, one past an
// end, or inside.
func (g *Generator) inRanges(rs rule.Ranges, max uint32) uint32 {
	r := rs[g.r.IntN(len(rs))]
	var v int64
	switch g.r.IntN(6) {
	case 0:
		v = int64(r.Lo)
	case 1:
		v = int64(r.Hi)
	case 2:
		v = int64(r.Lo) - 1
	case 3:
		v = int64(r.Hi) + 1
	default:
		v = int64(r.Lo) + g.r.Int64N(int64(r.Hi-r.Lo)+1)
	}
	if v < 0 {
		v = 0
	}
	if v > int64(max) {
		v = int64(max)
	}
	return uint32(v)
}

func (g *Generator) randAddr(fam rule.Family) netip.Addr {
	if fam == rule.IPv4 {
		var b [4]byte
		for i := range b {
			b[i] = byte(g.r.IntN(256))
		}
		return netip.AddrFrom4(b)
	}
	var b [16]byte
	b[0], b[1] = 0x20, 0x01
	for i := 2; i < 16; i++ {
		b[i] = byte(g.r.IntN(256))
	}
	return netip.AddrFrom16(b)
}

// addrIn picks an address of family fam in or at the border of p: the first
// or last address, one outside either end, or random inside. An invalid p
// gives a random address.
func (g *Generator) addrIn(p netip.Prefix, fam rule.Family) netip.Addr {
	if !p.IsValid() {
		return g.randAddr(fam)
	}
	a := rule.AddrFrom(p.Addr())
	m := rule.PrefixMask(p.Bits())
	lo := a.And(m)
	hi := rule.Addr{Hi: lo.Hi | ^m.Hi, Lo: lo.Lo | ^m.Lo}
	if fam == rule.IPv4 {
		hi.Hi &^= 0xffffffff
		hi.Lo = 0
	}
	var v rule.Addr
	switch g.r.IntN(6) {
	case 0:
		v = lo
	case 1:
		v = hi
	case 2:
		v = addAddr(lo, fam, -1)
	case 3:
		v = addAddr(hi, fam, 1)
	default:
		r := rule.Addr{Hi: g.r.Uint64(), Lo: g.r.Uint64()}
		v = rule.Addr{Hi: lo.Hi | r.Hi&^m.Hi, Lo: lo.Lo | r.Lo&^m.Lo}
		if fam == rule.IPv4 {
			v.Hi &^= 0xffffffff
			v.Lo = 0
		}
	}
	return v.Netip(fam)
}

// addAddr adds d (+1 or -1) to a, wrapping within the family.
func addAddr(a rule.Addr, fam rule.Family, d int) rule.Addr {
	if fam == rule.IPv4 {
		x := uint32(a.Hi>>32) + uint32(d)
		return rule.Addr{Hi: uint64(x) << 32}
	}
	lo := a.Lo + uint64(d)
	hi := a.Hi
	if d > 0 && lo == 0 {
		hi++
	}
	if d < 0 && lo == ^uint64(0) {
		hi--
	}
	return rule.Addr{Hi: hi, Lo: lo}
}
