package tcflower

import (
	"encoding/binary"
	"fmt"
	"net/netip"
)

// Ethernet protocol numbers used as the filter protocol and eth_type key
// (host order here; encoded big-endian on the wire).
const (
	ProtoAll   uint16 = 0x0003 // ETH_P_ALL
	ProtoIPv4  uint16 = 0x0800 // ETH_P_IP
	ProtoIPv6  uint16 = 0x86DD // ETH_P_IPV6
	Proto8021Q uint16 = 0x8100 // ETH_P_8021Q
)

// IP protocol numbers with meaning for the key prerequisites.
const (
	IPProtoICMP   uint8 = 1
	IPProtoTCP    uint8 = 6
	IPProtoUDP    uint8 = 17
	IPProtoICMPv6 uint8 = 58
)

// Flags are TCA_FLOWER_FLAGS (TCA_CLS_FLAGS_*). SkipHW/SkipSW/Verbose are
// requested by the caller; InHW/NotInHW are set by the kernel in dumps.
type Flags uint32

// Flag bits.
const (
	SkipHW  Flags = 1 << 0
	SkipSW  Flags = 1 << 1
	InHW    Flags = 1 << 2
	NotInHW Flags = 1 << 3
	Verbose Flags = 1 << 4
)

func (f Flags) String() string {
	s := ""
	for _, b := range []struct {
		f Flags
		n string
	}{{SkipHW, "skip_hw"}, {SkipSW, "skip_sw"}, {InHW, "in_hw"}, {NotInHW, "not_in_hw"}, {Verbose, "verbose"}} {
		if f&b.f != 0 {
			if s != "" {
				s += ","
			}
			s += b.n
		}
	}
	if rest := f &^ (SkipHW | SkipSW | InHW | NotInHW | Verbose); rest != 0 {
		if s != "" {
			s += ","
		}
		s += fmt.Sprintf("%#x", uint32(rest))
	}
	return s
}

// IP fragment flag bits for Key.IPFlags/IPFlagsMask
// (TCA_FLOWER_KEY_FLAGS_*).
const (
	IPFlagFrag      uint32 = 1 << 0 // IS_FRAGMENT
	IPFlagFirstFrag uint32 = 1 << 1 // FRAG_IS_FIRST
)

// AddrMask is an IPv4 or IPv6 address with an arbitrary bit mask of the same
// family. It is unset when Mask is invalid or all zero (flower neither
// encodes nor dumps a zero mask).
type AddrMask struct {
	Addr netip.Addr
	Mask netip.Addr
}

// Set reports whether the key is present.
func (a AddrMask) Set() bool { return a.Mask.IsValid() && !a.Mask.IsUnspecified() }

// Prefix returns the AddrMask of a CIDR prefix (masked).
func Prefix(p netip.Prefix) AddrMask {
	p = p.Masked()
	n := p.Addr().BitLen()
	m := make([]byte, n/8)
	for i := 0; i < p.Bits(); i++ {
		m[i/8] |= 0x80 >> (i % 8)
	}
	mask, _ := netip.AddrFromSlice(m)
	return AddrMask{Addr: p.Addr(), Mask: mask}
}

func (a AddrMask) String() string {
	if !a.Set() {
		return "any"
	}
	return a.Addr.String() + "/" + a.Mask.String()
}

// PortMask is a TCP/UDP port with a mask; unset when Mask is 0.
type PortMask struct {
	Port uint16
	Mask uint16
}

// Set reports whether the key is present.
func (p PortMask) Set() bool { return p.Mask != 0 }

// VLANKey matches the outer 802.1Q tag; it is used when Key.EthType is
// Proto8021Q. EthType is the encapsulated protocol (TCA_FLOWER_KEY_VLAN_ETH_TYPE).
type VLANKey struct {
	ID      uint16 // 12 bits, valid when HasID
	HasID   bool
	Prio    uint8 // 3 bits, valid when HasPrio
	HasPrio bool
	EthType uint16
}

// Key is the flower match. A zero field (zero mask) is "not matched".
// Values must already be masked (value&mask == value): Validate rejects
// anything else so that what is read back equals what was written.
type Key struct {
	// EthType is TCA_FLOWER_KEY_ETH_TYPE. IP keys need ProtoIPv4/ProtoIPv6
	// here, or Proto8021Q with VLAN.EthType set to one of them: the kernel
	// silently ignores IP keys otherwise, which would widen a drop.
	EthType uint16
	VLAN    VLANKey
	// IPProto is TCA_FLOWER_KEY_IP_PROTO (exact); 0 means not matched.
	IPProto uint8
	Src     AddrMask
	Dst     AddrMask
	// SrcPort/DstPort are encoded as TCP or UDP keys after IPProto.
	SrcPort PortMask
	DstPort PortMask
	// TCPFlags/TCPFlagsMask: the 12 flag bits of the TCP header (FIN=0x01,
	// SYN=0x02, RST=0x04, PSH=0x08, ACK=0x10, URG=0x20, ECE=0x40, CWR=0x80).
	TCPFlags     uint16
	TCPFlagsMask uint16
	// IPFlags/IPFlagsMask: IPFlagFrag, IPFlagFirstFrag.
	IPFlags     uint32
	IPFlagsMask uint32
	// TOS/TOSMask: IPv4 TOS / IPv6 traffic class byte; DSCP is TOS>>2.
	TOS     uint8
	TOSMask uint8
	// ICMP type and code, encoded as ICMPv4 or ICMPv6 keys after IPProto.
	ICMPType     uint8
	ICMPTypeMask uint8
	ICMPCode     uint8
	ICMPCodeMask uint8
}

