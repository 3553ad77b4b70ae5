package xdp

import (
	"errors"
	"net/netip"
	"strconv"
	"testing"

	"github.com/scrubd/scrubd/swpath/rule"
)

func slotsFor(s *rule.Set) []uint32 {
	out := make([]uint32, len(s.Rules))
	for i := range out {
		out[i] = uint32(i)
	}
	return out
}

func singlePorts(from, n int) rule.Ranges {
	var rs rule.Ranges
	for i := 0; i < n; i++ {
		rs = append(rs, rule.Range{Lo: uint32(from + i), Hi: uint32(from + i)})
	}
	return rs
}

// TestLimitsRefuse: a rule beyond each limit is refused with a LimitError
// naming the rule and the limit, and the rule just inside is accepted.
func TestLimitsRefuse(t *testing.T) {
	expansion := func(nproto int) *rule.Set {
		return &rule.Set{Rules: []rule.Rule{{ID: "wide", Match: rule.Match{
			Proto: []uint8{6, 17, 132}[:nproto], SrcPort: singlePorts(1, 16), DstPort: singlePorts(100, 16)}}}}
	}
	chain := func(n int) *rule.Set {
		s := &rule.Set{}
		for i := 0; i < n; i++ {
			s.Rules = append(s.Rules, rule.Rule{ID: "len" + strconv.Itoa(i),
				Match: rule.Match{Proto: []uint8{17}, Length: rule.Ranges{{Lo: uint32(i), Hi: uint32(i)}}}})
		}
		return s
	}
	for _, tt := range []struct {
		name      string
		ok, over  *rule.Set
		limit, id string
	}{
		{"entries", expansion(1), expansion(3), "MaxEntriesPerRule", "wide"},
		{"chain", chain(MaxChain), chain(MaxChain + 1), "MaxChain", "len" + strconv.Itoa(MaxChain)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := compile(tt.ok, slotsFor(tt.ok)); err != nil {
				t.Fatalf("inside the limit: %v", err)
			}
			_, err := compile(tt.over, slotsFor(tt.over))
			var le *LimitError
			if !errors.As(err, &le) {
				t.Fatalf("over the limit: got %v, want a *LimitError", err)
			}
			if le.Limit != tt.limit || le.RuleID != tt.id || le.Need <= le.Max {
				t.Fatalf("got %+v, want limit %s for rule %s", le, tt.limit, tt.id)
			}
			t.Log(err)
		})
	}
}

// TestMasksBounded: with prefix lengths rounded to mask steps, every shape a
// rule can take needs at most 245 masks, so MaxMasks is never reached.
func TestMasksBounded(t *testing.T) {
	s := masksSet(1 << 20)
	for shape := 0; shape < 8; shape++ { // rules without prefixes
		m := shapeMatch(shape)
		s.Rules = append(s.Rules, rule.Rule{ID: "any" + strconv.Itoa(shape), Match: m})
	}
	tb, err := compile(s, slotsFor(s))
	if err != nil {
		t.Fatal(err)
	}
	// 248 shapes, of which the four with only an exact destination port
	// (protocol given or not, family given by a /0 prefix or not) share the
	// port mask.
	if len(tb.masks) != 245 || len(tb.masks) > MaxMasks {
		t.Fatalf("%d masks for every shape, want 245 (<= MaxMasks %d)", len(tb.masks), MaxMasks)
	}
	ports := 0
	for _, m := range tb.masks {
		if m.Kind == kindPort {
			ports++
		}
	}
	if ports != 1 {
		t.Fatalf("%d port masks, want 1", ports)
	}
}

// TestCompileShape checks the layout decisions on a small set: masks sorted
// by best rank, lists in rank order, exact ports in the key.
func TestCompileShape(t *testing.T) {
	s := &rule.Set{Rules: []rule.Rule{
		{ID: "late", Priority: 50, Match: rule.Match{Proto: []uint8{17}, DstPort: rule.Ranges{{Lo: 1, Hi: 9}}}},
		{ID: "dns", Priority: 10, Match: rule.Match{Proto: []uint8{17}, DstPort: rule.Ranges{{Lo: 53, Hi: 53}}}},
		{ID: "early", Priority: 1, Match: rule.Match{Proto: []uint8{17}, Length: rule.Ranges{{Lo: 0, Hi: 100}}}},
		{ID: "net", Priority: 20, Match: rule.Match{Dst: netip.MustParsePrefix("10.1.2.0/23")}},
	}}
	tb, err := compile(s, slotsFor(s))
	if err != nil {
		t.Fatal(err)
	}
	if len(tb.masks) != 3 {
		t.Fatalf("%d masks, want 3 (udp, udp+dport, ipv4 dst/16)", len(tb.masks))
	}
	for i := 1; i < len(tb.masks); i++ {
		if tb.masks[i-1].BestRank > tb.masks[i].BestRank {
			t.Fatalf("masks not sorted by best rank: %+v", tb.masks)
		}
	}
	if len(tb.ents) != 4 || tb.ents[0].Rule != 2 || tb.ents[0].Rank != 0 {
		t.Fatalf("entries %+v", tb.ents)
	}
	// "net" (/23) sits in a /16 mask with its exact prefix in the entry.
	e := tb.ents[2]
	if e.Rule != 3 || e.Need&needPfx == 0 || e.DstM[2] != 0xfe {
		t.Fatalf("entry of net: %+v", e)
	}
	// "early" and "late" share the masked tuple (udp): one list, rank order.
	var k tuple
	k[1], k[6] = 17, 0
	c, ok := tb.keys[k]
	if !ok || c.N != 2 || tb.ents[c.Head].Rank != 0 || tb.ents[tb.ents[c.Head].Next].Rank != 3 {
		t.Fatalf("udp list %+v ok=%v", c, ok)
	}
}

func shapeMatch(shape int) rule.Match {
	var m rule.Match
	if shape&1 != 0 {
		m.Proto = []uint8{17}
	}
	if shape&2 != 0 {
		m.SrcPort = rule.Ranges{{Lo: 53, Hi: 53}}
	}
	if shape&4 != 0 {
		m.DstPort = rule.Ranges{{Lo: 53, Hi: 53}}
	}
	return m
}

// masksSet enumerates rule shapes with prefixes that each need their own
// mask: prefix lengths in mask steps, protocol given, exact ports.
func masksSet(n int) *rule.Set {
	s := &rule.Set{}
	for _, fam := range []struct {
		addr  string
		steps []int
	}{{"2001:db8::", []int{0, 32, 64, 96, 128}}, {"10.0.0.0", []int{0, 16, 32}}} {
		for _, sl := range fam.steps {
			for _, dl := range fam.steps {
				for shape := 0; shape < 8; shape++ {
					m := shapeMatch(shape)
					m.Src = netip.PrefixFrom(netip.MustParseAddr(fam.addr), sl)
					m.Dst = netip.PrefixFrom(netip.MustParseAddr(fam.addr), dl)
					if len(s.Rules) < n {
						s.Rules = append(s.Rules, rule.Rule{ID: "m" + strconv.Itoa(len(s.Rules)), Match: m})
					}
				}
			}
		}
	}
	return s
}
