package swengine

import (
	"context"
	"errors"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/scrubd/scrubd/agent/config"
	"github.com/scrubd/scrubd/internal/testenv"
)

// software.forward_to and software.interfaces are looked up by name
// (internal/netdev) before anything is loaded: one that is not there is an
// error naming the key, the device and ENODEV.
func TestXDPLooksUpDevices(t *testing.T) {
	ns := testenv.NewNetNS(t) // holds lo only
	for _, tc := range []struct {
		forwardTo string
		ifaces    []string
		want      string
	}{
		{forwardTo: "nodev8", want: `software.forward_to "nodev8"`},
		{ifaces: []string{"nodev7"}, want: `software.interfaces "nodev7"`},
	} {
		cfg := &config.Config{}
		cfg.Software.Engine = "xdp"
		cfg.Software.ForwardTo = tc.forwardTo
		cfg.Software.Interfaces = tc.ifaces
		err := ns.Do(func() error {
			e, err := New(context.Background(), cfg)
			if err == nil && e.Close != nil {
				e.Close()
			}
			return err
		})
		if errors.Is(err, unix.EPERM) || (err != nil && strings.Contains(err.Error(), "software.engine xdp")) {
			// The interfaces are looked up after the program loads.
			testenv.MissingUnderEmulation(t, "cannot load the XDP program here: %v", err)
		}
		if !errors.Is(err, unix.ENODEV) || !strings.Contains(err.Error(), tc.want) {
			t.Fatalf("%+v: %v; want ENODEV naming %s", tc, err, tc.want)
		}
	}
}
