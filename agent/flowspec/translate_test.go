package flowspec

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/osrg/gobgp/v3/pkg/packet/bgp"

	"github.com/scrubd/scrubd/swpath/rule"
)

func items(ops ...uint64) []*bgp.FlowSpecComponentItem {
	var out []*bgp.FlowSpecComponentItem
	for i := 0; i+1 < len(ops); i += 2 {
		out = append(out, &bgp.FlowSpecComponentItem{Op: uint8(ops[i]), Value: ops[i+1]})
	}
	return out
}

func TestNumeric(t *testing.T) {
	const and = bgp.DEC_NUM_OP_AND
	for _, tc := range []struct {
		items []*bgp.FlowSpecComponentItem
		want  string
	}{
		{items(bgp.DEC_NUM_OP_EQ, 80), "80"},
		{items(bgp.DEC_NUM_OP_GT_EQ, 1000, and|bgp.DEC_NUM_OP_LT_EQ, 2000), "1000-2000"},
		{items(bgp.DEC_NUM_OP_EQ, 53, bgp.DEC_NUM_OP_EQ, 123, bgp.DEC_NUM_OP_GT, 65000), "53,123,65001-65535"},
		{items(bgp.DEC_NUM_OP_NOT_EQ, 0), "1-65535"},
		{items(bgp.DEC_NUM_OP_LT, 0), ""},
		{items(bgp.DEC_NUM_OP_GT, 10, and|bgp.DEC_NUM_OP_LT, 5), ""},
		{items(0x07, 0), "0-65535"}, // RFC 8955: lt|gt|eq is true (GoBGP names 0x07 FALSE)
		{items(0x00, 0), ""},        // RFC 8955: no bits is false
		{items(bgp.DEC_NUM_OP_EQ, 70000), ""},
	} {
		got := numeric(tc.items, 65535)
		s := ""
		for i, r := range got {
			if i > 0 {
				s += ","
			}
			s += r.String()
		}
		if s != tc.want {
			t.Errorf("%v: %q want %q", tc.items, s, tc.want)
		}
	}
}

func TestFlagsAndFragments(t *testing.T) {
	v, m, ok := flags(items(bgp.BITMASK_FLAG_OP_MATCH, uint64(bgp.TCP_FLAG_SYN), bgp.BITMASK_FLAG_OP_AND|bgp.BITMASK_FLAG_OP_NOT, uint64(bgp.TCP_FLAG_ACK)))
	if !ok || v != rule.SYN || m != rule.SYN|rule.ACK {
		t.Fatalf("syn&!ack: %x/%x %v", v, m, ok)
	}
	if _, _, ok := flags(items(bgp.BITMASK_FLAG_OP_MATCH, 2, bgp.BITMASK_FLAG_OP_MATCH, 16)); ok {
		t.Fatal("OR of flag terms accepted")
	}
	if _, _, ok := flags(items(0, 0x12)); ok {
		t.Fatal("any-of several flags accepted")
	}
	f, ok := fragments(items(0, bgp.FRAG_FLAG_IS|bgp.FRAG_FLAG_FIRST))
	if !ok || f != rule.IsFragment|rule.FirstFragment {
		t.Fatalf("frag %v %v", f, ok)
	}
	if _, ok := fragments(items(bgp.BITMASK_FLAG_OP_NOT, bgp.FRAG_FLAG_IS)); ok {
		t.Fatal("not-fragment term accepted")
	}
	// Value 0: without the match bit GoBGP's not-a-fragment; with it,
	// (data AND 0) == 0 holds for every packet, and so does the component
	// (found by FuzzTranslate: it once read as not-a-fragment, a rule
	// narrower than its route).
	if f, ok := fragments(items(0, 0)); !ok || f != rule.NotFragment {
		t.Fatalf("value 0: %v %v, want not-fragment", f, ok)
	}
	if f, ok := fragments(items(bgp.BITMASK_FLAG_OP_MATCH, 0, 0, bgp.FRAG_FLAG_IS)); !ok || f != 0 {
		t.Fatalf("match value 0 or is-fragment: %v %v, want any packet (0)", f, ok)
	}
}

