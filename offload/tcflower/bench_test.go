package tcflower

import (
	"encoding/binary"
	"testing"
)

// BenchmarkMarshal measures encoding one typical drop filter (IPv4 /16
// source, masked ports, TCP flags, DSCP, fragment flags, cookie).
func BenchmarkMarshal(b *testing.B) {
	f := v4filter()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := f.MarshalBinary(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecodeKernelDump measures decoding the 6.1 kernel's dump reply
// of the nine lab filters (testdata/kernel-6.1/dump-lab.hex), per filter.
func BenchmarkDecodeKernelDump(b *testing.B) {
	var msgs [][]byte
	for _, d := range loadCapture(b, "dump-lab") {
		for off := 0; off+16 <= len(d); {
			n := int(binary.NativeEndian.Uint32(d[off:]))
			if binary.NativeEndian.Uint16(d[off+4:]) == rtmNewFilter {
				msgs = append(msgs, d[off+16:off+n])
			}
			off += (n + 3) &^ 3
		}
	}
	b.ReportAllocs()
	var f Filter
	for b.Loop() {
		for _, m := range msgs {
			if err := f.UnmarshalBinary(m); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(msgs)), "ns/filter")
}
