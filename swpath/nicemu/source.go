package nicemu

import (
	"bytes"
	"errors"
	"fmt"
	"io"

	"github.com/google/gopacket/pcapgo"
)

// Source yields frames for the emulator to receive. Next appends the next
// frame to dst[:0] and returns it; ok is false at the end of the traffic.
type Source interface {
	Next(dst []byte) (frame []byte, ok bool)
}

// FrameList is a Source over frames held in memory, each sent once, in
// order, Repeat times (at least once).
type FrameList struct {
	Frames [][]byte
	Repeat int
	i, r   int
}

// Next implements Source.
func (s *FrameList) Next(dst []byte) ([]byte, bool) {
	if len(s.Frames) == 0 {
		return nil, false
	}
	if s.i == len(s.Frames) {
		s.i = 0
		s.r++
	}
	if s.r >= max(s.Repeat, 1) {
		return nil, false
	}
	f := append(dst[:0], s.Frames[s.i]...)
	s.i++
	return f, true
}

// FuncSource adapts a generator function (for example a swpath/traffic
// Generator's method) to Source: it is called with dst and returns the
// frame, or ok false at the end. Limit, when > 0, ends it after that many.
type FuncSource struct {
	Fn    func(dst []byte) ([]byte, bool)
	Limit uint64
	n     uint64
}

// Next implements Source.
func (s *FuncSource) Next(dst []byte) ([]byte, bool) {
	if s.Limit > 0 && s.n >= s.Limit {
		return nil, false
	}
	f, ok := s.Fn(dst)
	if ok {
		s.n++
	}
	return f, ok
}

// ReadPcap reads every frame of a pcap or pcapng capture with an Ethernet
// link type.
func ReadPcap(r io.Reader) ([][]byte, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	var frames [][]byte
	if len(data) >= 4 && bytes.Equal(data[:4], []byte{0x0a, 0x0d, 0x0d, 0x0a}) {
		ng, err := pcapgo.NewNgReader(bytes.NewReader(data), pcapgo.DefaultNgReaderOptions)
		if err != nil {
			return nil, fmt.Errorf("nicemu: pcapng: %w", err)
		}
		for {
			b, _, err := ng.ReadPacketData()
			if errors.Is(err, io.EOF) {
				return frames, nil
			}
			if err != nil {
				return frames, fmt.Errorf("nicemu: pcapng frame %d: %w", len(frames), err)
			}
			frames = append(frames, b)
		}
	}
	pr, err := pcapgo.NewReader(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("nicemu: pcap: %w", err)
	}
	if lt := pr.LinkType(); lt != 1 {
		return nil, fmt.Errorf("nicemu: pcap link type %d: want 1 (Ethernet)", lt)
	}
	for {
		b, _, err := pr.ReadPacketData()
		if errors.Is(err, io.EOF) {
			return frames, nil
		}
		if err != nil {
			return frames, fmt.Errorf("nicemu: pcap frame %d: %w", len(frames), err)
		}
		frames = append(frames, b)
	}
}
