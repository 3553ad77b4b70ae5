package hwpath

import (
	"context"
	"errors"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/scrubd/scrubd/agent/config"
	"github.com/scrubd/scrubd/internal/testenv"
)

// offload.devices are looked up by name in the agent's network namespace
// (internal/netdev): a device that is there opens, one that is not is an
// error naming the config key, the device and ENODEV.
func TestNewFlowerLooksUpDevices(t *testing.T) {
	if _, err := exec.LookPath("ip"); err != nil {
		testenv.Missing(t, "iproute2 (ip) not installed: %v", err)
	}
	ns := testenv.NewNetNS(t)
	if out, err := exec.Command("ip", "-n", ns.Name, "link", "add", "up0", "type", "veth", "peer", "name", "up1").CombinedOutput(); err != nil {
		t.Fatalf("ip link add: %v\n%s", err, out)
	}
	open := func(devs ...string) error {
		cfg := &config.Config{}
		cfg.Offload.Devices = devs
		return ns.Do(func() error {
			f, err := NewFlower(cfg)
			if err == nil {
				f.Close()
			}
			return err
		})
	}
	if err := open("up0", "up1"); err != nil {
		t.Fatalf("devices that exist: %v", err)
	}
	err := open("up0", "nodev9")
	if !errors.Is(err, unix.ENODEV) || !strings.Contains(err.Error(), `offload.devices[1] "nodev9"`) {
		t.Fatalf("a device that is not there: %v; want ENODEV naming offload.devices[1]", err)
	}
}

// The tc flower path reports its devices' drop counters as ethtool -S
// names them: on a veth pair (drivers/net/veth.c, veth_rq_stats_desc) the
// one drop counter is rx_queue_0_drops, summed over both devices, and
// every other statistic (peer_ifindex, the XDP packet counts) is left out.
func TestNewFlowerReadsDropCounters(t *testing.T) {
	if _, err := exec.LookPath("ethtool"); err != nil {
		testenv.Missing(t, "ethtool not installed: %v", err)
	}
	ns := testenv.NewNetNS(t)
	if out, err := exec.Command("ip", "-n", ns.Name, "link", "add", "dc0", "type", "veth", "peer", "name", "dc1").CombinedOutput(); err != nil {
		t.Fatalf("ip link add: %v\n%s", err, out)
	}
	// What ethtool itself reads for the veth drop counter, both devices.
	var want uint64
	for _, dev := range []string{"dc0", "dc1"} {
		out, err := exec.Command("ip", "netns", "exec", ns.Name, "ethtool", "-S", dev).CombinedOutput()
		if err != nil {
			t.Fatalf("ethtool -S %s: %v\n%s", dev, err, out)
		}
		found := false
		for _, l := range strings.Split(string(out), "\n") {
			k, v, ok := strings.Cut(strings.TrimSpace(l), ": ")
			if ok && k == "rx_queue_0_drops" {
				n, err := strconv.ParseUint(v, 10, 64)
				if err != nil {
					t.Fatal(err)
				}
				want += n
				found = true
			}
		}
		if !found {
			t.Fatalf("ethtool -S %s has no rx_queue_0_drops:\n%s", dev, out)
		}
	}
	cfg := &config.Config{}
	cfg.Offload.Devices = []string{"dc0", "dc1"}
	var got map[string]uint64
	err := ns.Do(func() error {
		f, err := NewFlower(cfg)
		if err != nil {
			return err
		}
		defer f.Close()
		got, err = f.HW.NICCounters(context.Background())
		return err
	})
	if errors.Is(err, unix.ENOSYS) {
		// qemu-user (the arm64 test pass) does not translate SIOCETHTOOL.
		testenv.MissingUnderEmulation(t, "ethtool ioctl not implemented here (qemu-user?): %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got["rx_queue_0_drops"] != want {
		t.Fatalf("drop counters %v, want only rx_queue_0_drops = %d", got, want)
	}
}
