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

// LocalAddrToward returns this host's address on a BGP session with peer:
// flowspec.listen_address when it is of the peer's family, otherwise the
// source address the routing table picks toward the peer (a connected UDP
// socket sends nothing).
func LocalAddrToward(fs *config.FlowSpec, peer netip.Addr) (netip.Addr, error) {
	if la, err := netip.ParseAddr(fs.ListenAddress); err == nil && !la.IsUnspecified() && la.Unmap().Is4() == peer.Is4() {
		return la.Unmap(), nil
	}
	c, err := net.Dial("udp", net.JoinHostPort(peer.String(), "179"))
	if err != nil {
		return netip.Addr{}, fmt.Errorf("no route to %s: %w", peer, err)
	}
	defer c.Close()
	la, ok := c.LocalAddr().(*net.UDPAddr)
	if !ok {
		return netip.Addr{}, fmt.Errorf("no source address toward %s", peer)
	}
	a, ok := netip.AddrFromSlice(la.IP)
	if !ok || a.IsUnspecified() {
		return netip.Addr{}, fmt.Errorf("no source address toward %s", peer)
	}
	return a.Unmap(), nil
}
