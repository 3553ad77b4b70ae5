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
		// pcapgo's NgReader panics on some malformed options (an
		// interface's if_tsresol of 2^-64 divides by zero; short
		// if_filter, if_tsoffset or if_tsresol values index past their
		// end): such a file is an error, not a crash.
		var ng *pcapgo.NgReader
		err := noPanic(func() (err error) {
			ng, err = pcapgo.NewNgReader(&ngFramer{r: br}, pcapgo.DefaultNgReaderOptions)
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("capture: pcapng: %w", err)
		}
		rd.next = func() (b []byte, ci gopacket.CaptureInfo, err error) {
			err = noPanic(func() (err error) {
				b, ci, err = ng.ReadPacketData()
				return err
			})
			return b, ci, err
		}
		rd.link = ng.LinkType()
	} else {
		pr, err := pcapgo.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("capture: neither pcap nor pcapng: %w", err)
		}
		// libpcap's own bound (MAXIMUM_SNAPLEN, pcap-int.h): a record
		// claiming more is refused, not allocated (pcapgo allocates the
		// captured length the record claims, up to 4 GiB).
		if pr.Snaplen() > maxSnaplen {
			pr.SetSnaplen(maxSnaplen)
		}
		rd.next, rd.link = pr.ReadPacketData, pr.LinkType()
	}
	if rd.link != layers.LinkTypeEthernet {
		return nil, fmt.Errorf("capture: link type %v (%d): only Ethernet captures are supported", rd.link, int(rd.link))
	}
	return rd, nil
}

// noPanic runs f, turning a panic in it into an error.
func noPanic(f func() error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("malformed file (the reader failed: %v)", p)
		}
	}()
	return f()
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
// reported as io.ErrUnexpectedEOF instead of io.EOF. It also refuses, before
// the reader behind it sees them, a block length under 12, not a multiple of
// 4 or over maxNgBlock, and a packet whose captured length exceeds its
// block (pcapgo would allocate that length, up to 4 GiB, before reading).
type ngFramer struct {
	r      io.Reader
	hdr    [ngHeaderBytes]byte // the current block's first bytes
	off    uint64              // bytes of the current block seen
	total  uint64              // the current block's length; 0 until known
	big    bool                // the current section is big-endian
	errOff uint64              // the offset of the field checkHeader refused
	bad    error
}

const (
	ngSectionHeader  = 0x0a0d0d0a
	ngPacketBlock    = 2 // obsolete Packet Block: captured length at 20
	ngSimplePacket   = 3 // original length at 8
	ngEnhancedPacket = 6 // captured length at 20
	ngHeaderBytes    = 24
	maxNgBlock       = 16 << 20
	maxSnaplen       = 262144
)

func (f *ngFramer) Read(p []byte) (int, error) {
	if f.bad != nil {
		return 0, f.bad
	}
	n, err := f.r.Read(p)
	if keep, terr := f.track(p[:n]); terr != nil {
		// Withhold the bytes from the bad field on: the reader behind
		// gets the error instead of the value.
		f.bad = terr
		return keep, terr
	}
	if err == io.EOF && (f.off != 0) {
		return n, io.ErrUnexpectedEOF
	}
	return n, err
}

func (f *ngFramer) u32(b []byte) uint64 {
	if f.big {
		return uint64(binary.BigEndian.Uint32(b))
	}
	return uint64(binary.LittleEndian.Uint32(b))
}

// track follows b through the block structure. On a bad field it returns
// how many bytes of b lie before that field, and the error.
func (f *ngFramer) track(b []byte) (int, error) {
	i := 0
	for i < len(b) {
		if f.off >= ngHeaderBytes || (f.total != 0 && f.off >= f.total) {
			k := min(f.total-f.off, uint64(len(b)-i))
			f.off += k
			i += int(k)
		} else {
			f.hdr[f.off] = b[i]
			f.off++
			i++
			// at is the index in b of block offset o.
			at := func(o uint64) int { return max(0, i-int(f.off-o)) }
			if err := f.checkHeader(); err != nil {
				return at(f.errOff), err
			}
		}
		if f.total != 0 && f.off == f.total {
			f.off, f.total = 0, 0
		}
	}
	return len(b), nil
}

// checkHeader checks what the header bytes seen so far allow; errOff is
// the offset of the field at fault.
func (f *ngFramer) checkHeader() error {
	typ := binary.BigEndian.Uint32(f.hdr[:4]) // the SHB type reads the same either way
	switch {
	case f.off == 12 && typ == ngSectionHeader:
		switch {
		case binary.BigEndian.Uint32(f.hdr[8:12]) == 0x1a2b3c4d:
			f.big = true
		case binary.LittleEndian.Uint32(f.hdr[8:12]) == 0x1a2b3c4d:
			f.big = false
		default:
			f.errOff = 8
			return fmt.Errorf("capture: pcapng section header without a byte-order magic")
		}
		return f.setTotal()
	case f.off == 8 && typ != ngSectionHeader:
		return f.setTotal()
	}
	if f.total == 0 {
		return nil
	}
	t := f.u32(f.hdr[:4])
	switch {
	case f.off == 24 && (t == ngEnhancedPacket || t == ngPacketBlock):
		if c := f.u32(f.hdr[20:24]); f.total < 32 || c > f.total-32 {
			f.errOff = 20
			return fmt.Errorf("capture: pcapng packet of %d captured bytes in a block of %d", c, f.total)
		}
	case f.off == 12 && t == ngSimplePacket:
		if c := f.u32(f.hdr[8:12]); f.total < 16 || c > f.total-16 {
			f.errOff = 8
			return fmt.Errorf("capture: pcapng simple packet of %d bytes in a block of %d", c, f.total)
		}
	}
	return nil
}

func (f *ngFramer) setTotal() error {
	total := f.u32(f.hdr[4:8])
	if total < 12 || total%4 != 0 || total > maxNgBlock || total < f.off {
		f.errOff = 4
		return fmt.Errorf("capture: pcapng block length %d: must be a multiple of 4 from 12 to %d", total, maxNgBlock)
	}
	f.total = total
	return nil
}
