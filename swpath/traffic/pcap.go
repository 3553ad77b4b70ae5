package traffic

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/google/gopacket/pcapgo"
)

// Packet is one captured frame.
type Packet struct {
	Data []byte
	// Length is the frame's length on the wire (at least len(Data)).
	Length int
}

// Epoch is the timestamp of the first packet in files this package writes;
// packet i is Epoch + i microseconds, so written files are reproducible.
var Epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func captureInfo(i int, b []byte) gopacket.CaptureInfo {
	return gopacket.CaptureInfo{Timestamp: Epoch.Add(time.Duration(i) * time.Microsecond), CaptureLength: len(b), Length: len(b)}
}

// WritePcap writes frames as a classic pcap file (Ethernet, microseconds).
func WritePcap(w io.Writer, frames [][]byte) error {
	pw := pcapgo.NewWriter(w)
	if err := pw.WriteFileHeader(65535, layers.LinkTypeEthernet); err != nil {
		return err
	}
	for i, b := range frames {
		if err := pw.WritePacket(captureInfo(i, b), b); err != nil {
			return err
		}
	}
	return nil
}

// WritePcapNG writes frames as a pcapng file with one Ethernet interface.
func WritePcapNG(w io.Writer, frames [][]byte) error {
	nw, err := pcapgo.NewNgWriterInterface(w, pcapgo.NgInterface{
		Name: "gen0", LinkType: layers.LinkTypeEthernet, SnapLength: 65535,
		TimestampResolution: 9, // 10^-9: nanoseconds
	}, pcapgo.NgWriterOptions{SectionInfo: pcapgo.NgSectionInfo{Application: "scrubd traffic"}})
	if err != nil {
		return err
	}
	for i, b := range frames {
		if err := nw.WritePacket(captureInfo(i, b), b); err != nil {
			return err
		}
	}
	return nw.Flush()
}

// WriteFile writes frames to path, as pcapng when ng is set.
func WriteFile(path string, frames [][]byte, ng bool) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	bw := bufio.NewWriter(f)
	if ng {
		err = WritePcapNG(bw, frames)
	} else {
		err = WritePcap(bw, frames)
	}
	if err == nil {
		err = bw.Flush()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// Reader reads frames from a pcap or pcapng stream.
type Reader struct {
	next func() ([]byte, gopacket.CaptureInfo, error)
	link layers.LinkType
}

// NewReader detects the format (pcap or pcapng) from the first bytes of r.
// Only Ethernet captures are accepted.
func NewReader(r io.Reader) (*Reader, error) {
	br := bufio.NewReader(r)
	magic, err := br.Peek(4)
	if err != nil {
		return nil, fmt.Errorf("capture: reading the file header: %w", err)
	}
	rd := &Reader{}
	if magic[0] == 0x0a && magic[1] == 0x0d && magic[2] == 0x0d && magic[3] == 0x0a {
		// pcapgo's NgReader reports a file cut inside a block as a plain
		// io.EOF; the framer tells that apart from a clean end.
		ng, err := pcapgo.NewNgReader(&ngFramer{r: br}, pcapgo.DefaultNgReaderOptions)
		if err != nil {
			return nil, fmt.Errorf("capture: pcapng: %w", err)
		}
		rd.next, rd.link = ng.ReadPacketData, ng.LinkType()
	} else {
		pr, err := pcapgo.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("capture: neither pcap nor pcapng: %w", err)
		}
		rd.next, rd.link = pr.ReadPacketData, pr.LinkType()
	}
	if rd.link != layers.LinkTypeEthernet {
		return nil, fmt.Errorf("capture: link type %v (%d): only Ethernet captures are supported", rd.link, int(rd.link))
	}
	return rd, nil
}

// Next returns the next packet, or io.EOF after the last one. Data is a new
// slice for each packet.
func (r *Reader) Next() (Packet, error) {
	b, ci, err := r.next()
	if err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return Packet{}, fmt.Errorf("capture: truncated file: %w", err)
		}
		return Packet{}, err
	}
	n := ci.Length
	if n < len(b) {
		n = len(b)
	}
	return Packet{Data: b, Length: n}, nil
}

// ReadFile reads every packet of a pcap or pcapng file.
func ReadFile(path string) ([]Packet, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	r, err := NewReader(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	var out []Packet
	for {
		p, err := r.Next()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: packet %d: %w", path, len(out)+1, err)
		}
		out = append(out, p)
	}
}

// ngFramer passes a pcapng stream through while following its block
// framing (pcapng, draft-ietf-opsawg-pcapng section 3.1: every block starts
// with a 32-bit type and a 32-bit total length; the Section Header Block,
// type 0x0A0D0D0A, carries the byte-order magic 0x1A2B3C4D that gives the
// section's endianness). An end of input anywhere but between two blocks is
// reported as io.ErrUnexpectedEOF instead of io.EOF.
type ngFramer struct {
	r    io.Reader
	hdr  [12]byte
	nh   int    // header bytes of the current block collected
	left uint64 // bytes of the current block still to come after its header
	big  bool   // the current section is big-endian
	bad  error
}

const ngSectionHeader = 0x0a0d0d0a

func (f *ngFramer) Read(p []byte) (int, error) {
	if f.bad != nil {
		return 0, f.bad
	}
	n, err := f.r.Read(p)
	if terr := f.track(p[:n]); terr != nil {
		f.bad = terr
		return n, terr
	}
	if err == io.EOF && (f.nh != 0 || f.left != 0) {
		return n, io.ErrUnexpectedEOF
	}
	return n, err
}

func (f *ngFramer) track(b []byte) error {
	for len(b) > 0 {
		if f.left > 0 {
			k := uint64(len(b))
			if k > f.left {
				k = f.left
			}
			f.left -= k
			b = b[k:]
			continue
		}
		need := 8
		if f.nh >= 4 && binary.BigEndian.Uint32(f.hdr[:4]) == ngSectionHeader {
			need = 12 // the byte-order magic follows the length
		}
		k := copy(f.hdr[f.nh:need], b)
		f.nh += k
		b = b[k:]
		if f.nh < need {
			continue
		}
		if need == 8 && binary.BigEndian.Uint32(f.hdr[:4]) == ngSectionHeader {
			continue // now collect the byte-order magic too
		}
		if need == 12 {
			switch {
			case binary.BigEndian.Uint32(f.hdr[8:12]) == 0x1a2b3c4d:
				f.big = true
			case binary.LittleEndian.Uint32(f.hdr[8:12]) == 0x1a2b3c4d:
				f.big = false
			default:
				return fmt.Errorf("capture: pcapng section header without a byte-order magic")
			}
		}
		var total uint32
		if f.big {
			total = binary.BigEndian.Uint32(f.hdr[4:8])
		} else {
			total = binary.LittleEndian.Uint32(f.hdr[4:8])
		}
		if total < 12 || total%4 != 0 || int(total) < need {
			return fmt.Errorf("capture: pcapng block length %d is not a multiple of 4 of at least 12", total)
		}
		f.left = uint64(total) - uint64(need)
		f.nh = 0
	}
	return nil
}
