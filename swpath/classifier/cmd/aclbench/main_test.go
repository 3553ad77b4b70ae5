//go:build linux

package main

import (
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/scrubd/scrubd/swpath/classifier"
	"github.com/scrubd/scrubd/swpath/rule"
	"github.com/scrubd/scrubd/swpath/traffic"
)

// The rule lines are written by hand from dpdk-test-acl's documented format
// (app/test-acl/main.c, parse_cb_ipv4_rule): '@' src/len dst/len
// sport_lo : sport_hi dport_lo : dport_hi proto/mask.
func TestACLRuleFormat(t *testing.T) {
	pfx := netip.MustParsePrefix
	good := []struct {
		m    rule.Match
		want string
	}{
		{rule.Match{Src: pfx("10.1.2.0/24"), Proto: []uint8{6}, DstPort: rule.Ranges{{Lo: 80, Hi: 80}}},
			"@10.1.2.0/24 0.0.0.0/0 0 : 65535 80 : 80 0x06/0xff"},
		{rule.Match{Src: pfx("192.0.2.7/32"), Dst: pfx("198.51.0.0/16"), Proto: []uint8{17},
			SrcPort: rule.Ranges{{Lo: 1024, Hi: 65535}}, DstPort: rule.Ranges{{Lo: 100, Hi: 4000}}},
			"@192.0.2.7/32 198.51.0.0/16 1024 : 65535 100 : 4000 0x11/0xff"},
		{rule.Match{Dst: pfx("203.0.113.0/24")}, "@0.0.0.0/0 203.0.113.0/24 0 : 65535 0 : 65535 0x00/0x00"},
		{rule.Match{Dst: pfx("203.0.113.9/24"), Proto: []uint8{1}}, "@0.0.0.0/0 203.0.113.0/24 0 : 65535 0 : 65535 0x01/0xff"},
	}
	for _, c := range good {
		got, err := aclRule(&rule.Rule{ID: "r", Match: c.m}, rule.IPv4)
		if err != nil || got != c.want {
			t.Errorf("aclRule(%+v) = %q, %v; want %q", c.m, got, err, c.want)
		}
	}
	bad := []struct {
		m    rule.Match
		want string
	}{
		{rule.Match{Src: pfx("2001:db8::/32")}, "an IPv6 prefix in an IPv4 file"},
		{rule.Match{Proto: []uint8{6}}, "without a prefix"},
		{rule.Match{Src: pfx("10.0.0.0/8"), Proto: []uint8{6, 17}}, "protocol list"},
		{rule.Match{Src: pfx("10.0.0.0/8"), DstPort: rule.Ranges{{Lo: 1, Hi: 1}}}, "ports without"},
		{rule.Match{Src: pfx("10.0.0.0/8"), Proto: []uint8{6}, DstPort: rule.Ranges{{Lo: 1, Hi: 1}, {Lo: 3, Hi: 3}}}, "more than one port range"},
		{rule.Match{Src: pfx("10.0.0.0/8"), Fragment: rule.IsFragment}, "condition other"},
	}
	for _, c := range bad {
		_, err := aclRule(&rule.Rule{ID: "bad-one", Match: c.m}, rule.IPv4)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), `"bad-one"`) {
			t.Errorf("aclRule(%+v) error %v; want one naming the rule and %q", c.m, err, c.want)
		}
	}
}

func TestDecisionOrder(t *testing.T) {
	set := &rule.Set{Rules: []rule.Rule{{Priority: 20}, {Priority: 10}, {Priority: 20}, {Priority: 5}, {Priority: 10}}}
	got := decisionOrder(set)
	want := []int{3, 1, 4, 0, 2} // lowest priority number first, ties by position
	if !slices.Equal(got, want) {
		t.Fatalf("decisionOrder = %v, want %v", got, want)
	}
}

func TestTraceLine(t *testing.T) {
	f := rule.Fields{Family: rule.IPv4, Proto: 17, L4: true, SrcPort: 53, DstPort: 4444,
		Src: rule.AddrFrom(netip.MustParseAddr("10.0.0.1")), Dst: rule.AddrFrom(netip.MustParseAddr("192.168.1.255"))}
	if got, want := traceLine(&f), "0x0a000001 0xc0a801ff 53 4444 17"; got != want {
		t.Fatalf("traceLine = %q, want %q", got, want)
	}
	frag := f
	frag.L4 = false
	if !traceable(&f, rule.IPv4) || traceable(&frag, rule.IPv4) || traceable(&f, rule.IPv6) {
		t.Fatal("traceable: a UDP packet with ports is, a non-first fragment of one is not")
	}
}

// TestAgainstRteACL is the differential test against DPDK's rte_acl: a
// ClassBench-style set with mixed priorities, IPv4 and the same set in IPv6
// (toIPv6), fresh packets and packets of 100 flows, and rte_acl's
// first match for every packet from dpdk-test-acl's dump must be the rule
// scrubd's Decide, DecideBurst and ClassifyBurst pick. It also checks that
// check() notices one packet decided differently.
func TestAgainstRteACL(t *testing.T) {
	if _, err := exec.LookPath(testACL); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s missing (Debian dpdk-dev): %v", testACL, err)
		}
		t.Skipf("%s missing (Debian dpdk-dev)", testACL)
	}
	if os.Geteuid() != 0 && os.Getenv("CI") != "true" {
		t.Skip("dpdk-test-acl needs root here")
	}
	for _, family := range []rule.Family{rule.IPv4, rule.IPv6} {
		set := traffic.ClassBenchRules(7, 2000)
		for i := range set.Rules {
			set.Rules[i].Priority = []uint32{10, 1000, 1000, 50}[i%4]
		}
		if family == rule.IPv6 {
			set = toIPv6(set)
		}
		testAgainstRteACL(t, set, family)
	}
}

