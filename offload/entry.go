package offload

import (
	"cmp"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/scrubd/scrubd/swpath/rule"
)

// Flower ip_flags bits (TCA_FLOWER_KEY_FLAGS, pkt_cls.h
// TCA_FLOWER_KEY_FLAGS_IS_FRAGMENT and _FRAG_IS_FIRST).
const (
	FlagFrag      uint8 = 1 // any fragment: more-fragments set or offset != 0
	FlagFirstFrag uint8 = 2 // a fragment with offset 0
)

// PacketKey is what a flower-like parser extracts from a packet: the fields
// an Entry compares. L4 fields are zero where the packet has no L4 header of
// the matching protocol.
type PacketKey struct {
	Family   rule.Family
	Proto    uint8
	Src, Dst rule.Addr
	SrcPort  uint16
	DstPort  uint16
	TCPFlags uint8
	ICMPType uint8
	ICMPCode uint8
	TOS      uint8
	Flags    uint8 // FlagFrag, FlagFirstFrag
}

// KeyOf extracts the key of the packet f. It reports false for a packet
// that is not IP (nothing matches it).
func KeyOf(f *rule.Fields) (PacketKey, bool) {
	var k PacketKey
	if f.Family != rule.IPv4 && f.Family != rule.IPv6 {
		return k, false
	}
	k.Family = f.Family
	k.Proto = f.Proto
	k.Src, k.Dst = f.Src, f.Dst
	k.TOS = f.DSCP << 2
	if f.Frag&(rule.IsFragment|rule.FirstFragment) != 0 {
		k.Flags |= FlagFrag
	}
	if f.Frag&rule.FirstFragment != 0 {
		k.Flags |= FlagFirstFrag
	}
	if f.HasPorts() {
		k.SrcPort, k.DstPort = f.SrcPort, f.DstPort
	}
	if f.L4 && f.Proto == rule.ProtoTCP {
		k.TCPFlags = f.TCPFlags
	}
	if f.HasICMP() {
		k.ICMPType, k.ICMPCode = f.ICMPType, f.ICMPCode
	}
	return k, true
}

// Match is the match of one hardware entry. Values are kept masked
// (value & mask); a zero mask means the field is not matched. Ports need
// HasProto with TCP, UDP or SCTP; TCP flags need TCP; ICMP type and code
// need ICMP (IPv4) or ICMPv6 (IPv6). Match is comparable.
type Match struct {
	Family       rule.Family // IPv4 or IPv6 (the EtherType key)
	HasProto     bool
	Proto        uint8
	Src, SrcMask rule.Addr
	Dst, DstMask rule.Addr
	SrcPort      uint16
	SrcPortMask  uint16
	DstPort      uint16
	DstPortMask  uint16
	TCPFlags     uint8
	TCPFlagsMask uint8
	ICMPType     uint8
	ICMPTypeMask uint8
	ICMPCode     uint8
	ICMPCodeMask uint8
	TOS          uint8
	TOSMask      uint8
	Flags        uint8
	FlagsMask    uint8
}

// Normalize masks every value with its mask, as the kernel stores it.
func (m *Match) Normalize() {
	m.Src = m.Src.And(m.SrcMask)
	m.Dst = m.Dst.And(m.DstMask)
	m.SrcPort &= m.SrcPortMask
	m.DstPort &= m.DstPortMask
	m.TCPFlags &= m.TCPFlagsMask
	m.ICMPType &= m.ICMPTypeMask
	m.ICMPCode &= m.ICMPCodeMask
	m.TOS &= m.TOSMask
	m.Flags &= m.FlagsMask
	if !m.HasProto {
		m.Proto = 0
	}
}

