package swengine

import (
	"testing"

	"github.com/scrubd/scrubd/swpath/pool"
)

func TestBufferPlacement(t *testing.T) {
	for in, want := range map[string]pool.Placement{"": pool.WorkerNode, "worker": pool.WorkerNode, "device": pool.DeviceNode} {
		if got := bufferPlacement(in); got != want {
			t.Errorf("bufferPlacement(%q) = %v, want %v", in, got, want)
		}
	}
}
