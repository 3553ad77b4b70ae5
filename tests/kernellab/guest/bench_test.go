package guest

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/scrubd/scrubd/offload/tcflower"
)

const benchRules = 1000

func benchFilters(ifindex int) []tcflower.Filter {
	out := make([]tcflower.Filter, benchRules)
	for i := range out {
		a := netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)})
		out[i] = tcflower.Filter{Ifindex: ifindex, Prio: 1, Protocol: tcflower.ProtoIPv4, Handle: uint32(i + 1), Flags: tcflower.SkipHW,
			Key: tcflower.Key{EthType: tcflower.ProtoIPv4, IPProto: tcflower.IPProtoUDP,
				Dst: tcflower.Prefix(netip.PrefixFrom(a, 32)), DstPort: tcflower.PortMask{Port: uint16(1000 + i%1000), Mask: 0xffff}},
			Actions: []tcflower.Action{tcflower.Drop(tcflower.MakeCookie(uint64(i)))}}
	}
	return out
}

// tcBatch writes the same rules as benchFilters as a tc -batch file.
func tcBatch(dev string, fs []tcflower.Filter) []byte {
	var b bytes.Buffer
	for _, f := range fs {
		fmt.Fprintf(&b, "filter add dev %s ingress protocol ip pref %d handle 0x%x flower skip_hw dst_ip %s ip_proto udp dst_port %d action drop cookie %s\n",
			dev, f.Prio, f.Handle, f.Key.Dst.Addr, f.Key.DstPort.Port, hex.EncodeToString(f.Actions[0].Cookie))
	}
	return b.Bytes()
}

// BenchmarkInsert installs the same benchRules skip_hw flower filters
// (distinct /32 + UDP port, gact drop with a cookie) three ways on the
// lab kernel: our netlink batches (many requests per sendmsg), our client
// one request per sendmsg, and iproute2's tc -batch. The metric is rules/s;
// every run is checked by dumping the table back.
func BenchmarkInsert(b *testing.B) {
	requireGuest(b)
	c := dial(b)
	ia, _ := vethPair(b, "bn0", "bn1")
	if _, err := c.EnsureQdisc(ia); err != nil {
		b.Fatal(err)
	}
	fs := benchFilters(ia)
	clear := func() {
		if err := c.Delete(tcflower.Filter{Ifindex: ia, Prio: 1, Protocol: tcflower.ProtoIPv4}); err != nil {
			b.Fatalf("clearing prio 1: %v", err)
		}
	}
	check := func() {
		got, err := c.Dump(tcflower.DumpQuery{Ifindex: ia, Terse: true})
		if err != nil {
			b.Fatal(err)
		}
		if len(got) != benchRules {
			b.Fatalf("after insert %d filters, want %d", len(got), benchRules)
		}
	}
	netlinkRun := func(window int) func(b *testing.B) {
		return func(b *testing.B) {
			ops := make([]tcflower.Op, len(fs))
			for i, f := range fs {
				ops[i] = tcflower.Op{Kind: tcflower.OpAdd, Filter: f}
			}
			var spent time.Duration
			for range b.N {
				b.StopTimer()
				t0 := time.Now()
				b.StartTimer()
				res := c.Batch(ops, tcflower.BatchOptions{Window: window})
				b.StopTimer()
				spent += time.Since(t0)
				for _, r := range res {
					if r.Err != nil {
						b.Fatal(r.Err)
					}
				}
				check()
				clear()
				b.StartTimer()
			}
			b.ReportMetric(float64(benchRules*b.N)/spent.Seconds(), "rules/s")
		}
	}
	b.Run("netlink-window256", netlinkRun(256))
	b.Run("netlink-window1", netlinkRun(1))
	b.Run("tc-batch", func(b *testing.B) {
		file := filepath.Join(b.TempDir(), "rules.batch")
		if err := os.WriteFile(file, tcBatch("bn0", fs), 0o644); err != nil {
			b.Fatal(err)
		}
		var spent time.Duration
		for range b.N {
			b.StopTimer()
			t0 := time.Now()
			b.StartTimer()
			out, err := exec.Command("/usr/sbin/tc", "-batch", file).CombinedOutput()
			b.StopTimer()
			spent += time.Since(t0)
			if err != nil {
				b.Fatalf("tc -batch: %v\n%s", err, out)
			}
			check()
			clear()
			b.StartTimer()
		}
		b.ReportMetric(float64(benchRules*b.N)/spent.Seconds(), "rules/s")
	})
}
