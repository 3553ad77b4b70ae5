package bench

import (
	"context"
	"strconv"
	"strings"
	"testing"
)

// TestRunSmall runs the whole measurement on a small scale and checks the
// report is consistent (not its speed).
func TestRunSmall(t *testing.T) {
	rep, err := Run(context.Background(), Config{FrameSizes: []int{64, 1500}, Packets: 4096, RQLog2: 8, Flows: 256, Mix: 0.25})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Sizes) != 2 {
		t.Fatalf("%d sizes", len(rep.Sizes))
	}
	for _, s := range rep.Sizes {
		if s.Packets < 4096 || s.Dropped+s.Passed != s.Packets || s.Passed == 0 || s.Dropped == 0 {
			t.Errorf("size %d: packets %d dropped %d passed %d", s.FrameSize, s.Packets, s.Dropped, s.Passed)
		}
		if s.NsPerPkt <= 0 || s.MppsPerWorker <= 0 || s.Split.Classify <= 0 || s.CapacityMpps <= 0 {
			t.Errorf("size %d: %+v", s.FrameSize, s)
		}
		// One worker: its queue drains one packet per wall-clock ns/pkt.
		if d := 1e3 / s.NsPerPkt; s.QueueDrainMpps <= 0 || s.QueueDrainMpps < 0.999*d || s.QueueDrainMpps > 1.001*d {
			t.Errorf("size %d: queue drain %.3f Mpps, want 1000/ns per packet = %.3f", s.FrameSize, s.QueueDrainMpps, d)
		}
	}
	if got := rep.Sizes[0].LineRateMpps; got < 148.8 || got > 148.9 {
		t.Errorf("64 B line rate %.3f Mpps, want 148.81", got)
	}
}

// BenchmarkDropPath is the goal: one worker, 64-byte frames, the
// five drop rules, pre-filled rings: receive + classify + drop + recycle.
func BenchmarkDropPath(b *testing.B) {
	for _, size := range []int{64, 1500} {
		b.Run(strconv.Itoa(size), func(b *testing.B) { benchSize(b, Config{FrameSizes: []int{size}}) })
	}
}

// BenchmarkForward forwards every frame to the peer port's send queue.
func BenchmarkForward(b *testing.B) {
	benchSize(b, Config{FrameSizes: []int{64}, Mix: 1})
}

// BenchmarkCompressed is the drop path with compressed CQE sessions.
func BenchmarkCompressed(b *testing.B) {
	benchSize(b, Config{FrameSizes: []int{64}, Compress: true})
}

func benchSize(b *testing.B, cfg Config) {
	cfg.Packets = max(b.N, 1024)
	rep, err := Run(context.Background(), cfg)
	if err != nil {
		b.Fatal(err)
	}
	var text strings.Builder
	_ = rep.WriteText(&text)
	b.Log("\n" + text.String())
	s := rep.Sizes[0]
	b.ReportMetric(s.NsPerPkt, "ns/pkt")
	b.ReportMetric(s.CPUNsPerPkt, "cpu-ns/pkt")
	b.ReportMetric(s.CyclesPerPkt, "cycles/pkt")
	b.ReportMetric(s.MppsPerWorker, "Mpps")
	b.ReportMetric(s.QueueDrainMpps, "drain-Mpps/queue")
	b.ReportMetric(s.Split.RxRefill, "rx-ns/pkt")
	b.ReportMetric(s.Split.Classify, "classify-ns/pkt")
	b.ReportMetric(s.Split.Out, "out-ns/pkt")
	b.ReportMetric(0, "ns/op")
}

func TestParseFrameSizes(t *testing.T) {
	got, err := ParseFrameSizes("64, 128,1500")
	if err != nil || len(got) != 3 || got[0] != 64 || got[2] != 1500 {
		t.Fatalf("%v %v", got, err)
	}
	for _, bad := range []string{"", "64,x", "10", "64,,128"} {
		if _, err := ParseFrameSizes(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
