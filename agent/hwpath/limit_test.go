package hwpath

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/scrubd/scrubd/agent/dataplane"
	"github.com/scrubd/scrubd/offload"
	"github.com/scrubd/scrubd/offload/compile"
	"github.com/scrubd/scrubd/offload/sim"
	"github.com/scrubd/scrubd/swpath/rule"
)

// offload.max_entries_per_rule: a rule of 2 protocols x 3 single ports is
// 6 flower entries (one per protocol and port); with a bound of 6 it
// compiles and installs, with 5 Compile and Install refuse it as
// unsupported with the count and the key, and nothing goes in.
func TestMaxEntriesPerRule(t *testing.T) {
	caps := offload.MLX5(4096)
	r, err := rule.ParseRule("api", []byte(`{id: multi, action: drop, match: {dst: 203.0.113.0/24, proto: [tcp, udp], dst_port: [53, 123, 443]}}`), time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	set := &rule.Set{Rules: []rule.Rule{r}}
	for _, tc := range []struct {
		max  int
		want string
	}{{6, ""}, {5, "compiles to 6 hardware entries, more than the 5 of offload.max_entries_per_rule"}, {0, ""}} {
		nic := sim.New(sim.Config{Caps: caps, Clock: sim.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))})
		p := New(Config{Name: "sim", Compile: compile.Config{Caps: caps, PrioV4: 10, PrioV6: 11, PassPrioV4: 8, PassPrioV6: 9},
			Owner: offload.Owner{Chain: 0, PrioLo: 8, PrioHi: 11}, MaxEntriesPerRule: tc.max}, nic)
		cost, cerr := p.Compile(&r, set)
		ierr := p.Install(context.Background(), &r, set)
		if tc.want == "" {
			if cerr != nil || ierr != nil || cost.Entries != 6 || nic.Capacity().Entries != 6 {
				t.Errorf("max %d: compile %v (%d entries), install %v, %d entries in the table; want 6", tc.max, cerr, cost.Entries, ierr, nic.Capacity().Entries)
			}
			continue
		}
		for _, err := range []error{cerr, ierr} {
			var he *dataplane.HWError
			if !errors.As(err, &he) || he.Kind != dataplane.KindUnsupported || !strings.Contains(he.Detail, tc.want) {
				t.Errorf("max %d: %v, want unsupported: %q", tc.max, err, tc.want)
			}
		}
		if n := nic.Capacity().Entries; n != 0 {
			t.Errorf("max %d: %d entries went in", tc.max, n)
		}
	}
}
