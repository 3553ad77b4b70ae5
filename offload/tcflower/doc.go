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
// Attribute numbers and layouts follow include/uapi/linux/pkt_cls.h,
// tc_act/tc_gact.h and gen_stats.h of Linux 6.1; byte orders are as
// annotated there, except TCA_FLOWER_KEY_VLAN_ID and TCA_FLOWER_FLAGS which
// the kernel reads in host order (nla_get_u16/nla_get_u32).
package tcflower
