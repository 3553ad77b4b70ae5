// Package nicemu emulates the device side of an mlx5 NIC's Direct Verbs
// rings on ordinary memory, so the software path in swpath/dv can be run
// and tested without a ConnectX or BlueField.
//
// It follows the ownership and doorbell protocol of rdma-core
// providers/mlx5 (cq.c get_sw_cqe and update_cons_index, qp.c
// mlx5_post_wq_recv and post_send_db) and the PRM's completion-queue
// chapter:
//
//   - Receive: a packet is placed only into a WQE the RQ doorbell record
//     has announced (BE32, low 16 bits); with none posted the packet is
//     dropped and counted as OutOfBuffer, like mlx5's rx_out_of_buffer.
//     The packet is scattered through the WQE's data segments, translated
//     through the registered memory regions; the CQE body is written with
//     plain stores and the word at 0x3c (wqe_counter, signature, op_own) is
//     published last with an atomic (release) store. Compressed sessions
//     (a title CQE plus mini-CQE arrays, holes left unwritten or poisoned)
//     are emitted when asked.
//   - Send: the UAR/BlueFlame doorbell word names the last posted WQE; the
//     emulator checks it against the SQ doorbell record, consumes the send
//     WQEs (control, Ethernet with inlined headers, data segments), hands
//     each frame to a sink, and writes a send CQE for every WQE that asks
//     for one.
//   - Protocol errors are flagged, not hidden: a doorbell record in the
//     wrong byte order or running ahead of the ring, a CQ consumer index
//     ahead of the producer, a malformed send WQE.
//
// An Emulator runs the device on its own goroutine, with randomised pacing
// for tests, fed by a Source (a frame list, a pcap file, or a generator).
// Queues can also be driven synchronously (Deliver, Service), which is how
// benchmarks pre-fill rings so the emulator's cost stays out of the
// measurement.
//
// What it cannot check: the emulator shares memory through Go atomics,
// which order only within the inner-shareable domain, and amd64 is TSO, so
// a missing DMB OSH* barrier in the driver is invisible to it. Barrier
// placement is argued from rdma-core in swpath/dv and checked in the
// disassembly tests of arm/ and x86/.
package nicemu
