package plan

import (
	"errors"
	"math"
	"net/netip"
	"testing"
)

// The published verification table of Microsoft's RSS specification
// ("Verifying the RSS Hash Calculation"): with its key, each row's hash of
// the addresses alone and of addresses and ports.
func TestToeplitzVerificationVectors(t *testing.T) {
	v4 := []struct {
		dst, src     string
		dport, sport uint16
		ip, ipPorts  uint32
	}{
		{"161.142.100.80", "66.9.149.187", 1766, 2794, 0x323e8fc2, 0x51ccc178},
		{"65.69.140.83", "199.92.111.2", 4739, 14230, 0xd718262a, 0xc626b0ea},
		{"12.22.207.184", "24.19.198.95", 38024, 12898, 0xd2d0a5de, 0x5c2b394a},
		{"209.142.163.6", "38.27.205.30", 2217, 48228, 0x82989176, 0xafc7327f},
		{"202.188.127.2", "153.39.163.191", 1303, 44251, 0x5d1809c5, 0x10e828a2},
	}
	for _, c := range v4 {
		s, d := netip.MustParseAddr(c.src).As4(), netip.MustParseAddr(c.dst).As4()
		if got := Toeplitz(MicrosoftKey, RSSInputV4(s, d, c.sport, c.dport, false)); got != c.ip {
			t.Errorf("IPv4 %s -> %s: %#08x, want %#08x", c.src, c.dst, got, c.ip)
		}
		if got := Toeplitz(MicrosoftKey, RSSInputV4(s, d, c.sport, c.dport, true)); got != c.ipPorts {
			t.Errorf("IPv4 with ports %s:%d -> %s:%d: %#08x, want %#08x", c.src, c.sport, c.dst, c.dport, got, c.ipPorts)
		}
	}
	v6 := []struct {
		dst, src     string
		dport, sport uint16
		ip, ipPorts  uint32
	}{
		{"3ffe:2501:200:3::1", "3ffe:2501:200:1fff::7", 1766, 2794, 0x2cc18cd5, 0x40207d3d},
		{"ff02::1", "3ffe:501:8::260:97ff:fe40:efab", 4739, 14230, 0x0f0c461c, 0xdde51bbf},
		{"fe80::200:f8ff:fe21:67cf", "3ffe:1900:4545:3:200:f8ff:fe21:67cf", 38024, 44251, 0x4b61e985, 0x02d1feef},
	}
	for _, c := range v6 {
		s, d := netip.MustParseAddr(c.src).As16(), netip.MustParseAddr(c.dst).As16()
		if got := Toeplitz(MicrosoftKey, RSSInputV6(s, d, c.sport, c.dport, false)); got != c.ip {
			t.Errorf("IPv6 %s -> %s: %#08x, want %#08x", c.src, c.dst, got, c.ip)
		}
		if got := Toeplitz(MicrosoftKey, RSSInputV6(s, d, c.sport, c.dport, true)); got != c.ipPorts {
			t.Errorf("IPv6 with ports %s -> %s: %#08x, want %#08x", c.src, c.dst, got, c.ipPorts)
		}
	}
}

