package swengine

import "github.com/scrubd/scrubd/swpath/pool"

// bufferPlacement maps software.buffer_node (validated by agent/config) to
// the pool's per-queue node choice: the polling worker's node unless the
// operator asks for the device's.
func bufferPlacement(node string) pool.Placement {
	if node == "device" {
		return pool.DeviceNode
	}
	return pool.WorkerNode
}