// anyDst allows every destination, for cases about other components.
var anyDst = []netip.Prefix{netip.MustParsePrefix("0.0.0.0/0"), netip.MustParsePrefix("::/0")}

func TestTranslateAndRefusals(t *testing.T) {
	dst := bgp.NewFlowSpecDestinationPrefix(bgp.NewIPAddrPrefix(24, "203.0.113.0"))
	r, rf := Translate("x", 500, rule.IPv4, []bgp.FlowSpecComponentInterface{dst, num(bgp.FLOW_SPEC_TYPE_PKT_LEN, bgp.DEC_NUM_OP_LT, 100)}, anyDst)
	if rf != nil || r.Match.Length[0] != (rule.Range{Lo: 0, Hi: 99}) {
		t.Fatalf("%v %+v", rf, r.Match)
	}
	// Ports are TCP and UDP ports (RFC 8955 4.2.2.4-6): a route with ports
	// names those protocols, with ICMP alone it matches nothing, and with
	// TCP or SCTP it names TCP only (the rule model's ports hold for SCTP).
	if _, rf := Translate("x", 500, rule.IPv4, []bgp.FlowSpecComponentInterface{dst, num(bgp.FLOW_SPEC_TYPE_IP_PROTO, bgp.DEC_NUM_OP_EQ, 1), num(bgp.FLOW_SPEC_TYPE_DST_PORT, bgp.DEC_NUM_OP_EQ, 80)}, anyDst); rf == nil || rf.Reason != ReasonEmpty {
		t.Fatalf("icmp+ports: %v", rf)
	}
	r, rf = Translate("x", 500, rule.IPv4, []bgp.FlowSpecComponentInterface{dst, num(bgp.FLOW_SPEC_TYPE_DST_PORT, bgp.DEC_NUM_OP_EQ, 80)}, anyDst)
	if rf != nil || !slices.Equal(r.Match.Proto, []uint8{rule.ProtoTCP, rule.ProtoUDP}) {
		t.Fatalf("ports alone: %v %v", rf, &r.Match)
	}
	tcpSCTP := bgp.NewFlowSpecComponent(bgp.FLOW_SPEC_TYPE_IP_PROTO, []*bgp.FlowSpecComponentItem{
		bgp.NewFlowSpecComponentItem(bgp.DEC_NUM_OP_EQ, rule.ProtoTCP), bgp.NewFlowSpecComponentItem(bgp.DEC_NUM_OP_EQ|bgp.DEC_NUM_OP_END, rule.ProtoSCTP)})
	r, rf = Translate("x", 500, rule.IPv4, []bgp.FlowSpecComponentInterface{dst, tcpSCTP, num(bgp.FLOW_SPEC_TYPE_PORT, bgp.DEC_NUM_OP_EQ, 80)}, anyDst)
	if rf != nil || !slices.Equal(r.Match.Proto, []uint8{rule.ProtoTCP}) {
		t.Fatalf("tcp or sctp with ports: %v %v", rf, &r.Match)
	}
	// A type twice: GoBGP's decoder keeps both, the route asks for both,
	// and a rule of the last alone would drop port 443 as well.
	if _, rf := Translate("x", 500, rule.IPv4, []bgp.FlowSpecComponentInterface{dst, num(bgp.FLOW_SPEC_TYPE_DST_PORT, bgp.DEC_NUM_OP_EQ, 80), num(bgp.FLOW_SPEC_TYPE_DST_PORT, bgp.DEC_NUM_OP_GT, 79)}, anyDst); rf == nil || rf.Reason != ReasonInvalid || !strings.Contains(rf.Detail, "twice") {
		t.Fatalf("destination port twice: %v", rf)
	}
	if _, rf := Translate("x", 500, rule.IPv4, []bgp.FlowSpecComponentInterface{dst, num(bgp.FLOW_SPEC_TYPE_LABEL, bgp.DEC_NUM_OP_EQ, 5)}, anyDst); rf == nil || rf.Reason != ReasonComponent {
		t.Fatalf("label: %v", rf)
	}
	allowed := []netip.Prefix{netip.MustParsePrefix("198.51.100.0/22")}
	if _, rf := Translate("x", 500, rule.IPv4, []bgp.FlowSpecComponentInterface{dst}, allowed); rf == nil || rf.Reason != ReasonDestination {
		t.Fatalf("allowed: %v", rf)
	}
	// allowed_destinations is required: none configured refuses every
	// route, and a route with only a source names no destination.
	if _, rf := Translate("x", 500, rule.IPv4, []bgp.FlowSpecComponentInterface{dst}, nil); rf == nil || rf.Reason != ReasonDestination {
		t.Fatalf("no allowed destinations: %v", rf)
	}
	src := bgp.NewFlowSpecSourcePrefix(bgp.NewIPAddrPrefix(24, "198.51.100.0"))
	if _, rf := Translate("x", 500, rule.IPv4, []bgp.FlowSpecComponentInterface{src}, allowed); rf == nil || rf.Reason != ReasonDestination || !strings.Contains(rf.Detail, "no destination prefix") {
		t.Fatalf("source only: %v", rf)
	}
	if rf := Action(nil); rf == nil || rf.Reason != ReasonNoAction {
		t.Fatalf("no action: %v", rf)
	}
	pk := &bgp.UnknownExtended{Type: 0x80, Value: []byte{0x0c, 0, 0, 0, 0, 0, 0}}
	if rf := Action([]bgp.PathAttributeInterface{bgp.NewPathAttributeExtendedCommunities([]bgp.ExtendedCommunityInterface{pk})}); rf != nil {
		t.Fatalf("traffic-rate-packets 0: %v", rf)
	}
	pk2 := &bgp.UnknownExtended{Type: 0x80, Value: []byte{0x0c, 0, 0, 0x44, 0x7a, 0, 0}}
	if rf := Action([]bgp.PathAttributeInterface{bgp.NewPathAttributeExtendedCommunities([]bgp.ExtendedCommunityInterface{pk2})}); rf == nil {
		t.Fatal("traffic-rate-packets 1000 accepted")
	}
}