// A hand-derived indirection table: 8 entries over 3 queues round robin
// is 0,1,2,0,1,2,0,1, so queues 0 and 1 hold 3 entries and queue 2 holds 2;
// 128 entries over 26 queues: 128 = 4*26 + 24, so queues 0-23 hold 5 and
// queues 24-25 hold 4.
func TestRETAByHand(t *testing.T) {
	r, err := UniformRETA(8, 3)
	if err != nil {
		t.Fatal(err)
	}
	want := []int{0, 1, 2, 0, 1, 2, 0, 1}
	for i, q := range want {
		if r.Entries[i] != q {
			t.Fatalf("entry %d -> queue %d, want %d", i, r.Entries[i], q)
		}
	}
	if got := r.PerQueue(3); got[0] != 3 || got[1] != 3 || got[2] != 2 {
		t.Fatalf("per queue %v, want [3 3 2]", got)
	}
	// The low 3 bits of the hash index the table: 0x51ccc178 ends in
	// binary ...1111000, so entry 0, queue 0; 0xd718262a ends in ...101010,
	// entry 2, queue 2.
	if q := r.Queue(0x51ccc178); q != 0 {
		t.Errorf("hash 0x51ccc178 -> queue %d, want 0", q)
	}
	if q := r.Queue(0xd718262a); q != 2 {
		t.Errorf("hash 0xd718262a -> queue %d, want 2", q)
	}
	r, _ = UniformRETA(128, 26)
	per := r.PerQueue(26)
	for q, n := range per {
		want := 5
		if q >= 24 {
			want = 4
		}
		if n != want {
			t.Errorf("queue %d holds %d entries, want %d", q, n, want)
		}
	}
	if _, err := UniformRETA(100, 4); err == nil {
		t.Error("a 100-entry table was accepted")
	}
}

// The exact random-source spread (a coset of the key windows' span) must
// agree with hashing many random sources one by one.
func TestRandomSourceSpreadAgreesWithSampling(t *testing.T) {
	const size = 128
	reach := RandomSourceEntries(MicrosoftKey, FloodDst, size)
	want := map[int]bool{}
	for _, e := range reach {
		want[e] = true
	}
	if len(want) != len(reach) {
		t.Fatalf("%d entries listed, %d distinct", len(reach), len(want))
	}
	counts := make([]int, size)
	src := splitmix{42}
	const n = 1 << 18
	for i := 0; i < n; i++ {
		v := src.next()
		s := [4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}
		counts[Toeplitz(MicrosoftKey, RSSInputV4(s, FloodDst, 0, 0, false))&(size-1)]++
	}
	exp := float64(n) / float64(len(reach))
	for e, c := range counts {
		if !want[e] && c != 0 {
			t.Errorf("entry %d: %d samples, but the coset excludes it", e, c)
		}
		if want[e] && math.Abs(float64(c)-exp) > 6*math.Sqrt(exp) {
			t.Errorf("entry %d: %d samples, want %.0f +- %.0f", e, c, exp, 6*math.Sqrt(exp))
		}
	}
	if len(reach) != size {
		t.Errorf("random sources reach %d of %d entries", len(reach), size)
	}
}

