package agent_test

import (
	"net/netip"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/scrubd/scrubd/agent/config"
	"github.com/scrubd/scrubd/agent/dataplane"
	"github.com/scrubd/scrubd/agent/sim"
	"github.com/scrubd/scrubd/agent/version"
	"github.com/scrubd/scrubd/swpath/packet"
	"github.com/scrubd/scrubd/swpath/rule"
)

var lostRe = regexp.MustCompile(`(?m)^scrubd_protected_lost_packets_total\{cause="(\w+)"\} (\S+)$`)

// TestProtectedLossExported: an agent on the simulated NIC with no rule for
// the built-in floods overloads its software path, and the management
// flows (protected) lose packets for want of buffers. /metrics exports
// that loss by cause, and its sum is what was sent to the management
// address less what the peer port transmitted to it (frames parsed at the
// sink), times the scale. The NIC drop metric carries drop counters only,
// and scrubd_info the release.
func TestProtectedLossExported(t *testing.T) {
	cfg := testConfig(t, "rules: []\n", func(*config.Config) {})
	mgmt := netip.MustParseAddr("192.0.2.1")
	var sunk atomic.Uint64
	n, err := sim.New(sim.Options{HWEntries: 10, Sink: func(fr []byte) {
		var f rule.Fields
		if packet.Parse(fr, &f) == packet.OK && f.Dst.Netip(f.Family) == mgmt {
			sunk.Add(1)
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.Close() })
	a := start(t, &cfg, n)
	t.Cleanup(func() { a.stop(t) })
	const steps = 30
	for range steps {
		n.Step(100 * time.Millisecond)
	}
	// The two management flows send 0.02 Mpps each: 2 real frames per
	// 100 ms step at the default scale of 1000.
	sent := uint64(steps * 2 * 2)
	want := float64(sent-sunk.Load()) * n.Scale()
	if want == 0 {
		t.Fatal("no protected packet lost: the traffic does not overload the software path")
	}
	body, err := (&httpGetter{}).get("http://" + a.d.HTTPAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, m := range lostRe.FindAllStringSubmatch(body, -1) {
		v, err := strconv.ParseFloat(m[2], 64)
		if err != nil {
			t.Fatal(err)
		}
		got[m[1]] = v
	}
	var sum float64
	for _, c := range dataplane.LostCauses {
		if _, ok := got[c]; !ok {
			t.Errorf("no scrubd_protected_lost_packets_total{cause=%q} series", c)
		}
		sum += got[c]
	}
	if sum != want || got[dataplane.LostOutOfBuffer] == 0 {
		t.Errorf("protected lost %v (sum %.0f), want (sent %d - out of the peer port %d) x %.0f = %.0f, out_of_buffer among them",
			got, sum, sent, sunk.Load(), n.Scale(), want)
	}
	if strings.Contains(body, `stat="rx_packets_phy"`) {
		t.Error("rx_packets_phy (every packet received) exported as a NIC drop counter")
	}
	if !strings.Contains(body, `scrubd_nic_dropped_packets_total{stat="rx_out_of_buffer"}`) {
		t.Error("rx_out_of_buffer not exported")
	}
	if w := `scrubd_info{node="` + cfg.Node + `",version="` + version.Get().Version + `"} 1`; !strings.Contains(body, w) {
		t.Errorf("no %s in the scrape", w)
	}
}
