package rule

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// rules.guard.max_list_entries: a list condition with more entries than the
// limit is refused, naming the field, the count and the key; at the limit
// it passes; accept rules are bounded too; 0 is no bound.
func TestGuardMaxListEntries(t *testing.T) {
	ports := func(n int) string { // n ports two apart: n ranges, none merged
		var b []string
		for i := range n {
			b = append(b, fmt.Sprint(1000+2*i))
		}
		return "[" + strings.Join(b, ", ") + "]"
	}
	dscp := func(n int) string {
		var b []string
		for i := range n {
			b = append(b, fmt.Sprint(i))
		}
		return "[" + strings.Join(b, ", ") + "]"
	}
	g := Guard{MinPrefixV4: 8, MinPrefixV6: 32, MaxListEntries: 10}
	for _, tc := range []struct {
		body, want string
	}{
		{`{id: a, action: drop, match: {dst: 192.0.2.0/24, proto: udp, dst_port: ` + ports(10) + `}}`, ""},
		{`{id: a, action: drop, match: {dst: 192.0.2.0/24, proto: udp, dst_port: ` + ports(11) + `}}`, `match.dst_port: 11 entries, more than the 10 of rules.guard.max_list_entries`},
		{`{id: a, action: accept, match: {src: 192.0.2.0/24, proto: tcp, src_port: ` + ports(40) + `}}`, `match.src_port: 40 entries`},
		{`{id: a, action: drop, match: {dst: 192.0.2.0/24, dscp: ` + dscp(10) + `}}`, ""},
		{`{id: a, action: drop, match: {dst: 192.0.2.0/24, dscp: ` + dscp(11) + `}}`, `match.dscp: 11 entries`},
		{`{id: a, action: drop, match: {dst: 192.0.2.0/24, proto: udp, port: ` + ports(12) + `}}`, `match.port: 12 entries`},
	} {
		r, err := ParseRule("api", []byte(tc.body), time.Time{})
		if err != nil {
			t.Fatalf("%s: %v", tc.body, err)
		}
		err = g.Check(&r)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%.60s…: refused: %v", tc.body, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%.60s…: %v, want %q", tc.body, err, tc.want)
		}
		if g0 := (Guard{MinPrefixV4: 8, MinPrefixV6: 32}); g0.Check(&r) != nil {
			t.Errorf("%.60s…: refused with no list bound: %v", tc.body, g0.Check(&r))
		}
	}
}
