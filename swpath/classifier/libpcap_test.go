package classifier

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/scrubd/scrubd/swpath/packet"
	"github.com/scrubd/scrubd/swpath/rule"
	"github.com/scrubd/scrubd/swpath/traffic"
)

// This file checks the match semantics against libpcap: each rule becomes a
// pcap-filter expression, tcpdump counts the packets it matches in a
// generated capture, and the counts must equal the classifier's per-rule
// matched counts and first-match hits. The captures avoid what an
// expression cannot express the same way (pcap-filter(7)):
// no IPv6 extension headers (ip6 proto looks at the fixed header only), no
// truncated or malformed frames, and tagged frames in captures of their own
// under one leading "vlan and" per tag.

// pcapExpr returns the filter expression of m for one family.
func pcapFamExpr(m *rule.Match, fam rule.Family) string {
	if f := m.Family(); f != rule.FamilyAny && f != fam {
		return ""
	}
	v4 := fam == rule.IPv4
	var and []string
	if v4 {
		and = append(and, "ip")
	} else {
		and = append(and, "ip6")
	}
	for _, p := range []struct {
		dir string
		p   interface {
			IsValid() bool
			Bits() int
			String() string
		}
	}{{"src", m.Src}, {"dst", m.Dst}} {
		if p.p.IsValid() && p.p.Bits() > 0 {
			and = append(and, p.dir+" net "+p.p.String())
		}
	}
	if m.Proto != nil {
		var or []string
		for _, pr := range m.Proto {
			if v4 {
				or = append(or, fmt.Sprintf("ip proto %d", pr))
			} else {
				or = append(or, fmt.Sprintf("ip6 proto %d", pr))
			}
		}
		and = append(and, "("+strings.Join(or, " or ")+")")
	}
	ranges := func(prim string, rs rule.Ranges) string {
		var or []string
		for _, r := range rs {
			or = append(or, fmt.Sprintf("%s %d-%d", prim, r.Lo, r.Hi))
		}
		return "(" + strings.Join(or, " or ") + ")"
	}
	if m.SrcPort != nil {
		and = append(and, ranges("src portrange", m.SrcPort))
	}
	if m.DstPort != nil {
		and = append(and, ranges("dst portrange", m.DstPort))
	}
	if m.Port != nil {
		and = append(and, ranges("portrange", m.Port))
	}
	byteRanges := func(expr string, rs rule.Ranges) string {
		var or []string
		for _, r := range rs {
			or = append(or, fmt.Sprintf("(%s >= %d and %s <= %d)", expr, r.Lo, expr, r.Hi))
		}
		return "(" + strings.Join(or, " or ") + ")"
	}
	if m.ICMPType != nil || m.ICMPCode != nil {
		typ, code := "icmp[0]", "icmp[1]"
		if v4 {
			and = append(and, "icmp")
		} else {
			and = append(and, "ip6 proto 58")
			typ, code = "ip6[40]", "ip6[41]"
		}
		if m.ICMPType != nil {
			and = append(and, byteRanges(typ, m.ICMPType))
		}
		if m.ICMPCode != nil {
			and = append(and, byteRanges(code, m.ICMPCode))
		}
	}
	if m.HasTCPFlags {
		if v4 {
			and = append(and, fmt.Sprintf("ip proto 6 and (tcp[13] & %d) == %d", m.TCPFlags.Mask, m.TCPFlags.Value))
		} else {
			and = append(and, fmt.Sprintf("ip6 proto 6 and (ip6[53] & %d) == %d", m.TCPFlags.Mask, m.TCPFlags.Value))
		}
	}
	if m.Fragment != 0 {
		var or []string
		for _, st := range []struct {
			bit    rule.Frag
			v4, v6 string
		}{
			{rule.DontFragment, "(ip[6] & 0x40) != 0", ""},
			{rule.IsFragment, "(ip[6:2] & 0x1fff) != 0", ""},
			{rule.FirstFragment, "(ip[6:2] & 0x3fff) == 0x2000", ""},
			{rule.LastFragment, "((ip[6:2] & 0x1fff) != 0 and (ip[6:2] & 0x2000) == 0)", ""},
			{rule.NotFragment, "(ip[6:2] & 0x3fff) == 0", "ip6"}, // no fragment header here
		} {
			if m.Fragment&st.bit == 0 {
				continue
			}
			if v4 {
				or = append(or, st.v4)
			} else if st.v6 != "" {
				or = append(or, st.v6)
			}
		}
		if len(or) == 0 {
			return ""
		}
		and = append(and, "("+strings.Join(or, " or ")+")")
	}
	if m.Length != nil {
		if v4 {
			and = append(and, byteRanges("ip[2:2]", m.Length))
		} else {
			and = append(and, byteRanges("ip6[4:2] + 40", m.Length))
		}
	}
	if m.DSCP != 0 {
		var or []string
		for d := 0; d < 64; d++ {
			if m.DSCP&(1<<d) == 0 {
				continue
			}
			if v4 {
				or = append(or, fmt.Sprintf("(ip[1] >> 2) == %d", d))
			} else {
				or = append(or, fmt.Sprintf("((ip6[0:2] >> 6) & 0x3f) == %d", d))
			}
		}
		and = append(and, "("+strings.Join(or, " or ")+")")
	}
	return "(" + strings.Join(and, " and ") + ")"
}

