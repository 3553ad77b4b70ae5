package main

import (
	"bytes"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"

	"github.com/scrubd/scrubd/swpath/traffic"
)

const sample = "../../../deploy/examples/sample.pcap"

type dryReport struct {
	Packets, Dropped int
	Rules            []struct {
		ID      string
		Matched int
	}
}

func dryJSON(t *testing.T, rules string, extra ...string) (int, dryReport, string) {
	t.Helper()
	p := filepath.Join(t.TempDir(), "rules.yaml")
	if err := os.WriteFile(p, []byte(rules), 0o644); err != nil {
		t.Fatal(err)
	}
	rc, out, errs := runCmd(append([]string{"dryrun", "--rules", p, "--pcap", sample, "--json"}, extra...)...)
	var rep dryReport
	if rc == 0 {
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
	}
	return rc, rep, errs
}

// A rule means what it says, through `scrubd dryrun` on the bundled sample:
// a rule file cut short, a rule without an action, an empty file and a
// drop rule for everything are refused with the reason, where they used to
// drop most of the sample.
func TestDryrunRefusesWhatTheAgentRefuses(t *testing.T) {
	lift := []string{"--min-prefix-v4", "0", "--min-prefix-v6", "0", "--allow-match-all"}
	for _, tc := range []struct {
		name, rules string
		flags       []string
		want        string // "" = accepted
	}{
		{"cut off after action", "rules:\n- id: only-one\n  action: drop\n", nil, `rule "only-one": match: no match condition`},
		{"id alone", "rules:\n- id: x\n", nil, `rule "x": action: required`},
		{"no match, guard lifted", "rules:\n- id: only-one\n  action: drop\n", lift, `match: no match condition`},
		{"empty file", "", nil, "rules: empty file"},
		{"rules: with nothing", "rules:\n", nil, "rules: empty value"},
		{"no rules", "rules: []\n", nil, ""},
		{"dst 0.0.0.0/0", "rules:\n- {id: all-udp, action: drop, match: {dst: 0.0.0.0/0, proto: udp}}\n", nil, `rule "all-udp": match.dst "0.0.0.0/0": too broad`},
		{"dst 0.0.0.0/0 allowed by the operator", "rules:\n- {id: all-udp, action: drop, match: {dst: 0.0.0.0/0, proto: udp}}\n", []string{"--min-prefix-v4", "0"}, ""},
		{"no address", "rules:\n- {id: udp, action: drop, match: {proto: udp}}\n", nil, `rule "udp": match: too broad`},
		{"v6 /31", "rules:\n- {id: v6, action: drop, match: {dst: \"2001:db8::/31\"}}\n", nil, `match.dst "2001:db8::/31": too broad`},
		{"source blocklist", "rules:\n- {id: bl, action: drop, match: {src: 198.51.100.0/24}}\n", nil, ""},
		{"/8 destination", "rules:\n- {id: d8, action: drop, match: {dst: 203.0.0.0/8, proto: udp}}\n", nil, ""},
		{"match all", "rules:\n- {id: everything, action: drop, match: all}\n", nil, `rule "everything": match "all": matches every packet`},
		{"match all, opted in", "rules:\n- {id: everything, action: drop, match: all}\n", lift, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rc, rep, errs := dryJSON(t, tc.rules, tc.flags...)
			if tc.want == "" {
				if rc != 0 || rep.Packets != 900 {
					t.Fatalf("refused (rc %d): %s", rc, errs)
				}
				if tc.name == "match all, opted in" {
					// Every IP packet: what 0.0.0.0/0 and ::/0 drop together.
					_, both, errs := dryJSON(t, "rules:\n- {id: v4, action: drop, match: {dst: 0.0.0.0/0}}\n- {id: v6, action: drop, match: {dst: \"::/0\"}}\n", lift...)
					if rep.Dropped == 0 || rep.Dropped != both.Dropped {
						t.Fatalf("match: all dropped %d, 0.0.0.0/0 and ::/0 %d (%s)", rep.Dropped, both.Dropped, errs)
					}
				}
				if tc.name == "no rules" && rep.Dropped != 0 {
					t.Fatalf("rules: [] dropped %d", rep.Dropped)
				}
				return
			}
			if rc != 1 || !strings.Contains(errs, tc.want) {
				t.Fatalf("rc %d, stderr %q; want rc 1 and %q", rc, errs, tc.want)
			}
		})
	}
}

