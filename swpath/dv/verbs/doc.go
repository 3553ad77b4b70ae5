// Package verbs sets up real mlx5 receive and send queues for swpath/dv
// through rdma-core (libibverbs + libmlx5) with cgo, behind the build tag
// mlx5: device open, protection domain, one memory region over a pool
// node's arena, CQs created with mlx5dv_create_cq (optionally with CQE
// compression), receive WQs moved to ready, an RSS indirection table with
// Toeplitz raw-packet QPs for IPv4 and IPv6, steering rules (own MAC,
// multicast, or promiscuous, with a flow tag), a raw-packet QP for
// sending, and mlx5dv_init_obj to get the ring memory the engine polls
// (prm.RxRings, prm.TxRings). The order follows VPP's rdma plugin
// (device.c rdma_dev_init / rdma_rxq_init / rdma_rxq_finalize).
// SetupPort wires all of it to swpath/dv workers for one direction
// (receive netdev -> classify -> peer netdev).
//
// Without the tag, or without cgo, the package holds only what needs no C:
// the netdev-to-RDMA-device mapping (Mellanox/rdmamap) and the
// out_of_buffer counter reader. The build needs no C toolchain then.
//
// With the tag, a cgo test checks every layout constant of swpath/dv/prm
// against offsetof/sizeof and the enum values of rdma-core's mlx5dv.h:
//
//	go test -tags mlx5 ./swpath/dv/verbs/
//
// Nothing here has run against a ConnectX or BlueField: there is none on
// the machines this was written on. It compiles against Debian's
// libibverbs-dev and its layouts are checked against that header.
package verbs
