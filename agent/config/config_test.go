package config

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/scrubd/scrubd/swpath/rule"
)

func TestLoadFull(t *testing.T) {
	c, err := Load("testdata/full.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if c.Node != "dpu-a1" || c.FlowSpec.HoldTime != 5*time.Minute || len(c.FlowSpec.Neighbors) != 1 ||
		c.Software.Workers != 12 || !c.KeepHW() || c.Place.MinDwell != 30*time.Second || len(c.Protect) != 2 {
		t.Fatalf("%+v", c)
	}
}

func TestDefaultsValid(t *testing.T) {
	c := Defaults()
	c.Software.Interfaces = []string{"eth0"} // the default engine (xdp) needs the interface to filter
	if err := c.Validate("", false); err != nil {
		t.Fatal(err)
	}
	s := Sim(t.TempDir())
	if err := s.Validate("", false); err != nil {
		t.Fatal(err)
	}
}

func TestEmptyFileIsDefaults(t *testing.T) {
	c, err := Parse("x", []byte("software: {interfaces: [eth0]}\n"), false)
	if err != nil {
		t.Fatal(err)
	}
	if c.Metrics.MaxRuleSeries != 500 || !c.KeepHW() || c.Software.Engine != "xdp" {
		t.Fatalf("%+v", c)
	}
}

// node defaults to the host name (docs/config.md); a config that names
// one keeps it.
func TestNodeDefaultsToHostName(t *testing.T) {
	host, err := os.Hostname()
	if err != nil || host == "" {
		t.Skipf("no host name: %v", err)
	}
	c, err := Parse("x", []byte("software: {interfaces: [eth0]}\n"), false)
	if err != nil {
		t.Fatal(err)
	}
	if c.Node != host {
		t.Errorf("node %q without a node key, want the host name %q", c.Node, host)
	}
	if c, err = Parse("x", []byte("node: edge-1\nsoftware: {interfaces: [eth0]}\n"), false); err != nil || c.Node != "edge-1" {
		t.Errorf("node: edge-1 gave %q, %v", c.Node, err)
	}
}

// A bad shutdown.timeout is one error, not the same error twice.
func TestShutdownTimeoutOneError(t *testing.T) {
	_, err := Parse("x", []byte("shutdown: {timeout: 0s}\nsoftware: {interfaces: [eth0]}\n"), false)
	if err == nil {
		t.Fatal("shutdown.timeout 0s accepted")
	}
	if n := strings.Count(err.Error(), "shutdown.timeout"); n != 1 {
		t.Errorf("shutdown.timeout named %d times: %v", n, err)
	}
}

func TestRefused(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{"bogus: 1\n", "x:1: bogus: unknown key"},
		{"api:\n  sockit: /x\n", "x:2: api.sockit: unknown key"},
		{"api: {tcp: 127.0.0.1:80}\n", `api.token_file: required`},
		{"api: {tcp: localhost, token_file: t}\n", `api.tcp "localhost": must be ip:port`},
		{"api: {tcp: '127.0.0.1:0', token_file: t}\n", `api.tcp "127.0.0.1:0": must be ip:port (port 1-65535)`},
		{"flowspec: {enabled: true, asn: 1, router_id: 1.2.3.4}\n", "flowspec.neighbors: at least one"},
		{"flowspec: {enabled: true, asn: 1, router_id: '::1', neighbors: [{address: 1.2.3.4, asn: 2}]}\n", `flowspec.router_id "::1"`},
		{"flowspec: {enabled: true, asn: 1, router_id: 1.1.1.1, on_session_down: forget, neighbors: [{address: x, asn: 2}]}\n", `flowspec.neighbors[0].address "x"`},
		{"flowspec: {enabled: true, asn: 1, router_id: 1.1.1.1, on_session_down: forget, neighbors: [{address: 1.1.1.2, asn: 2}]}\n", `flowspec.on_session_down "forget"`},
		{"offload: {backend: doca}\n", `offload.backend "doca"`},
		{"offload: {backend: tcflower}\n", "offload.devices: tcflower needs"},
		{"software: {engine: dv}\n", "software.interfaces: engine dv needs"},
		{"placement: {high_water: 0.5, low_water: 0.6}\n", "placement.low_water"},
		{"protect: [{prefix: 10.0.0.1/8}]\n", "host bits set"},
		{"protect: [{prefix: 10.0.0.0/8, proto: icmp, ports: ['22']}]\n", "ports need proto"},
		{"rules: {files: [testdata/nonexistent.yaml]}\n", `rules.files[0] "testdata/nonexistent.yaml"`},
		{"protect: [{prefix: 10.0.0.0/8, direction: up}]\n", "direction"},
		{"link_gbps: -1\n", `link_gbps "-1"`},
		{"memory_limit_mb: 63\n", `memory_limit_mb "63": must be 0 (no limit) or at least 64`},
		{"memory_limit_mb: -1\n", `memory_limit_mb "-1": must be 0 (no limit) or at least 64`},
		{"gc_percent: 9\n", `gc_percent "9": must be 0 (the default) or 10-1000`},
		{"gc_percent: 1001\n", `gc_percent "1001": must be 0 (the default) or 10-1000`},
		{"gc_percent: -1\n", `gc_percent "-1": must be 0 (the default) or 10-1000`},
		{"metrics: {max_rule_series: 0}\n", "metrics.max_rule_series"},
		{"placement: {interval: banana}\n", "x:1"},
		{"- a\n- b\n", "x:1"},
		{"flowspec: {enabled: true, asn: 1, router_id: auto, neighbors: [{address: '2001:db8::1', asn: 2}]}\n", `flowspec.router_id "auto": auto takes the local IPv4 address`},
		{"offload: {backend: sim}\nsoftware: {engine: go}\n", `software.engine "go": offload.backend sim runs the dv engine`},
		{"software: {engine: dv, interfaces: [p0, p1], workers: 1}\n", `software.workers "1": the dv engine needs at least one worker per interface (2)`},
		{"software: {cycles_per_packet: fast}\n", `x:1: software.cycles_per_packet "fast": must be auto or a number`},
		{"software: {cycles_per_packet: -3}\n", `software.cycles_per_packet "-3"`},
		{"software: {cycles_per_packet: .nan}\n", `software.cycles_per_packet "NaN"`},
		{"software: {engine: go, forward_to: eth1}\n", `software.forward_to "eth1": only the dv and xdp engines forward`},
		{"software: {engine: dv, interfaces: [p0], forward_to: p0}\n", `software.forward_to "p0": is also in software.interfaces`},
		{"software: {engine: dv, interfaces: [p0], forward_to: a/b}\n", `software.forward_to "a/b": not an interface name`},
		{"software: {engine: dv, interfaces: [p0], forward_to: pf0hpf-much-too-long}\n", `longer than 15 bytes`},
		{"software: {engine: dv, interfaces: [p0], buffer_node: remote}\n", `software.buffer_node "remote": must be worker or device`},
		{"software: {engine: xdp, interfaces: [p0], xdp_pin_path: bpf/scrubd}\n", `software.xdp_pin_path "bpf/scrubd": must be a clean absolute path`},
		{"software: {engine: xdp, interfaces: [p0], xdp_pin_path: /sys/fs/bpf/scrubd.v2}\n", `software.xdp_pin_path "/sys/fs/bpf/scrubd.v2": the directory's name must not contain a dot`},
		{"software: {engine: dv, interfaces: ['p 0']}\n", `software.interfaces[0] "p 0": not an interface name`},
		{"software: {engine: go}\n", `software.engine "go": the Go classifier has no packet input in scrubd run`},
		{"metrics: {listen: '127.0.0.1:99999'}\n", `metrics.listen "127.0.0.1:99999": port "99999": must be a number 0-65535`},
		{"api: {tcp: '0.0.0.0:8443', token_file: t}\n", `api.tcp "0.0.0.0:8443": not a loopback address`},
		{"api: {tcp: '[2001:db8::1]:8443', token_file: t}\n", `api.tcp "[2001:db8::1]:8443": not a loopback address`},
		{"api: {tcp: '127.0.0.1:8443', token_file: testdata/nonexistent-token}\n", `api.token_file "testdata/nonexistent-token": stat`},
		{"api: {tls_cert_file: c.pem, tls_key_file: k.pem}\n", `api.tls_cert_file "c.pem": TLS is for the TCP listener: set api.tcp`},
		{"api: {tcp: '127.0.0.1:8443', token_file: t, tls_client_ca_file: ca.pem}\n", `api.tls_cert_file: required`},
		{"api: {idle_timeout: 0s}\n", `api.idle_timeout "0s": must be positive`},
		{"api: {max_connections: 0}\n", `api.max_connections "0": must be at least 1`},
		{"api: {max_body_bytes: 10}\n", `api.max_body_bytes "10": must be at least 1024`},
	} {
		_, err := Parse("x", []byte(tc.yaml), true)
		if err == nil {
			t.Errorf("%q: accepted", tc.yaml)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %q does not contain %q", tc.yaml, err, tc.want)
		}
		var ce *Error
		if !errors.As(err, &ce) {
			t.Errorf("%q: %T is not a *config.Error", tc.yaml, err)
		}
	}
}

