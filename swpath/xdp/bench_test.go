//go:build linux

package xdp

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/scrubd/scrubd/internal/testenv"
	"github.com/scrubd/scrubd/swpath/rule"
)

// benchRules is the rule set every receiver gets: n rules "drop UDP to
// destination port 10000+i", the rules xdp-filter can express too.
func benchRules(n int) *rule.Set {
	s := &rule.Set{}
	for i := 0; i < n; i++ {
		p := uint32(10000 + i)
		s.Rules = append(s.Rules, rule.Rule{ID: "b" + strconv.Itoa(i), Priority: rule.DefaultPriority, Action: rule.Drop,
			Match: rule.Match{Proto: []uint8{rule.ProtoUDP}, DstPort: rule.Ranges{{Lo: p, Hi: p}}}})
	}
	return s
}

// benchFrame is a 60-byte UDP frame va -> vb (10.99.0.1 -> 10.99.0.2) to the
// last rule's port, with a valid IPv4 checksum so the stack takes it too.
func benchFrame(src, dst net.HardwareAddr, dport uint16) []byte {
	b := make([]byte, 60)
	copy(b[0:], dst)
	copy(b[6:], src)
	binary.BigEndian.PutUint16(b[12:], 0x0800)
	ip := b[14:34]
	ip[0], ip[8], ip[9] = 0x45, 64, rule.ProtoUDP
	binary.BigEndian.PutUint16(ip[2:], 46)
	copy(ip[12:], []byte{10, 99, 0, 1})
	copy(ip[16:], []byte{10, 99, 0, 2})
	var sum uint32
	for i := 0; i < 20; i += 2 {
		sum += uint32(binary.BigEndian.Uint16(ip[i:]))
	}
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	binary.BigEndian.PutUint16(ip[10:], ^uint16(sum))
	udp := b[34:42]
	binary.BigEndian.PutUint16(udp[0:], 1234)
	binary.BigEndian.PutUint16(udp[2:], dport)
	binary.BigEndian.PutUint16(udp[4:], 26)
	return b
}

