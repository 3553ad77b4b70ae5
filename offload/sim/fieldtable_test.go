package sim

import (
	"testing"

	"github.com/scrubd/scrubd/offload"
	"github.com/scrubd/scrubd/swpath/rule"
)

// TestKeyFollowsFieldTable checks the simulated table's key packing
// (offload.KeyOf, then packKey under a mask that keeps everything) against
// rule.MatchFields: a field's bits land only where the table says, and a
// field the hardware keys on reaches the key bit by bit. The fields that
// gate others (family, protocol, L4 presence) are set as a packet of the
// field's own kind would have them.
func TestKeyFollowsFieldTable(t *testing.T) {
	all := offload.Mask{Proto: true, SrcMask: rule.Addr{Hi: ^uint64(0), Lo: ^uint64(0)}, DstMask: rule.Addr{Hi: ^uint64(0), Lo: ^uint64(0)},
		SrcPortMask: 0xffff, DstPortMask: 0xffff, TCPFlagsMask: 0xff, ICMPTypeMask: 0xff, ICMPCodeMask: 0xff, TOSMask: 0xff, FlagsMask: 0xff}
	base := func(name string) rule.Fields {
		f := rule.Fields{Family: rule.IPv6, L4: true, Proto: rule.ProtoTCP}
		if name == "icmp_type" || name == "icmp_code" {
			f.Proto = rule.ProtoICMPv6
		}
		return f
	}
	for _, mf := range rule.MatchFields {
		f0 := base(mf.Name)
		k0, ok := offload.KeyOf(&f0)
		if !ok {
			t.Fatalf("%s: base packet has no key", mf.Name)
		}
		p0 := packKey(&k0, &all)
		h0, l0 := mf.Get(&f0)
		for bit := 0; bit < mf.Width; bit++ {
			f := f0
			hi, lo := h0, l0
			if bit < 64 {
				lo ^= 1 << bit
			} else {
				hi ^= 1 << (bit - 64)
			}
			mf.Set(&f, hi, lo)
			k, ok := offload.KeyOf(&f)
			if !ok {
				continue // not IP any more (family varied): no key at all
			}
			p := packKey(&k, &all)
			changed := false
			for w := range p {
				d := p[w] ^ p0[w]
				if d&^mf.SimKey[w] != 0 && mf.Name != "protocol" && mf.Name != "l4" {
					// protocol and L4 presence gate the port, flag and ICMP
					// fields: flipping them may clear those too.
					t.Errorf("%s bit %d changes sim-key word %d bits %#x outside the table's %#x", mf.Name, bit, w, d, mf.SimKey[w])
				}
				changed = changed || d != 0
			}
			// Fragment state reaches the key only as "a fragment" and "the
			// first fragment" (offload.KeyOf); L4 presence only through the
			// fields it gates; family only while it names IPv4 or IPv6.
			oneToOne := mf.SimKey != [6]uint64{} && mf.Name != "fragment" && mf.Name != "family"
			if oneToOne && !changed {
				t.Errorf("%s bit %d does not reach the simulated table's key (table: %#x)", mf.Name, bit, mf.SimKey)
			}
			if mf.SimKey == ([6]uint64{}) && mf.Name != "l4" && changed {
				t.Errorf("%s bit %d reaches the simulated table's key, which the table says has no %s", mf.Name, bit, mf.Name)
			}
		}
	}
}
