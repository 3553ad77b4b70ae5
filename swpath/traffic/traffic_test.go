package traffic_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/google/gopacket/pcapgo"

	"github.com/scrubd/scrubd/swpath/packet"
	"github.com/scrubd/scrubd/swpath/rule"
	"github.com/scrubd/scrubd/swpath/traffic"
)

func TestCaptureRoundTrip(t *testing.T) {
	frames := traffic.NewGenerator(traffic.Config{Seed: 1, Odd: true, Sizes: traffic.Sizes{IMIX: true}}).Frames(500)
	dir := t.TempDir()
	for _, ng := range []bool{false, true} {
		p := filepath.Join(dir, "c")
		if err := traffic.WriteFile(p, frames, ng); err != nil {
			t.Fatal(err)
		}
		got, err := traffic.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(frames) {
			t.Fatalf("pcapng=%v: %d packets back, want %d", ng, len(got), len(frames))
		}
		for i := range got {
			if !bytes.Equal(got[i].Data, frames[i]) || got[i].Length != len(frames[i]) {
				t.Fatalf("pcapng=%v packet %d differs", ng, i)
			}
		}
	}
}

func TestReaderRejects(t *testing.T) {
	if _, err := traffic.NewReader(strings.NewReader("not a capture at all")); err == nil || !strings.Contains(err.Error(), "neither pcap nor pcapng") {
		t.Errorf("garbage: %v", err)
	}
	if _, err := traffic.NewReader(strings.NewReader("ab")); err == nil {
		t.Error("2-byte file accepted")
	}
	var raw bytes.Buffer
	w := pcapgo.NewWriter(&raw)
	w.WriteFileHeader(65535, layers.LinkTypeRaw)
	if _, err := traffic.NewReader(&raw); err == nil || !strings.Contains(err.Error(), "only Ethernet") {
		t.Errorf("raw-IP capture: %v", err)
	}
	var good bytes.Buffer
	traffic.WritePcap(&good, traffic.NewGenerator(traffic.Config{Seed: 2}).Frames(3))
	cut := good.Bytes()[:good.Len()-10]
	r, err := traffic.NewReader(bytes.NewReader(cut))
	if err != nil {
		t.Fatal(err)
	}
	var last error
	for range 5 {
		if _, last = r.Next(); last != nil {
			break
		}
	}
	if last == nil || last == io.EOF {
		t.Errorf("truncated capture read without error: %v", last)
	}
	p := filepath.Join(t.TempDir(), "x")
	os.WriteFile(p, cut, 0o644)
	if _, err := traffic.ReadFile(p); err == nil || !strings.Contains(err.Error(), "packet 3") {
		t.Errorf("ReadFile on a truncated capture: %v", err)
	}
}

// A pcapng file cut anywhere but between two blocks is an error, not a
// shorter capture. The clean cut points come from the writer: the length
// of a file of the first k frames.
func TestPcapNGTruncated(t *testing.T) {
	frames := traffic.NewGenerator(traffic.Config{Seed: 3, Sizes: traffic.Sizes{IMIX: true}}).Frames(4)
	clean := map[int]int{} // file length -> packets
	var full []byte
	for k := 0; k <= len(frames); k++ {
		var b bytes.Buffer
		if err := traffic.WritePcapNG(&b, frames[:k]); err != nil {
			t.Fatal(err)
		}
		clean[b.Len()] = k
		full = b.Bytes()
	}
	header := len(full)
	for l := range clean {
		header = min(header, l)
	}
	for l := header; l <= len(full); l++ {
		got, err := readAll(full[:l])
		if k, ok := clean[l]; ok {
			if err != nil || got != k {
				t.Fatalf("cut at %d (a block boundary): %d packets, %v; want %d, no error", l, got, err, k)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), "truncated") {
			t.Fatalf("cut at %d of %d (inside a block): %d packets, err %v; want a truncation error", l, len(full), got, err)
		}
	}
}

func readAll(b []byte) (int, error) {
	r, err := traffic.NewReader(bytes.NewReader(b))
	if err != nil {
		return 0, err
	}
	n := 0
	for {
		if _, err := r.Next(); err == io.EOF {
			return n, nil
		} else if err != nil {
			return n, err
		}
		n++
	}
}

func TestDeterministic(t *testing.T) {
	set := traffic.RandomRules(3, 50)
	cfg := traffic.Config{Seed: 9, Rules: set, RuleFraction: 0.5, Odd: true, Flows: 0, Sizes: traffic.Sizes{Min: 64, Max: 1518}}
	a, b := traffic.NewGenerator(cfg).Frames(300), traffic.NewGenerator(cfg).Frames(300)
	for i := range a {
		if !bytes.Equal(a[i], b[i]) {
			t.Fatalf("frame %d differs between runs with one seed", i)
		}
	}
	cfg.Seed = 10
	c := traffic.NewGenerator(cfg).Frames(300)
	same := 0
	for i := range a {
		if bytes.Equal(a[i], c[i]) {
			same++
		}
	}
	if same > 10 {
		t.Fatalf("%d of 300 frames equal across seeds", same)
	}
	if !slices.EqualFunc(traffic.RandomRules(3, 50).Rules, set.Rules, func(x, y rule.Rule) bool { return x.Match.String() == y.Match.String() }) {
		t.Fatal("RandomRules not deterministic")
	}
}

