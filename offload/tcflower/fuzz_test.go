package tcflower

import (
	"encoding/binary"
	"encoding/hex"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// readOnly clears what the kernel reports but a request cannot carry.
func readOnly(f Filter) Filter {
	f.InHWCount = 0
	f.Parent = f.parent()
	acts := make([]Action, len(f.Actions))
	for i, a := range f.Actions {
		a.Stats, a.Times = Stats{}, Times{}
		acts[i] = a
	}
	if len(acts) == 0 {
		acts = nil
	}
	f.Actions = acts
	return f
}

// FuzzDecode feeds arbitrary bytes to the filter decoder: it must never
// panic, and whatever it accepts must survive encode -> decode unchanged.
func FuzzDecode(f *testing.F) {
	for _, flt := range roundTripCases() {
		b, err := flt.MarshalBinary()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f1 := Filter{Ifindex: 4, Prio: 7, Protocol: ProtoIPv4, Handle: 1, Flags: SkipHW | NotInHW,
		Key:     Key{EthType: ProtoIPv4, IPProto: IPProtoUDP, Dst: Prefix(netip.MustParsePrefix("198.51.100.0/24")), DstPort: PortMask{53, 0xffff}},
		Actions: []Action{{Kind: "gact", Verdict: ActShot, Index: 3, Cookie: MakeCookie(77)}}}
	f.Add(dumpReply(f, f1, Stats{Bytes: 1000, Packets: 0x1_0000_0005, HWBytes: 10, HWPackets: 1, Drops: 5}).Data)
	// Real 6.1 dump replies (testdata/kernel-6.1, captured in the kernel lab).
	if b, err := os.ReadFile(filepath.Join("testdata", "kernel-6.1", "dump-lab.hex")); err == nil {
		for _, l := range strings.Fields(string(b)) {
			d, err := hex.DecodeString(l)
			if err != nil {
				f.Fatal(err)
			}
			for off := 0; off+16 <= len(d); {
				n := int(binary.NativeEndian.Uint32(d[off:]))
				if n < 16 || off+n > len(d) {
					break
				}
				f.Add(d[off+16 : off+n])
				off += (n + 3) &^ 3
			}
		}
	}
	f.Add([]byte{})
	f.Add(make([]byte, tcmsgLen))
	f.Fuzz(func(t *testing.T, data []byte) {
		var a Filter
		if err := a.UnmarshalBinary(data); err != nil {
			return
		}
		b, err := a.MarshalBinary()
		if err != nil {
			t.Fatalf("decoded filter does not encode: %v\n%+v", err, a)
		}
		var c Filter
		if err := c.UnmarshalBinary(b); err != nil {
			t.Fatalf("re-decode: %v", err)
		}
		if diff := cmp.Diff(readOnly(a), readOnly(c), cmp.Comparer(func(x, y netip.Addr) bool { return x == y })); diff != "" {
			t.Fatalf("encode/decode not stable (-first +second):\n%s", diff)
		}
	})
}
