package classifier

import (
	"net/netip"
	"testing"

	"github.com/scrubd/scrubd/swpath/rule"
)

// TestCacheKeyFollowsFieldTable checks the flow-cache key packing against
// rule.MatchFields: with a rule set that looks at every field, setting any
// one bit of a field changes the key, and only in the bits the table gives
// that field. A bit dropped from the key (a packet would then share a
// cached decision with one that differs there) or a field packed over
// another fails it.
func TestCacheKeyFollowsFieldTable(t *testing.T) {
	set := &rule.Set{Rules: []rule.Rule{
		{ID: "all-fields", Priority: 1, Action: rule.Drop, Match: rule.Match{
			Src: netip.MustParsePrefix("192.0.2.0/24"), Dst: netip.MustParsePrefix("198.51.100.0/24"),
			Proto: []uint8{rule.ProtoTCP}, SrcPort: rule.Ranges{{Lo: 1, Hi: 2}}, DstPort: rule.Ranges{{Lo: 3, Hi: 4}},
			TCPFlags: rule.TCPFlags{Value: 2, Mask: 2}, HasTCPFlags: true, Fragment: rule.IsFragment,
			Length: rule.Ranges{{Lo: 40, Hi: 100}}, DSCP: 1 << 46}},
		{ID: "icmp", Priority: 2, Action: rule.Drop, Match: rule.Match{
			Proto: []uint8{rule.ProtoICMP}, ICMPType: rule.Ranges{{Lo: 8, Hi: 8}}, ICMPCode: rule.Ranges{{Lo: 0, Hi: 0}}}},
	}}
	c, err := New(set)
	if err != nil {
		t.Fatal(err)
	}
	tb := c.Table()
	var zero rule.Fields
	k0 := tb.cacheKeyOf(&zero)
	for _, mf := range rule.MatchFields {
		for bit := 0; bit < mf.Width; bit++ {
			var f rule.Fields
			var hi, lo uint64
			if bit < 64 {
				lo = 1 << bit
			} else {
				hi = 1 << (bit - 64)
			}
			mf.Set(&f, hi, lo)
			if gh, gl := mf.Get(&f); gh != hi || gl != lo {
				t.Fatalf("%s: Get after Set(%#x, %#x) = %#x, %#x", mf.Name, hi, lo, gh, gl)
			}
			k := tb.cacheKeyOf(&f)
			changed := false
			for w := range k {
				d := k[w] ^ k0[w]
				if d&^mf.CacheKey[w] != 0 {
					t.Errorf("%s bit %d changes cache-key word %d bits %#x outside the table's %#x", mf.Name, bit, w, d, mf.CacheKey[w])
				}
				changed = changed || d != 0
			}
			if !changed {
				t.Errorf("%s bit %d does not reach the flow-cache key (table: %#x)", mf.Name, bit, mf.CacheKey)
			}
		}
	}
}

// TestCacheMasksKeepOnlyFieldsRead: with rules that read only addresses
// and protocol, packets differing in any other field share a cache key;
// a rule reading DSCP brings the table's DSCP bits back into it.
func TestCacheMasksKeepOnlyFieldsRead(t *testing.T) {
	key := func(set *rule.Set, f *rule.Fields) cacheKey {
		c, err := New(set)
		if err != nil {
			t.Fatal(err)
		}
		return c.Table().cacheKeyOf(f)
	}
	plain := &rule.Set{Rules: []rule.Rule{{ID: "a", Priority: 1, Action: rule.Drop, Match: rule.Match{
		Dst: netip.MustParsePrefix("198.51.100.0/24"), Proto: []uint8{rule.ProtoUDP}}}}}
	a := rule.Fields{Family: rule.IPv4, Proto: rule.ProtoUDP, L4: true, DSCP: 46, SrcPort: 9, DstPort: 53, Length: 80, TCPFlags: 0, Frag: rule.NotFragment}
	b := a
	b.DSCP, b.SrcPort, b.DstPort, b.Length = 10, 10, 54, 81
	if key(plain, &a) != key(plain, &b) {
		t.Fatal("fields no rule reads are in the cache key")
	}
	withDSCP := &rule.Set{Rules: append(plain.Rules, rule.Rule{ID: "d", Priority: 2, Action: rule.Drop, Match: rule.Match{DSCP: 1 << 46}})}
	b = a
	b.DSCP = 47
	if key(withDSCP, &a) == key(withDSCP, &b) {
		t.Fatal("DSCP is read by a rule but not in the cache key")
	}
}
