package plan

import (
	"fmt"
	"math/bits"
)

// RSS as an mlx5 NIC does it: a Toeplitz hash of the packet's addresses
// with a 40-byte key, whose low bits index an indirection table (RETA) of
// receive queues.

// MicrosoftKey is the Toeplitz key of Microsoft's RSS specification
// ("Verifying the RSS Hash Calculation" uses it). scrubd's Direct Verbs
// engine gives it to the NIC (ibv_create_qp_ex rx_hash_key), and the NIC
// emulator hashes with it.
var MicrosoftKey = []byte{
	0x6d, 0x5a, 0x56, 0xda, 0x25, 0x5b, 0x0e, 0xc2,
	0x41, 0x67, 0x25, 0x3d, 0x43, 0xa3, 0x8f, 0xb0,
	0xd0, 0xca, 0x2b, 0xcb, 0xae, 0x7b, 0x30, 0xb4,
	0x77, 0xcb, 0x2d, 0xa3, 0x80, 0x30, 0xf2, 0x0c,
	0x6a, 0x42, 0xb7, 0x3b, 0xbe, 0xac, 0x01, 0xfa,
}

// DefaultRETASize is the indirection table size the model assumes: 128
// entries, the table of the ConnectX-5 in the VPP drop-path measurements
// and of older mlx5e drivers. Newer mlx5e drivers use 256 or more
// (drivers/net/ethernet/mellanox/mlx5/core/en/rqt.h), and DPDK's mlx5 PMD
// uses one entry per queue for a power of 2 of queues and its maximum
// (512) otherwise. For the queue counts of the source table (8, 16, 26,
// 32) all of these give the same busiest-queue share.
const DefaultRETASize = 128

// Toeplitz returns the Toeplitz hash of input under key: for every input
// bit set, counted from the most significant bit of input[0], the 32 key
// bits starting at that bit position are XORed into the result. The key
// must hold at least len(input)+4 bytes.
func Toeplitz(key, input []byte) uint32 {
	var h uint32
	// window holds key bits [i, i+64) for the current input bit i.
	var window uint64
	for j := 0; j < 8; j++ {
		window <<= 8
		if j < len(key) {
			window |= uint64(key[j])
		}
	}
	next := 8
	for _, b := range input {
		for bit := 7; bit >= 0; bit-- {
			if b&(1<<bit) != 0 {
				h ^= uint32(window >> 32)
			}
			window <<= 1
		}
		// Refill the low byte the eight shifts emptied.
		if next < len(key) {
			window |= uint64(key[next])
		}
		next++
	}
	return h
}

// RSSInputV4 is the hash input for an IPv4 packet: source address,
// destination address and, with ports, source and destination port, in
// that order (the order of the specification's IPv4 and IPv4-with-TCP
// types). mlx5 hashes the fields the queue pair's rx_hash_fields_mask
// names; scrubd's engine names the two addresses only.
func RSSInputV4(src, dst [4]byte, sport, dport uint16, ports bool) []byte {
	in := append(append(make([]byte, 0, 12), src[:]...), dst[:]...)
	if ports {
		in = append(in, byte(sport>>8), byte(sport), byte(dport>>8), byte(dport))
	}
	return in
}

// RSSInputV6 is RSSInputV4 for IPv6 (36 or 32 bytes).
func RSSInputV6(src, dst [16]byte, sport, dport uint16, ports bool) []byte {
	in := append(append(make([]byte, 0, 36), src[:]...), dst[:]...)
	if ports {
		in = append(in, byte(sport>>8), byte(sport), byte(dport>>8), byte(dport))
	}
	return in
}

// RETA is an indirection table: entry i sends to queue Entries[i]. Its
// size is a power of 2, indexed by the hash's low bits.
type RETA struct {
	Entries []int
}

// UniformRETA fills a table of size entries round robin over queues:
// entry i to queue i mod queues (mlx5e_rss_params_indir_init_uniform,
// ethtool_rxfh_indir_default). With queues not dividing size, size mod
// queues queues get one entry more than the others.
func UniformRETA(size, queues int) (RETA, error) {
	if size <= 0 || size&(size-1) != 0 {
		return RETA{}, fmt.Errorf("reta-size %d: must be a power of 2", size)
	}
	if queues <= 0 {
		return RETA{}, fmt.Errorf("queues %d: must be at least 1", queues)
	}
	r := RETA{Entries: make([]int, size)}
	for i := range r.Entries {
		r.Entries[i] = i % queues
	}
	return r, nil
}

// Index is the table entry a hash selects.
func (r RETA) Index(hash uint32) int { return int(hash & uint32(len(r.Entries)-1)) }

// Queue is the queue a hash selects.
func (r RETA) Queue(hash uint32) int { return r.Entries[r.Index(hash)] }

// PerQueue counts the entries of each of queues queues.
func (r RETA) PerQueue(queues int) []int {
	out := make([]int, queues)
	for _, q := range r.Entries {
		if q < queues {
			out[q]++
		}
	}
	return out
}

// RandomSourceEntries returns the table entries an IPv4 flood with
// uniformly random source addresses to the one destination dst reaches,
// each with the same probability. The hash of the two addresses is
// linear over GF(2) in the source bits: h(s) = h(0, dst) XOR the key
// windows of the bits set in s. The low log2(size) bits of h therefore
// range, each equally often, over the coset h(0,dst) + span(windows), which
// is computed exactly here, not sampled.
func RandomSourceEntries(key []byte, dst [4]byte, size int) []int {
	mask := uint32(size - 1)
	base := Toeplitz(key, RSSInputV4([4]byte{}, dst, 0, 0, false)) & mask
	// A basis of the span of the 32 source-bit windows (masked).
	var basis []uint32
	for i := 0; i < 32; i++ {
		var src [4]byte
		src[i/8] = 0x80 >> (i % 8)
		v := (Toeplitz(key, RSSInputV4(src, [4]byte{}, 0, 0, false))) & mask
		for _, b := range basis {
			if v^b < v {
				v ^= b
			}
		}
		if v != 0 {
			basis = append(basis, v)
			// Keep the basis reduced: sorted by leading bit, descending.
			for k := len(basis) - 1; k > 0 && bits.Len32(basis[k]) > bits.Len32(basis[k-1]); k-- {
				basis[k], basis[k-1] = basis[k-1], basis[k]
			}
		}
	}
	out := make([]int, 0, 1<<len(basis))
	for c := 0; c < 1<<len(basis); c++ {
		v := base
		for k, b := range basis {
			if c&(1<<k) != 0 {
				v ^= b
			}
		}
		out = append(out, int(v))
	}
	return out
}
