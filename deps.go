//go:build deps

package deps

import (
	_ "github.com/Mellanox/rdmamap"
	_ "github.com/cilium/ebpf"
	_ "github.com/google/go-cmp/cmp"
	_ "github.com/google/gopacket/pcapgo"
	_ "github.com/mdlayher/genetlink"
	_ "github.com/mdlayher/netlink"
	_ "github.com/osrg/gobgp/v3/pkg/server"
	_ "github.com/prometheus/client_golang/prometheus"
	_ "github.com/vishvananda/netlink"
	_ "go.yaml.in/yaml/v3"
	_ "golang.org/x/sys/unix"
)
