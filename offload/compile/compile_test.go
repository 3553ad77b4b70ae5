package compile

import (
	"math/rand/v2"
	"net/netip"
	"testing"
	"time"

	"github.com/scrubd/scrubd/offload"
	"github.com/scrubd/scrubd/swpath/rule"
)

func mlx5Cfg() *Config {
	return &Config{Caps: offload.MLX5(4096), PrioV4: 1, PrioV6: 2}
}

func flowerCfg() *Config {
	return &Config{Caps: offload.SoftwareFlower(), PrioV4: 1, PrioV6: 2}
}

func parseOne(t *testing.T, y string) rule.Rule {
	t.Helper()
	r, err := rule.ParseRule("test", []byte(y), time.Unix(0, 0))
	if err != nil {
		t.Fatalf("parse %q: %v", y, err)
	}
	return r
}

// checkExact asserts that the rule's entries match exactly the packets its
// match holds for, over the edge packet space of the rule.
func checkExact(t *testing.T, r *rule.Rule, res *Result, n int) {
	t.Helper()
	sp := newSpace(uint64(len(r.ID))*31+7, []rule.Rule{*r})
	for range n {
		f := sp.packet()
		want := r.Match.Matches(&f)
		if got := entriesMatch(res.Entries, &f); got != want {
			t.Fatalf("rule %s (%s): packet %+v: entries match %v, rule matches %v\nentries: %v", r.ID, r.Match.String(), f, got, want, entryStrings(res.Entries))
		}
	}
}

func entryStrings(es []offload.Entry) []string {
	var s []string
	for i := range es {
		s = append(s, es[i].Match.String())
	}
	return s
}

