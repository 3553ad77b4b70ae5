package hwpath

import (
	"runtime"
	"testing"

	"github.com/scrubd/scrubd/agent/dataplane"
	"github.com/scrubd/scrubd/offload"
	"github.com/scrubd/scrubd/offload/compile"
	"github.com/scrubd/scrubd/swpath/traffic"
)

// Every rule's Cost, which placement keeps for each rule it compiled,
// names the rule's mask shapes with 16-byte keys (dataplane.MaskShape):
// one key per distinct (table, mask) that offload/compile gives, the same
// for every rule with that shape, in lists that rules of the same shapes
// share. On 40k ClassBench-style rules (113,668 masks, 26,922 distinct)
// kept costs retain 9.7 bytes a mask; with a list per rule 16; with keys
// as strings ("0/10/" and 16 hex digits) 24.5 shared and 40 not; printed
// in full (%v of the mask) 104.
func TestCostMaskKeys(t *testing.T) {
	p, _, _ := newPath(offload.MLX5(4096), 0)
	const n = 40000
	set := traffic.ClassBenchRules(1, n)
	costs := make([]dataplane.Cost, n)
	if _, err := p.Compile(&set.Rules[0], set); err != nil && dataplane.KindOf(err) != dataplane.KindUnsupported {
		t.Fatal(err) // the first call indexes the set: not counted below
	}
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	masks := 0
	for i := range set.Rules {
		c, err := p.Compile(&set.Rules[i], set)
		if err != nil {
			continue
		}
		costs[i] = c
		masks += len(c.Masks)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	perMask := float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / float64(masks)

	// The keys against the shapes offload/compile gives.
	shapes := map[compile.TableMask]dataplane.MaskShape{}
	keys := map[dataplane.MaskShape]bool{}
	for i := range set.Rules {
		res := compile.Rule(&p.cfg.Compile, &set.Rules[i])
		if costs[i].Masks == nil {
			continue
		}
		if len(res.Masks) != len(costs[i].Masks) {
			t.Fatalf("rule %s: %d masks in its cost, %d compiled", set.Rules[i].ID, len(costs[i].Masks), len(res.Masks))
		}
		for j, tm := range res.Masks {
			k := costs[i].Masks[j]
			if old, ok := shapes[tm]; ok && old != k {
				t.Fatalf("one shape, two keys: %v and %v", old, k)
			}
			shapes[tm] = k
			keys[k] = true
		}
	}
	if len(keys) != len(shapes) || masks == 0 {
		t.Fatalf("%d keys for %d shapes (%d masks in costs)", len(keys), len(shapes), masks)
	}
	runtime.KeepAlive(costs)
	t.Logf("%d masks in %d costs, %d distinct shapes: %.1f bytes retained per mask", masks, n, len(shapes), perMask)
	if perMask > 12 {
		t.Fatalf("%.1f bytes retained per mask in kept costs; want at most 12 (a rule's list of keys shared with the rules of the same shapes: 16 with a list of its own)", perMask)
	}
	// Rules with the same shapes share one list: the last rule compiled,
	// compiled again as a copy, gets the list it got before.
	for i := len(costs) - 1; i >= 0; i-- {
		if len(costs[i].Masks) == 0 {
			continue
		}
		r := set.Rules[i]
		again, err := p.Compile(&r, set)
		if err != nil || &again.Masks[0] != &costs[i].Masks[0] {
			t.Fatalf("rule %s compiled again: masks %v in a list of their own (err %v)", r.ID, again.Masks, err)
		}
		break
	}
}
