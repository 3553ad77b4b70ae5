package rule

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
)

// TestCheckBounds: a rule made in code with a value outside its field (no
// parser would make it) is refused by every guard, the loosest too, with
// the field and the value; the largest values each field holds, worked
// from the protocols' field widths (16-bit ports, 8-bit ICMP type and
// code, an IPv6 packet of 40 + 65535 bytes), pass. Each refused rule,
// written as YAML, is refused by the parser for the same field: the two
// agree on what a rule may hold.
func TestCheckBounds(t *testing.T) {
	base := func() Rule {
		return Rule{ID: "a", Action: Drop, Match: Match{Dst: netip.MustParsePrefix("203.0.113.0/24"), Proto: []uint8{ProtoUDP}}}
	}
	tests := []struct {
		name  string
		edit  func(m *Match)
		yaml  string // the same match in a rule file; "" where YAML cannot say it
		field string // "" = passes
		value string
	}{
		{"ports at 65535", func(m *Match) {
			m.SrcPort, m.DstPort, m.Port = Ranges{{0, 65535}}, Ranges{{65535, 65535}}, Ranges{{1, 2}}
		}, "", "", ""},
		{"dst port 65536", func(m *Match) { m.DstPort = Ranges{{65536, 65536}} }, "dst_port: 65536", "match.dst_port", "65536"},
		{"src port range past 65535", func(m *Match) { m.SrcPort = Ranges{{53, 53}, {100, 70000}} }, "src_port: [53, 100-70000]", "match.src_port", "100-70000"},
		{"port range reversed", func(m *Match) { m.Port = Ranges{{9, 7}} }, "port: 9-7", "match.port", "9-7"},
		{"icmp at 255", func(m *Match) {
			m.Proto, m.ICMPType, m.ICMPCode = []uint8{ProtoICMP}, Ranges{{255, 255}}, Ranges{{0, 255}}
		}, "", "", ""},
		{"icmp type 256", func(m *Match) { m.Proto, m.ICMPType = []uint8{ProtoICMP}, Ranges{{8, 256}} }, "{proto: icmp, icmp_type: 8-256}", "match.icmp_type", "8-256"},
		{"icmp code 300", func(m *Match) { m.Proto, m.ICMPCode = []uint8{ProtoICMP}, Ranges{{300, 300}} }, "{proto: icmp, icmp_code: 300}", "match.icmp_code", "300"},
		{"length 65575", func(m *Match) { m.Length = Ranges{{1500, 65575}} }, "", "", ""},
		{"length 65576", func(m *Match) { m.Length = Ranges{{65576, 65576}} }, "length: 65576", "match.length", "65576"},
		{"src with host bits", func(m *Match) { m.Src = netip.PrefixFrom(netip.MustParseAddr("198.51.100.7"), 24) }, "src: 198.51.100.7/24", "match.src", "198.51.100.7/24"},
		{"dst of the other family", func(m *Match) {
			m.Src, m.Dst = netip.MustParsePrefix("198.51.100.0/24"), netip.MustParsePrefix("2001:db8::/32")
		}, "{src: 198.51.100.0/24, dst: \"2001:db8::/32\"}", "match.dst", "2001:db8::/32"},
	}
	for _, tt := range tests {
		r := base()
		tt.edit(&r.Match)
		for _, g := range []Guard{{}, {AllowMatchAll: true}, DefaultGuard} {
			err := g.Check(&r)
			if tt.field == "" {
				if err != nil {
					t.Errorf("%s, guard %+v: refused: %v", tt.name, g, err)
				}
				continue
			}
			var e *Error
			if !errors.As(err, &e) || e.RuleID != "a" || e.Field != tt.field || e.Value != tt.value {
				t.Errorf("%s, guard %+v: got %v, want rule a, field %s, value %q", tt.name, g, err, tt.field, tt.value)
			}
		}
		if err := r.Match.CheckBounds(); (err == nil) != (tt.field == "") {
			t.Errorf("%s: CheckBounds %v", tt.name, err)
		}
		if tt.yaml == "" {
			continue
		}
		y := tt.yaml
		if !strings.HasPrefix(y, "{") {
			y = "{dst: 203.0.113.0/24, proto: udp, " + y + "}"
		}
		_, err := ParseRule("t", []byte("{id: a, action: drop, match: "+y+"}"), t0)
		var e *Error
		if !errors.As(err, &e) || e.Field != tt.field {
			t.Errorf("%s: the parser: %v, want field %s", tt.name, err, tt.field)
		}
	}
}
