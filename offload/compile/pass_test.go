package compile

import (
	"math/rand/v2"
	"testing"

	"github.com/scrubd/scrubd/offload"
	"github.com/scrubd/scrubd/swpath/rule"
)

// TestPassExactRandom: an accept rule's pass entries match exactly the
// packets the rule matches (rule.Match.Matches over the rule's edge packet
// space), every one is a pass entry in the pass table of its family, and
// a drop rule's cookie is not changed by the pass bit's existence.
func TestPassExactRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	cfg := mlx5Cfg()
	cfg.PrioV4, cfg.PrioV6, cfg.PassPrioV4, cfg.PassPrioV6 = 10, 11, 8, 9
	n := 0
	for i := range 2000 {
		ru := randRule(r, i)
		ru.Action = rule.Accept
		res := Pass(cfg, &ru)
		d := ru
		d.Action = rule.Drop
		dres := Rule(cfg, &d)
		if res.Offloadable != dres.Offloadable {
			t.Fatalf("%s: pass offloadable %v, drop %v", ru.Match.String(), res.Offloadable, dres.Offloadable)
		}
		if !res.Offloadable {
			continue
		}
		n++
		checkExact(t, &ru, &res, 300)
		rh := offload.RuleHash(ru.ID, &ru.Match)
		for j, e := range res.Entries {
			want := uint16(8)
			if e.Match.Family == rule.IPv6 {
				want = 9
			}
			if !e.Pass || e.Prio != want || e.Cookie.RuleHash() != rh {
				t.Fatalf("%s: entry %d pass %v prio %d cookie %s", ru.Match.String(), j, e.Pass, e.Prio, e.Cookie)
			}
			dc := e
			dc.Pass = false
			dc.SetCookie(rh)
			if dc.Cookie == e.Cookie {
				t.Fatalf("pass and drop entries share a cookie")
			}
		}
	}
	if n < 300 {
		t.Fatalf("only %d of 2000 accept rules got pass entries", n)
	}
	ru := rule.Rule{ID: "d", Action: rule.Drop, Match: rule.Match{Proto: []uint8{rule.ProtoTCP}}}
	if res := Pass(cfg, &ru); res.Offloadable {
		t.Error("a drop rule got pass entries")
	}
	cfg.PassPrioV4 = 0
	ru.Action = rule.Accept
	if res := Pass(cfg, &ru); res.Offloadable {
		t.Error("pass entries without a pass priority")
	}
}
