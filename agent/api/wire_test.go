package api

import (
	"bytes"
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/scrubd/scrubd/swpath/rule"
)

// everyKind is a rule file with every match field and form the rule
// format has, each rule's spec as the API shows it.
const everyKind = `rules:
  - {id: all-fields, priority: 7, action: drop, expires: "2030-01-02T03:04:05Z", match: {src: 198.51.100.0/24, dst: 203.0.113.7/32, proto: [udp, tcp, 200], src_port: ["53", "1000-2000"], dst_port: "4444", length: "0-100", dscp: [46, 0], fragment: [is-fragment, dont-fragment]}}
  - {id: v6-port, action: accept, match: {src: "2001:db8::/32", port: "123", proto: udp}}
  - {id: icmp, action: drop, match: {proto: icmp, icmp_type: 8, icmp_code: ["0-3"]}}
  - {id: flags, action: drop, match: {proto: tcp, tcp_flags: {value: [syn], mask: [syn, ack]}}}
  - {id: no-flags, action: drop, match: {proto: tcp, tcp_flags: {value: [], mask: [fin, syn, rst]}}}
  - {id: everything, action: drop, match: all}
`

// wireInfos is a set of RuleInfo with every field and path kind, the
// strings JSON must escape, and floats in both of JSON's number forms.
func wireInfos(t testing.TB) []RuleInfo {
	set, err := rule.Parse("every.yaml", []byte(everyKind), time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	var out []RuleInfo
	for i := range set.Rules {
		out = append(out, RuleInfo{Rule: set.Rules[i].Spec(), Source: "file:/etc/scrubd/every.yaml", Status: "active", Path: "hw",
			Placement: "offload first: hardware can express it exactly", HW: Counter{12345, 678900}, PPS: 1500.5, AvgFrame: 64, Moves: 2})
	}
	odd := []string{"", `quote " and \ backslash`, "tab\tnew\nline\rcr\bbs\fff", "\x00\x01\x1f\x7f", "<script>&amp;</script>",
		"line\u2028para\u2029", "bad \xff\xfe utf-8 \xc3", "non-ASCII: Grüße, 日本, 🙂", "/slash/"}
	for i, s := range odd {
		out = append(out, RuleInfo{Rule: rule.Spec{ID: s, Action: s, Expires: s, Match: rule.MatchSpec{Src: s, Proto: []string{s, s}, Length: []string{}, DSCP: []int{-1, 63}}},
			Source: s, Status: "refused", Reason: s, Path: s, Placement: s, StaleAt: s,
			HW: Counter{math.MaxUint64, 0}, SW: Counter{uint64(i), 1 << 40}})
	}
	for _, f := range []float64{0, math.Copysign(0, -1), 1e-7, 1e-6, 0.1, 123.456, 1e20, 1e21, 1.5e300, -2.5e-10, math.MaxFloat64, math.SmallestNonzeroFloat64, 999999.5} {
		out = append(out, RuleInfo{Rule: rule.Spec{ID: "f", Match: rule.MatchSpec{TCPFlags: &rule.FlagsSpec{}}}, Status: "active", Path: "sw", PPS: f, AvgFrame: -f, StaleAt: "2026-12-02T00:00:00Z"})
	}
	out = append(out, RuleInfo{Rule: rule.Spec{ID: "p", Match: rule.MatchSpec{All: true}}, Status: "pending", Path: "none"})
	return out
}

// appendRuleInfo writes what encoding/json writes, byte for byte, for
// every field and escape.
func TestAppendRuleInfoIsJSONMarshal(t *testing.T) {
	for i, ri := range wireInfos(t) {
		want, err := json.Marshal(ri)
		if err != nil {
			t.Fatal(err)
		}
		if got := appendRuleInfo(nil, &ri); !bytes.Equal(got, want) {
			t.Errorf("info %d:\n got %s\nwant %s", i, got, want)
		}
	}
}

func FuzzAppendString(f *testing.F) {
	f.Add("plain")
	f.Add("<\u2028\xff\"\\\x00")
	f.Fuzz(func(t *testing.T, s string) {
		want, _ := json.Marshal(s)
		if got := appendString(nil, s); !bytes.Equal(got, want) {
			t.Fatalf("%q: got %s, want %s", s, got, want)
		}
	})
}

func FuzzAppendFloat(f *testing.F) {
	for _, v := range []float64{0, 1e-7, 1e21, 123.456, -1} {
		f.Add(v)
	}
	f.Fuzz(func(t *testing.T, v float64) {
		want, err := json.Marshal(v)
		if err != nil { // NaN, ±Inf: encoding/json refuses them
			want = []byte("null")
		}
		if got := appendFloat(nil, v); !bytes.Equal(got, want) {
			t.Fatalf("%v: got %s, want %s", v, got, want)
		}
	})
}

// refRow is what ListRow holds, as encoding/json decodes it: the reference
// ListRow.Decode is held to.
type refRow struct {
	Rule struct {
		ID string `json:"id"`
	} `json:"rule"`
	Source    string  `json:"source"`
	Status    string  `json:"status"`
	Reason    string  `json:"reason"`
	Path      string  `json:"path"`
	Placement string  `json:"placement_reason"`
	HW        Counter `json:"hw"`
	SW        Counter `json:"sw"`
	PPS       float64 `json:"pps"`
}

func checkRow(t *testing.T, in []byte) {
	t.Helper()
	var want refRow
	werr := json.Unmarshal(in, &want)
	var got ListRow
	gerr := got.Decode(in)
	if (werr == nil) != (gerr == nil) {
		t.Fatalf("%q: Decode error %v, encoding/json's %v", in, gerr, werr)
	}
	if werr != nil {
		return
	}
	g := refRow{Source: string(got.Source), Status: string(got.Status), Reason: string(got.Reason), Path: string(got.Path),
		Placement: string(got.Placement), HW: Counter{Packets: got.HWPackets}, SW: Counter{Packets: got.SWPackets}, PPS: got.PPS}
	g.Rule.ID = string(got.ID)
	want.HW.Bytes, want.SW.Bytes = 0, 0
	if g != want && !(math.IsNaN(g.PPS) && math.IsNaN(want.PPS)) {
		t.Fatalf("%q:\n got %+v\nwant %+v", in, g, want)
	}
}

// rowSeeds are inputs ListRow.Decode must read as encoding/json does:
// valid and invalid JSON, keys in other case, null, duplicates, the
// wrong types, every escape.
var rowSeeds = []string{
	`{}`, `null`, ` null `, `[]`, `"x"`, `1`, ``, `{`, `{"rule":{"id":"a"}}x`, `{"rule":{"id":"a"}} `,
	`{"RULE":{"ID":"a"},"Source":"s","STATUS":"x","pAtH":"hw","PLACEMENT_REASON":"p","Hw":{"PACKETS":5},"PPS":1}`,
	`{"ſource":"long s","ruleK":1,"rule":{"ıd":"dotless"}}`,
	`{"path":"a","path":"b","path":null}`, `{"rule":{"id":"a"},"rule":{"priority":1}}`, `{"hw":{"packets":1},"hw":{"bytes":2}}`,
	`{"source":5}`, `{"rule":"all"}`, `{"rule":null,"hw":null,"pps":null}`, `{"hw":[]}`, `{"pps":"1"}`, `{"pps":1e400}`, `{"pps":-0}`,
	`{"hw":{"packets":1.0}}`, `{"hw":{"packets":-1}}`, `{"hw":{"packets":18446744073709551616}}`, `{"hw":{"bytes":1.5}}`,
	`{"hw":{"packets":18446744073709551615}}`, `{"pps":01}`, `{"pps":1.}`, `{"pps":.5}`, `{"pps":1e}`, `{"pps":-}`, `{"pps":+1}`,
	`{"source":"\"\\\/\b\f\n\r\t\u0041\u00e9\ud83d\ude42\ud800\udc00x"}`, `{"source":"\ud800"}`, `{"source":"\ud800\u0041"}`, `{"source":"\udc00\ud800"}`,
	`{"source":"\x"}`, `{"source":"\u12"}`, `{"source":"a` + "\x01" + `"}`, `{"source":"bad ` + "\xff\xc3" + ` utf8"}`, `{"source":"a`,
	`{"other":[1,{"a":[true,false,null]},"s"],"source":"ok"}`, `{"other":[1,]}`, `{"other":{"a":1,}}`, `{"other":tru}`, `{"a" 1}`, `{a:1}`,
	`{"other":[[[[[]]]]],"status":"deep"}`, " \t\r\n{ \"source\" : \"ws\" , \"hw\" : { \"packets\" : 3 } } \n",
}

func TestListRowDecodeIsEncodingJSON(t *testing.T) {
	for _, ri := range wireInfos(t) {
		checkRow(t, appendRuleInfo(nil, &ri))
	}
	for _, s := range rowSeeds {
		checkRow(t, []byte(s))
	}
}

func FuzzListRowDecode(f *testing.F) {
	for _, ri := range wireInfos(f) {
		f.Add(appendRuleInfo(nil, &ri))
	}
	for _, s := range rowSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) { checkRow(t, in) })
}

