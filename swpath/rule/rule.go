package rule

import (
	"fmt"
	"net/netip"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// DefaultPriority is the priority of a rule that gives none.
const DefaultPriority = 1000

// MaxIPv6ExtHeaders is how many IPv6 extension headers a parser walks before
// it gives up on finding the upper-layer protocol. Every engine uses this
// limit (the XDP verifier needs a bound).
const MaxIPv6ExtHeaders = 4

// Action is what a deciding rule does with a packet.
type Action uint8

const (
	// Drop discards the packet.
	Drop Action = iota
	// Accept passes the packet and stops lower-priority rules from dropping
	// it (an allow-list entry).
	Accept
)

func (a Action) String() string {
	switch a {
	case Drop:
		return "drop"
	case Accept:
		return "accept"
	}
	return "action(" + strconv.Itoa(int(a)) + ")"
}

// Family is an IP version, or FamilyAny for a rule without prefixes.
type Family uint8

const (
	FamilyAny Family = 0
	IPv4      Family = 4
	IPv6      Family = 6
)

// IP protocol numbers with names in the rule format.
const (
	ProtoICMP   = 1
	ProtoTCP    = 6
	ProtoUDP    = 17
	ProtoGRE    = 47
	ProtoICMPv6 = 58
	ProtoSCTP   = 132
)

var protoNames = map[string]uint8{
	"icmp": ProtoICMP, "tcp": ProtoTCP, "udp": ProtoUDP, "gre": ProtoGRE,
	"icmpv6": ProtoICMPv6, "sctp": ProtoSCTP,
}

// ProtoName returns the rule-format name of an IP protocol number, or the
// number itself.
func ProtoName(p uint8) string {
	for n, v := range protoNames {
		if v == p {
			return n
		}
	}
	return strconv.Itoa(int(p))
}

// TCP flag bits (byte 13 of the TCP header).
const (
	FIN uint8 = 0x01
	SYN uint8 = 0x02
	RST uint8 = 0x04
	PSH uint8 = 0x08
	ACK uint8 = 0x10
	URG uint8 = 0x20
	ECE uint8 = 0x40
	CWR uint8 = 0x80
)

var tcpFlagNames = []struct {
	name string
	bit  uint8
}{{"fin", FIN}, {"syn", SYN}, {"rst", RST}, {"psh", PSH}, {"ack", ACK}, {"urg", URG}, {"ece", ECE}, {"cwr", CWR}}

// Frag is a set of fragment states (a bit each).
type Frag uint8

const (
	DontFragment  Frag = 1 << iota // IPv4 DF set
	IsFragment                     // fragment offset != 0
	FirstFragment                  // offset 0, more-fragments set
	LastFragment                   // offset != 0, more-fragments clear
	NotFragment                    // offset 0, more-fragments clear
)

var fragNames = []struct {
	name string
	bit  Frag
}{{"dont-fragment", DontFragment}, {"is-fragment", IsFragment}, {"first-fragment", FirstFragment}, {"last-fragment", LastFragment}, {"not-fragment", NotFragment}}

func (f Frag) names() []string {
	var out []string
	for _, n := range fragNames {
		if f&n.bit != 0 {
			out = append(out, n.name)
		}
	}
	return out
}

// Range is an inclusive range of values.
type Range struct{ Lo, Hi uint32 }

// Contains reports whether v is in r.
func (r Range) Contains(v uint32) bool { return v >= r.Lo && v <= r.Hi }

func (r Range) String() string {
	if r.Lo == r.Hi {
		return strconv.FormatUint(uint64(r.Lo), 10)
	}
	return strconv.FormatUint(uint64(r.Lo), 10) + "-" + strconv.FormatUint(uint64(r.Hi), 10)
}

// Ranges is a list of ranges, any of which may hold. A nil Ranges means the
// field is not given (anything holds).
type Ranges []Range

// Contains reports whether any range holds v.
func (rs Ranges) Contains(v uint32) bool {
	for _, r := range rs {
		if r.Contains(v) {
			return true
		}
	}
	return false
}

// TCPFlags holds when (flags & Mask) == Value.
type TCPFlags struct{ Value, Mask uint8 }

// Match is the condition of a rule. The zero Match matches every IP packet.
type Match struct {
	Src, Dst netip.Prefix // !IsValid() means not given
	// Proto lists the upper-layer protocols, sorted; nil means not given.
	Proto    []uint8
	SrcPort  Ranges
	DstPort  Ranges
	Port     Ranges // source or destination
	ICMPType Ranges
	ICMPCode Ranges
	// TCPFlags applies when HasTCPFlags is set.
	TCPFlags    TCPFlags
	HasTCPFlags bool
	Fragment    Frag   // 0 means not given
	Length      Ranges // IP packet length
	// DSCP is a set of code points, bit n for DSCP n; 0 means not given.
	DSCP uint64
	// All marks a match written as "match: all": no condition, on purpose.
	// Engines need not look at it (a Match without conditions matches
	// every IP packet); the parser refuses a rule without conditions that
	// does not say All, and a Guard refuses All unless allowed.
	All bool
}

// MatchAllName is the rule-file spelling of a match without conditions.
const MatchAllName = "all"

// Empty reports whether m has no condition (it matches every IP packet).
func (m *Match) Empty() bool {
	return !m.Src.IsValid() && !m.Dst.IsValid() && m.Proto == nil && m.SrcPort == nil && m.DstPort == nil &&
		m.Port == nil && m.ICMPType == nil && m.ICMPCode == nil && !m.HasTCPFlags && m.Fragment == 0 &&
		m.Length == nil && m.DSCP == 0
}

// Family returns the family the prefixes fix, or FamilyAny.
func (m *Match) Family() Family {
	for _, p := range []netip.Prefix{m.Src, m.Dst} {
		if p.IsValid() {
			if p.Addr().Is4() {
				return IPv4
			}
			return IPv6
		}
	}
	return FamilyAny
}

// NeedsL4 reports whether the match has a condition on the L4 header (ports,
// TCP flags, ICMP type or code).
func (m *Match) NeedsL4() bool {
	return m.SrcPort != nil || m.DstPort != nil || m.Port != nil || m.HasTCPFlags ||
		m.ICMPType != nil || m.ICMPCode != nil
}

// Rule is one drop or accept rule.
type Rule struct {
	ID       string
	Priority uint32
	Action   Action
	// Expires is the time the rule stops applying; zero means never.
	Expires time.Time
	Match   Match
}

// Expired reports whether r has an expiry at or before now.
func (r *Rule) Expired(now time.Time) bool {
	return !r.Expires.IsZero() && !now.Before(r.Expires)
}

// Before reports whether a decides before b when they have keys ai and bi in
// one Set (Set.Key: their indexes unless a change in place moved one).
func Before(a *Rule, ai int, b *Rule, bi int) bool {
	if a.Priority != b.Priority {
		return a.Priority < b.Priority
	}
	return ai < bi
}

var idRE = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

// ValidID reports whether id is a valid rule id.
func ValidID(id string) bool { return idRE.MatchString(id) }

// String formats the match compactly for logs, in rule-file words.
func (m *Match) String() string {
	var b []string
	add := func(k, v string) { b = append(b, k+"="+v) }
	if m.Src.IsValid() {
		add("src", m.Src.String())
	}
	if m.Dst.IsValid() {
		add("dst", m.Dst.String())
	}
	if m.Proto != nil {
		ps := make([]string, len(m.Proto))
		for i, p := range m.Proto {
			ps[i] = ProtoName(p)
		}
		add("proto", strings.Join(ps, ","))
	}
	rs := func(k string, r Ranges) {
		if r != nil {
			ss := make([]string, len(r))
			for i, x := range r {
				ss[i] = x.String()
			}
			add(k, strings.Join(ss, ","))
		}
	}
	rs("src_port", m.SrcPort)
	rs("dst_port", m.DstPort)
	rs("port", m.Port)
	rs("icmp_type", m.ICMPType)
	rs("icmp_code", m.ICMPCode)
	if m.HasTCPFlags {
		add("tcp_flags", fmt.Sprintf("0x%02x/0x%02x", m.TCPFlags.Value, m.TCPFlags.Mask))
	}
	if m.Fragment != 0 {
		add("fragment", strings.Join(m.Fragment.names(), ","))
	}
	rs("length", m.Length)
	if m.DSCP != 0 {
		var ds []string
		for i := 0; i < 64; i++ {
			if m.DSCP&(1<<i) != 0 {
				ds = append(ds, strconv.Itoa(i))
			}
		}
		add("dscp", strings.Join(ds, ","))
	}
	if len(b) == 0 {
		return "any"
	}
	return strings.Join(b, " ")
}

// Set is an ordered rule set: the order of keys breaks priority ties, and a
// position's key is its index unless Order moved it (see Order). Its rules
// are the elements of Rules less the positions Holes marks (nil for none;
// see Holes): a set with holes keeps every rule's index, and code that
// reads Rules asks Live and Key, or reads Compact's set.
type Set struct {
	Rules []Rule
	Holes *Holes
	Order *Order
}

// Index returns the index of the rule with the given id, or -1.
func (s *Set) Index(id string) int {
	for i := range s.Rules {
		if s.Rules[i].ID == id && s.Live(i) {
			return i
		}
	}
	return -1
}