func TestCyclesAndForwardTo(t *testing.T) {
	for _, tc := range []struct {
		yaml string
		want Cycles
		auto bool
	}{{"software: {engine: none}\n", 0, true}, {"software: {engine: none, cycles_per_packet: auto}\n", 0, true}, {"software: {engine: none, cycles_per_packet: 0}\n", 0, true},
		{"software: {engine: none, cycles_per_packet: 297}\n", 297, false}, {"software: {engine: none, cycles_per_packet: 141.5}\n", 141.5, false}} {
		c, err := Parse("x", []byte(tc.yaml), false)
		if err != nil {
			t.Fatalf("%q: %v", tc.yaml, err)
		}
		if c.Software.CyclesPerPacket != tc.want || c.Software.CyclesPerPacket.Auto() != tc.auto {
			t.Errorf("%q: %v (auto %v)", tc.yaml, c.Software.CyclesPerPacket, c.Software.CyclesPerPacket.Auto())
		}
	}
	if _, err := Parse("x", []byte("software: {engine: none}\nflowspec: {enabled: true, asn: 1, router_id: auto, neighbors: [{address: 192.0.2.1, asn: 2}], allowed_destinations: [203.0.113.0/24]}\n"), false); err != nil {
		t.Fatalf("router_id auto: %v", err)
	}
	c, err := Parse("x", []byte("software: {engine: dv, interfaces: [p0], forward_to: pf0hpf}\n"), false)
	if err != nil || c.Software.ForwardTo != "pf0hpf" {
		t.Fatalf("%v %+v", err, c)
	}
	out, err := yaml.Marshal(c.Software)
	if err != nil || !strings.Contains(string(out), "cycles_per_packet: auto") {
		t.Fatalf("marshal: %v\n%s", err, out)
	}
}