// Matches reports whether the entry matches a packet with key k. m must be
// normalized.
func (m *Match) Matches(k *PacketKey) bool {
	return m.Family == k.Family &&
		(!m.HasProto || m.Proto == k.Proto) &&
		k.Src.And(m.SrcMask) == m.Src &&
		k.Dst.And(m.DstMask) == m.Dst &&
		k.SrcPort&m.SrcPortMask == m.SrcPort &&
		k.DstPort&m.DstPortMask == m.DstPort &&
		k.TCPFlags&m.TCPFlagsMask == m.TCPFlags &&
		k.ICMPType&m.ICMPTypeMask == m.ICMPType &&
		k.ICMPCode&m.ICMPCodeMask == m.ICMPCode &&
		k.TOS&m.TOSMask == m.TOS &&
		k.Flags&m.FlagsMask == m.Flags
}

// HasL4 reports whether the entry compares any L4 field.
func (m *Match) HasL4() bool {
	return m.SrcPortMask|m.DstPortMask != 0 || m.TCPFlagsMask|m.ICMPTypeMask|m.ICMPCodeMask != 0
}

// ZeroL4 reports whether a packet whose key has zero L4 fields (no L4
// header) satisfies the entry's L4 conditions.
func (m *Match) ZeroL4() bool {
	return m.SrcPort == 0 && m.DstPort == 0 && m.TCPFlags == 0 && m.ICMPType == 0 && m.ICMPCode == 0
}

// Mask is the mask shape of an entry: which fields it matches and with
// which masks. Each distinct shape in one table costs a flow group (mlx5
// DMFS) or matcher (SMFS). AddrFamily is set only when an address is
// matched, since IPv4 and IPv6 addresses are different header fields.
type Mask struct {
	AddrFamily   rule.Family
	Proto        bool
	SrcMask      rule.Addr
	DstMask      rule.Addr
	SrcPortMask  uint16
	DstPortMask  uint16
	TCPFlagsMask uint8
	ICMPTypeMask uint8
	ICMPCodeMask uint8
	TOSMask      uint8
	FlagsMask    uint8
}

// Mask returns the entry's mask shape.
func (m *Match) Mask() Mask {
	k := Mask{
		Proto: m.HasProto, SrcMask: m.SrcMask, DstMask: m.DstMask,
		SrcPortMask: m.SrcPortMask, DstPortMask: m.DstPortMask, TCPFlagsMask: m.TCPFlagsMask,
		ICMPTypeMask: m.ICMPTypeMask, ICMPCodeMask: m.ICMPCodeMask, TOSMask: m.TOSMask, FlagsMask: m.FlagsMask,
	}
	if m.SrcMask != (rule.Addr{}) || m.DstMask != (rule.Addr{}) {
		k.AddrFamily = m.Family
	}
	return k
}

// Apply returns the masked key of k under mask s: the Match an entry of
// shape s must equal to match k. It is how a tuple-space lookup finds the
// entry of one shape in one hash probe.
func (s *Mask) Apply(k *PacketKey) Match {
	m := Match{
		Family: k.Family, HasProto: s.Proto,
		Src: k.Src.And(s.SrcMask), SrcMask: s.SrcMask, Dst: k.Dst.And(s.DstMask), DstMask: s.DstMask,
		SrcPort: k.SrcPort & s.SrcPortMask, SrcPortMask: s.SrcPortMask,
		DstPort: k.DstPort & s.DstPortMask, DstPortMask: s.DstPortMask,
		TCPFlags: k.TCPFlags & s.TCPFlagsMask, TCPFlagsMask: s.TCPFlagsMask,
		ICMPType: k.ICMPType & s.ICMPTypeMask, ICMPTypeMask: s.ICMPTypeMask,
		ICMPCode: k.ICMPCode & s.ICMPCodeMask, ICMPCodeMask: s.ICMPCodeMask,
		TOS: k.TOS & s.TOSMask, TOSMask: s.TOSMask,
		Flags: k.Flags & s.FlagsMask, FlagsMask: s.FlagsMask,
	}
	if s.Proto {
		m.Proto = k.Proto
	}
	return m
}

func fmtAddr(fam rule.Family, a, m rule.Addr) string {
	return fmt.Sprintf("%s/%d", a.Netip(fam), m.PrefixLen())
}

