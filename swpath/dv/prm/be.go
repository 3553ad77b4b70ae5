package prm

import "encoding/binary"

// Plain big-endian field accessors. They are for bytes the other side does
// not touch concurrently (CQE bodies after the owner test, WQE segments
// before the doorbell record); shared words go through the atomic helpers.

// BE16 reads a big-endian 16-bit field at off.
func BE16(b []byte, off int) uint16 { return binary.BigEndian.Uint16(b[off:]) }

// BE32 reads a big-endian 32-bit field at off.
func BE32(b []byte, off int) uint32 { return binary.BigEndian.Uint32(b[off:]) }

// BE64 reads a big-endian 64-bit field at off.
func BE64(b []byte, off int) uint64 { return binary.BigEndian.Uint64(b[off:]) }

// PutBE16 writes v big-endian at off.
func PutBE16(b []byte, off int, v uint16) { binary.BigEndian.PutUint16(b[off:], v) }

// PutBE32 writes v big-endian at off.
func PutBE32(b []byte, off int, v uint32) { binary.BigEndian.PutUint32(b[off:], v) }

// PutBE64 writes v big-endian at off.
func PutBE64(b []byte, off int, v uint64) { binary.BigEndian.PutUint64(b[off:], v) }

// OwnerWord splits the CQE word at 0x3c (loaded as a little-endian host
// uint32 by LoadWord) into its fields.
func OwnerWord(w uint32) (wqeCounter uint16, opOwn uint8) {
	return uint16(w)<<8 | uint16(w>>8)&0xff, uint8(w >> 24)
}

// MakeOwnerWord builds the host-order uint32 that, stored at CQE+0x3c,
// puts wqe_counter (BE16), signature 0 and op_own in place.
func MakeOwnerWord(wqeCounter uint16, opOwn uint8) uint32 {
	return uint32(wqeCounter>>8) | uint32(wqeCounter&0xff)<<8 | uint32(opOwn)<<24
}

// Opcode returns op_own[7:4].
func Opcode(opOwn uint8) uint8 { return opOwn >> OpcodeShift }

// Format returns op_own[3:2].
func Format(opOwn uint8) uint8 { return (opOwn & FormatMask) >> FormatShift }

// SWOwned reports whether a CQE with this op_own, at consumer index ci of
// a CQ of 2^log2 entries, belongs to software: the opcode is not INVALID
// and the owner bit equals the pass parity of ci (rdma-core cq.c
// get_sw_cqe; DPDK mlx5_common.h check_cqe).
func SWOwned(opOwn uint8, ci uint32, log2 uint) bool {
	return opOwn>>OpcodeShift != CQEInvalid && uint32(opOwn&OwnerMask) == (ci>>log2)&1
}