// TestOddCoverage checks that odd traffic holds every edge the engines must
// agree on, as the parser sees it.
func TestOddCoverage(t *testing.T) {
	frames := traffic.NewGenerator(traffic.Config{Seed: 4, Odd: true}).Frames(20000)
	status := map[packet.Status]int{}
	var tags1, tags2, first4, mid4, last4, first6, mid6, last6, longChain, extL4, opts, icmp6, sctp int
	var f rule.Fields
	for _, b := range frames {
		st := packet.Parse(b, &f)
		status[st]++
		et := uint16(b[12])<<8 | uint16(b[13])
		if et == 0x8100 || et == 0x88a8 {
			et2 := uint16(b[16])<<8 | uint16(b[17])
			if et2 == 0x8100 || et2 == 0x88a8 {
				tags2++
			} else {
				tags1++
			}
		}
		if st != packet.OK {
			continue
		}
		base := f.Frag &^ rule.DontFragment
		switch {
		case f.Family == rule.IPv4 && base == rule.FirstFragment:
			first4++
		case f.Family == rule.IPv4 && base == rule.IsFragment:
			mid4++
		case f.Family == rule.IPv4 && base == rule.IsFragment|rule.LastFragment:
			last4++
		case f.Family == rule.IPv6 && base == rule.FirstFragment:
			first6++
		case f.Family == rule.IPv6 && base == rule.IsFragment:
			mid6++
		case f.Family == rule.IPv6 && base == rule.IsFragment|rule.LastFragment:
			last6++
		}
		if f.Family == rule.IPv6 {
			switch f.Proto {
			case 0, 43, 60:
				longChain++ // the walk stopped on an extension header
			}
			if f.L4 && len(b) > 14+40 && (b[14+6] == 0 || b[14+6] == 43 || b[14+6] == 60) {
				extL4++
			}
			if f.Proto == rule.ProtoICMPv6 && f.L4 {
				icmp6++
			}
		}
		if f.Family == rule.IPv4 && b[14]&0x0f > 5 {
			opts++
		}
		if f.Proto == rule.ProtoSCTP && f.L4 {
			sctp++
		}
	}
	for name, n := range map[string]int{
		"not-ip": status[packet.NotIP], "too-many-tags": status[packet.TooManyTags], "truncated": status[packet.Truncated],
		"malformed": status[packet.Malformed], "one tag": tags1, "two tags": tags2,
		"v4 first fragment": first4, "v4 middle fragment": mid4, "v4 last fragment": last4,
		"v6 first fragment": first6, "v6 middle fragment": mid6, "v6 last fragment": last6,
		"v6 chain too long": longChain, "v6 L4 behind extension headers": extL4, "v4 options": opts,
		"icmpv6": icmp6, "sctp": sctp,
	} {
		if n < 10 {
			t.Errorf("%s: only %d of %d frames", name, n, len(frames))
		}
	}
}

func TestSizes(t *testing.T) {
	count := map[int]int{}
	for _, b := range traffic.NewGenerator(traffic.Config{Seed: 5, Sizes: traffic.Sizes{IMIX: true}}).Frames(12000) {
		n := len(b)
		if n <= 14+40+8+20 { // IPv6, fragment header, TCP
			n = 60 // a 64-byte frame, or just the headers when they are longer
		}
		count[n]++
	}
	if len(count) != 3 || count[60] < 6000 || count[590] < 3500 || count[1514] < 700 {
		t.Errorf("IMIX frame lengths %v", count)
	}
	for _, b := range traffic.NewGenerator(traffic.Config{Seed: 5, Sizes: traffic.Fixed(128)}).Frames(100) {
		if len(b) != 124 {
			t.Fatalf("Fixed(128) gave a %d-byte frame", len(b))
		}
	}
}

func TestFlows(t *testing.T) {
	seen := map[rule.Fields]bool{}
	var f rule.Fields
	for _, b := range traffic.NewGenerator(traffic.Config{Seed: 6, Flows: 10}).Frames(1000) {
		packet.Parse(b, &f)
		f.Length = 0 // packets of a flow vary in size
		seen[f] = true
	}
	if len(seen) > 10 || len(seen) < 5 {
		t.Errorf("%d distinct packets from 10 flows", len(seen))
	}
}

