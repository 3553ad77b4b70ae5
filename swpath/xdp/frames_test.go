package xdp

import (
	"encoding/binary"
	"math/rand/v2"
	"net/netip"

	"github.com/scrubd/scrubd/swpath/rule"
)

// frame describes a test frame; build turns it into bytes.
type frame struct {
	vlans      int // 0..3 tags
	v6         bool
	etherType  uint16 // overrides IP when non-zero
	badVersion bool
	src, dst   netip.Addr
	proto      uint8
	tos        uint8
	ipOptWords int // IPv4 options, 32-bit words
	df, mf     bool
	fragOff    uint16  // in 8-byte units
	ext        []uint8 // IPv6 extension headers in order (0, 43, 60, 44)
	sport      uint16  // also ICMP type (high byte) and code (low byte)
	dport      uint16
	tcpFlags   uint8
	payload    int
	cut        int // when > 0, keep only this many bytes
}

func (f *frame) build() []byte {
	b := make([]byte, 0, 256)
	b = append(b, 2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1) // dst, src MAC
	for i := 0; i < f.vlans; i++ {
		tpid := uint16(0x8100)
		if i == 0 && f.vlans > 1 {
			tpid = 0x88a8
		}
		b = binary.BigEndian.AppendUint16(b, tpid)
		b = binary.BigEndian.AppendUint16(b, uint16(100+i))
	}
	l4 := f.l4()
	switch {
	case f.etherType != 0:
		b = binary.BigEndian.AppendUint16(b, f.etherType)
		b = append(b, make([]byte, 46)...)
	case !f.v6:
		b = binary.BigEndian.AppendUint16(b, 0x0800)
		ihl := 5 + f.ipOptWords
		ver := byte(4)
		if f.badVersion {
			ver = 6
		}
		h := make([]byte, ihl*4)
		h[0] = ver<<4 | byte(ihl)
		h[1] = f.tos
		binary.BigEndian.PutUint16(h[2:], uint16(ihl*4+len(l4)))
		fo := f.fragOff & 0x1fff
		if f.df {
			fo |= 0x4000
		}
		if f.mf {
			fo |= 0x2000
		}
		binary.BigEndian.PutUint16(h[6:], fo)
		h[8] = 64
		h[9] = f.proto
		s, d := f.src.As4(), f.dst.As4()
		copy(h[12:], s[:])
		copy(h[16:], d[:])
		for i := 20; i < len(h); i++ {
			h[i] = 1 // NOP options
		}
		b = append(b, h...)
		b = append(b, l4...)
	default:
		b = binary.BigEndian.AppendUint16(b, 0x86dd)
		ver := byte(6)
		if f.badVersion {
			ver = 4
		}
		h := make([]byte, 40)
		h[0] = ver<<4 | f.tos>>4
		h[1] = f.tos << 4
		var exts []byte
		next := f.proto
		for i := len(f.ext) - 1; i >= 0; i-- {
			var e []byte
			if f.ext[i] == 44 {
				e = make([]byte, 8)
				fo := f.fragOff << 3
				if f.mf {
					fo |= 1
				}
				binary.BigEndian.PutUint16(e[2:], fo)
			} else {
				n := 1 + i%2 // 16 or 24 bytes
				e = make([]byte, 8*n)
				e[1] = byte(n - 1)
			}
			e[0] = next
			next = f.ext[i]
			exts = append(e, exts...)
		}
		binary.BigEndian.PutUint16(h[4:], uint16(len(exts)+len(l4)))
		h[6] = next
		h[7] = 64
		s, d := f.src.As16(), f.dst.As16()
		copy(h[8:], s[:])
		copy(h[24:], d[:])
		b = append(b, h...)
		b = append(b, exts...)
		b = append(b, l4...)
	}
	for len(b) < 60 && f.cut == 0 {
		b = append(b, 0)
	}
	if f.cut > 0 && f.cut < len(b) {
		b = b[:f.cut]
	}
	return b
}

func (f *frame) l4() []byte {
	var h []byte
	switch f.proto {
	case rule.ProtoTCP:
		h = make([]byte, 20)
		h[12] = 5 << 4
		h[13] = f.tcpFlags
	case rule.ProtoUDP:
		h = make([]byte, 8)
	case rule.ProtoSCTP:
		h = make([]byte, 12)
	case rule.ProtoICMP, rule.ProtoICMPv6:
		h = make([]byte, 8)
	default:
		h = make([]byte, 8)
	}
	binary.BigEndian.PutUint16(h[0:], f.sport)
	binary.BigEndian.PutUint16(h[2:], f.dport)
	if f.proto == rule.ProtoICMP || f.proto == rule.ProtoICMPv6 {
		h[0], h[1] = byte(f.sport>>8), byte(f.sport)
	}
	return append(h, make([]byte, f.payload)...)
}