// Decode reuses its buffer and allocates nothing once it is large enough,
// for the agent's form and for one with escapes.
func TestListRowDecodeAllocs(t *testing.T) {
	ri := wireInfos(t)[0]
	plain := appendRuleInfo(nil, &ri)
	escaped := []byte(`{"rule":{"id":"a\u0041"},"source":"s\n","status":"active","path":"hw","placement_reason":"\u00e9","hw":{"packets":1,"bytes":2},"sw":{"packets":3,"bytes":4},"pps":1.5}`)
	var r ListRow
	for _, in := range [][]byte{plain, escaped} {
		if n := testing.AllocsPerRun(100, func() {
			if err := r.Decode(in); err != nil {
				t.Fatal(err)
			}
		}); n != 0 {
			t.Errorf("%.60s...: %.0f allocations per Decode", in, n)
		}
	}
	if err := r.Decode(escaped); err != nil || string(r.ID) != "aA" || string(r.Source) != "s\n" || string(r.Placement) != "é" || r.SWPackets != 3 {
		t.Errorf("escaped: %+v %v", r, err)
	}
}

func TestWidthsRoundTrip(t *testing.T) {
	w := Widths{ID: 1, Source: 22, Status: 3, Path: 4, HWPackets: 20, SWPackets: 6, PPS: 7}
	if s := w.String(); s != "id=1,source=22,status=3,path=4,hw_packets=20,sw_packets=6,pps=7" {
		t.Errorf("String: %s", s)
	}
	if got, err := ParseWidths(w.String()); err != nil || got != w {
		t.Errorf("ParseWidths(%s): %+v %v", w, got, err)
	}
	for in, want := range map[string]string{
		"id=1":                     "source is missing",
		"id=1,id=2":                `"id=2" is not one of`,
		"id=x,source=1":            `id="x" is not a width`,
		"id=-1":                    `id="-1" is not a width`,
		"id=1,colour=2":            `"colour=2" is not one of`,
		"":                         `"" is not one of`,
		strings.Repeat("id=1,", 2): `"id=1" is not one of`,
	} {
		if _, err := ParseWidths(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseWidths(%q): %v, want %q", in, err, want)
		}
	}
}