func TestEdgesOfARule(t *testing.T) {
	set := &rule.Set{Rules: []rule.Rule{{ID: "e", Match: rule.Match{Dst: netip.MustParsePrefix("203.0.113.0/24"),
		Proto: []uint8{rule.ProtoUDP}, DstPort: rule.Ranges{{Lo: 1000, Hi: 2000}}}}}}
	want := map[string]bool{"203.0.113.0": false, "203.0.113.255": false, "203.0.112.255": false, "203.0.114.0": false}
	ports := map[uint16]bool{999: false, 1000: false, 2000: false, 2001: false}
	var f rule.Fields
	for _, b := range traffic.NewGenerator(traffic.Config{Seed: 7, Rules: set, RuleFraction: 1}).Frames(2000) {
		packet.Parse(b, &f)
		if s := f.Dst.Netip(rule.IPv4).String(); f.Family == rule.IPv4 {
			if _, ok := want[s]; ok {
				want[s] = true
			}
		}
		if _, ok := ports[f.DstPort]; ok {
			ports[f.DstPort] = true
		}
	}
	for k, v := range want {
		if !v {
			t.Errorf("no packet to %s", k)
		}
	}
	for k, v := range ports {
		if !v {
			t.Errorf("no packet to port %d", k)
		}
	}
}

func TestRuleSets(t *testing.T) {
	check := func(name string, set *rule.Set, n int) {
		if len(set.Rules) != n {
			t.Fatalf("%s: %d rules, want %d", name, len(set.Rules), n)
		}
		for _, r := range set.Rules {
			js, _ := json.Marshal(r.Spec())
			if _, err := rule.ParseRule(name, js, traffic.Epoch); err != nil {
				t.Fatalf("%s: rule %s does not parse back: %v", name, r.ID, err)
			}
		}
	}
	check("classbench", traffic.ClassBenchRules(1, 2000), 2000)
	check("valid", traffic.RandomValidRules(2, 300), 300)
	check("source", traffic.SourceWorkload(), 5)
}

// Inputs the fuzzer found (FuzzReader's corpus holds them too): a packet
// claiming more captured bytes than its block (pcapgo allocated it first),
// an interface whose timestamp resolution is 2^-64 (pcapgo divided by zero),
// and a classic pcap record claiming 1 GiB. Each is an error.
func TestReaderMalformed(t *testing.T) {
	frames := traffic.NewGenerator(traffic.Config{Seed: 4}).Frames(2)
	var ng bytes.Buffer
	if err := traffic.WritePcapNG(&ng, frames); err != nil {
		t.Fatal(err)
	}
	le := func(b []byte) int { return int(b[0]) | int(b[1])<<8 | int(b[2])<<16 | int(b[3])<<24 }
	shb := ng.Bytes()[:le(ng.Bytes()[4:8])]
	idbAt := len(shb)
	idb := ng.Bytes()[idbAt : idbAt+le(ng.Bytes()[idbAt+4:])]
	epbAt := idbAt + len(idb)

	huge := bytes.Clone(ng.Bytes())
	copy(huge[epbAt+20:], []byte{0xff, 0xff, 0xff, 0xff})
	if _, err := readAll(huge); err == nil || !strings.Contains(err.Error(), "captured bytes in a block of") {
		t.Errorf("caplen 0xffffffff: %v", err)
	}

	res := bytes.Clone(ng.Bytes())
	found := false
	for o := idbAt + 16; o+4 < epbAt; { // options after type, length, link type, reserved, snaplen
		code, n := int(res[o])|int(res[o+1])<<8, int(res[o+2])|int(res[o+3])<<8
		if code == 9 { // if_tsresol
			res[o+4] = 0x80 | 64
			found = true
			break
		}
		if code == 0 {
			break
		}
		o += 4 + (n+3)/4*4
	}
	if !found {
		t.Fatal("the writer's interface block has no if_tsresol option to corrupt")
	}
	if _, err := readAll(res); err == nil || !strings.Contains(err.Error(), "malformed") {
		t.Errorf("if_tsresol 2^-64: %v", err)
	}

	var pc bytes.Buffer
	w := pcapgo.NewWriter(&pc)
	w.WriteFileHeader(0xffffffff, layers.LinkTypeEthernet)
	rec := pc.Len()
	w.WritePacket(gopacketCI(len(frames[0])), frames[0])
	big := bytes.Clone(pc.Bytes())
	copy(big[rec+8:], []byte{0, 0, 0, 0x40}) // captured length 1 GiB
	copy(big[rec+12:], []byte{0, 0, 0, 0x40})
	if _, err := readAll(big); err == nil || !strings.Contains(err.Error(), "exceeds snap length") {
		t.Errorf("classic pcap record of 1 GiB: %v", err)
	}
}

func gopacketCI(n int) gopacket.CaptureInfo {
	return gopacket.CaptureInfo{Timestamp: traffic.Epoch, CaptureLength: n, Length: n}
}