// Relative rule-file and token paths are relative to the config file, not
// to the working directory.
func TestLoadResolvesRelativePaths(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(dir+"/rules", 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, dir+"/rules/a.yaml", "rules:\n  - {id: a, action: drop, match: {dst: 198.51.100.0/24}}\n")
	writeFile(t, dir+"/token", "secret\n")
	if err := os.Chmod(dir+"/token", 0o600); err != nil {
		t.Fatal(err)
	}
	writeFile(t, dir+"/scrubd.yaml", "rules: {files: [rules/a.yaml, "+dir+"/rules/a.yaml]}\napi: {tcp: '127.0.0.1:9000', token_file: token}\nsoftware: {engine: none}\n")
	c, err := Load(dir + "/scrubd.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if c.Rules.Files[0] != dir+"/rules/a.yaml" || c.Rules.Files[1] != dir+"/rules/a.yaml" || c.API.TokenFile != dir+"/token" {
		t.Fatalf("files %v token %q", c.Rules.Files, c.API.TokenFile)
	}
	// Parse (text without a file) keeps them relative to the working
	// directory: the same text fails here.
	if _, err := Parse("x", []byte("rules: {files: [rules/a.yaml]}\n"), true); err == nil {
		t.Fatal("relative rule file found from the working directory")
	}
}

func TestBadRuleFileRefusesConfig(t *testing.T) {
	dir := t.TempDir()
	bad := dir + "/bad.yaml"
	writeFile(t, bad, "rules:\n  - id: x\n    action: explode\n")
	_, err := Parse("c", []byte("rules: {files: ["+bad+"]}\n"), true)
	if err == nil || !strings.Contains(err.Error(), "explode") {
		t.Fatalf("err %v", err)
	}
}

func TestProtectRules(t *testing.T) {
	rs, err := Protect{Prefix: "192.0.2.10", Direction: "both", Ports: []string{"22"}}.Rules("p")
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 2 || rs[0].Action != rule.Accept || rs[0].Priority != 0 {
		t.Fatalf("%+v", rs)
	}
	set := rule.Set{Rules: rs}
	mgmt := rule.AddrFrom(netip.MustParseAddr("192.0.2.10"))
	other := rule.AddrFrom(netip.MustParseAddr("192.0.2.11"))
	f := rule.Fields{Family: rule.IPv4, Proto: rule.ProtoTCP, L4: true, SrcPort: 40000, DstPort: 22, Src: other, Dst: mgmt}
	if set.Decide(&f) < 0 {
		t.Fatal("ssh to management not protected")
	}
	f.Src, f.Dst, f.SrcPort, f.DstPort = mgmt, other, 22, 40000
	if set.Decide(&f) < 0 {
		t.Fatal("ssh from management not protected")
	}
	f.SrcPort = 80
	if set.Decide(&f) >= 0 {
		t.Fatal("port 80 protected though only 22 listed")
	}
}

