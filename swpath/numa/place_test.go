package numa

import (
	"errors"
	"os"
	"runtime"
	"slices"
	"syscall"
	"testing"

	"github.com/scrubd/scrubd/internal/testenv"
	"github.com/scrubd/scrubd/swpath/internal/sys"
)

// skipIfNoSyscall skips only where the call itself is missing (ENOSYS: a
// kernel built without NUMA, or qemu-user, which does not implement mbind
// and get_mempolicy).
func skipIfNoSyscall(t *testing.T, err error) {
	t.Helper()
	if errors.Is(err, syscall.ENOSYS) {
		testenv.MissingUnderEmulation(t, "syscall not implemented here (ENOSYS: kernel without CONFIG_NUMA, or qemu-user): %v", err)
	}
}

// TestLiveTopologyMatchesKernel reads /sys and checks it against getcpu(2):
// pinned to each CPU in turn, the kernel must report the node sysfs gives.
func TestLiveTopologyMatchesKernel(t *testing.T) {
	topo, err := ReadLive()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("live topology: %+v", topo.Nodes)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	orig, err := ThreadAffinity()
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := PinThread(orig...); err != nil {
			t.Errorf("restore affinity: %v", err)
		}
	}()
	for _, cpu := range orig {
		if err := PinThread(cpu); err != nil {
			t.Fatal(err)
		}
		c, node, err := sys.Getcpu()
		skipIfNoSyscall(t, err)
		if err != nil {
			t.Fatal(err)
		}
		if c != cpu {
			t.Errorf("pinned to cpu %d, getcpu says %d", cpu, c)
		}
		if want := topo.NodeOfCPU(cpu); node != want {
			t.Errorf("cpu %d: kernel says node %d, sysfs says %d", cpu, node, want)
		}
	}
}

func TestPinThread(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	orig, err := ThreadAffinity()
	if err != nil {
		t.Fatal(err)
	}
	defer PinThread(orig...)
	last := orig[len(orig)-1]
	if err := PinThread(last); err != nil {
		t.Fatal(err)
	}
	got, err := ThreadAffinity()
	if err != nil || !slices.Equal(got, []int{last}) {
		t.Fatalf("affinity after PinThread(%d) = %v, %v", last, got, err)
	}
	if err := PinThread(); err == nil {
		t.Error("PinThread() with no CPUs succeeded")
	}
	if err := PinThread(-1); err == nil {
		t.Error("PinThread(-1) succeeded")
	}
	topo, err := ReadLive()
	if err != nil {
		t.Fatal(err)
	}
	if err := topo.PinThreadToNode(topo.Nodes[0].ID); err != nil {
		t.Fatal(err)
	}
	got, _ = ThreadAffinity()
	for _, c := range got {
		if topo.NodeOfCPU(c) != topo.Nodes[0].ID {
			t.Errorf("after PinThreadToNode(%d) may run on cpu %d of node %d", topo.Nodes[0].ID, c, topo.NodeOfCPU(c))
		}
	}
	if err := topo.PinThreadToNode(4000); err == nil {
		t.Error("PinThreadToNode(4000) succeeded")
	}
}

// TestBindAndReadBack binds a fresh anonymous mapping to the first online
// node with MPOL_BIND, touches it, and reads back both the policy and the
// node of the pages from the kernel. On a one-node machine this still
// exercises the real syscalls and their argument encoding (a wrong node
// mask or maxnode gives EINVAL or a different node set back).
func TestBindAndReadBack(t *testing.T) {
	topo, err := ReadLive()
	if err != nil {
		t.Fatal(err)
	}
	node := topo.Nodes[len(topo.Nodes)-1].ID
	const size = 4 << 20
	b, err := sys.MapAnon(size, false)
	if err != nil {
		t.Fatal(err)
	}
	defer sys.Unmap(b)
	err = Bind(b, node)
	skipIfNoSyscall(t, err)
	if err != nil {
		t.Fatal(err)
	}
	pg := os.Getpagesize()
	for i := 0; i < len(b); i += pg {
		b[i] = 1
	}
	mode, nodes, err := PolicyOf(b[size/2:])
	if err != nil {
		t.Fatal(err)
	}
	if mode != sys.MPOL_BIND || !slices.Equal(nodes, []int{node}) {
		t.Errorf("policy = mode %d nodes %v, want MPOL_BIND(%d) [%d]", mode, nodes, sys.MPOL_BIND, node)
	}
	for _, off := range []int{0, pg, size / 2, size - pg} {
		got, err := NodeOfMemory(b[off:])
		if err != nil {
			t.Fatal(err)
		}
		if got != node {
			t.Errorf("page at +%#x on node %d, bound to %d", off, got, node)
		}
	}

	// A node that is not online must be refused by the kernel, and the
	// error must name it.
	offline := topo.Nodes[len(topo.Nodes)-1].ID + 1
	c, err := sys.MapAnon(pg, false)
	if err != nil {
		t.Fatal(err)
	}
	defer sys.Unmap(c)
	err = Bind(c, offline)
	var be *BindError
	if !errors.As(err, &be) || be.Node != offline || !errors.Is(err, syscall.EINVAL) {
		t.Errorf("Bind to offline node %d: err = %v, want BindError wrapping EINVAL", offline, err)
	}
	if err := Bind(c, -1); err == nil {
		t.Error("Bind to node -1 succeeded")
	}
}
