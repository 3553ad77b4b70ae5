package bench

import (
	"testing"

	"github.com/scrubd/scrubd/swpath/rule"
	"github.com/scrubd/scrubd/swpath/traffic"
)

// floodFlows is the distinct frames a flood benchmark cycles: eight times
// the classifier's flow cache (8192 decisions), so the cache misses and
// bypasses itself, as it does on a spoofed flood where every packet is a
// new 5-tuple.
const floodFlows = 1 << 16

// BenchmarkFloodRules is the drop path (one worker, 64-byte frames) on
// flood traffic for the source workload's five rules and for 10k
// ClassBench-style rules: what the rule count costs a packet the flow
// cache cannot help. Compare the two cpu-ns/pkt figures (the 10k set's
// should be at most twice the 5-rule set's).
func BenchmarkFloodRules(b *testing.B) {
	for _, c := range []struct {
		name string
		set  func() *rule.Set
	}{
		{"rules=5", traffic.SourceWorkload},
		{"rules=10k", func() *rule.Set { return traffic.ClassBenchRules(10000, 10000) }},
	} {
		b.Run(c.name, func(b *testing.B) {
			benchSize(b, Config{FrameSizes: []int{64}, Rules: c.set(), Flows: floodFlows})
		})
	}
}
