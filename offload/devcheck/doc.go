// Package devcheck reads what the NIC and its driver say about flow-table
// offload: the devlink eswitch mode (legacy or switchdev), devlink device
// parameters such as mlx5's flow_steering_mode (dmfs, smfs, hmfs), the
// ethtool "hw-tc-offload" feature, and the driver's ethtool statistics
// (ethtool -S), from which DropCounters picks the NIC drop counters
// (rx_discards_phy, rx_out_of_buffer and the like) for metrics.
//
// devlink is spoken over generic netlink (mdlayher/genetlink); ethtool
// features and statistics go through the SIOCETHTOOL ioctl, because
// ethtool-netlink has no equivalent of ETHTOOL_GSTATS for driver-private
// counters.
package devcheck
