package xdp

import (
	"strings"
	"testing"

	"github.com/cilium/ebpf/btf"

	"github.com/scrubd/scrubd/swpath/rule"
)

// TestPacketLayoutFollowsFieldTable reads struct pkt from the BTF that
// clang wrote into the compiled program (scrub_bpfel.o and scrub_bpfeb.o)
// and checks each field's member and offset against rule.MatchFields, so
// the table's BPF column is the layout the program was built with.
func TestPacketLayoutFollowsFieldTable(t *testing.T) {
	for _, obj := range []string{"scrub_bpfel.o", "scrub_bpfeb.o"} {
		spec, err := btf.LoadSpec(obj)
		if err != nil {
			t.Fatalf("%s: %v", obj, err)
		}
		var pkt *btf.Struct
		if err := spec.TypeByName("pkt", &pkt); err != nil {
			t.Fatalf("%s: struct pkt: %v", obj, err)
		}
		offset := func(path string) (int, bool) {
			var st = pkt
			off := 0
			parts := strings.Split(path, ".")
			for i, name := range parts {
				found := false
				for _, m := range st.Members {
					if m.Name != name {
						continue
					}
					off += int(m.Offset.Bytes())
					found = true
					if i < len(parts)-1 {
						s, ok := btf.UnderlyingType(m.Type).(*btf.Struct)
						if !ok {
							return 0, false
						}
						st = s
					}
					break
				}
				if !found {
					return 0, false
				}
			}
			return off, true
		}
		n := 0
		for _, mf := range rule.MatchFields {
			if mf.BPF == "" {
				continue
			}
			n++
			got, ok := offset(mf.BPF)
			if !ok {
				t.Errorf("%s: %s: struct pkt has no member %s", obj, mf.Name, mf.BPF)
				continue
			}
			if got != mf.BPFOffset {
				t.Errorf("%s: %s: struct pkt member %s at byte %d, the table says %d", obj, mf.Name, mf.BPF, got, mf.BPFOffset)
			}
		}
		if n < 10 {
			t.Fatalf("only %d fields have a BPF member", n)
		}
	}
}