// refParse is the test's own reading of rule's package doc: frame bytes to
// Fields. It is the oracle's parser, independent of bpf/scrub.c.
func refParse(b []byte) rule.Fields {
	var f rule.Fields
	if len(b) < 14 {
		return f
	}
	et := binary.BigEndian.Uint16(b[12:])
	off := 14
	for tags := 0; et == 0x8100 || et == 0x88a8; tags++ {
		if tags == 2 || len(b) < off+4 {
			return rule.Fields{}
		}
		et = binary.BigEndian.Uint16(b[off+2:])
		off += 4
	}
	ip := b[off:]
	var l4 []byte
	switch et {
	case 0x0800:
		if len(ip) < 20 || ip[0]>>4 != 4 {
			return f
		}
		ihl := int(ip[0]&15) * 4
		if ihl < 20 || len(ip) < ihl {
			return f
		}
		f.Family = rule.IPv4
		f.DSCP = ip[1] >> 2
		f.Length = uint32(binary.BigEndian.Uint16(ip[2:]))
		fo := binary.BigEndian.Uint16(ip[6:])
		f.Frag = rule.FragState(fo&0x4000 != 0, fo&0x2000 != 0, fo&0x1fff)
		f.Proto = ip[9]
		f.Src, f.Dst = rule.AddrFrom4(ip[12:]), rule.AddrFrom4(ip[16:])
		if fo&0x1fff == 0 {
			l4 = ip[ihl:]
		}
	case 0x86dd:
		if len(ip) < 40 || ip[0]>>4 != 6 {
			return f
		}
		f.Family = rule.IPv6
		f.DSCP = (ip[0]<<4 | ip[1]>>4) >> 2
		f.Length = 40 + uint32(binary.BigEndian.Uint16(ip[4:]))
		f.Frag = rule.NotFragment
		f.Src, f.Dst = rule.AddrFrom16(ip[8:]), rule.AddrFrom16(ip[24:])
		nh := ip[6]
		rest := ip[40:]
		isExt := func(n uint8) bool { return n == 0 || n == 43 || n == 60 || n == 44 }
		ok := true
		for i := 0; i < rule.MaxIPv6ExtHeaders && ok && isExt(nh); i++ {
			if nh == 44 {
				if len(rest) < 8 {
					ok = false
					break
				}
				fo := binary.BigEndian.Uint16(rest[2:])
				f.Frag = rule.FragState(false, fo&1 != 0, fo>>3)
				nh, rest = rest[0], rest[8:]
				if fo>>3 != 0 {
					ok = false
				}
				continue
			}
			if len(rest) < 2 || len(rest) < (int(rest[1])+1)*8 {
				ok = false
				break
			}
			nh, rest = rest[0], rest[(int(rest[1])+1)*8:]
		}
		f.Proto = nh
		if ok && !isExt(nh) {
			l4 = rest
		}
	default:
		return f
	}
	if l4 == nil {
		return f
	}
	switch {
	case f.Proto == rule.ProtoTCP && len(l4) >= 20:
		f.L4, f.TCPFlags = true, l4[13]
	case f.Proto == rule.ProtoUDP && len(l4) >= 8, f.Proto == rule.ProtoSCTP && len(l4) >= 12:
		f.L4 = true
	case (f.Family == rule.IPv4 && f.Proto == rule.ProtoICMP || f.Family == rule.IPv6 && f.Proto == rule.ProtoICMPv6) && len(l4) >= 4:
		f.L4, f.ICMPType, f.ICMPCode = true, l4[0], l4[1]
	}
	if f.HasPorts() {
		f.SrcPort, f.DstPort = binary.BigEndian.Uint16(l4), binary.BigEndian.Uint16(l4[2:])
	}
	return f
}

// Pools shared by random rules and random frames, so that they meet.
var (
	v4Addrs    = []string{"10.1.2.3", "10.1.9.9", "10.200.0.1", "192.0.2.7", "198.51.100.1"}
	v6Addrs    = []string{"2001:db8::1", "2001:db8:1::5", "2001:db9::1", "fe80::1"}
	v4Prefixes = []string{"10.0.0.0/8", "10.1.0.0/16", "10.1.2.3/32", "192.0.2.0/24", "0.0.0.0/0", "10.1.2.0/30"}
	v6Prefixes = []string{"2001:db8::/32", "2001:db8::1/128", "::/0", "2001:db8:1::/48"}
	protos     = []uint8{rule.ProtoICMP, rule.ProtoTCP, rule.ProtoUDP, rule.ProtoGRE, rule.ProtoICMPv6, rule.ProtoSCTP}
	ports      = []uint16{0, 22, 53, 80, 443, 1000, 1500, 2000, 4000, 65535}
)

func pick[T any](r *rand.Rand, xs []T) T { return xs[r.IntN(len(xs))] }

