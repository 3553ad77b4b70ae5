package compile

import (
	"encoding/binary"
	"net/netip"
	"testing"

	"github.com/scrubd/scrubd/swpath/rule"
)

// ruleFromBytes builds an arbitrary (possibly odd) drop rule from fuzz
// input: any combination of conditions, including ones the rule-file parser
// refuses.
func ruleFromBytes(b []byte) rule.Rule {
	get := func(n int) []byte {
		if len(b) < n {
			b = append(b, make([]byte, n-len(b))...)
		}
		x := b[:n]
		b = b[n:]
		return x
	}
	r := rule.Rule{ID: "f", Action: rule.Drop}
	m := &r.Match
	sel := binary.LittleEndian.Uint16(get(2))
	if sel&1 != 0 {
		a := get(5)
		m.Dst = netip.PrefixFrom(netip.AddrFrom4([4]byte(a[:4])), int(a[4]%33)).Masked()
	} else if sel&2 != 0 {
		a := get(17)
		m.Src = netip.PrefixFrom(netip.AddrFrom16([16]byte(a[:16])), int(a[16]%129)).Masked()
	}
	ranges := func(max uint32) rule.Ranges {
		n := int(get(1)[0]%3) + 1
		var rs rule.Ranges
		for range n {
			x := get(4)
			lo, hi := uint32(binary.LittleEndian.Uint16(x))%(max+1), uint32(binary.LittleEndian.Uint16(x[2:]))%(max+1)
			if lo > hi {
				lo, hi = hi, lo
			}
			rs = append(rs, rule.Range{Lo: lo, Hi: hi})
		}
		return rs
	}
	if sel&4 != 0 {
		p := get(2)
		m.Proto = []uint8{p[0]}
		if p[1]&1 != 0 && p[1] != p[0] {
			m.Proto = append(m.Proto, p[1])
		}
	}
	if sel&8 != 0 {
		m.SrcPort = ranges(65535)
	}
	if sel&16 != 0 {
		m.DstPort = ranges(65535)
	}
	if sel&32 != 0 {
		m.Port = ranges(65535)
	}
	if sel&64 != 0 {
		x := get(2)
		m.HasTCPFlags, m.TCPFlags = true, rule.TCPFlags{Value: x[0] & x[1], Mask: x[1]}
	}
	if sel&128 != 0 {
		m.ICMPType = ranges(255)
	}
	if sel&256 != 0 {
		m.ICMPCode = ranges(255)
	}
	if sel&512 != 0 {
		m.Fragment = rule.Frag(get(1)[0] & 31)
	}
	if sel&1024 != 0 {
		m.DSCP = binary.LittleEndian.Uint64(get(8))
	}
	return r
}

// FuzzCompileExact compiles arbitrary rules for mlx5 and the software
// flower: no panic, and every offloaded rule matches exactly its packets
// over its edge packet space.
func FuzzCompileExact(f *testing.F) {
	f.Add([]byte{0x11, 0, 203, 0, 113, 0, 24, 2, 1, 0x35, 0, 0x35, 0})
	f.Add([]byte{0xff, 0x07, 10, 0, 0, 0, 8, 6, 17, 0, 0, 0, 0xe8, 3, 0xd0, 7})
	f.Add([]byte{0x04, 0x02, 17, 0, 0x0c})
	f.Add([]byte{0x40, 0x04, 0x02, 0x12})
	f.Fuzz(func(t *testing.T, b []byte) {
		r := ruleFromBytes(b)
		for _, cfg := range []*Config{mlx5Cfg(), flowerCfg()} {
			res := Rule(cfg, &r)
			if res.Offloadable {
				checkExact(t, &r, &res, 300)
			} else if res.Detail == "" {
				t.Fatalf("refused without detail: %v", res.Reason)
			}
		}
	})
}
