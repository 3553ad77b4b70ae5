// Package dv is scrubd's poll-mode software packet path over mlx5 Direct
// Verbs rings, modelled on FD.io VPP's rdma plugin in DV mode rather than
// on DPDK.
//
// A Worker owns one receive queue (a CQ and a cyclic RQ) and, in forward
// mode, one send queue on the peer port. Each burst it
//
//  1. reaps send completions and returns the sent buffers to its pool
//     cache;
//  2. polls up to 256 receive completions: a run of ready CQEs is found by
//     their owner words alone, then one from-device barrier covers the
//     whole run; compressed sessions (title + mini-CQE arrays) are
//     expanded and their slots invalidated; the CQ doorbell record gets the
//     new 24-bit consumer index, big-endian, after a to-device barrier;
//  3. parses every frame (swpath/packet) and classifies the burst with the
//     classifier's burst API (swpath/classifier);
//  4. returns dropped buffers straight to the pool cache, and posts passed
//     frames as send WQEs (control, Ethernet with the L2 header inlined,
//     one data segment) on the peer's SQ, then rings its doorbell: record,
//     then a 64-bit BlueFlame write, then a write-combining flush; in host
//     mode it counts passed frames and recycles them instead;
//  5. refills the RQ the way VPP does: only with at least 16 free slots, in
//     multiples of 8, at most 256, never wrapping inside a batch, then one
//     barrier and the 16-bit RQ doorbell record, big-endian.
//
// Every barrier comes from swpath/barrier, at the place rdma-core puts it;
// each call site names the rdma-core function it follows. Ring memory is
// []byte (prm.RxRings, prm.TxRings), so the same code runs over rdma-core's
// rings (build tag mlx5, package verbs) and over the NIC emulator
// (swpath/nicemu) in tests and benchmarks.
//
// One goroutine per queue: a Worker's methods are not safe for concurrent
// use. Its Counters are written once per burst with atomic stores and may
// be read at any time. Engine starts the workers, each on a goroutine
// locked to an OS thread pinned to its CPU, and stops them with an atomic
// flag checked once per burst.
package dv