func testAgainstRteACL(t *testing.T, set *rule.Set, family rule.Family) {
	dir := t.TempDir()
	order, err := writeRules(dir+"/rules.txt", set, family)
	if err != nil {
		t.Fatal(err)
	}
	for _, flows := range []int{0, 100} {
		tr := makeTrace("t", set, 8192, flows, 5, family)
		if err := writeTrace(dir+"/trace.txt", tr.fs); err != nil {
			t.Fatal(err)
		}
		res, err := aclRun{rules: dir + "/rules.txt", trace: dir + "/trace.txt", nrules: len(set.Rules), ntrace: len(tr.fs),
			cpu: 0, memMB: 512, iter: 1, verbose: 2, ipv6: family == rule.IPv6}.run()
		if err != nil {
			t.Fatal(err)
		}
		tab, err := classifier.Compile(set)
		if err != nil {
			t.Fatal(err)
		}
		if err := check(set, tab, order, tr, res.matches); err != nil {
			t.Fatalf("IPv%d, flows %d: %v", family, flows, err)
		}
		matched := 0
		for _, m := range res.matches {
			if m != noMatch {
				matched++
			}
		}
		if matched < len(tr.fs)/4 || matched == len(tr.fs) {
			t.Fatalf("IPv%d, flows %d: %d of %d packets matched a rule: the trace should hit rules often, not always", family, flows, matched, len(tr.fs))
		}
		// Break one result on purpose: check must say so.
		for i, m := range res.matches {
			if m != noMatch {
				res.matches[i] = noMatch
				break
			}
		}
		if err := check(set, tab, order, tr, res.matches); err == nil || !strings.Contains(err.Error(), "1 of") {
			t.Fatalf("check with one altered result: %v, want 1 packet decided differently", err)
		}
	}
}

// The side-by-side figures by hand: round r's best is the least of its
// APIs, and each ratio is taken within a round.
func TestScalingRatios(t *testing.T) {
	small := map[string][]float64{"Decide": {40, 44, 42}, "DecideBurst": {10, 12, 11}, "ClassifyBurst": {14, 11.5, 13}}
	big := map[string][]float64{"Decide": {100, 90, 95}, "DecideBurst": {19, 25, 20}, "ClassifyBurst": {21, 23, 24}}
	b0, b1 := roundBest(small), roundBest(big)
	if !slices.Equal(b0, []float64{10, 11.5, 11}) || !slices.Equal(b1, []float64{19, 23, 20}) {
		t.Fatalf("roundBest = %v and %v, want [10 11.5 11] and [19 23 20]", b0, b1)
	}
	// 19/10 = 1.9, 23/11.5 = 2, 20/11 = 1.818...: sorted.
	got := ratios(b1, b0)
	want := []float64{20.0 / 11, 1.9, 2}
	if len(got) != 3 || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
		t.Fatalf("ratios = %v, want %v", got, want)
	}
	if got := ratios([]float64{5, 6}, []float64{0, 3}); !slices.Equal(got, []float64{2}) {
		t.Fatalf("ratios with a zero round = %v, want [2]", got)
	}
}

// With huge pages dpdk-test-acl takes its memory in memory only, without
// --no-huge; without, on 4 KiB pages and no shared configuration.
func TestACLArgsPages(t *testing.T) {
	a := aclRun{rules: "r", trace: "t", nrules: 1, ntrace: 1, memMB: 4096, huge: true}
	got := a.args()
	if !slices.Contains(got, "--in-memory") || slices.Contains(got, "--no-huge") || !slices.Contains(got, "4096") {
		t.Fatalf("args with huge pages: %v", got)
	}
	a.huge = false
	got = a.args()
	if slices.Contains(got, "--in-memory") || !slices.Contains(got, "--no-huge") || !slices.Contains(got, "--no-shconf") {
		t.Fatalf("args without huge pages: %v", got)
	}
}

// alternate over two passes whose cost the fake clock makes: 10 and 30
// after a pass of their own (warm), 15 more after the other's (cold). Each
// timed pass must follow its own untimed pass, the order must turn every
// step, and the time must go to the pass that took it.
func TestAlternate(t *testing.T) {
	var now time.Duration
	var log []int
	cost := []time.Duration{10, 30}
	passes := make([]func(), 2)
	for k := range passes {
		passes[k] = func() {
			c := cost[k]
			if len(log) == 0 || log[len(log)-1] != k {
				c += 15
			}
			now += c
			log = append(log, k)
		}
	}
	got := alternate(passes, []int{2, 3}, 100, func() time.Duration { return now })
	// Timed 10+30 a step: 40, 80, 120, so three steps; A's 30 over 3
	// passes of 2 packets, B's 90 over 3 of 3.
	if want := []float64{5, 10}; !slices.Equal(got, want) {
		t.Fatalf("alternate = %v, want %v", got, want)
	}
	if want := []int{0, 0, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1}; !slices.Equal(log, want) {
		t.Fatalf("passes ran in the order %v, want %v", log, want)
	}
	// However short the target, both orders are taken once.
	log = nil
	if got, want := alternate(passes, []int{2, 3}, 1, func() time.Duration { return now }), []float64{5, 10}; !slices.Equal(got, want) || len(log) != 8 {
		t.Fatalf("alternate with a target of 1 = %v after %d passes, want %v after 8", got, len(log), want)
	}
}
