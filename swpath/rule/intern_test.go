package rule

import (
	"fmt"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"
)

// Rules that repeat a list (ports, protocols, lengths) share one array of
// it, with its capacity at its length; different lists stay apart, an
// empty list stays empty and not nil.
func TestParseInternsRepeatedLists(t *testing.T) {
	src := `rules:
  - {id: a, action: drop, match: {proto: [udp, tcp], dst_port: ["53", "5353"], length: "60-80"}}
  - {id: b, action: drop, match: {proto: [tcp, udp], dst_port: ["53", "5353"], src_port: "60-80"}}
  - {id: c, action: drop, match: {proto: udp, dst_port: "54", length: "60-80"}}
`
	set, err := Parse("t.yaml", []byte(src), time.Unix(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	a, b, c := &set.Rules[0].Match, &set.Rules[1].Match, &set.Rules[2].Match
	if &a.Proto[0] != &b.Proto[0] || &a.DstPort[0] != &b.DstPort[0] || &a.Length[0] != &b.SrcPort[0] || &a.Length[0] != &c.Length[0] {
		t.Fatal("repeated lists are not shared")
	}
	if &a.Proto[0] == &c.Proto[0] || &a.DstPort[0] == &c.DstPort[0] {
		t.Fatal("different lists are shared")
	}
	if !reflect.DeepEqual(a.Proto, []uint8{ProtoTCP, ProtoUDP}) || !reflect.DeepEqual(c.DstPort, Ranges{{54, 54}}) ||
		!reflect.DeepEqual(b.DstPort, Ranges{{53, 53}, {5353, 5353}}) || !reflect.DeepEqual(c.Length, Ranges{{60, 80}}) {
		t.Fatalf("lists read %v %v %v %v", a.Proto, c.DstPort, b.DstPort, c.Length)
	}
	for _, l := range [][]Range{a.DstPort, a.Length, c.DstPort} {
		if cap(l) != len(l) {
			t.Fatalf("a shared list of %d has capacity %d", len(l), cap(l))
		}
	}
	if cap(a.Proto) != len(a.Proto) {
		t.Fatalf("a shared protocol list of %d has capacity %d", len(a.Proto), cap(a.Proto))
	}
	x := append(a.DstPort, Range{1, 1})
	y := append(b.DstPort, Range{2, 2})
	if x[2] == y[2] || b.DstPort[1] != (Range{5353, 5353}) {
		t.Fatal("appending to one rule's list wrote another's")
	}
}

// Past maxInterned distinct lists a parse keeps no more, and every rule
// still reads its own list.
func TestParseInternBound(t *testing.T) {
	var b strings.Builder
	b.WriteString("rules:\n")
	const n = maxInterned + 100
	for i := range n {
		fmt.Fprintf(&b, "  - {id: r%d, action: drop, match: {dst_port: \"%d\"}}\n", i, i)
	}
	fmt.Fprintf(&b, "  - {id: again, action: drop, match: {dst_port: \"%d\"}}\n", n-1)
	set, err := Parse("t.yaml", []byte(b.String()), time.Unix(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if p := set.Rules[i].Match.DstPort; len(p) != 1 || p[0] != (Range{uint32(i), uint32(i)}) {
			t.Fatalf("rule %d reads dst_port %v", i, p)
		}
	}
	if last := set.Rules[n].Match.DstPort; &last[0] == &set.Rules[n-1].Match.DstPort[0] || last[0] != (Range{n - 1, n - 1}) {
		t.Fatalf("a list past the bound: %v", last)
	}
}

// The saving, in bytes a parsed rule retains: 20000 rules with the same
// protocol and port lists retain a rule (304 bytes in the set's array),
// its id's bytes and a few more (320 bytes a rule in all, on amd64 with
// Go 1.26), not two small arrays more (8 and 16 bytes: 344 in all).
func TestParsedRuleRetains(t *testing.T) {
	const n = 20000
	var b strings.Builder
	b.WriteString("rules:\n")
	for i := range n {
		fmt.Fprintf(&b, "  - {id: r%05d, action: drop, match: {dst: 10.0.0.0/8, proto: [tcp, udp], dst_port: [\"53\", \"80-90\"]}}\n", i)
	}
	data := []byte(b.String())
	b.Reset()
	var m0, m1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m0)
	set, err := Parse("t.yaml", data, time.Unix(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	runtime.GC()
	runtime.ReadMemStats(&m1)
	runtime.KeepAlive(set)
	runtime.KeepAlive(data)
	perRule := (int64(m1.HeapAlloc) - int64(m0.HeapAlloc)) / n
	size := int64(reflect.TypeFor[Rule]().Size())
	t.Logf("%d parsed rules retain %d bytes a rule (a rule is %d bytes, its id 6)", n, perRule, size)
	if perRule > size+24 {
		t.Fatalf("a parsed rule retains %d bytes, want at most %d", perRule, size+24)
	}
}