// String formats the match like tc-flower's arguments, for logs and errors.
func (m *Match) String() string {
	var b []string
	add := func(f string, a ...any) { b = append(b, fmt.Sprintf(f, a...)) }
	if m.Family == rule.IPv4 {
		add("protocol ip")
	} else {
		add("protocol ipv6")
	}
	if m.HasProto {
		add("ip_proto %d", m.Proto)
	}
	if m.SrcMask != (rule.Addr{}) {
		add("src_ip %s", fmtMaskedAddr(m.Family, m.Src, m.SrcMask))
	}
	if m.DstMask != (rule.Addr{}) {
		add("dst_ip %s", fmtMaskedAddr(m.Family, m.Dst, m.DstMask))
	}
	if m.SrcPortMask != 0 {
		add("src_port %d/0x%04x", m.SrcPort, m.SrcPortMask)
	}
	if m.DstPortMask != 0 {
		add("dst_port %d/0x%04x", m.DstPort, m.DstPortMask)
	}
	if m.TCPFlagsMask != 0 {
		add("tcp_flags 0x%02x/0x%02x", m.TCPFlags, m.TCPFlagsMask)
	}
	if m.ICMPTypeMask != 0 {
		add("type %d/0x%02x", m.ICMPType, m.ICMPTypeMask)
	}
	if m.ICMPCodeMask != 0 {
		add("code %d/0x%02x", m.ICMPCode, m.ICMPCodeMask)
	}
	if m.TOSMask != 0 {
		add("ip_tos 0x%02x/0x%02x", m.TOS, m.TOSMask)
	}
	if m.FlagsMask != 0 {
		var fs []string
		if m.FlagsMask&FlagFrag != 0 {
			fs = append(fs, map[bool]string{true: "frag", false: "nofrag"}[m.Flags&FlagFrag != 0])
		}
		if m.FlagsMask&FlagFirstFrag != 0 {
			fs = append(fs, map[bool]string{true: "firstfrag", false: "nofirstfrag"}[m.Flags&FlagFirstFrag != 0])
		}
		add("ip_flags %s", strings.Join(fs, "/"))
	}
	return strings.Join(b, " ")
}

func fmtMaskedAddr(fam rule.Family, a, m rule.Addr) string {
	if rule.PrefixMask(m.PrefixLen()) == m {
		return fmtAddr(fam, a, m)
	}
	return a.Netip(fam).String() + "/" + m.Netip(fam).String()
}

// Cookie is the 16-byte action cookie (TC_COOKIE_MAX_SIZE) of an entry.
type Cookie [16]byte

// CookieMagic are the first two bytes of every cookie scrubd writes.
var CookieMagic = [2]byte{0x5c, 0x7d}

// Ours reports whether c carries scrubd's magic.
func (c Cookie) Ours() bool { return c[0] == CookieMagic[0] && c[1] == CookieMagic[1] }

// RuleHash returns the 6 bytes that identify the rule the entry came from.
func (c Cookie) RuleHash() [6]byte { return [6]byte(c[2:8]) }

func (c Cookie) String() string { return hex.EncodeToString(c[:]) }

// RuleHash is the stable hash of a rule's identity: its id and match, in a
// canonical binary form of this package's own (protocol lists sorted and
// deduplicated, range lists sorted and merged), so the same rule written
// differently, or printed differently by a later version, keeps its cookies.
func RuleHash(id string, m *rule.Match) [6]byte {
	b := []byte("scrubd-rule\x00")
	b = append(b, id...)
	b = append(b, 0)
	for _, p := range []netip.Prefix{m.Src, m.Dst} {
		if !p.IsValid() {
			b = append(b, 0)
			continue
		}
		a := p.Masked().Addr().AsSlice()
		b = append(b, byte(len(a)))
		b = append(b, a...)
		b = append(b, byte(p.Bits()))
	}
	if m.Proto == nil {
		b = append(b, 0)
	} else {
		ps := slices.Compact(slices.Sorted(slices.Values(m.Proto)))
		b = append(b, 1, byte(len(ps)))
		b = append(b, ps...)
	}
	for _, rs := range []rule.Ranges{m.SrcPort, m.DstPort, m.Port, m.ICMPType, m.ICMPCode, m.Length} {
		b = appendRanges(b, rs)
	}
	b = append(b, boolByte(m.HasTCPFlags), m.TCPFlags.Value, m.TCPFlags.Mask, byte(m.Fragment))
	b = binary.BigEndian.AppendUint64(b, m.DSCP)
	sum := sha256.Sum256(b)
	return [6]byte(sum[:6])
}

