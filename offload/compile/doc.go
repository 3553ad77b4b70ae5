// Package compile turns rules (swpath/rule) into hardware entries
// (offload.Entry) for a device with given capabilities, and says for every
// rule it cannot put in hardware why not.
//
// The compiler is exact: the entries of an offloaded rule match exactly the
// packets the rule's match holds for (offload.Match.Matches against
// rule.Match.Matches, over every rule.Fields). A rule that the device cannot
// express exactly is never installed wider, or narrower, than written; it
// is reported not offloadable with a Reason and goes to the software path:
//
//   - accept rules, by Rule (Pass compiles an accept rule into pass
//     entries at their own priorities, which agent/hwpath puts in front of
//     the drops that overlap it);
//   - packet length (flower has no such key);
//   - fragment conditions flower's frag/firstfrag bits cannot express:
//     dont-fragment and last-fragment always, and on mlx5 (no firstfrag)
//     is-fragment and first-fragment alone. is-fragment together with
//     first-fragment is "frag", not-fragment is "nofrag", both fine on mlx5;
//   - ports of a protocol the device does not match ports for (SCTP on
//     mlx5; a rule with ports and no protocol also matches SCTP);
//   - ICMP, TOS, TCP flags or an address family the device lacks;
//   - an L4 condition that a packet without an L4 header would satisfy in
//     hardware (flower compares zeros there: port 0, TCP flags value 0,
//     ICMP type 0 with any code), since the rule never matches such packets;
//   - more entries than Config.MaxEntriesPerRule;
//   - a drop rule that overlaps an accept rule deciding before it (Set)
//     and cannot be split around it exactly, so hardware never drops what
//     the allow-list protects (the agent does not use Set: it puts pass
//     entries in front of the drops instead; agent/hwpath says why).
//
// Set splits a drop rule D around an overlapping earlier accept rule A when
// A's condition on every field but one is implied by D's and that field is
// an address prefix, a port list, an ICMP type or code list, a protocol
// list or a DSCP set: D∖A is then D with that field narrowed to its
// complement (a prefix's complement is one sibling prefix per extra bit).
// The entries then match exactly D's packets that no such A matches
// (Result.SplitBy), which the tests check packet by packet.
//
// Expansion: each port range becomes its minimal prefix cover (1000-2000 is
// 8 value/mask pairs; any 16-bit range at most 30); `port` (source or
// destination) becomes the union of a source-side and a destination-side
// set (overlapping or made disjoint, whichever is smaller); protocol lists and families give one entry set each;
// DSCP sets become a small ternary cover of the 6-bit code points (as ip_tos
// with mask 0xfc or narrower); ICMP type and code ranges become prefixes.
// The entries of a rule are the cross product, bounded by
// MaxEntriesPerRule. Every Result lists the distinct mask shapes its entries
// need per table, since each shape costs a flow group (15 large groups per
// mlx5 table by default); Config.AddrLadder4/6 trade entries for fewer
// shapes by splitting prefixes to a few fixed lengths, and Budget lets
// placement take rules while the entries and shapes fit.
package compile