func checkIndent(t *testing.T, in []byte) {
	t.Helper()
	var want bytes.Buffer
	want.WriteString("pre")
	werr := json.Indent(&want, in, "  ", "\t")
	got, gerr := AppendIndent([]byte("pre"), in, "  ", "\t")
	if (werr == nil) != (gerr == nil) {
		t.Fatalf("%q: AppendIndent error %v, json.Indent's %v", in, gerr, werr)
	}
	if werr == nil && !bytes.Equal(got, want.Bytes()) {
		t.Fatalf("%q:\n got %q\nwant %q", in, got, want.Bytes())
	}
	if gerr != nil && string(got) != "pre" {
		t.Fatalf("%q: on error dst is %q", in, got)
	}
}

// AppendIndent indents as json.Indent does and refuses what it refuses.
func TestAppendIndentIsJSONIndent(t *testing.T) {
	for _, ri := range wireInfos(t) {
		checkIndent(t, appendRuleInfo(nil, &ri))
	}
	for _, s := range append(rowSeeds, `[]`, `{}`, `[{}, [], [[]], {"a": []}]`, ` 1 `, "\"\xff\" \n", `"\u00e9\/"`, `[1,2,]`, `{"a":1}{}`, `[1 2]`) {
		checkIndent(t, []byte(s))
	}
}

func FuzzAppendIndent(f *testing.F) {
	for _, ri := range wireInfos(f) {
		f.Add(appendRuleInfo(nil, &ri))
	}
	for _, s := range rowSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) { checkIndent(t, in) })
}

// BenchmarkListRowDecode: one rule as the agent writes it (the rule-file
// rules of wireInfos, in turn), read by ListRow.Decode and, for
// comparison, by encoding/json into the same fields (ns per rule).
func BenchmarkListRowDecode(b *testing.B) {
	var lines [][]byte
	for _, ri := range wireInfos(b)[:6] {
		lines = append(lines, appendRuleInfo(nil, &ri))
	}
	b.Run("ListRow", func(b *testing.B) {
		var r ListRow
		i := 0
		for b.Loop() {
			if err := r.Decode(lines[i%len(lines)]); err != nil {
				b.Fatal(err)
			}
			i++
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		i := 0
		for b.Loop() {
			var r refRow
			if err := json.Unmarshal(lines[i%len(lines)], &r); err != nil {
				b.Fatal(err)
			}
			i++
		}
	})
}
