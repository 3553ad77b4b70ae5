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
// The Monitor stays on mdlayher/netlink: vishvananda v1.3.1's rtnetlink
// subscriptions are for links, addresses, routes and neighbours
// (LinkSubscribe, AddrSubscribe, RouteSubscribe, NeighSubscribe), none for
// RTNLGRP_TC, which carries RTM_NEWQDISC/RTM_DELQDISC, and it exports no
// decoder of qdisc messages (as LinkDeserialize is for links); a mdlayher
// socket also lets Next end at a context's cancellation through its read
// deadline.
//
// The flower codec and the filter requests stay our own, because
// vishvananda v1.3.1's Flower (filter_linux.go, Flower.encode and
// Flower.decode) cannot carry what scrubd installs and reads:
//   - skip flags: encode writes TCA_FLOWER_FLAGS in network byte order
//     (htonl) while cls_flower reads it in host order (nla_get_u32); on a
//     little-endian host SkipSw arrives as 0x02000000, which fl_change
//     refuses (tc_flags_valid, EINVAL), so skip_sw hardware entries cannot
//     be installed. decode reads the u32 as an nla_bitfield32 and swaps the
//     two bits (TCA_CLS_FLAGS_SKIP_HW sets SkipSw, TCA_CLS_FLAGS_SKIP_SW
//     sets SkipHw), and reads neither TCA_CLS_FLAGS_IN_HW/NOT_IN_HW nor
//     TCA_FLOWER_IN_HW_COUNT, which tell whether the NIC holds an entry.
//     The kernel lab's TestVishvanandaFlowerFlags shows both on cls_flower:
//     EINVAL for a SkipHw filter that goes in without the flag, and our
//     skip_hw filter read back as SkipSw.
//   - missing keys: Flower has no field for port masks
//     (TCA_FLOWER_KEY_{TCP,UDP}_{SRC,DST}_MASK; ports are exact or a
//     range), TCA_FLOWER_KEY_TCP_FLAGS, the fragment flags
//     (TCA_FLOWER_KEY_FLAGS), TCA_FLOWER_KEY_IP_TOS, ICMP and ICMPv6 type
//     and code (TCA_FLOWER_KEY_ICMPV4_* / ICMPV6_*), VLAN priority and the
//     inner ethertype of a VLAN match (TCA_FLOWER_KEY_VLAN_PRIO,
//     TCA_FLOWER_KEY_VLAN_ETH_TYPE); decode of a VLAN key overwrites
//     EthType with 802.1Q.
//   - actions: no TCA_ACT_COOKIE on encode or decode, which is how scrubd
//     tells its entries from OVS's or an operator's.
//   - requests: one request per call, waiting for its ACK, and no terse
//     dump (TCA_DUMP_FLAGS); Batch sends a window of requests per sendmsg.
//
// Attribute numbers and layouts follow include/uapi/linux/pkt_cls.h,
// tc_act/tc_gact.h and gen_stats.h of Linux 6.1; byte orders are as
// annotated there, except TCA_FLOWER_KEY_VLAN_ID and TCA_FLOWER_FLAGS which
// the kernel reads in host order (nla_get_u16/nla_get_u32).
package tcflower
