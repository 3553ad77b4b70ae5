package verbs

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/Mellanox/rdmamap"
)

// NetdevError reports a netdev that has no RDMA device.
type NetdevError struct {
	Netdev string
	Err    error
}

func (e *NetdevError) Error() string {
	return fmt.Sprintf("verbs: netdev %q: no RDMA device: %v", e.Netdev, e.Err)
}

func (e *NetdevError) Unwrap() error { return e.Err }

// DeviceForNetdev returns the RDMA device (for example mlx5_0) behind a
// network interface (for example p0 or ens1f0np0), through sysfs as
// Mellanox/rdmamap reads it.
func DeviceForNetdev(netdev string) (string, error) {
	if _, err := os.Stat(filepath.Join("/sys/class/net", netdev)); err != nil {
		return "", &NetdevError{Netdev: netdev, Err: err}
	}
	dev, err := rdmamap.GetRdmaDeviceForNetdevice(netdev)
	if err != nil {
		return "", &NetdevError{Netdev: netdev, Err: err}
	}
	if dev == "" {
		return "", &NetdevError{Netdev: netdev, Err: fmt.Errorf("rdmamap found none")}
	}
	return dev, nil
}

// SysfsRoot is where RDMA devices' counters are read from.
var SysfsRoot = "/sys/class/infiniband"

// OutOfBuffer reads the port's out_of_buffer hardware counter: packets the
// NIC dropped because the receive queue had no posted WQE (the counter
// DPDK exposes as rx_out_of_buffer). It is the real-device counterpart of
// the emulator's OutOfBuffer.
func OutOfBuffer(dev string, port int) (uint64, error) {
	p := filepath.Join(SysfsRoot, dev, "ports", strconv.Itoa(port), "hw_counters", "out_of_buffer")
	b, err := os.ReadFile(p)
	if err != nil {
		return 0, fmt.Errorf("verbs: %s port %d out_of_buffer: %w", dev, port, err)
	}
	v, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("verbs: %s: value %q: %w", p, strings.TrimSpace(string(b)), err)
	}
	return v, nil
}
