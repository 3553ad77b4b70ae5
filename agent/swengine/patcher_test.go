package swengine

import (
	"testing"

	"github.com/scrubd/scrubd/agent/dataplane"
)

// The engines over the Go classifier take changes (dataplane.SWPatcher);
// the XDP program and "none" are given whole sets.
func TestPatchers(t *testing.T) {
	for name, x := range map[string]struct {
		sw   dataplane.SW
		want bool
	}{
		"dv":       {&dvSW{}, true},
		"emulated": {&Emulated{}, true},
		"xdp":      {&xdpSW{}, false},
		"none":     {&noSW{}, false},
	} {
		if _, ok := x.sw.(dataplane.SWPatcher); ok != x.want {
			t.Errorf("%s: a patcher: %v, want %v", name, ok, x.want)
		}
	}
}
