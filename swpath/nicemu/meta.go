package nicemu

import (
	"encoding/binary"

	"github.com/scrubd/scrubd/swpath/dv/prm"
)

// meta is what the NIC's own parser puts into a receive CQE.
type meta struct {
	hdsIP uint8  // CQE 0x1c: L2/L3/L4 OK
	l4l3  uint8  // CQE 0x1d: frag, L4 type, L3 type
	hash  uint32 // Toeplitz hash (0 when not IP)
}

// title reports the fields a compressed session's title carries for all
// its packets; packets can share a session only when these agree.
func (m meta) title() uint16 { return uint16(m.hdsIP)<<8 | uint16(m.l4l3) }

// parseMeta does what the NIC's hardware parser does for the CQE: L3/L4
// types, "OK" bits (header present and long enough; checksums are not
// verified here), the fragment bit, and the RSS hash over addresses and,
// for unfragmented TCP/UDP, ports.
func parseMeta(b []byte) meta {
	var m meta
	if len(b) < 14 {
		return m
	}
	m.hdsIP = prm.CQEL2OK
	et := binary.BigEndian.Uint16(b[12:])
	off := 14
	for tags := 0; (et == 0x8100 || et == 0x88a8) && tags < 2; tags++ {
		if len(b) < off+4 {
			return m
		}
		et = binary.BigEndian.Uint16(b[off+2:])
		off += 4
	}
	var in [36]byte
	n := 0
	var proto uint8
	l4 := -1
	switch et {
	case 0x0800:
		if len(b) < off+20 || b[off]>>4 != 4 {
			return m
		}
		ihl := int(b[off]&15) * 4
		if ihl < 20 || len(b) < off+ihl {
			return m
		}
		m.l4l3 |= prm.CQEL3IPv4 << prm.CQEL3Shift
		m.hdsIP |= prm.CQEL3OK
		proto = b[off+9]
		frag := binary.BigEndian.Uint16(b[off+6:])
		n += copy(in[:], b[off+12:off+20])
		if frag&0x3fff != 0 {
			m.l4l3 |= prm.CQEIPFrag
		} else {
			l4 = off + ihl
		}
	case 0x86dd:
		if len(b) < off+40 || b[off]>>4 != 6 {
			return m
		}
		m.l4l3 |= prm.CQEL3IPv6 << prm.CQEL3Shift
		m.hdsIP |= prm.CQEL3OK
		proto = b[off+6]
		n += copy(in[:], b[off+8:off+40])
		if proto == 44 {
			m.l4l3 |= prm.CQEIPFrag
		} else {
			l4 = off + 40
		}
	default:
		return m
	}
	if l4 >= 0 {
		switch {
		case proto == 6 && len(b) >= l4+20:
			m.l4l3 |= prm.CQEL4TCP << prm.CQEL4Shift
			m.hdsIP |= prm.CQEL4OK
			n += copy(in[n:], b[l4:l4+4])
		case proto == 17 && len(b) >= l4+8:
			m.l4l3 |= prm.CQEL4UDP << prm.CQEL4Shift
			m.hdsIP |= prm.CQEL4OK
			n += copy(in[n:], b[l4:l4+4])
		}
	}
	m.hash = toeplitz(in[:n])
	return m
}

// rssKey is the well-known 40-byte Toeplitz key from Microsoft's RSS
// specification ("Verifying the RSS Hash Calculation"), which mlx5 drivers
// also use by default.
var rssKey = [40]byte{
	0x6d, 0x5a, 0x56, 0xda, 0x25, 0x5b, 0x0e, 0xc2, 0x41, 0x67,
	0x25, 0x3d, 0x43, 0xa3, 0x8f, 0xb0, 0xd0, 0xca, 0x2b, 0xcb,
	0xae, 0x7b, 0x30, 0xb4, 0x77, 0xcb, 0x2d, 0xa3, 0x80, 0x30,
	0xf2, 0x0c, 0x6a, 0x42, 0xb7, 0x3b, 0xbe, 0xac, 0x01, 0xfa,
}

// toeplitzTab[i][b] is the hash contribution of byte value b at input
// position i: the Toeplitz hash is linear in the input bits, so the hash
// of an input is the XOR of its bytes' contributions.
var toeplitzTab = func() (t [36][256]uint32) {
	for i := range t {
		for b := 0; b < 256; b++ {
			t[i][b] = toeplitzSlow(i, byte(b))
		}
	}
	return t
}()

// toeplitzSlow hashes one byte at position pos, bit by bit: for every set
// input bit (most significant first), XOR in the 32-bit window of the key
// that starts at that bit.
func toeplitzSlow(pos int, by byte) uint32 {
	var h uint32
	for bit := 0; bit < 8; bit++ {
		if by&(0x80>>bit) == 0 {
			continue
		}
		start := pos*8 + bit // key bit index of the window's first bit
		var w uint32
		for k := 0; k < 32; k++ {
			kb := start + k
			w = w<<1 | uint32(rssKey[kb/8]>>(7-kb%8)&1)
		}
		h ^= w
	}
	return h
}

// toeplitz computes the Toeplitz hash of in (at most 36 bytes) under rssKey.
func toeplitz(in []byte) uint32 {
	var h uint32
	for i, b := range in[:min(len(in), len(toeplitzTab))] {
		h ^= toeplitzTab[i][b]
	}
	return h
}