// A pcapng capture cut inside a block is an error (it used to give one
// packet fewer and exit 0).
func TestDryrunTruncatedPcapNG(t *testing.T) {
	pkts, err := traffic.ReadFile(sample)
	if err != nil {
		t.Fatal(err)
	}
	frames := make([][]byte, len(pkts))
	for i, p := range pkts {
		frames[i] = p.Data
	}
	var b bytes.Buffer
	if err := traffic.WritePcapNG(&b, frames); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	rules := "../../../deploy/examples/rules.yaml"
	full, cut := filepath.Join(dir, "full.pcapng"), filepath.Join(dir, "cut.pcapng")
	os.WriteFile(full, b.Bytes(), 0o644)
	os.WriteFile(cut, b.Bytes()[:b.Len()-7], 0o644)
	if rc, out, errs := runCmd("dryrun", "--rules", rules, "--pcap", full, "--json"); rc != 0 || !strings.Contains(out, `"packets": 900`) {
		t.Fatalf("whole pcapng: rc %d %s %s", rc, out, errs)
	}
	rc, out, errs := runCmd("dryrun", "--rules", rules, "--pcap", cut, "--json")
	if rc != 1 || !strings.Contains(errs, "truncated") || !strings.Contains(errs, cut) {
		t.Fatalf("truncated pcapng: rc %d, stdout %q, stderr %q; want rc 1 naming the file and the truncation", rc, out, errs)
	}
}

// tcp_flags {value: [], mask: [syn, ack]} is "neither SYN nor ACK set". The
// expected count comes from gopacket's decoder, not from scrubd's parser;
// every dry-run engine must agree with it.
func TestDryrunTCPFlagsNoneSet(t *testing.T) {
	pkts, err := traffic.ReadFile(sample)
	if err != nil {
		t.Fatal(err)
	}
	_, dst, _ := net.ParseCIDR("203.0.113.0/24")
	want := 0
	for _, p := range pkts {
		g := gopacket.NewPacket(p.Data, layers.LayerTypeEthernet, gopacket.Default)
		ip, _ := g.Layer(layers.LayerTypeIPv4).(*layers.IPv4)
		tcp, _ := g.Layer(layers.LayerTypeTCP).(*layers.TCP)
		if ip == nil || tcp == nil || !dst.Contains(ip.DstIP) || ip.FragOffset != 0 || len(g.Layers()) > 0 && g.ErrorLayer() != nil {
			continue
		}
		if !tcp.SYN && !tcp.ACK {
			want++
		}
	}
	if want == 0 {
		t.Fatal("the sample has no TCP packet without SYN and ACK: the test would prove nothing")
	}
	rules := "rules:\n- {id: no-syn-no-ack, action: drop, match: {dst: 203.0.113.0/24, proto: tcp, tcp_flags: {value: [], mask: [syn, ack]}}}\n"
	engines := []string{"go", "dv"}
	if os.Geteuid() == 0 {
		engines = append(engines, "xdp")
	} else if os.Getenv("CI") == "true" {
		t.Fatal("the XDP engine needs root, and CI runs as root")
	}
	for _, e := range engines {
		rc, rep, errs := dryJSON(t, rules, "--engine", e)
		if rc != 0 {
			t.Fatalf("--engine %s: rc %d: %s", e, rc, errs)
		}
		if len(rep.Rules) != 1 || rep.Rules[0].Matched != want || rep.Dropped != want {
			t.Errorf("--engine %s: matched %+v dropped %d, want %d (gopacket's count)", e, rep.Rules, rep.Dropped, want)
		}
	}
}
