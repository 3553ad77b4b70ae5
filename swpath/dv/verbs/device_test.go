//go:build mlx5 && cgo

package verbs

import (
	"errors"
	"syscall"
	"testing"

	"github.com/Mellanox/rdmamap"

	"github.com/scrubd/scrubd/swpath/dv/prm"
)

func TestOpenUnknownDevice(t *testing.T) {
	_, err := Open("scrubd-no-such-rdma-dev")
	var ve *Error
	if !errors.As(err, &ve) || ve.Dev != "scrubd-no-such-rdma-dev" || !(errors.Is(err, syscall.ENODEV) || errors.Is(err, syscall.ENOSYS)) {
		t.Fatalf("got %v; want a verbs.Error naming the device, ENODEV (no such device) or ENOSYS (no RDMA subsystem)", err)
	}
}

// TestRealDevice creates the whole setup on the first mlx5 device, when
// the machine has one (CI with a ConnectX or BlueField). Hosts without an
// RDMA device skip it: the hardware is really missing there.
func TestRealDevice(t *testing.T) {
	var name string
	for _, d := range rdmamap.GetRdmaDeviceList() {
		if len(d) > 4 && d[:4] == "mlx5" {
			name = d
			break
		}
	}
	if name == "" {
		t.Skip("no mlx5 RDMA device on this machine")
	}
	d, err := Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	arena := prm.Alloc(1 << 20)
	if _, err := d.RegisterArena(arena); err != nil {
		t.Fatal(err)
	}
	tx, err := d.CreateTx(8)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Close()
	rx, err := d.CreateRx(RxConfig{Queues: 2, Log2: 8, Compress: d.CompressFormats&prm.ResFormatHash != 0, FlowTag: 0x5c})
	if err != nil {
		t.Fatal(err)
	}
	defer rx.Close()
	for i, r := range rx.Rings {
		if err := r.Validate(); err != nil {
			t.Errorf("queue %d: %v", i, err)
		}
		if r.CQLog2 < r.RQLog2 {
			t.Errorf("queue %d: CQ 2^%d smaller than RQ 2^%d", i, r.CQLog2, r.RQLog2)
		}
		if v := prm.LoadDBR(r.RQDBR, 0); v != 0 {
			t.Errorf("queue %d: RQ doorbell record %#x after RESET->RDY, want 0", i, v)
		}
	}
}
