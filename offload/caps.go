package offload

import (
	"strings"
	"time"

	"github.com/scrubd/scrubd/swpath/rule"
)

// Keys is a set of match keys a device can put in hardware.
type Keys uint32

// Match keys, after flower's TCA_FLOWER_KEY_* families.
const (
	KeyIPv4Addr  Keys = 1 << iota // IPv4 src/dst with any bit mask
	KeyIPv6Addr                   // IPv6 src/dst with any bit mask
	KeyIPProto                    // ip_proto (exact)
	KeyTCPPorts                   // TCP src/dst ports with masks
	KeyUDPPorts                   // UDP src/dst ports with masks
	KeySCTPPorts                  // SCTP src/dst ports with masks
	KeyTCPFlags                   // tcp_flags value/mask
	KeyFrag                       // ip_flags frag/nofrag
	KeyFirstFrag                  // ip_flags firstfrag/nofirstfrag
	KeyTOS                        // ip_tos value/mask
	KeyICMPv4                     // ICMP type/code with masks
	KeyICMPv6                     // ICMPv6 type/code with masks
)

var keyNames = []string{"ipv4-addr", "ipv6-addr", "ip-proto", "tcp-ports", "udp-ports", "sctp-ports",
	"tcp-flags", "frag", "first-frag", "tos", "icmp", "icmpv6"}

func (k Keys) String() string {
	var b []string
	for i, n := range keyNames {
		if k&(1<<i) != 0 {
			b = append(b, n)
		}
	}
	if len(b) == 0 {
		return "none"
	}
	return strings.Join(b, ",")
}

// Has reports whether every key in want is in k.
func (k Keys) Has(want Keys) bool { return k&want == want }

// Capabilities is what a device's hardware table can hold.
type Capabilities struct {
	// Keys the device matches in hardware.
	Keys Keys
	// LargeGroups is the number of auto-grouped flow groups each table
	// gives its first distinct mask shapes (mlx5 devlink fdb_large_groups,
	// default 15). Later shapes get one-entry groups. 0 means no limit.
	LargeGroups int
	// MaxEntries is the entry capacity of a table; 0 means unknown.
	MaxEntries int
	// MaxChain and MaxPrio are the highest chain and priority the device
	// offloads (mlx5 FDB without ignore_flow_level: chain 3, prio 16).
	MaxChain uint32
	MaxPrio  uint16
	// InsertRate is the expected insertion rate in entries per second (0:
	// unknown). mlx5: about 5k/s through firmware (DMFS), 33k/s with SMFS.
	InsertRate float64
	// StatsPeriod is how often hardware counters are refreshed (mlx5: 1 s).
	StatsPeriod time.Duration
}

// MLX5Keys are the keys upstream mlx5 offloads from tc flower with ICMP
// flex parsing enabled: no SCTP ports, no first-fragment, no port ranges
// (which the compiler never emits) and no packet length (flower has none).
const MLX5Keys = KeyIPv4Addr | KeyIPv6Addr | KeyIPProto | KeyTCPPorts | KeyUDPPorts | KeyTCPFlags |
	KeyFrag | KeyTOS | KeyICMPv4 | KeyICMPv6

// AllKeys is every key: the kernel's software flower (skip_hw).
const AllKeys = KeyIPv4Addr | KeyIPv6Addr | KeyIPProto | KeyTCPPorts | KeyUDPPorts | KeySCTPPorts |
	KeyTCPFlags | KeyFrag | KeyFirstFrag | KeyTOS | KeyICMPv4 | KeyICMPv6

// Insertion rates measured for mlx5 tc rules in the 2019 software-steering
// introduction (Linux pull request "mlx5-updates-2019-09-01 (Software
// steering support)", merge 94810bd365cb): firmware-managed (DMFS) and
// software-managed (SMFS) flow steering, entries per second.
const (
	RateDMFS = 5000
	RateSMFS = 33000
)

