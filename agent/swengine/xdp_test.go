package swengine

import (
	"testing"

	"github.com/scrubd/scrubd/swpath/xdp"
)

func TestXDPWorkerStatsCountsDrops(t *testing.T) {
	v := make([]xdp.Counter, int(xdp.Accepted)+1)
	v[xdp.NotIP] = xdp.Counter{Packets: 1, Bytes: 60}
	v[xdp.Passed] = xdp.Counter{Packets: 2, Bytes: 200}
	v[xdp.Dropped] = xdp.Counter{Packets: 5, Bytes: 500}
	v[xdp.Accepted] = xdp.Counter{Packets: 3, Bytes: 300}
	w := xdpWorkerStats(v)
	if w.RxPackets != 11 || w.RxBytes != 1060 || w.Dropped != 5 || w.Passed != 6 {
		t.Fatalf("got rx %d/%dB dropped %d passed %d, want 11/1060B, 5, 6", w.RxPackets, w.RxBytes, w.Dropped, w.Passed)
	}
}
