package daemon

import (
	"testing"
	"time"

	"github.com/scrubd/scrubd/agent/config"
)

// Placement remembers a removed rule's counters for the longer of
// flowspec.hold_time and, with graceful restart, the restart time.
func TestCounterMemory(t *testing.T) {
	off := false
	for _, tc := range []struct {
		hold, restart time.Duration
		gr            *bool
		want          time.Duration
	}{
		{5 * time.Minute, 120 * time.Second, nil, 5 * time.Minute},
		{5 * time.Second, 120 * time.Second, nil, 120 * time.Second},
		{5 * time.Second, 120 * time.Second, &off, 5 * time.Second},
	} {
		c := config.Defaults()
		c.FlowSpec.HoldTime, c.FlowSpec.GracefulRestart.RestartTime, c.FlowSpec.GracefulRestart.Enabled = tc.hold, tc.restart, tc.gr
		if got := counterMemory(&c); got != tc.want {
			t.Errorf("hold %v, restart %v, graceful restart %v: %v, want %v", tc.hold, tc.restart, tc.gr, got, tc.want)
		}
	}
}