// LoadForRun checks the config file itself and leaves what the checks read
// from other files to ValidateRun, so that `scrubd run` parses each rule
// file once: a bad rule file passes LoadForRun (Load refuses it), and
// ValidateRun, named after the config file, refuses it naming the key; a
// good one comes back parsed from ValidateRun.
func TestLoadForRunLeavesFilesToValidateRun(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir+"/bad.yaml", "rules:\n  - id: x\n    action: explode\n")
	writeFile(t, dir+"/good.yaml", "rules:\n  - {id: a, action: drop, match: {dst: 198.51.100.0/24}}\n")
	writeFile(t, dir+"/scrubd.yaml", "rules: {files: [good.yaml, bad.yaml]}\nsoftware: {engine: none}\n")
	if _, err := Load(dir + "/scrubd.yaml"); err == nil || !strings.Contains(err.Error(), "explode") {
		t.Fatalf("Load: %v", err)
	}
	c, err := LoadForRun(dir + "/scrubd.yaml")
	if err != nil {
		t.Fatalf("LoadForRun read the rule files: %v", err)
	}
	if c.Rules.Files[1] != dir+"/bad.yaml" {
		t.Fatalf("files %v: not resolved against the config's directory", c.Rules.Files)
	}
	loaded, err := c.ValidateRun(context.Background(), dir+"/scrubd.yaml")
	if err == nil || !strings.Contains(err.Error(), dir+"/scrubd.yaml: rules.files[1]") || !strings.Contains(err.Error(), "explode") {
		t.Fatalf("ValidateRun: %v", err)
	}
	if s := loaded.Sets[dir+"/good.yaml"]; s == nil || len(s.Rules) != 1 || s.Rules[0].ID != "a" {
		t.Fatalf("the good file parsed: %+v", loaded.Sets)
	}
	// Once its context is done ValidateRun stops reading rule files and
	// returns the context's error, nothing loaded.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if loaded, err := c.ValidateRun(ctx, dir+"/scrubd.yaml"); !errors.Is(err, context.Canceled) || len(loaded.Sets) != 0 {
		t.Fatalf("ValidateRun with its context done: %v, %d files loaded", err, len(loaded.Sets))
	}
	// Problems of the config file itself are still LoadForRun's.
	writeFile(t, dir+"/scrubd.yaml", "rules: {files: [good.yaml], poll: -1s}\n")
	if _, err := LoadForRun(dir + "/scrubd.yaml"); err == nil || !strings.Contains(err.Error(), "rules.poll") {
		t.Fatalf("LoadForRun of a bad poll: %v", err)
	}
}

// gc_percent: 0 (the default: GOGC, else DefaultGCPercent) and 10-1000
// are taken as given.
func TestGCPercentAccepted(t *testing.T) {
	if d := Defaults(); d.GCPercent != 0 {
		t.Fatalf("default gc_percent %d, want 0", d.GCPercent)
	}
	for _, n := range []int{10, 50, 1000} {
		c, err := Parse("x", []byte(fmt.Sprintf("gc_percent: %d\nsoftware: {engine: none}\n", n)), false)
		if err != nil || c.GCPercent != n {
			t.Fatalf("gc_percent %d: %v %+v", n, err, c)
		}
	}
}

// memory_limit_mb: 0 (the default) and 64 or more are taken as given.
func TestMemoryLimitAccepted(t *testing.T) {
	if d := Defaults(); d.MemoryLimitMB != 0 {
		t.Fatalf("default memory_limit_mb %d, want 0 (none)", d.MemoryLimitMB)
	}
	for _, n := range []int{64, 400} {
		c, err := Parse("x", []byte(fmt.Sprintf("memory_limit_mb: %d\nsoftware: {engine: none}\n", n)), false)
		if err != nil || c.MemoryLimitMB != n {
			t.Fatalf("memory_limit_mb %d: %v %+v", n, err, c)
		}
	}
}
