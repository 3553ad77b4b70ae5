package classifier

import (
	"path/filepath"
	"testing"

	"github.com/scrubd/scrubd/swpath/packet"
	"github.com/scrubd/scrubd/swpath/rule"
	"github.com/scrubd/scrubd/swpath/traffic"
)

// TestLibpcapOracleTCPFlagsNone: tcp_flags with value [] ("none of the
// masked flags set") against libpcap's (tcp[13] & mask) == 0, per rule,
// over frames steered at the rules.
func TestLibpcapOracleTCPFlagsNone(t *testing.T) {
	tcpdump := findTcpdump(t)
	set, err := rule.Parse("flags.yaml", []byte(`rules:
- {id: no-syn-ack, action: drop, match: {proto: tcp, tcp_flags: {value: [], mask: [syn, ack]}}}
- {id: no-rst-v4, action: drop, match: {dst: 10.0.0.0/8, proto: tcp, tcp_flags: {value: [], mask: [rst]}}}
- {id: no-flags-v6, action: drop, match: {dst: "2001:db8::/32", proto: tcp, tcp_flags: {value: [], mask: [fin, syn, rst, psh, ack, urg, ece, cwr]}}}
- {id: fin-not-ack, action: drop, match: {proto: tcp, dst_port: 80, tcp_flags: {value: [fin], mask: [fin, ack]}}}
`), traffic.Epoch)
	if err != nil {
		t.Fatal(err)
	}
	tab, err := Compile(set)
	if err != nil {
		t.Fatal(err)
	}
	frames := oracleFrames(7, set, 3000, nil)
	file := filepath.Join(t.TempDir(), "flags.pcap")
	if err := traffic.WriteFile(file, frames, false); err != nil {
		t.Fatal(err)
	}
	matched := make([]int, len(set.Rules))
	var f rule.Fields
	for _, b := range frames {
		packet.Parse(b, &f)
		for _, m := range tab.AppendMatching(nil, &f) {
			matched[m]++
		}
	}
	for i := range set.Rules {
		want := tcpdumpCount(t, tcpdump, file, pcapExpr(&set.Rules[i].Match), 0)
		if matched[i] != want {
			t.Errorf("rule %s (%s): classifier matched %d, libpcap %d", set.Rules[i].ID, set.Rules[i].Match.String(), matched[i], want)
		}
		if want == 0 {
			t.Errorf("rule %s matched nothing in libpcap's count: the capture does not probe it", set.Rules[i].ID)
		}
	}
	t.Logf("matched %v", matched)
}
