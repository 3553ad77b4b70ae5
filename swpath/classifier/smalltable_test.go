package classifier

import (
	"fmt"
	"testing"

	"github.com/scrubd/scrubd/swpath/rule"
	"github.com/scrubd/scrubd/swpath/traffic"
)

// TestSmallTablesHaveNoChains: in every hash table of at most
// smallTableKeys keys, each key sits in its home slot (the slot its hash
// names), so no lookup in a small set walks a probe chain. The sets: the
// source workload (five amplification-port rules, 20 keys in one table,
// two of which shared a home slot before small tables grew) and sets of 1
// to 32 single-port UDP rules.
func TestSmallTablesHaveNoChains(t *testing.T) {
	sets := map[string]*rule.Set{"source workload": traffic.SourceWorkload()}
	for _, n := range []int{1, 2, 5, 17, 25, 32} {
		s := &rule.Set{}
		for i := 0; i < n; i++ {
			s.Rules = append(s.Rules, rule.Rule{ID: fmt.Sprint(i), Action: rule.Drop, Match: rule.Match{
				Proto: []uint8{rule.ProtoUDP}, SrcPort: rule.Ranges{{Lo: uint32(1000 + 7*i), Hi: uint32(1000 + 7*i)}}}})
		}
		sets[fmt.Sprintf("%d port rules", n)] = s
	}
	for name, set := range sets {
		tab, err := compile(set, treesOff)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		small := 0
		for ti := range tab.tables {
			ht := &tab.tables[ti]
			keys := 0
			for _, s := range ht.slots {
				if s.n != 0 {
					keys++
				}
			}
			if keys > smallTableKeys {
				continue
			}
			small++
			for h, s := range ht.slots {
				if s.n == 0 {
					continue
				}
				home := hash5(s.srcHi, s.srcLo, s.dstHi, s.dstLo, s.misc) >> ht.shift >> bloomShift
				if home != uint64(h) {
					t.Errorf("%s: table %d (%d keys, %d slots): key with misc %#x sits in slot %d, its home is %d",
						name, ti, keys, len(ht.slots), s.misc, h, home)
				}
			}
		}
		if small == 0 {
			t.Fatalf("%s: no small table to check", name)
		}
	}
}
