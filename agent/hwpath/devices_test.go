package hwpath

import (
	"errors"
	"os/exec"
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
