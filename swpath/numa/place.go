package numa

import (
	"errors"
	"fmt"

	"github.com/scrubd/scrubd/swpath/internal/sys"
)

// BindError reports a failed mbind or get_mempolicy.
type BindError struct {
	Op   string // "mbind", "get_mempolicy"
	Node int
	Len  int
	Err  error
}

func (e *BindError) Error() string {
	return fmt.Sprintf("numa: %s node %d (%d bytes): %v", e.Op, e.Node, e.Len, e.Err)
}
func (e *BindError) Unwrap() error { return e.Err }

// Bind sets the policy of the pages of b to MPOL_BIND on node, with
// MPOL_MF_STRICT|MPOL_MF_MOVE so pages already present elsewhere move or
// the call fails. b must be page-aligned mmap'd memory. Call it before the
// first touch so pages are allocated on the node to begin with.
func Bind(b []byte, node int) error {
	if node < 0 || node >= sys.MaxNodes {
		return &BindError{Op: "mbind", Node: node, Len: len(b), Err: errors.New("node out of range")}
	}
	if err := sys.Mbind(b, sys.MPOL_BIND, []int{node}, sys.MPOL_MF_STRICT|sys.MPOL_MF_MOVE); err != nil {
		return &BindError{Op: "mbind", Node: node, Len: len(b), Err: err}
	}
	return nil
}

// NodeOfMemory returns the node holding the page at b[0], faulting it in
// if needed (get_mempolicy MPOL_F_NODE|MPOL_F_ADDR).
func NodeOfMemory(b []byte) (int, error) {
	n, err := sys.NodeOfPage(b)
	if err != nil {
		return Unknown, &BindError{Op: "get_mempolicy", Node: Unknown, Len: len(b), Err: err}
	}
	return n, nil
}

// PolicyOf returns the policy mode (sys.MPOL_*) and nodes governing b[0].
func PolicyOf(b []byte) (mode int, nodes []int, err error) {
	mode, nodes, err = sys.PolicyOf(b)
	if err != nil {
		return 0, nil, &BindError{Op: "get_mempolicy", Node: Unknown, Len: len(b), Err: err}
	}
	return mode, nodes, nil
}

// PinThread restricts the calling OS thread to cpus. Call
// runtime.LockOSThread first and keep the goroutine locked: otherwise the
// goroutine can move to an unpinned thread, and the pinned thread can run
// other goroutines. A worker should exit while still locked (the runtime
// then ends the thread) or restore the old affinity before
// runtime.UnlockOSThread, so no narrowed thread returns to the scheduler.
func PinThread(cpus ...int) error {
	if len(cpus) == 0 {
		return errors.New("numa: PinThread: empty CPU set")
	}
	if err := sys.SetAffinity(cpus); err != nil {
		return fmt.Errorf("numa: pin thread to cpus %v: %w", cpus, err)
	}
	return nil
}

// PinThreadToNode restricts the calling OS thread to the CPUs of node.
func (t *Topology) PinThreadToNode(node int) error {
	n, ok := t.Node(node)
	if !ok || len(n.CPUs) == 0 {
		return fmt.Errorf("numa: pin thread: node %d is not online or has no CPUs", node)
	}
	return PinThread(n.CPUs...)
}

// ThreadAffinity returns the CPUs the calling thread may run on.
func ThreadAffinity() ([]int, error) { return sys.Affinity() }