func TestCompileCases(t *testing.T) {
	for _, tt := range []struct {
		name    string
		y       string
		cfg     *Config
		reason  Reason
		entries int // checked when >= 0
		mod     func(*rule.Rule)
	}{
		{"range", `{id: a, action: drop, match: {dst: 203.0.113.0/24, proto: udp, dst_port: "1000-2000"}}`, mlx5Cfg(), OK, 8, nil},
		{"port-no-proto-mlx5", `{id: a, action: drop, match: {port: "80"}}`, mlx5Cfg(), ReasonUnsupportedKey, -1, nil},
		{"port-no-proto-flower", `{id: a, action: drop, match: {port: "80"}}`, flowerCfg(), OK, 12, nil},
		{"tcp-port", `{id: a, action: drop, match: {dst: 10.0.0.0/8, proto: tcp, port: "80"}}`, mlx5Cfg(), OK, 2, nil},
		// A FlowSpec route without prefixes: the family's whole space.
		{"zero-prefix-v4", `{id: a, action: drop, match: {dst: 0.0.0.0/0, proto: udp, port: "53"}}`, mlx5Cfg(), OK, 2, nil},
		{"zero-prefix-v6", `{id: a, action: drop, match: {dst: "::/0", proto: udp, port: "53"}}`, mlx5Cfg(), OK, 2, nil},
		{"length", `{id: a, action: drop, match: {proto: udp, length: "0-100"}}`, mlx5Cfg(), ReasonLength, -1, nil},
		{"isfrag-mlx5", `{id: a, action: drop, match: {fragment: [is-fragment]}}`, mlx5Cfg(), ReasonFragment, -1, nil},
		{"isfrag-flower", `{id: a, action: drop, match: {fragment: [is-fragment]}}`, flowerCfg(), OK, 2, nil},
		{"anyfrag-mlx5", `{id: a, action: drop, match: {fragment: [is-fragment, first-fragment]}}`, mlx5Cfg(), OK, 2, nil},
		{"nofrag", `{id: a, action: drop, match: {dst: 10.0.0.0/8, fragment: [not-fragment]}}`, mlx5Cfg(), OK, 1, nil},
		{"firstfrag-port-mlx5", `{id: a, action: drop, match: {proto: udp, dst_port: "53", fragment: [first-fragment]}}`, mlx5Cfg(), OK, 2, nil},
		{"firstfrag-mlx5", `{id: a, action: drop, match: {proto: udp, fragment: [first-fragment]}}`, mlx5Cfg(), ReasonFragment, -1, nil},
		{"df", `{id: a, action: drop, match: {dst: 10.0.0.0/8, fragment: [dont-fragment]}}`, flowerCfg(), ReasonFragment, -1, nil},
		{"df-v6", `{id: a, action: drop, match: {dst: "2001:db8::/32", fragment: [dont-fragment]}}`, flowerCfg(), ReasonNoPackets, -1, nil},
		{"lastfrag", `{id: a, action: drop, match: {fragment: [last-fragment]}}`, flowerCfg(), ReasonFragment, -1, nil},
		{"syn-clear", `{id: a, action: drop, match: {proto: tcp, tcp_flags: {value: [syn], mask: [syn]}}}`, flowerCfg(), ReasonL4Zero, -1,
			func(r *rule.Rule) { r.Match.TCPFlags.Value = 0 }},
		{"syn-set", `{id: a, action: drop, match: {proto: tcp, tcp_flags: {value: [syn], mask: [syn, ack]}}}`, mlx5Cfg(), OK, 2, nil},
		{"echo-reply", `{id: a, action: drop, match: {proto: icmp, icmp_type: "0"}}`, mlx5Cfg(), ReasonL4Zero, -1, nil},
		{"echo-request", `{id: a, action: drop, match: {proto: icmp, icmp_type: "8"}}`, mlx5Cfg(), OK, 1, nil},
		{"icmp-both-families", `{id: a, action: drop, match: {icmp_type: "8"}}`, mlx5Cfg(), OK, 2, nil},
		{"dscp", `{id: a, action: drop, match: {dst: 10.0.0.0/8, dscp: [46, 0]}}`, mlx5Cfg(), OK, 2, nil},
		{"dscp-block", `{id: a, action: drop, match: {dst: 10.0.0.0/8, dscp: [8, 9, 10, 11, 12, 13, 14, 15]}}`, mlx5Cfg(), OK, 1, nil},
		{"proto-list", `{id: a, action: drop, match: {proto: [tcp, udp], dst_port: "53"}}`, mlx5Cfg(), OK, 4, nil},
		{"accept", `{id: a, action: accept, match: {proto: udp}}`, mlx5Cfg(), ReasonAccept, -1, nil},
		{"too-many", `{id: a, action: drop, match: {proto: tcp, src_port: "1-65535", dst_port: "1-65535"}}`, mlx5Cfg(), ReasonTooManyEntries, -1, nil},
		{"port0", `{id: a, action: drop, match: {proto: udp, dst_port: "0-1023"}}`, mlx5Cfg(), ReasonL4Zero, -1, nil},
		{"port0-and-dst", `{id: a, action: drop, match: {proto: udp, src_port: "0-1023", dst_port: "80"}}`, mlx5Cfg(), OK, 2, nil},
		{"sctp-mlx5", `{id: a, action: drop, match: {proto: sctp, dst_port: "80"}}`, mlx5Cfg(), ReasonUnsupportedKey, -1, nil},
		{"sctp-flower", `{id: a, action: drop, match: {proto: sctp, dst_port: "80"}}`, flowerCfg(), OK, 2, nil},
		{"gre", `{id: a, action: drop, match: {src: 198.51.100.0/24, proto: gre}}`, mlx5Cfg(), OK, 1, nil},
		{"ports-icmp-nothing", `{id: a, action: drop, match: {proto: icmp}}`, mlx5Cfg(), ReasonNoPackets, -1,
			func(r *rule.Rule) { r.Match.DstPort = rule.Ranges{{Lo: 80, Hi: 80}} }},
		{"any", `{id: a, action: drop, match: all}`, mlx5Cfg(), OK, 2, nil},
		// value [] with a mask: none of the masked flags set. Alone, all
		// zeros (a packet without an L4 header in hardware) would match;
		// with a port it is exact.
		{"flags-none-set", `{id: a, action: drop, match: {proto: tcp, tcp_flags: {value: [], mask: [syn, ack]}}}`, flowerCfg(), ReasonL4Zero, -1, nil},
		{"flags-none-set-port", `{id: a, action: drop, match: {proto: tcp, dst_port: "80", tcp_flags: {value: [], mask: [syn, ack]}}}`, mlx5Cfg(), OK, 2, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := parseOne(t, tt.y)
			if tt.mod != nil {
				tt.mod(&r)
			}
			res := Rule(tt.cfg, &r)
			if res.Reason != tt.reason {
				t.Fatalf("reason %v (%s), want %v; entries %v", res.Reason, res.Detail, tt.reason, entryStrings(res.Entries))
			}
			if res.Offloadable != (tt.reason == OK) {
				t.Fatalf("offloadable %v with reason %v", res.Offloadable, res.Reason)
			}
			if tt.entries >= 0 && len(res.Entries) != tt.entries {
				t.Errorf("%d entries, want %d: %v", len(res.Entries), tt.entries, entryStrings(res.Entries))
			}
			if res.Offloadable {
				checkExact(t, &r, &res, 20000)
				for _, e := range res.Entries {
					if !e.Cookie.Ours() || e.RuleID != "a" {
						t.Errorf("entry %v: cookie %s rule %q", e.Match.String(), e.Cookie, e.RuleID)
					}
				}
			} else if res.Detail == "" {
				t.Error("refusal without detail")
			}
		})
	}
}

