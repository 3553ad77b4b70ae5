package backend

import (
	"testing"

	"github.com/scrubd/scrubd/agent/config"
	"github.com/scrubd/scrubd/agent/swengine"
)

// --sim and offload.backend sim size the emulated rings from
// software.rx_ring_entries, or from the capacity model when it is 0.
func TestSimRingFromConfig(t *testing.T) {
	cfg := config.Sim(t.TempDir())
	cfg.Software.RxRingEntries = 1024
	n, err := NewSim(&cfg, 1000)
	if err != nil {
		t.Fatal(err)
	}
	rq, cq := n.Rings()
	n.Close()
	if rq != 1024 || cq != 2048 {
		t.Fatalf("configured 1024: rings %d, CQ %d", rq, cq)
	}
	cfg.Software.RxRingEntries = 0
	want, why := swengine.RxRing(&cfg, "/")
	n, err = NewSim(&cfg, 1000)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	if rq, _ := n.Rings(); rq != want {
		t.Fatalf("auto: rings %d, want the model's %d (%s)", rq, want, why)
	}
}
