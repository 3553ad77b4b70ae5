// Package prm holds the mlx5 device layouts that the Direct Verbs engine
// (swpath/dv) and the NIC emulator (swpath/nicemu) share: the offsets of
// the 64-byte completion entry (struct mlx5_cqe64), the 8-byte mini
// completion, the receive and send work-queue segments (struct
// mlx5_wqe_data_seg, mlx5_wqe_ctrl_seg, mlx5_wqe_eth_seg), the opcodes and
// flag bits, and the accessors both sides use to read and write them.
//
// Every device-visible multi-byte field is big-endian. The names follow
// rdma-core's providers/mlx5/mlx5dv.h; the cgo test in swpath/dv/verbs
// (build tag mlx5) checks each offset and size here against offsetof and
// sizeof from that header.
//
// Memory is handed around as []byte so that ring logic can be unit tested
// over make([]byte, n). The word at CQE offset 0x3c (wqe_counter,
// signature, op_own) and the doorbell records are shared with the device
// and are accessed only with atomic 32/64-bit loads and stores (the
// helpers in access_unsafe.go); all other bytes are plain loads and stores
// ordered by those atomics and by the swpath/barrier calls at the call
// sites.
package prm