// appendRanges appends a canonical form of rs: absent, or sorted merged
// ranges.
func appendRanges(b []byte, rs rule.Ranges) []byte {
	if rs == nil {
		return append(b, 0)
	}
	c := slices.Clone(rs)
	slices.SortFunc(c, func(x, y rule.Range) int { return cmp.Compare(x.Lo, y.Lo) })
	var out rule.Ranges
	for _, r := range c {
		if r.Lo > r.Hi {
			continue
		}
		if n := len(out); n > 0 && uint64(r.Lo) <= uint64(out[n-1].Hi)+1 {
			out[n-1].Hi = max(out[n-1].Hi, r.Hi)
			continue
		}
		out = append(out, r)
	}
	b = append(b, 1)
	b = binary.BigEndian.AppendUint32(b, uint32(len(out)))
	for _, r := range out {
		b = binary.BigEndian.AppendUint32(b, r.Lo)
		b = binary.BigEndian.AppendUint32(b, r.Hi)
	}
	return b
}

// Entry is one hardware table entry: a drop filter in (Chain, Prio) with a
// match and a cookie, or with Pass a pass filter (gact pass, TC_ACT_OK):
// a packet it matches ends tc classification there and goes on to the
// kernel's receive path, so no later priority's drop sees it. Handle is the
// filter handle in its table; 0 asks the backend to choose one. RuleID is
// kept in memory only (hardware holds the cookie).
type Entry struct {
	Chain  uint32
	Prio   uint16
	Handle uint32
	Cookie Cookie
	RuleID string
	Match  Match
	Pass   bool
}

// SetCookie computes the entry's cookie from the rule hash and the entry's
// table and match.
func (e *Entry) SetCookie(ruleHash [6]byte) {
	var buf [128]byte
	b := append(buf[:0], ruleHash[:]...)
	b = binary.BigEndian.AppendUint32(b, e.Chain)
	b = binary.BigEndian.AppendUint16(b, e.Prio)
	m := &e.Match
	b = append(b, byte(m.Family), boolByte(m.HasProto), m.Proto)
	for _, a := range []rule.Addr{m.Src, m.SrcMask, m.Dst, m.DstMask} {
		b = binary.BigEndian.AppendUint64(b, a.Hi)
		b = binary.BigEndian.AppendUint64(b, a.Lo)
	}
	for _, v := range []uint16{m.SrcPort, m.SrcPortMask, m.DstPort, m.DstPortMask} {
		b = binary.BigEndian.AppendUint16(b, v)
	}
	b = append(b, m.TCPFlags, m.TCPFlagsMask, m.ICMPType, m.ICMPTypeMask, m.ICMPCode, m.ICMPCodeMask,
		m.TOS, m.TOSMask, m.Flags, m.FlagsMask)
	if e.Pass {
		b = append(b, 'p') // a drop entry's cookie is what it always was
	}
	sum := sha256.Sum256(b)
	e.Cookie[0], e.Cookie[1] = CookieMagic[0], CookieMagic[1]
	copy(e.Cookie[2:8], ruleHash[:])
	copy(e.Cookie[8:], sum[:8])
}

func boolByte(b bool) byte {
	if b {
		return 1
	}
	return 0
}

// Table is one (chain, priority) table of a device.
type Table struct {
	Chain uint32
	Prio  uint16
}

// Table returns the entry's table.
func (e *Entry) Table() Table { return Table{e.Chain, e.Prio} }
