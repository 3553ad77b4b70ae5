package config

import (
	"strings"
	"testing"
	"time"
)

// The session keys of a fleet: connect_retry, local_address, graceful
// restart and max_routes, each refused with its field and value when out of
// range.
func TestFlowSpecSessionKeys(t *testing.T) {
	base := "software: {engine: none}\nflowspec: {enabled: true, asn: 65010, router_id: 192.0.2.10, allowed_destinations: [203.0.113.0/24], "
	c, err := Parse("x", []byte(base+"neighbors: [{address: 192.0.2.1, asn: 65010, local_address: 192.0.2.11}]}\n"), false)
	if err != nil {
		t.Fatal(err)
	}
	fs := c.FlowSpec
	// Defaults: 5 s connect-retry, graceful restart on with 120 s, no LLGR.
	if fs.ConnectRetry != 5*time.Second || !fs.GracefulRestart.GR() || fs.GracefulRestart.RestartTime != 120*time.Second ||
		fs.GracefulRestart.LongLivedStaleTime != 0 || fs.Neighbors[0].LocalAddress != "192.0.2.11" || fs.MaxRoutes != 200000 {
		t.Fatalf("defaults: %+v", fs)
	}
	c, err = Parse("x", []byte(base+"connect_retry: 2s, max_routes: 5000, graceful_restart: {enabled: false, restart_time: 0s}, neighbors: [{address: 192.0.2.1, asn: 65010}]}\n"), false)
	if err != nil {
		t.Fatal(err)
	}
	if c.FlowSpec.GracefulRestart.GR() || c.FlowSpec.ConnectRetry != 2*time.Second || c.FlowSpec.MaxRoutes != 5000 {
		t.Fatalf("set: %+v", c.FlowSpec)
	}
	for _, tc := range []struct{ yaml, want string }{
		{"connect_retry: 500ms, neighbors: [{address: 192.0.2.1, asn: 1}]}", `flowspec.connect_retry "500ms": must be 1s-1h`},
		{"max_routes: 0, neighbors: [{address: 192.0.2.1, asn: 1}]}", `flowspec.max_routes "0": must be 1-10000000`},
		{"max_routes: 20000000, neighbors: [{address: 192.0.2.1, asn: 1}]}", `flowspec.max_routes "20000000": must be 1-10000000`},
		{"neighbors: [{address: 192.0.2.1, asn: 1, local_address: nope}]}", `flowspec.neighbors[0].local_address "nope": not an IP address`},
		{"neighbors: [{address: 192.0.2.1, asn: 1, local_address: '2001:db8::1'}]}", `flowspec.neighbors[0].local_address "2001:db8::1": not of the neighbor address's family`},
		{"graceful_restart: {restart_time: 4096s}, neighbors: [{address: 192.0.2.1, asn: 1}]}", `flowspec.graceful_restart.restart_time "1h8m16s": must be 1s-4095s`},
		{"graceful_restart: {long_lived_stale_time: -1s}, neighbors: [{address: 192.0.2.1, asn: 1}]}", `flowspec.graceful_restart.long_lived_stale_time "-1s"`},
	} {
		_, err := Parse("x", []byte(base+tc.yaml+"\n"), false)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.yaml, err, tc.want)
		}
	}
}
