package nicemu

import (
	"encoding/binary"
	"testing"
)

// TestSessionLayoutLiteral delivers one compressed session of 13 packets
// and checks the CQ bytes against literal offsets, not prm's helpers:
// the title's byte_cnt (mlx5_cqe64 0x2c) holds the count and its op_own
// (0x3f) is RESP_SEND<<4 | format 3<<2 | owner; mini-CQE k (8 bytes,
// rx_hash_result then byte_cnt, big-endian: the kernel's
// include/linux/mlx5/device.h struct mlx5_mini_cqe8) sits in array k/8 at
// byte 8*(k%8); array 0 in the slot after the title, array j >= 1 at
// title+8j (DPDK drivers/net/mlx5/mlx5_rx.c mlx5_rx_poll_len, VPP
// src/plugins/rdma/input.c process_mini_cqes; the PRM's "CQE Compression"
// section). Slots 2..7 are holes the device leaves alone.
func TestSessionLayoutLiteral(t *testing.T) {
	d, q := newMini(t, 6, 5)
	d.post(32)
	frames := make([][]byte, 13)
	for i := range frames {
		frames[i] = frame(i)
	}
	if got := q.DeliverBurst(frames, true, 40); got != 13 {
		t.Fatalf("placed %d of 13", got)
	}
	if q.C.Sessions.Load() != 1 || q.C.Compressed.Load() != 13 {
		t.Fatalf("sessions %d compressed %d, want 1 session of 13", q.C.Sessions.Load(), q.C.Compressed.Load())
	}
	cq := d.r.CQ
	slot := func(i int) []byte { return cq[i*64 : i*64+64] }
	title := slot(0)
	if got := binary.BigEndian.Uint32(title[0x2c:]); got != 13 {
		t.Errorf("title byte_cnt %d, want the mini-CQE count 13", got)
	}
	if title[0x3f] != 0x2c {
		t.Errorf("title op_own %#x, want 0x2c (RESP_SEND, format 3, owner 0)", title[0x3f])
	}
	if got := binary.BigEndian.Uint16(title[0x3c:]); got != 0 {
		t.Errorf("title wqe_counter %d, want 0 (the first WQE of the session)", got)
	}
	// mini-CQE k -> (slot, byte offset), written out.
	where := [13][2]int{
		{1, 0}, {1, 8}, {1, 16}, {1, 24}, {1, 32}, {1, 40}, {1, 48}, {1, 56},
		{8, 0}, {8, 8}, {8, 16}, {8, 24}, {8, 32},
	}
	for k, w := range where {
		m := slot(w[0])[w[1] : w[1]+8]
		if got := binary.BigEndian.Uint32(m[4:]); got != uint32(len(frames[k])) {
			t.Errorf("mini-CQE %d (slot %d byte %d): byte_cnt %d, want %d", k, w[0], w[1], got, len(frames[k]))
		}
	}
	// The holes keep what rdma-core initialised (op_own 0xf0), and so
	// does the owner byte of the partly filled array in slot 8.
	for _, s := range []int{2, 3, 4, 5, 6, 7} {
		if op := slot(s)[0x3f]; op != 0xf0 {
			t.Errorf("hole slot %d op_own %#x, want 0xf0", s, op)
		}
	}
	if op := slot(8)[0x3f]; op != 0xf0 {
		t.Errorf("slot 8 (5 mini-CQEs) op_own %#x, want 0xf0", op)
	}
	// The session took CQ slots 0..12: the next packet's CQE is slot 13.
	if got := q.DeliverBurst(frames[:1], false, 0); got != 1 {
		t.Fatal("one more packet not placed")
	}
	if op := slot(13)[0x3f]; op != 0x20 {
		t.Errorf("the CQE after the session: slot 13 op_own %#x, want 0x20 (RESP_SEND, owner 0)", op)
	}
	if got := binary.BigEndian.Uint16(slot(13)[0x3c:]); got != 13 {
		t.Errorf("its wqe_counter %d, want 13", got)
	}
}