func run(b *testing.B, name string, args ...string) string {
	b.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		b.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// receiver is one filter under test on vb.
type receiver struct {
	name  string
	rules int
	setup func(b *testing.B) (count func() uint64, teardown func())
}

// newBenchLab sets up the veth pair of the drop benchmarks: addresses on
// both ends, NAPI (GRO) on the receiving end (without an XDP program it
// needs NAPI to take XDP frames), and the in-kernel live-frames sender. It
// returns the lab, the receiving interface's name, the sending end's MAC
// address and the sender.
func newBenchLab(b testing.TB) (*lab, string, net.HardwareAddr, *liveGen) {
	l := newLab(b)
	id := strconv.Itoa(os.Getpid() % 100000)
	vb := "sxvb" + id
	sh(b, "ip", "-n", l.nsA, "addr", "add", "10.99.0.1/24", "dev", "sxva"+id)
	sh(b, "ip", "-n", l.nsB, "addr", "add", "10.99.0.2/24", "dev", vb)
	sh(b, "ip", "netns", "exec", l.nsB, "ethtool", "-K", vb, "gro", "on")
	var vaMAC net.HardwareAddr
	l.in(b, l.fdA, func() {
		ifc, err := net.InterfaceByIndex(l.va)
		if err != nil {
			b.Fatal(err)
		}
		vaMAC = ifc.HardwareAddr
	})
	return l, vb, vaMAC, newLiveGen(b)
}

// BenchmarkVethDrop runs every receiver on the same veth with the same
// sender: the in-kernel live-frames generator on one CPU (CPU 0), so the
// receive path (veth NAPI) runs on that core too and Mpps is per core.
// Each iteration sends for one second (-benchtime=Nx: N seconds per
// receiver). Metric "Mpps" is what the receiver counted (dropped, or for "none" what
// reached UDP), per second of sending; x-nft and x-xdpfilter are ratios to
// the same rule count measured earlier in the same run.
func BenchmarkVethDrop(b *testing.B) {
	l, vb, vaMAC, gen := newBenchLab(b)
	results := map[string]float64{}
	resultsCPU := map[string]float64{}
	sizes := []int{5, 1000, 10000}
	label := func(n int) string {
		if n >= 1000 {
			return strconv.Itoa(n/1000) + "k"
		}
		return strconv.Itoa(n)
	}

	var recv []receiver
	recv = append(recv, receiver{name: "none", setup: func(b *testing.B) (func() uint64, func()) {
		return func() uint64 { return snmpUDP(b, l.nsB) }, func() {}
	}})
	for _, n := range sizes {
		recv = append(recv, receiver{name: "nft", rules: n, setup: func(b *testing.B) (func() uint64, func()) {
			return nftSetup(b, l.nsB, vb, n)
		}})
	}
	xf, xfErr := exec.LookPath("xdp-filter")
	for _, n := range sizes {
		recv = append(recv, receiver{name: "nft-set", rules: n, setup: func(b *testing.B) (func() uint64, func()) {
			return nftSetSetup(b, l.nsB, vb, n)
		}})
	}
	// Each xdp/N runs right after xdp-filter/N, so that their ratio is taken
	// back to back on this shared machine. xdp-filter takes one port per
	// command (about 2-3 ms each); its lookup is a 65536-entry port array
	// whatever the count, so 10k is left out.
	for _, n := range sizes {
		if n <= 1000 {
			recv = append(recv, receiver{name: "xdp-filter", rules: n, setup: func(b *testing.B) (func() uint64, func()) {
				if xfErr != nil {
					testenv.Missing(b, "xdp-filter not installed (Debian package xdp-tools): %v", xfErr)
				}
				return xdpFilterSetup(b, xf, l.nsB, vb, n)
			}})
		}
		recv = append(recv, receiver{name: "xdp", rules: n, setup: func(b *testing.B) (func() uint64, func()) {
			e, err := New(Options{})
			if err != nil {
				b.Fatal(err)
			}
			if err := e.Replace(benchRules(n)); err != nil {
				b.Fatal(err)
			}
			l.in(b, l.fdB, func() { _, err = e.Attach(l.vb, false) })
			if err != nil {
				b.Fatal(err)
			}
			return func() uint64 {
					v, err := e.Verdicts()
					if err != nil {
						b.Fatal(err)
					}
					return v[Dropped].Packets
				}, func() {
					e.Detach()
					e.Close()
				}
		}})
	}

	for _, rc := range recv {
		name := rc.name
		if rc.rules > 0 {
			name += "/" + label(rc.rules)
		}
		var count func() uint64
		teardown := func() {}
		b.Run(name, func(b *testing.B) {
			n := max(rc.rules, 1)
			frame := benchFrame(vaMAC, l.vbMAC, uint16(10000+n-1))
			if count == nil { // once, not for every b.N round
				count, teardown = rc.setup(b)
			}
			mpps, cpu, _ := sendMeasure(b, l, gen, frame, count)
			results[name], resultsCPU[name] = mpps, cpu
			b.ReportMetric(mpps, "Mpps")
			b.ReportMetric(cpu, "Mpps/cpu-s")
			b.ReportMetric(0, "ns/op")
			if rc.name == "xdp" {
				if v := results["nft/"+label(rc.rules)]; v > 0 {
					b.ReportMetric(mpps/v, "x-nft")
				}
				if v := results["nft-set/"+label(rc.rules)]; v > 0 {
					b.ReportMetric(mpps/v, "x-nftset")
				}
				if v := results["xdp-filter/"+label(rc.rules)]; v > 0 {
					b.ReportMetric(mpps/v, "x-xdpfilter")
				}
				if v := resultsCPU["xdp-filter/"+label(rc.rules)]; v > 0 {
					b.ReportMetric(cpu/v, "x-xdpfilter-cpu")
				}
			}
		})
		teardown()
	}
}

// sendMeasure sends from CPU 0 for b.N seconds and returns what the
// receiver counted per microsecond of sending, and per microsecond of the
// sending thread's CPU time: the receive path runs in softirq on the same
// CPU, mostly in the sender's context (this kernel has no
// IRQ_TIME_ACCOUNTING, so that time counts to the thread), which makes the
// second figure less sensitive to other tenants taking the CPU. The third
// figure is what the receiver counted per frame sent (its drop fraction
// when it counts drops). A call returns only when the
// receive path (on the same core) has taken its frames, so the batch per
// call starts small and doubles while calls are short (up to 1<<18, where
// per-call overhead no longer shows).
func sendMeasure(b *testing.B, l *lab, gen *liveGen, frame []byte, count func() uint64) (float64, float64, float64) {
	repeat := uint32(1 << 12)
	settle := func() uint64 {
		prev := count()
		for {
			time.Sleep(20 * time.Millisecond)
			c := count()
			if c == prev {
				return c
			}
			prev = c
		}
	}
	// Warm up (and check the receiver counts at all).
	var err error
	l.in(b, l.fdA, func() {
		var set unix.CPUSet
		set.Set(0)
		if err = unix.SchedSetaffinity(0, &set); err != nil {
			return
		}
		err = gen.send(l.va, frame, repeat)
	})
	if err != nil {
		b.Fatal(err)
	}
	c0, s0 := settle(), gen.sent.Load()
	var elapsed, cpu time.Duration
	threadCPU := func() time.Duration {
		var ru unix.Rusage
		if err := unix.Getrusage(unix.RUSAGE_THREAD, &ru); err != nil {
			b.Fatal(err)
		}
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	b.ResetTimer()
	l.in(b, l.fdA, func() {
		var set unix.CPUSet
		set.Set(0)
		if err = unix.SchedSetaffinity(0, &set); err != nil {
			return
		}
		start, cpu0 := time.Now(), threadCPU()
		end := start.Add(time.Duration(b.N) * time.Second)
		for err == nil && time.Now().Before(end) {
			t0 := time.Now()
			err = gen.send(l.va, frame, repeat)
			if time.Since(t0) < 50*time.Millisecond && repeat < 1<<18 {
				repeat *= 2
			}
		}
		elapsed, cpu = time.Since(start), threadCPU()-cpu0
		var all unix.CPUSet
		for c := 0; c < 1024; c++ {
			all.Set(c)
		}
		unix.SchedSetaffinity(0, &all)
	})
	b.StopTimer()
	if err != nil {
		b.Fatal(err)
	}
	c1, s1 := settle(), gen.sent.Load()
	if c1 == c0 {
		b.Fatal("the receiver counted nothing")
	}
	return float64(c1-c0) / elapsed.Seconds() / 1e6, float64(c1-c0) / cpu.Seconds() / 1e6, float64(c1-c0) / float64(s1-s0)
}

// snmpUDP returns UDP NoPorts + InDatagrams of the namespace.
func snmpUDP(b *testing.B, ns string) uint64 {
	out := run(b, "ip", "netns", "exec", ns, "cat", "/proc/net/snmp")
	var hdr []string
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 || f[0] != "Udp:" {
			continue
		}
		if hdr == nil {
			hdr = f
			continue
		}
		var s uint64
		for i, h := range hdr {
			if h == "NoPorts" || h == "InDatagrams" {
				v, _ := strconv.ParseUint(f[i], 10, 64)
				s += v
			}
		}
		return s
	}
	b.Fatal("no Udp line in /proc/net/snmp")
	return 0
}

func nftSetup(b *testing.B, ns, dev string, n int) (func() uint64, func()) {
	var buf bytes.Buffer
	fmt.Fprintf(&buf, "table netdev scrubbench {\n counter c { }\n chain ingress {\n  type filter hook ingress device %q priority -500; policy accept;\n", dev)
	for i := 0; i < n; i++ {
		fmt.Fprintf(&buf, "  udp dport %d counter name \"c\" drop\n", 10000+i)
	}
	buf.WriteString(" }\n}\n")
	return nftLoad(b, ns, buf.Bytes())
}

func nftLoad(b *testing.B, ns string, rules []byte) (func() uint64, func()) {
	f, err := os.CreateTemp("", "scrubbench-*.nft")
	if err != nil {
		b.Fatal(err)
	}
	defer os.Remove(f.Name())
	f.Write(rules)
	f.Close()
	run(b, "ip", "netns", "exec", ns, "nft", "-f", f.Name())
	return func() uint64 {
			out := run(b, "ip", "netns", "exec", ns, "nft", "list", "counter", "netdev", "scrubbench", "c")
			i := strings.Index(out, "packets ")
			if i < 0 {
				b.Fatalf("no packets in %q", out)
			}
			v, _ := strconv.ParseUint(strings.Fields(out[i+8:])[0], 10, 64)
			return v
		}, func() {
			exec.Command("ip", "netns", "exec", ns, "nft", "delete", "table", "netdev", "scrubbench").Run()
		}
}

// nftSetSetup is the same rules written the way nft is best at: one rule
// with a set of ports.
func nftSetSetup(b *testing.B, ns, dev string, n int) (func() uint64, func()) {
	var buf bytes.Buffer
	fmt.Fprintf(&buf, "table netdev scrubbench {\n counter c { }\n chain ingress {\n  type filter hook ingress device %q priority -500; policy accept;\n  udp dport { ", dev)
	for i := 0; i < n; i++ {
		if i > 0 {
			buf.WriteString(", ")
		}
		fmt.Fprintf(&buf, "%d", 10000+i)
	}
	buf.WriteString(" } counter name \"c\" drop\n }\n}\n")
	return nftLoad(b, ns, buf.Bytes())
}

func xdpFilterSetup(b *testing.B, xf, ns, dev string, n int) (func() uint64, func()) {
	nsenter := func(args ...string) string {
		return run(b, "nsenter", append([]string{"--net=/run/netns/" + ns, xf}, args...)...)
	}
	os.Remove("/run/xdp-filter.lck") // a stale lock from a killed run blocks every command
	nsenter("load", "-m", "native", "-f", "udp", dev)
	for i := 0; i < n; i++ {
		nsenter("port", "-m", "dst", "-p", "udp", strconv.Itoa(10000+i))
	}
	return func() uint64 { return xdpDrops(b, ns, dev) }, func() {
		exec.Command("nsenter", "--net=/run/netns/"+ns, xf, "unload", dev).Run()
	}
}

// xdpDrops sums veth's per-queue native XDP drop counters.
func xdpDrops(b *testing.B, ns, dev string) uint64 {
	out := run(b, "ip", "netns", "exec", ns, "ethtool", "-S", dev)
	var s uint64
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) == 2 && strings.HasSuffix(f[0], "_xdp_drops:") {
			v, _ := strconv.ParseUint(f[1], 10, 64)
			s += v
		}
	}
	return s
}
