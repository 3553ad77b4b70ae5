package rule

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"
)

// The chunked reading of a plain rule file gives what the whole-file
// reading gives: the same rules, and for a refused file the same errors
// with the same line numbers; files of another shape are read whole.
func TestParseItemsAgreesWithWholeFile(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var b strings.Builder
	b.WriteString("# generated\nrules:\n")
	for i := range 1500 {
		switch i % 3 {
		case 0:
			fmt.Fprintf(&b, "  - {id: r%d, action: drop, match: {dst: 203.0.%d.%d/32, proto: udp, dst_port: [53, 123]}}\n", i, i/256%256, i%256)
		case 1:
			fmt.Fprintf(&b, "  # rule %d\n  - id: r%d\n    action: drop\n    priority: %d\n    match:\n      src: 198.51.%d.0/24\n      proto: tcp\n\n", i, i, 100+i%7, i%256)
		default:
			fmt.Fprintf(&b, "  - {\"id\":\"r%d\",\"action\":\"accept\",\"match\":{\"dst\":\"192.0.2.%d/32\",\"dscp\":[46]}}\n", i, i%256)
		}
	}
	good := b.String()
	bad := strings.Replace(good, "id: r700\n", "id: r700\n    colour: red\n", 1)
	bad = strings.Replace(bad, "dst: 203.0.5.55/32", "dst: 203.0.5.355/32", 1)
	bad = strings.Replace(bad, "{id: r999,", "{id: r3,", 1)
	for _, tc := range []struct {
		name, data string
		chunked    bool
	}{
		{"good", good, true},
		{"bad", bad, true},
		{"flow list", "rules: [{id: a, action: drop, match: {dst: 192.0.2.1/32}}]\n", false},
		{"anchor", "rules:\n  - &x {id: a, action: drop, match: {dst: 192.0.2.1/32}}\n", false},
		{"other key", "rules:\n  - {id: a, action: drop, match: {dst: 192.0.2.1/32}}\nextra: 1\n", false},
		{"cut after rules", "rules:\n", false},
		{"items at two depths", "rules:\n  - {id: a, action: drop, match: {dst: 192.0.2.1/32}}\n - {id: b, action: drop, match: {dst: 192.0.2.2/32}}\n", false},
	} {
		set, ok, err := parseItems(context.Background(), "f.yaml", []byte(tc.data), now)
		if ok != tc.chunked {
			t.Errorf("%s: chunked %v, want %v", tc.name, ok, tc.chunked)
			continue
		}
		wset, werr := parseWhole("f.yaml", []byte(tc.data), now)
		if !ok {
			set, err = Parse("f.yaml", []byte(tc.data), now)
		}
		if fmt.Sprint(err) != fmt.Sprint(werr) {
			t.Errorf("%s: error\n%v\nwant\n%v", tc.name, err, werr)
		}
		if !reflect.DeepEqual(set, wset) {
			t.Errorf("%s: rules differ from the whole-file reading", tc.name)
		}
		if tc.name == "good" && (set == nil || len(set.Rules) != 1500) {
			t.Errorf("good: %d rules, want 1500", len(set.Rules))
		}
		if tc.name == "bad" && (werr == nil || !strings.Contains(werr.Error(), "f.yaml:2336: ") || !strings.Contains(werr.Error(), "duplicate id")) {
			t.Errorf("bad: whole-file error %v: want line 2336 and the duplicate id", werr)
		}
	}
}