// pcapExpr returns m as a pcap-filter expression, "" when it can never match.
func pcapExpr(m *rule.Match) string {
	var or []string
	for _, fam := range []rule.Family{rule.IPv4, rule.IPv6} {
		if e := pcapFamExpr(m, fam); e != "" {
			or = append(or, e)
		}
	}
	if len(or) == 0 {
		return ""
	}
	return "(" + strings.Join(or, " or ") + ")"
}

var countRE = regexp.MustCompile(`(?m)^(\d+) packets?$`)

// tcpdumpCount counts the packets of file that expr matches; tags is the
// number of VLAN tags every frame of the file carries.
func tcpdumpCount(t *testing.T, tcpdump, file, expr string, tags int) int {
	t.Helper()
	if expr == "" {
		return 0
	}
	full := strings.Repeat("vlan and ", tags) + "(" + expr + ")"
	cmd := exec.Command(tcpdump, "-n", "-r", file, "--count", full)
	out, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) && strings.Contains(string(ee.Stderr), "expression rejects all packets") {
			return 0 // the optimizer proved it never matches
		}
		t.Fatalf("tcpdump %q: %v: %s", full, err, func() string {
			if ee != nil {
				return string(ee.Stderr)
			}
			return ""
		}())
	}
	m := countRE.FindSubmatch(out)
	if m == nil {
		t.Fatalf("tcpdump %q: no count in %q", full, out)
	}
	n, _ := strconv.Atoi(string(m[1]))
	return n
}

func findTcpdump(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("tcpdump")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("tcpdump is not installed; CI must install it (apt-get install tcpdump)")
		}
		t.Skip("tcpdump is not installed (apt-get install tcpdump); the libpcap oracle needs it")
	}
	return p
}

// oracleFrames generates frames the oracle can judge, all with the given
// tags.
func oracleFrames(seed uint64, set *rule.Set, n int, tags []uint16) [][]byte {
	g := traffic.NewGenerator(traffic.Config{Seed: seed, Rules: set, RuleFraction: 0.85, Odd: true, Sizes: traffic.Sizes{Min: 64, Max: 1518}})
	var out [][]byte
	for len(out) < n {
		fr := g.NextFrame()
		if fr.Truncate != 0 || fr.Version != 0 || fr.IHL != 0 || len(fr.Ext) != 0 {
			continue
		}
		if fr.Family == rule.IPv6 {
			switch fr.Proto {
			case packet.IPv6HopByHop, packet.IPv6Routing, packet.IPv6Fragment, packet.IPv6DestOpts:
				continue // would be walked as an extension header
			}
		}
		fr.Tags = tags
		out = append(out, traffic.AppendFrame(nil, &fr))
	}
	return out
}

func TestLibpcapOracle(t *testing.T) {
	tcpdump := findTcpdump(t)
	dir := t.TempDir()
	seeds := 3
	if testing.Short() {
		seeds = 1
	}
	for seed := uint64(1); seed <= uint64(seeds); seed++ {
		set := traffic.RandomValidRules(100+seed, 16)
		tab, err := Compile(set)
		if err != nil {
			t.Fatal(err)
		}
		exprs := make([]string, len(set.Rules))
		for i := range set.Rules {
			exprs[i] = pcapExpr(&set.Rules[i].Match)
		}
		for _, tags := range [][]uint16{nil, {0x8100}, {0x88a8, 0x8100}} {
			frames := oracleFrames(seed, set, 1500, tags)
			file := filepath.Join(dir, fmt.Sprintf("s%d-t%d.pcap", seed, len(tags)))
			if err := traffic.WriteFile(file, frames, false); err != nil {
				t.Fatal(err)
			}
			matched := make([]int, len(set.Rules))
			hits := make([]int, len(set.Rules))
			var f rule.Fields
			var buf []int32
			for _, b := range frames {
				packet.Parse(b, &f)
				for _, m := range tab.AppendMatching(buf[:0], &f) {
					matched[m]++
				}
				if d := tab.Decide(&f); d >= 0 {
					hits[d]++
				}
			}
			totalHits := 0
			for i := range set.Rules {
				if got := tcpdumpCount(t, tcpdump, file, exprs[i], len(tags)); got != matched[i] {
					t.Errorf("seed %d tags %d rule %s (%s): libpcap matched %d, classifier %d\n  expr: %s",
						seed, len(tags), set.Rules[i].ID, set.Rules[i].Match.String(), got, matched[i], exprs[i])
				}
				// First match: rule i and none of the rules deciding before it.
				var before []string
				for j := range set.Rules {
					if j != i && rule.Before(&set.Rules[j], j, &set.Rules[i], i) && exprs[j] != "" {
						before = append(before, exprs[j])
					}
				}
				e := exprs[i]
				if e != "" && len(before) > 0 {
					e = e + " and not (" + strings.Join(before, " or ") + ")"
				}
				if got := tcpdumpCount(t, tcpdump, file, e, len(tags)); got != hits[i] {
					t.Errorf("seed %d tags %d rule %s: libpcap first-match %d, classifier hits %d", seed, len(tags), set.Rules[i].ID, got, hits[i])
				}
				totalHits += hits[i]
			}
			t.Logf("seed %d tags %d: matched %v hits %v", seed, len(tags), matched, hits)
			if totalHits == 0 || totalHits == len(frames) {
				t.Errorf("seed %d tags %d: %d of %d packets hit a rule: the capture does not probe both outcomes", seed, len(tags), totalHits, len(frames))
			}
		}
	}
}
