package traffic_test

import (
	"bytes"
	"io"
	"testing"

	"github.com/scrubd/scrubd/swpath/traffic"
)

// FuzzReader feeds arbitrary bytes to the capture reader: it must never
// panic or loop, and a prefix of a valid pcapng file must read as the
// packets of the blocks it holds whole, then either end cleanly at a block
// boundary or report the truncation (never a silent clean end inside a
// block).
func FuzzReader(f *testing.F) {
	frames := traffic.NewGenerator(traffic.Config{Seed: 9, Sizes: traffic.Sizes{Min: 60, Max: 200}}).Frames(3)
	var ng, pc bytes.Buffer
	if err := traffic.WritePcapNG(&ng, frames); err != nil {
		f.Fatal(err)
	}
	if err := traffic.WritePcap(&pc, frames); err != nil {
		f.Fatal(err)
	}
	f.Add(ng.Bytes(), uint16(0))
	f.Add(pc.Bytes(), uint16(0))
	f.Add(ng.Bytes(), uint16(ng.Len()-3))
	f.Fuzz(func(t *testing.T, in []byte, cut uint16) {
		n, err := readCount(in)
		_ = n
		_ = err
		// A cut of the valid pcapng file.
		full := ng.Bytes()
		if int(cut) > len(full) {
			return
		}
		got, err := readCount(full[:cut])
		if err != nil {
			return
		}
		var w bytes.Buffer
		if werr := traffic.WritePcapNG(&w, frames[:got]); werr != nil {
			t.Fatal(werr)
		}
		if w.Len() != int(cut) {
			t.Fatalf("cut at %d read %d packets with no error, but %d packets fill %d bytes", cut, got, got, w.Len())
		}
	})
}

func readCount(b []byte) (int, error) {
	r, err := traffic.NewReader(bytes.NewReader(b))
	if err != nil {
		return 0, err
	}
	n := 0
	for {
		_, err := r.Next()
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return n, err
		}
		n++
		if n > len(b) {
			panic("more packets than bytes")
		}
	}
}
