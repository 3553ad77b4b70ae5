package daemon

import (
	"fmt"
	"net"
	"net/netip"
	"strconv"

	"github.com/scrubd/scrubd/agent/config"
)

// RouterIDToward returns the local IPv4 address the kernel's routing table
// picks as source toward addr: a connected UDP socket sends nothing, it
// only resolves the route. It is flowspec.router_id auto: one config
// serves a fleet, and each node gets its own ID.
func RouterIDToward(addr string) (string, error) {
	a, err := netip.ParseAddr(addr)
	if err != nil || !a.Unmap().Is4() {
		return "", fmt.Errorf("router_id auto: neighbor %q is not an IPv4 address", addr)
	}
	c, err := net.Dial("udp4", net.JoinHostPort(a.Unmap().String(), strconv.Itoa(179)))
	if err != nil {
		return "", fmt.Errorf("router_id auto: no route to neighbor %s: %w", addr, err)
	}
	defer c.Close()
	la, ok := c.LocalAddr().(*net.UDPAddr)
	if !ok || la.IP.To4() == nil || la.IP.IsUnspecified() {
		return "", fmt.Errorf("router_id auto: no IPv4 source address toward %s", addr)
	}
	return la.IP.To4().String(), nil
}

// resolveRouterID fills in flowspec.router_id auto from the first IPv4
// neighbor.
func resolveRouterID(fs *config.FlowSpec) error {
	if fs.RouterID != "auto" {
		return nil
	}
	for _, n := range fs.Neighbors {
		if a, err := netip.ParseAddr(n.Address); err == nil && a.Unmap().Is4() {
			id, err := RouterIDToward(n.Address)
			if err != nil {
				return err
			}
			fs.RouterID = id
			return nil
		}
	}
	return fmt.Errorf("flowspec.router_id auto: no IPv4 neighbor")
}