// MLX5 returns the capabilities of an mlx5 switchdev FDB table with the
// given entry capacity: 15 large groups, chains 0..3 and priorities 1..16
// (no ignore_flow_level), insertion at the DMFS rate, 1 s counters.
func MLX5(entries int) Capabilities {
	return Capabilities{Keys: MLX5Keys, LargeGroups: 15, MaxEntries: entries, MaxChain: 3, MaxPrio: 16,
		InsertRate: RateDMFS, StatsPeriod: time.Second}
}

// SoftwareFlower returns the capabilities of the kernel's software flower:
// every key, no group or entry limit.
func SoftwareFlower() Capabilities {
	return Capabilities{Keys: AllKeys, MaxChain: ^uint32(0) - 1, MaxPrio: ^uint16(0)}
}

// KeysOf returns the keys the match needs.
func KeysOf(m *Match) Keys {
	var k Keys
	if m.SrcMask != (rule.Addr{}) || m.DstMask != (rule.Addr{}) {
		if m.Family == rule.IPv4 {
			k |= KeyIPv4Addr
		} else {
			k |= KeyIPv6Addr
		}
	}
	if m.HasProto {
		k |= KeyIPProto
	}
	if m.SrcPortMask|m.DstPortMask != 0 {
		switch m.Proto {
		case rule.ProtoTCP:
			k |= KeyTCPPorts
		case rule.ProtoUDP:
			k |= KeyUDPPorts
		case rule.ProtoSCTP:
			k |= KeySCTPPorts
		}
	}
	if m.TCPFlagsMask != 0 {
		k |= KeyTCPFlags
	}
	if m.ICMPTypeMask|m.ICMPCodeMask != 0 {
		if m.Family == rule.IPv4 {
			k |= KeyICMPv4
		} else {
			k |= KeyICMPv6
		}
	}
	if m.TOSMask != 0 {
		k |= KeyTOS
	}
	if m.FlagsMask&FlagFrag != 0 {
		k |= KeyFrag
	}
	if m.FlagsMask&FlagFirstFrag != 0 {
		k |= KeyFirstFrag
	}
	return k
}

// Check reports whether the device can hold the match, with the reason it
// cannot, worded like mlx5's extack messages. The error is an *EntryError
// of kind KindUnsupported.
func (c *Capabilities) Check(m *Match) error {
	if m.Family != rule.IPv4 && m.Family != rule.IPv6 {
		return unsupported(0, "Unsupported protocol: only IPv4 and IPv6 entries")
	}
	if m.HasProto && m.Proto == 0 {
		return unsupported(KeyIPProto, "ip_proto 0 cannot be matched (flower reads 0 as no ip_proto key)")
	}
	if m.SrcPortMask|m.DstPortMask != 0 && (!m.HasProto || (m.Proto != rule.ProtoTCP && m.Proto != rule.ProtoUDP && m.Proto != rule.ProtoSCTP)) {
		return unsupported(0, "Only UDP, TCP and SCTP transports carry ports")
	}
	if m.TCPFlagsMask != 0 && (!m.HasProto || m.Proto != rule.ProtoTCP) {
		return unsupported(0, "TCP flags need ip_proto tcp")
	}
	if m.ICMPTypeMask|m.ICMPCodeMask != 0 {
		want := uint8(rule.ProtoICMP)
		if m.Family == rule.IPv6 {
			want = rule.ProtoICMPv6
		}
		if !m.HasProto || m.Proto != want {
			return unsupported(0, "Code and type matching only with ICMP and ICMPv6")
		}
	}
	need := KeysOf(m)
	if miss := need &^ c.Keys; miss != 0 {
		msg := "Unsupported key: " + miss.String()
		switch {
		case miss&(KeyTCPPorts|KeyUDPPorts|KeySCTPPorts) != 0:
			msg = "Only UDP and TCP transports are supported for L4 matching"
		case miss&KeyFirstFrag != 0:
			msg = "Match on frag first/later is not supported"
		case miss&(KeyICMPv4|KeyICMPv6) != 0:
			msg = "ICMP matching is not supported (flex parser)"
		}
		return unsupported(miss, msg)
	}
	return nil
}