// A route of one family decides that family's packets only (RFC 8955,
// 8956), prefixes or not.
func TestTranslateFamily(t *testing.T) {
	udp53 := []bgp.FlowSpecComponentInterface{num(bgp.FLOW_SPEC_TYPE_IP_PROTO, bgp.DEC_NUM_OP_EQ, 17), num(bgp.FLOW_SPEC_TYPE_PORT, bgp.DEC_NUM_OP_EQ, 53)}
	v4 := rule.Fields{Family: rule.IPv4, Proto: 17, L4: true, SrcPort: 40000, DstPort: 53,
		Src: rule.AddrFrom(netip.MustParseAddr("198.51.100.1")), Dst: rule.AddrFrom(netip.MustParseAddr("203.0.113.1"))}
	v6 := rule.Fields{Family: rule.IPv6, Proto: 17, L4: true, SrcPort: 40000, DstPort: 53,
		Src: rule.AddrFrom(netip.MustParseAddr("2001:db8::1")), Dst: rule.AddrFrom(netip.MustParseAddr("2001:db8::2"))}
	for _, tc := range []struct {
		fam        rule.Family
		match, not *rule.Fields
	}{{rule.IPv4, &v4, &v6}, {rule.IPv6, &v6, &v4}} {
		r, rf := Translate("x", 500, tc.fam, udp53, anyDst)
		if rf != nil {
			t.Fatalf("IPv%d: %v", tc.fam, rf)
		}
		if !r.Match.Matches(tc.match) || r.Match.Matches(tc.not) {
			t.Errorf("IPv%d route %s: matches its family %v, the other %v; want true, false", tc.fam, r.Match.String(),
				r.Match.Matches(tc.match), r.Match.Matches(tc.not))
		}
	}
	// An IPv6 route carrying an IPv4 prefix is malformed.
	dst4 := bgp.NewFlowSpecDestinationPrefix(bgp.NewIPAddrPrefix(24, "203.0.113.0"))
	if _, rf := Translate("x", 500, rule.IPv6, []bgp.FlowSpecComponentInterface{dst4}, anyDst); rf == nil || rf.Reason != ReasonInvalid {
		t.Fatalf("IPv4 prefix in an IPv6 route: %v", rf)
	}
}
