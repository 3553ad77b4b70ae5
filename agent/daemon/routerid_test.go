package daemon

import (
	"net"
	"testing"

	"github.com/scrubd/scrubd/agent/config"
)

// auto resolves to a local IPv4 address: the source toward the neighbor.
func TestRouterIDToward(t *testing.T) {
	id, err := RouterIDToward("127.0.0.2")
	if err != nil {
		t.Fatal(err)
	}
	ip := net.ParseIP(id)
	if ip == nil || ip.To4() == nil || !ip.IsLoopback() {
		t.Fatalf("router id %q toward 127.0.0.2, want a loopback IPv4 address", id)
	}
	fs := config.FlowSpec{RouterID: "auto", Neighbors: []config.Neighbor{{Address: "2001:db8::1"}, {Address: "127.0.0.9"}}}
	if err := resolveRouterID(&fs); err != nil || net.ParseIP(fs.RouterID).To4() == nil {
		t.Fatalf("resolved %q, %v", fs.RouterID, err)
	}
	fixed := config.FlowSpec{RouterID: "192.0.2.10"}
	if err := resolveRouterID(&fixed); err != nil || fixed.RouterID != "192.0.2.10" {
		t.Fatalf("fixed id changed: %q %v", fixed.RouterID, err)
	}
	if _, err := RouterIDToward("2001:db8::1"); err == nil {
		t.Fatal("IPv6 neighbor accepted")
	}
}