// TestCompileExactRandom compiles random rules for mlx5 and for the
// software flower and checks every offloaded rule against the reference
// match over its edge packet space.
func TestCompileExactRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	offloaded := map[string]int{}
	for i := range 3000 {
		ru := randRule(r, i)
		ru.Action = rule.Drop
		for name, cfg := range map[string]*Config{"mlx5": mlx5Cfg(), "flower": flowerCfg()} {
			res := Rule(cfg, &ru)
			if res.Offloadable {
				offloaded[name]++
				checkExact(t, &ru, &res, 400)
			}
		}
	}
	t.Logf("offloaded of 3000: %v", offloaded)
	if offloaded["mlx5"] < 500 || offloaded["flower"] <= offloaded["mlx5"] {
		t.Errorf("suspicious offload counts %v", offloaded)
	}
}

func TestAddrLadder(t *testing.T) {
	cfg := mlx5Cfg()
	cfg.AddrLadder4 = []int{8, 16, 24, 32}
	cfg.AddrLadder6 = []int{32, 48, 64, 128}
	for _, y := range []string{
		`{id: a, action: drop, match: {dst: 10.1.254.0/23, proto: udp, dst_port: "53"}}`,
		`{id: a, action: drop, match: {src: 10.252.0.0/14, dst: 192.0.2.0/26}}`,
		`{id: a, action: drop, match: {dst: "2001:db8:fffc::/46"}}`,
		`{id: a, action: drop, match: {dst: 10.0.0.0/8}}`,
	} {
		r := parseOne(t, y)
		res := Rule(cfg, &r)
		if !res.Offloadable {
			t.Fatalf("%s: %s", y, res.Detail)
		}
		for _, e := range res.Entries {
			for _, m := range []rule.Addr{e.Match.SrcMask, e.Match.DstMask} {
				l := m.PrefixLen()
				ok := l == 0
				for _, x := range append(cfg.AddrLadder4, cfg.AddrLadder6...) {
					ok = ok || l == x
				}
				if !ok {
					t.Errorf("%s: entry %s has a length off the ladder", y, e.Match.String())
				}
			}
		}
		checkExact(t, &r, &res, 20000)
	}
}

func TestLadderPrefixesTile(t *testing.T) {
	for _, tt := range []struct {
		p      string
		ladder []int
		n      int
	}{{"10.252.0.0/14", []int{8, 16}, 4}, {"10.1.254.0/23", []int{24}, 2}, {"2001:db8:fff0::/44", []int{48}, 16}, {"0.0.0.0/0", []int{2}, 4}, {"10.0.0.0/8", []int{8}, 1}} {
		p := netip.MustParsePrefix(tt.p)
		ps := ladderPrefixes(p, tt.ladder)
		if len(ps) != tt.n {
			t.Fatalf("%s: %d prefixes %v, want %d", tt.p, len(ps), ps, tt.n)
		}
		// contiguous, in order, inside p, covering p
		first, _ := rule.PrefixAddr(p)
		if a, _ := rule.PrefixAddr(ps[0]); a != first {
			t.Fatalf("%s: starts at %v", tt.p, ps[0])
		}
		for i := 1; i < len(ps); i++ {
			prev, m := rule.PrefixAddr(ps[i-1])
			last := rule.Addr{Hi: prev.Hi | ^m.Hi, Lo: prev.Lo | ^m.Lo}
			cur, _ := rule.PrefixAddr(ps[i])
			next := last
			if p.Addr().Is4() {
				next = rule.Addr{Hi: (last.Hi | 0xffffffff) + 1}
			} else if next.Lo++; next.Lo == 0 {
				next.Hi++
			}
			if cur != next || !p.Overlaps(ps[i]) {
				t.Fatalf("%s: %v does not follow %v", tt.p, ps[i], ps[i-1])
			}
		}
	}
}
