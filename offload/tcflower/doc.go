// Package tcflower is scrubd's own tc flower codec and client on
// mdlayher/netlink: it encodes drop filters (IPv4/IPv6 prefixes with
// arbitrary masks, ip_proto, TCP/UDP ports with masks, TCP flags, fragment
// flags, TOS/DSCP, ICMP/ICMPv6 type and code, VLAN) with a gact action that
// carries a cookie identifying scrubd's own entries, and decodes dumps
// including the in_hw/not_in_hw flags, in_hw_count and software and
// hardware action counters.
//
// The Client installs, replaces, deletes and dumps filters on the ingress
// of a clsact (or an existing ingress) qdisc, batching many requests per
// sendmsg, and creates the qdisc when it is missing without ever deleting
// one it did not create. Errors are *nlerr.Error values carrying the
// kernel's errno and extack text.
//
// # Which netlink library does what
//
// The clsact qdisc (Qdisc, EnsureQdisc, DeleteQdisc) goes through
// vishvananda/netlink (QdiscList, QdiscAdd, QdiscDel), and device names in
// errors come from its LinkByIndex (package internal/netdev). Both use a
// vishvananda Handle opened by Dial beside the filter socket, so both
// sockets live in the network namespace Dial was called in. A Handle's
// socket has no extended ACK in vishvananda v1.3.1, so qdisc errors carry
// the errno without the kernel's text.
//
// Attribute numbers and layouts follow include/uapi/linux/pkt_cls.h,
// tc_act/tc_gact.h and gen_stats.h of Linux 6.1; byte orders are as
// annotated there, except TCA_FLOWER_KEY_VLAN_ID and TCA_FLOWER_FLAGS which
// the kernel reads in host order (nla_get_u16/nla_get_u32).
package tcflower
