// Package offload is the interface between scrubd's placement and a hardware
// flow table: the Backend every hardware table implements (tc flower on a
// real NIC, the simulated mlx5 table in offload/sim), the hardware entry it
// stores (a flower-like match with a drop action, identified by a cookie),
// the capabilities a device reports, typed per-entry errors, and Reconcile,
// which brings a table to a wanted set without ever touching entries that
// are not scrubd's and without a window with fewer drops.
//
// # Entries and their semantics
//
// An Entry is one drop filter: an EtherType (IPv4 or IPv6), an optional
// exact ip_proto and value/mask pairs on addresses, TCP/UDP/SCTP ports, TCP
// flags, ICMP type and code, TOS and the flower ip_flags bits (frag,
// firstfrag). Entry matching is defined on the key a flower-like parser
// extracts from a packet (PacketKey, built from rule.Fields by KeyOf):
//
//   - frag is set for any fragment (more-fragments set or offset != 0);
//     firstfrag for a fragment with offset 0 (Linux flow dissector,
//     FLOW_DIS_IS_FRAGMENT and FLOW_DIS_FIRST_FRAG).
//   - A packet without an L4 header (a non-first fragment, or a header cut
//     short) has zero ports, zero TCP flags and zero ICMP type and code in
//     the key: flower reads nothing and compares zeros. The compiler
//     (offload/compile) therefore never emits an entry whose L4 conditions
//     all accept zero for a rule that needs an L4 header.
//   - TOS is DSCP<<2; rule.Fields carries no ECN, so the key's ECN bits are
//     0 and compiled entries never mask them.
//
// Match.Matches is the reference for this semantics; offload/sim's lookup is
// tested against it and offload/compile's output is tested against
// rule.Match.Matches through it.
//
// # Identity
//
// Every entry scrubd installs carries a 16-byte action cookie: a 2-byte
// magic, 6 bytes of a hash of the rule (id and match) and 8 bytes of a hash
// of the entry's content and table. The cookie is stable across restarts,
// so a restarted agent recognises its own entries in a dump; entries without
// the magic, or outside the Owner's chain and priorities, are never removed.
package offload