// DSCP sets the key to match DSCP d (TOS byte d<<2, mask 0xfc).
func (k *Key) DSCP(d uint8) { k.TOS, k.TOSMask = d<<2, 0xfc }

// Stats are an action's counters: the kernel's totals (software plus
// hardware, TCA_STATS_BASIC) and the hardware part (TCA_STATS_BASIC_HW).
type Stats struct {
	Bytes     uint64
	Packets   uint64
	HWBytes   uint64
	HWPackets uint64
	Drops     uint64 // TCA_STATS_QUEUE drops
	// Present is true when the dump carried TCA_ACT_STATS.
	Present bool
}

// SWPackets is the software part of Packets.
func (s Stats) SWPackets() uint64 { return s.Packets - min(s.HWPackets, s.Packets) }

// SWBytes is the software part of Bytes.
func (s Stats) SWBytes() uint64 { return s.Bytes - min(s.HWBytes, s.Bytes) }

// Times are the action's struct tcf_t: ages relative to the dump, in
// clock_t ticks (USER_HZ, 100 per second on x86-64 and arm64).
type Times struct {
	Install, LastUse, Expires, FirstUse uint64
}

// Action is a gact action (the only kind scrubd installs).
type Action struct {
	Kind    string // "gact"
	Verdict int32  // ActShot (drop) or ActOK (pass)
	Index   uint32 // 0 on install: the kernel allocates one
	Cookie  []byte // up to CookieMaxLen bytes; see MakeCookie
	// Read back only:
	Stats Stats
	Times Times
}

// Drop returns a gact drop action with cookie c.
func Drop(c []byte) Action { return Action{Kind: "gact", Verdict: ActShot, Cookie: c} }

// Filter is one flower filter on a device's tc hook.
type Filter struct {
	Ifindex  int
	Parent   uint32 // ParentIngress when 0
	Chain    uint32
	Prio     uint16 // 1..0xffff; 0 only for dumps/installs letting the kernel pick
	Protocol uint16 // filter protocol (tcm_info low half), ProtoIPv4 etc.
	Handle   uint32 // 0 on install: the kernel allocates one (read it back with Echo)
	Flags    Flags
	// InHWCount is TCA_FLOWER_IN_HW_COUNT, read back only.
	InHWCount uint32
	Key       Key
	Actions   []Action
}

func (f *Filter) parent() uint32 {
	if f.Parent == 0 {
		return ParentIngress
	}
	return f.Parent
}

// ID names the filter for errors: "chain C prio P handle 0xH".
func (f *Filter) ID() string {
	return fmt.Sprintf("chain %d prio %d handle %#x", f.Chain, f.Prio, f.Handle)
}

// Cookie layout: "scrubd" magic, a version byte, then an 8-byte rule id
// (big-endian): 15 bytes, within TC_COOKIE_MAX_SIZE.
var cookieMagic = [6]byte{'s', 'c', 'r', 'u', 'b', 'd'}

const cookieVersion = 1

// MakeCookie returns the action cookie that marks a scrubd entry for rule
// id (a rule hash or id).
func MakeCookie(id uint64) []byte {
	b := make([]byte, 15)
	copy(b, cookieMagic[:])
	b[6] = cookieVersion
	binary.BigEndian.PutUint64(b[7:], id)
	return b
}

// ParseCookie returns the rule id in a scrubd cookie; ok is false for
// anyone else's cookie (or none).
func ParseCookie(b []byte) (id uint64, ok bool) {
	if len(b) != 15 || [6]byte(b[:6]) != cookieMagic || b[6] != cookieVersion {
		return 0, false
	}
	return binary.BigEndian.Uint64(b[7:]), true
}

// OwnedID returns the scrubd rule id of the filter: the cookie of its first
// action, if that is a scrubd cookie.
func (f *Filter) OwnedID() (uint64, bool) {
	if len(f.Actions) == 0 {
		return 0, false
	}
	return ParseCookie(f.Actions[0].Cookie)
}

// MaskEqual reports whether k and o match on the same fields with the same
// masks. cls_flower replaces a filter in place (same handle) only when the
// new key uses the old filter's mask: fl_check_assign_mask returns EINVAL
// otherwise, with no extack (Linux 6.1, seen in the kernel lab). When the
// masks differ, install the new filter under another handle first and then
// delete the old one, so the drop never lapses.
func (k Key) MaskEqual(o Key) bool {
	return k.EthType == o.EthType &&
		k.VLAN.HasID == o.VLAN.HasID && k.VLAN.HasPrio == o.VLAN.HasPrio && (k.VLAN.EthType != 0) == (o.VLAN.EthType != 0) &&
		(k.IPProto != 0) == (o.IPProto != 0) &&
		k.Src.Set() == o.Src.Set() && (!k.Src.Set() || k.Src.Mask == o.Src.Mask) &&
		k.Dst.Set() == o.Dst.Set() && (!k.Dst.Set() || k.Dst.Mask == o.Dst.Mask) &&
		k.SrcPort.Mask == o.SrcPort.Mask && k.DstPort.Mask == o.DstPort.Mask &&
		k.TCPFlagsMask == o.TCPFlagsMask && k.IPFlagsMask == o.IPFlagsMask && k.TOSMask == o.TOSMask &&
		k.ICMPTypeMask == o.ICMPTypeMask && k.ICMPCodeMask == o.ICMPCodeMask
}
