package placement

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/scrubd/scrubd/swpath/rule"
)

// swPushes counts the sets pushed to the fake software engine since op i.
func swPushes(w *world, from int) int {
	n := 0
	for _, op := range w.ops[from:] {
		if strings.HasPrefix(op, "sw=") {
			n++
		}
	}
	return n
}

func swIDs(w *world) []string {
	var ids []string
	for _, r := range w.sw.set.Rules {
		ids = append(ids, r.ID)
	}
	return ids
}

// With the backstop, an Apply pushes its set to software once: the set
// before the hardware pass already holds what the pass places, in
// hardware or in software, so the software engine does not compile the
// same set twice. Without it, the set after the pass (hardware rules out)
// is a second push. Either way every rule is enforced somewhere after
// every operation (the world's check) and the engine ends with the set
// placement would push now.
func TestOneSoftwarePushPerApplyWithBackstop(t *testing.T) {
	for _, noBackstop := range []bool{false, true} {
		w := newWorld(t, 2)
		c := cfg()
		c.NoBackstop = noBackstop
		p := New(c, w.hw, w.sw, quiet(), w.now)
		rs := []rule.Rule{drop("a", "203.0.113.0/24"), drop("b", "198.51.100.0/24"), drop("c", "198.51.101.0/24")}
		w.want(rs...)
		want := 1
		if noBackstop {
			want = 2
		}
		for round, set := range [][]rule.Rule{rs, append(rs, drop("d", "198.51.102.0/24"))} {
			w.want(set...)
			from := len(w.ops)
			p.Apply(context.Background(), snap(uint64(round+1), set...))
			if got := swPushes(w, from); got != want {
				t.Errorf("backstop %v, round %d: %d software pushes, want %d (ops %v)", !noBackstop, round, got, want, w.ops[from:])
			}
			var now []string
			for _, r := range p.swSet(nil, !noBackstop).Rules {
				now = append(now, r.ID)
			}
			if got := swIDs(w); !slices.Equal(got, now) {
				t.Errorf("backstop %v, round %d: software holds %v, placement's set now is %v", !noBackstop, round, got, now)
			}
		}
		if n := len(w.hw.installed); n != 2 {
			t.Errorf("backstop %v: %d rules in hardware, want 2", !noBackstop, n)
		}
	}
}