func queueRun(t *testing.T, p QueueParams) QueueResult {
	t.Helper()
	r, err := QueueModel(p)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// The VPP drop-path measurements: ConnectX-5, 3.26 GHz, 346 cycles per
// packet (a CPU ceiling of 3260/346 = 9.42 Mpps per worker), 142 Mpps of
// 64 B random-source frames, one RX queue per worker. Expected values are
// worked out by hand from the 128-entry table:
//
//	16 queues: 8 entries each, 142/16 = 8.875 Mpps per queue, above the
//	   drain rate: 16 x drain (5.5 -> 88.0; 5.55 -> 88.8), ring-limited;
//	26 queues: 24 queues of 5 entries get 142*5/128 = 5.546875, 2 of 4 get
//	   4.4375; with drain 5.55 everything is carried (142); with 5.5 the
//	   24 busy queues lose 0.046875 each: 24*5.5 + 2*4.4375 = 140.875;
//	32 queues: 4 entries each, 4.4375 Mpps: 142 with either drain rate;
//	 8 queues: 16 entries each, 17.75 Mpps: 8 x drain (44.0 or 44.4). The
//	   measured 34 is not what an even random-source spread gives.
func TestSourceQueueTable(t *testing.T) {
	base := QueueParams{GHz: 3.26, CyclesPerPacket: 346, OfferedMpps: 142}
	for _, c := range []struct {
		queues  int
		drain   float64
		tp      float64
		limit   string
		busiest float64
	}{
		{8, 5.5, 44, "ring", 17.75},
		{16, 5.5, 88, "ring", 8.875},
		{26, 5.5, 140.875, "ring", 5.546875},
		{32, 5.5, 142, "link", 4.4375},
		{8, 5.55, 44.4, "ring", 17.75},
		{16, 5.55, 88.8, "ring", 8.875},
		{26, 5.55, 142, "link", 5.546875},
		{32, 5.55, 142, "link", 4.4375},
	} {
		p := base
		p.Queues, p.DrainMpps = c.queues, c.drain
		r := queueRun(t, p)
		if !near(r.ThroughputMpps, c.tp, 1e-9) || r.Limit != c.limit || !near(r.BusiestMpps, c.busiest, 1e-9) {
			t.Errorf("%d queues, drain %v: %.4f Mpps limit %s busiest %.4f; want %.4f %s %.4f",
				c.queues, c.drain, r.ThroughputMpps, r.Limit, r.BusiestMpps, c.tp, c.limit, c.busiest)
		}
		if !near(r.CPUCeilingMpps, 3260.0/346, 1e-9) {
			t.Errorf("CPU ceiling %v", r.CPUCeilingMpps)
		}
		if len(r.PerQueue) != c.queues {
			t.Fatalf("%d per-queue rows", len(r.PerQueue))
		}
	}
	// The recommendation: with a drain of 5.55 the fewest queues that carry
	// 142 Mpps are 26; with 5.5, 26 to 31 queues leave 5 entries on the
	// busiest queue (5.55 Mpps), so 32.
	p := base
	p.Queues, p.DrainMpps = 8, 5.55
	if r := queueRun(t, p); r.RecommendedQueues != 26 || !r.RecommendedHolds {
		t.Errorf("drain 5.55: recommended %d (holds %v), want 26", r.RecommendedQueues, r.RecommendedHolds)
	}
	p.DrainMpps = 5.5
	if r := queueRun(t, p); r.RecommendedQueues != 32 || !r.RecommendedHolds {
		t.Errorf("drain 5.5: recommended %d (holds %v), want 32", r.RecommendedQueues, r.RecommendedHolds)
	}
}

// Which spread gives 34 Mpps on 8 queues: with F flows of equal rate
// 142/F > 5.5, a queue carries 5.5 if any flow lands on it, so the mean
// throughput is 5.5 * 8 * (1 - (7/8)^F): 32.42 for F = 10, 33.87 for 11,
// 35.14 for 12. About eleven flows.
func TestEightQueuesFewFlows(t *testing.T) {
	for _, f := range []int{10, 11, 12} {
		want := 5.5 * 8 * (1 - math.Pow(7.0/8, float64(f)))
		r := queueRun(t, QueueParams{Queues: 8, GHz: 3.26, CyclesPerPacket: 346, DrainMpps: 5.5, OfferedMpps: 142, Spread: Spread{Flows: f}})
		if !near(r.ExpectedMpps, want, 1e-6) {
			t.Errorf("%d flows: expected %.4f Mpps, want %.4f", f, r.ExpectedMpps, want)
		}
		// One concrete set of sources: a multiple of 5.5 (busy queues).
		if k := r.ThroughputMpps / 5.5; math.Abs(k-math.Round(k)) > 1e-9 || r.Limit != "ring" {
			t.Errorf("%d flows: %.3f Mpps (%s), want whole busy queues of 5.5, ring", f, r.ThroughputMpps, r.Limit)
		}
	}
}

// Without a measured drain rate the worker's CPU bounds the queue, and a
// drain rate above the CPU ceiling leaves the CPU as the limit.
func TestCPULimited(t *testing.T) {
	for _, drain := range []float64{0, 12} {
		r := queueRun(t, QueueParams{Queues: 8, GHz: 3.26, CyclesPerPacket: 346, DrainMpps: drain, OfferedMpps: 142})
		if r.Limit != "cpu" || !near(r.ThroughputMpps, 8*3260.0/346, 1e-9) {
			t.Errorf("drain %v: %.3f Mpps limit %s, want %.3f cpu", drain, r.ThroughputMpps, r.Limit, 8*3260.0/346)
		}
	}
	// Offered above line rate is cut to line rate (100G, 64 B: 148.81).
	r := queueRun(t, QueueParams{Queues: 32, GHz: 3.26, CyclesPerPacket: 346, OfferedMpps: 200})
	if !near(r.OfferedMpps, 148.8095, 1e-3) || len(r.Warnings) == 0 {
		t.Errorf("offered %v, warnings %v", r.OfferedMpps, r.Warnings)
	}
}

// Ring memory: 8192 entries of 64 B frames take 8192 * (16 + 64) + 16384
// * 64 = 1703936 bytes. At 5.5 Mpps 500 us is 2750 packets: 4096 entries;
// a 512 KiB share holds at most 524288 / 208 = 2520 entries: 2048.
func TestRing(t *testing.T) {
	if got := RingBytes(8192, 64); got != 1703936 {
		t.Errorf("RingBytes(8192, 64) = %d", got)
	}
	if got := RingBytes(1024, 1500); got != 1024*(16+24*64)+2048*64 {
		t.Errorf("RingBytes(1024, 1500) = %d", got)
	}
	if n, _ := RecommendRing(5.5, 500, 64, 0); n != 4096 {
		t.Errorf("recommend %d, want 4096", n)
	}
	if n, _ := RecommendRing(5.5, 500, 64, 512); n != 2048 {
		t.Errorf("recommend within 512 KiB: %d, want 2048", n)
	}
	if n, _ := RecommendRing(0.01, 500, 64, 0); n != MinRing {
		t.Errorf("recommend for a light queue: %d", n)
	}
	r := queueRun(t, QueueParams{Queues: 26, GHz: 3.26, CyclesPerPacket: 346, DrainMpps: 5.5, OfferedMpps: 142, RingEntries: 8192, LLCShareKiB: 1024})
	if r.Ring.Fits || r.Ring.CQEntries != 16384 || r.Ring.Bytes != 26*1703936 || len(r.Warnings) == 0 {
		t.Errorf("8192 entries in 1 MiB: %+v warnings %v", r.Ring, r.Warnings)
	}
	r = queueRun(t, QueueParams{Queues: 26, GHz: 3.26, CyclesPerPacket: 346, DrainMpps: 5.5, OfferedMpps: 142, RingEntries: 4096, LLCShareKiB: 4096})
	if !r.Ring.Fits || len(r.Warnings) != 0 {
		t.Errorf("4096 entries in 4 MiB: %+v warnings %v", r.Ring, r.Warnings)
	}
}

func TestQueueBadParams(t *testing.T) {
	ok := QueueParams{Queues: 8, GHz: 3.26, CyclesPerPacket: 346}
	for _, mut := range []func(*QueueParams){
		func(p *QueueParams) { p.Queues = 0 },
		func(p *QueueParams) { p.GHz = math.NaN() },
		func(p *QueueParams) { p.DrainMpps = -1 },
		func(p *QueueParams) { p.RETASize = 100 },
		func(p *QueueParams) { p.RingEntries = 1000 },
		func(p *QueueParams) { p.Spread = Spread{Flows: -2} },
		func(p *QueueParams) { p.FrameBytes = 10 },
	} {
		p := ok
		mut(&p)
		if _, err := QueueModel(p); !errors.Is(err, ErrQueueParams) {
			t.Errorf("%+v: err %v", p, err)
		}
	}
	for _, s := range []string{"0", "x", "-3", ""} {
		if _, err := ParseSpread(s); err == nil {
			t.Errorf("flows %q accepted", s)
		}
	}
	if s, err := ParseSpread("random"); err != nil || !s.Random {
		t.Errorf("random: %v %v", s, err)
	}
}
