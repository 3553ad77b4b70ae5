// Package rule is scrubd's rule model and the one definition of its match
// semantics. Every engine (the Go classifier, the XDP program, the Direct
// Verbs path and the kernel's flower through the offload compiler) is checked
// against the functions in this package.
//
// # Rules
//
// A Rule has an ID, a Priority (lower decides first, default 1000), an Action
// (drop, or accept for an allow-list entry; required, there is no default),
// an optional expiry and a Match. Every field of a Match is optional; all
// given fields must hold (AND), and a field given as a list holds when any
// element holds (OR). A rule must give at least one condition: one meant to
// match every packet says so with "match: all", and a Guard refuses that
// unless allowed.
//
// A Guard also refuses drop rules whose addresses cover too much: by default
// a drop rule needs a source or destination prefix of at least /8 (IPv4) or
// /32 (IPv6). The agent applies its Guard to every source of rules.
//
// # Packets
//
// A frame is reduced to Fields by a parser (swpath/packet). The semantics the
// parser must follow, and that Matches relies on, are:
//
//   - Up to two 802.1Q/802.1ad tags are skipped. A frame with a third tag, a
//     non-IP EtherType, or a truncated or malformed IP header is not IP: no
//     rule matches it and it passes.
//   - IPv4: the header length comes from IHL (5..15 words, all present).
//     Length is the Total Length field; DSCP is TOS>>2. Fragment state comes
//     from the flags and offset fields.
//   - IPv6: Length is 40 + Payload Length; DSCP is the traffic class >> 2.
//     Up to MaxIPv6ExtHeaders extension headers among hop-by-hop (0), routing
//     (43), destination options (60) and fragment (44) are walked to find the
//     upper-layer protocol. If the chain is longer, or an extension header is
//     truncated, Proto is the Next Header value where the walk stopped and no
//     L4 field is present. The fragment header gives the fragment state; IPv6
//     never has dont-fragment.
//   - The L4 header is present (Fields.L4) only in a packet that is not a
//     non-first fragment (offset 0) whose captured bytes hold the protocol's
//     fixed header: TCP 20 bytes, UDP 8, SCTP 12, ICMP and ICMPv6 4. Ports
//     exist for TCP, UDP and SCTP; TCP flags (byte 13, all eight bits) for TCP;
//     type and code for ICMP (protocol 1 in IPv4) and ICMPv6 (58 in IPv6).
//
// # Matching
//
//   - src and dst are prefixes of one family; a rule with a prefix matches only
//     packets of that family. A rule without prefixes matches both families.
//   - proto matches the upper-layer protocol found above.
//   - src_port, dst_port and port (source or destination) match only packets
//     with an L4 header that carries ports (TCP, UDP, SCTP). A non-first
//     fragment never matches a port, TCP-flag or ICMP condition.
//   - tcp_flags {value, mask} holds when (flags & mask) == value, TCP only.
//     value [] with a mask means none of the masked flags is set.
//   - icmp_type and icmp_code hold only for ICMP in IPv4 and ICMPv6 in IPv6.
//   - fragment holds when any listed state holds: dont-fragment (IPv4 DF set),
//     is-fragment (offset != 0), first-fragment (offset 0 and MF set),
//     last-fragment (offset != 0 and MF clear), not-fragment (offset 0 and MF
//     clear).
//   - length matches Fields.Length; dscp matches Fields.DSCP.
//
// # Deciding
//
// The deciding rule for a packet is the matching rule with the lowest priority
// number; among equal priorities, the rule listed first (lowest index in the
// Set). Its action decides the packet. A packet that no rule matches passes.
// Decide is the reference (linear scan) implementation of this.
//
// # Rule files
//
// Parse reads the YAML rule-file format (JSON is accepted too, as a subset of
// YAML). A file with no rules says "rules: []": an empty file, or one cut
// off after "rules:", is refused. Bad input is refused whole with an *Error naming the file, line, rule
// id, field and value; nothing is returned for a refused file, so a caller that
// keeps its old Set keeps every rule that was in force.
package rule
