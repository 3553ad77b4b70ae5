// Package devcheck reads what the NIC and its driver say about flow-table
// offload: the devlink eswitch mode (legacy or switchdev), devlink device
// parameters such as mlx5's flow_steering_mode (dmfs, smfs, hmfs), the
// ethtool "hw-tc-offload" feature, and the driver's ethtool statistics
// (ethtool -S), from which DropCounters picks the NIC drop counters
// (rx_discards_phy, rx_out_of_buffer and the like) for metrics.
//
// devlink is spoken over generic netlink (mdlayher/genetlink); ethtool
// features, statistics and driver information (ethtool -i) go through the
// SIOCETHTOOL ioctl, because ethtool-netlink has no equivalent of
// ETHTOOL_GSTATS for driver-private counters.
//
// # Why the ioctl is our own and not github.com/safchain/ethtool
//
// safchain/ethtool v0.7.0 (ethtool.go) offers the same calls (Stats,
// DriverInfo, FeaturesWithState, Change) but was not adopted, for risks
// ours does not have:
//   - its ifreq is {ifr_name [16]byte; ifr_data uintptr}, 24 bytes, while
//     the kernel copies a whole struct ifreq, 40 bytes on 64-bit, from the
//     address it is given (net/socket.c, sock_do_ioctl): every call makes
//     the kernel read 16 bytes past the Go value. Ours is 40 bytes.
//   - the command structure's address travels as a uintptr through
//     ordinary Go calls (ioctl(intf string, data uintptr)), outside the
//     forms in which unsafe.Pointer's rules keep the object alive and in
//     place, so a structure on the goroutine stack can move (stack growth)
//     between the conversion and the system call. Ours keeps a real
//     pointer in the ifreq (ethtool_unsafe.go).
//   - Stats takes the count from ETHTOOL_GDRVINFO and never reads the count
//     that ETHTOOL_GSTRINGS and ETHTOOL_GSTATS return, so when the driver's
//     count changes between the calls (mlx5 adds per-channel counters when
//     channels are added) names and values are paired by a stale count, in
//     pooled buffers that are not cleared between calls. Ours reads the
//     returned counts and reads again when they differ (Stats).
//
// What safchain does better, its fixed buffers of 32768 entries that a
// grown count cannot overrun on kernels that write their own count
// (6.1), ours does too.
package devcheck
