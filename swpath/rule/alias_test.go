package rule_test

import (
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/scrubd/scrubd/agent/protect"
	"github.com/scrubd/scrubd/offload"
	"github.com/scrubd/scrubd/offload/compile"
	"github.com/scrubd/scrubd/swpath/classifier"
	"github.com/scrubd/scrubd/swpath/rule"
)

// Parsed rules share the lists they repeat (the parser interns them), so a
// consumer that sorted, merged or clipped a rule's list in place would
// change other rules. The consumers of a set (the classifier's compile,
// the offload compiler with its accept-rule splits, the protect list's
// check, the rule's own text forms) leave every list as parsed; the lists
// are written unsorted, overlapping and past the field's range where the
// format allows, to tempt a normalizer.
func TestConsumersLeaveSharedListsAlone(t *testing.T) {
	src := `rules:
  - {id: a, action: accept, priority: 10, match: {src: 192.0.2.0/24, proto: [udp, tcp], dst_port: ["443", "80-90", "85-100", "22"]}}
  - {id: d1, action: drop, match: {dst: 10.0.0.0/8, proto: [udp, tcp], dst_port: ["443", "80-90", "85-100", "22"], length: ["1000-1500", "60-80"]}}
  - {id: d2, action: drop, match: {dst: 10.1.0.0/16, proto: [udp, tcp], dst_port: ["443", "80-90", "85-100", "22"], src_port: ["443", "80-90", "85-100", "22"]}}
  - {id: d3, action: drop, match: {src: 198.51.100.0/24, proto: [icmp], icmp_type: ["8", "0", "3-5"], length: ["1000-1500", "60-80"]}}
  - {id: d4, action: drop, match: {dst: 10.2.0.0/16, port: ["443", "80-90", "85-100", "22"], proto: [tcp, udp]}}
`
	set, err := rule.Parse("t.yaml", []byte(src), time.Unix(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	if &set.Rules[1].Match.DstPort[0] != &set.Rules[2].Match.SrcPort[0] {
		t.Fatal("the parser does not share repeated lists: this test has nothing to check")
	}
	want := clone(set)
	if _, err := classifier.Compile(set); err != nil {
		t.Fatal(err)
	}
	for _, caps := range []offload.Capabilities{offload.MLX5(4096), offload.SoftwareFlower()} {
		cfg := &compile.Config{Caps: caps, PrioV4: 10, PrioV6: 11, PassPrioV4: 2, PassPrioV6: 3}
		compile.Set(cfg, set)
		for i := range set.Rules {
			compile.Rule(cfg, &set.Rules[i])
			compile.Pass(cfg, &set.Rules[i])
		}
	}
	pl := &protect.List{Entries: []protect.Entry{{Rule: set.Rules[0], Note: "a"}}}
	for i := range set.Rules {
		pl.Check(&set.Rules[i])
		_ = set.Rules[i].Match.String()
		_ = set.Rules[i].Spec()
	}
	if !reflect.DeepEqual(set, want) {
		t.Fatalf("a consumer wrote a shared list:\n got %+v\nwant %+v", set.Rules, want.Rules)
	}
}

// clone copies s with every list in an array of its own.
func clone(s *rule.Set) *rule.Set {
	out := &rule.Set{Rules: slices.Clone(s.Rules)}
	for i := range out.Rules {
		m := &out.Rules[i].Match
		m.Proto = slices.Clone(m.Proto)
		for _, l := range []*rule.Ranges{&m.SrcPort, &m.DstPort, &m.Port, &m.ICMPType, &m.ICMPCode, &m.Length} {
			*l = slices.Clone(*l)
		}
	}
	return out
}