func randRanges(r *rand.Rand, max uint32, pool []uint16) rule.Ranges {
	n := 1 + r.IntN(3)
	if r.IntN(8) == 0 {
		n = 5 + r.IntN(15) // forces chunking or exceeds MaxExactPorts
	}
	rs := make(rule.Ranges, 0, n)
	for i := 0; i < n; i++ {
		a := uint32(pick(r, pool))
		if r.IntN(2) == 0 {
			rs = append(rs, rule.Range{Lo: a, Hi: a})
			continue
		}
		b := a + uint32(r.IntN(1500))
		rs = append(rs, rule.Range{Lo: a, Hi: min(b, max)})
	}
	return rs
}

func randRule(r *rand.Rand, i int) rule.Rule {
	ru := rule.Rule{ID: "r" + string(rune('a'+i%26)) + string(rune('0'+i/26%10)) + string(rune('0'+i/260)),
		Priority: pick(r, []uint32{1, 5, 10, rule.DefaultPriority}), Action: rule.Action(r.IntN(4) / 3)}
	m := &ru.Match
	switch r.IntN(3) {
	case 0:
		if r.IntN(2) == 0 {
			m.Src = netip.MustParsePrefix(pick(r, v4Prefixes))
		}
		if r.IntN(2) == 0 {
			m.Dst = netip.MustParsePrefix(pick(r, v4Prefixes))
		}
	case 1:
		if r.IntN(2) == 0 {
			m.Src = netip.MustParsePrefix(pick(r, v6Prefixes))
		}
		if r.IntN(2) == 0 {
			m.Dst = netip.MustParsePrefix(pick(r, v6Prefixes))
		}
	}
	if r.IntN(2) == 0 {
		for j, n := 0, 1+r.IntN(3); j < n; j++ {
			m.Proto = append(m.Proto, pick(r, protos))
		}
	}
	pp := append(ports, 1024, 3000)
	if r.IntN(4) == 0 {
		m.SrcPort = randRanges(r, 65535, pp)
	}
	if r.IntN(3) == 0 {
		m.DstPort = randRanges(r, 65535, pp)
	}
	if r.IntN(6) == 0 {
		m.Port = randRanges(r, 65535, pp)
	}
	if r.IntN(6) == 0 {
		m.HasTCPFlags = true
		m.TCPFlags.Mask = uint8(r.IntN(256))
		m.TCPFlags.Value = uint8(r.IntN(256)) & m.TCPFlags.Mask
	}
	if r.IntN(8) == 0 {
		m.ICMPType = randRanges(r, 255, []uint16{0, 3, 8, 128, 129})
	}
	if r.IntN(10) == 0 {
		m.ICMPCode = randRanges(r, 255, []uint16{0, 1, 4})
	}
	if r.IntN(6) == 0 {
		m.Fragment = rule.Frag(1 + r.IntN(31))
	}
	if r.IntN(6) == 0 {
		m.Length = randRanges(r, 65535+40, []uint16{0, 40, 60, 64, 100, 1500})
	}
	if r.IntN(8) == 0 {
		m.DSCP = r.Uint64() & r.Uint64()
	}
	return ru
}

func randFrame(r *rand.Rand) frame {
	f := frame{v6: r.IntN(2) == 0, proto: pick(r, protos), tos: uint8(r.IntN(256)),
		sport: pick(r, ports), dport: pick(r, ports), tcpFlags: uint8(r.IntN(256)), payload: r.IntN(40)}
	if r.IntN(3) == 0 {
		f.sport = uint16(r.IntN(65536))
	}
	if f.v6 {
		f.src, f.dst = netip.MustParseAddr(pick(r, v6Addrs)), netip.MustParseAddr(pick(r, v6Addrs))
	} else {
		f.src, f.dst = netip.MustParseAddr(pick(r, v4Addrs)), netip.MustParseAddr(pick(r, v4Addrs))
		f.ipOptWords = []int{0, 0, 0, 1, 10}[r.IntN(5)]
	}
	if r.IntN(4) == 0 {
		f.vlans = r.IntN(4)
	}
	if r.IntN(5) == 0 {
		f.df, f.mf = r.IntN(2) == 0, r.IntN(2) == 0
		if r.IntN(2) == 0 {
			f.fragOff = uint16(1 + r.IntN(100))
		}
		if f.v6 {
			f.ext = append(f.ext, 44)
		}
	}
	if f.v6 && r.IntN(4) == 0 {
		n := r.IntN(6)
		for i := 0; i < n; i++ {
			f.ext = append([]uint8{pick(r, []uint8{0, 43, 60, 44})}, f.ext...)
		}
	}
	if r.IntN(20) == 0 {
		f.badVersion = true
	}
	if r.IntN(30) == 0 {
		f.etherType = pick(r, []uint16{0x0806, 0x8847, 0x8100})
	}
	if r.IntN(6) == 0 {
		f.cut = 14 + r.IntN(80)
	}
	return f
}
