package config

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"

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
	if err := c.Validate("", false); err != nil {
		t.Fatal(err)
	}
	s := Sim(t.TempDir())
	if err := s.Validate("", false); err != nil {
		t.Fatal(err)
	}
}

func TestEmptyFileIsDefaults(t *testing.T) {
	c, err := Parse("x", nil, false)
	if err != nil {
		t.Fatal(err)
	}
	if c.Metrics.MaxRuleSeries != 500 || !c.KeepHW() {
		t.Fatalf("%+v", c)
	}
}

func TestRefused(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{"bogus: 1\n", "x:1: bogus: unknown key"},
		{"api:\n  sockit: /x\n", "x:2: sockit: unknown key"},
		{"api: {tcp: 127.0.0.1:80}\n", `api.token_file: required`},
		{"api: {tcp: localhost, token_file: t}\n", `api.tcp "localhost": must be ip:port`},
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
		{"metrics: {max_rule_series: 0}\n", "metrics.max_rule_series"},
		{"placement: {interval: banana}\n", "x:1"},
		{"- a\n- b\n", "x:1"},
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
