package numa

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func seq(a, b int) []int {
	var s []int
	for i := a; i <= b; i++ {
		s = append(s, i)
	}
	return s
}

func TestFakeTrees(t *testing.T) {
	tests := []struct {
		root  string
		nodes []Node
		cpuOf map[int]int
		dev   map[string]int
	}{
		{
			root:  "testdata/one",
			nodes: []Node{{ID: 0, CPUs: []int{0, 1}, Distance: []int{10}}},
			cpuOf: map[int]int{0: 0, 1: 0, 2: Unknown},
			dev:   map[string]int{"eth0": Unknown, "lo": Unknown},
		},
		{
			root: "testdata/two",
			nodes: []Node{
				{ID: 0, CPUs: append(seq(0, 7), seq(16, 23)...), Distance: []int{10, 21}},
				{ID: 1, CPUs: append(seq(8, 15), seq(24, 31)...), Distance: []int{21, 10}},
			},
			cpuOf: map[int]int{0: 0, 7: 0, 8: 1, 16: 0, 31: 1, 32: Unknown},
			dev:   map[string]int{"p0": 1, "p1": 0},
		},
		{
			root: "testdata/nps4",
			nodes: []Node{
				{ID: 0, CPUs: append(seq(0, 15), seq(64, 79)...), Distance: []int{10, 12, 12, 12}},
				{ID: 1, CPUs: append(seq(16, 31), seq(80, 95)...), Distance: []int{12, 10, 12, 12}},
				{ID: 2, CPUs: append(seq(32, 47), seq(96, 111)...), Distance: []int{12, 12, 10, 12}},
				{ID: 3, CPUs: append(seq(48, 63), seq(112, 127)...), Distance: []int{12, 12, 12, 10}},
			},
			cpuOf: map[int]int{0: 0, 17: 1, 40: 2, 127: 3, 128: Unknown},
			dev:   map[string]int{"cx8a": 2, "cx8b": 3, "bf3p0": 3},
		},
		{
			root:  "testdata/nonuma",
			nodes: []Node{{ID: 0, CPUs: seq(0, 3), Distance: []int{10}}},
			cpuOf: map[int]int{3: 0, 4: Unknown},
			dev:   map[string]int{"eth0": Unknown},
		},
	}
	for _, tc := range tests {
		t.Run(filepath.Base(tc.root), func(t *testing.T) {
			topo, err := Read(tc.root)
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.nodes, topo.Nodes); d != "" {
				t.Errorf("nodes (-want +got):\n%s", d)
			}
			for cpu, want := range tc.cpuOf {
				if got := topo.NodeOfCPU(cpu); got != want {
					t.Errorf("NodeOfCPU(%d) = %d, want %d", cpu, got, want)
				}
			}
			for dev, want := range tc.dev {
				got, err := topo.NetdevNode(dev)
				if err != nil || got != want {
					t.Errorf("NetdevNode(%q) = %d, %v; want %d", dev, got, err, want)
				}
			}
			for i, a := range topo.Nodes {
				for j, b := range topo.Nodes {
					d, err := topo.Distance(a.ID, b.ID)
					if err != nil || d != a.Distance[j] {
						t.Errorf("Distance(%d,%d) = %d, %v", a.ID, b.ID, d, err)
					}
					if i == j && d != 10 {
						t.Errorf("local distance of node %d = %d, want 10", a.ID, d)
					}
				}
			}
		})
	}
}

func TestRemoteDevice(t *testing.T) {
	// A worker on node 0 polling p0, whose NIC sits on node 1: the two
	// placements differ, which is what swpath/pool's policy chooses between.
	topo, err := Read("testdata/two")
	if err != nil {
		t.Fatal(err)
	}
	dev, _ := topo.NetdevNode("p0")
	if w := topo.NodeOfCPU(3); w != 0 || dev != 1 {
		t.Fatalf("worker node %d, device node %d; want 0 and 1", w, dev)
	}
	if d, _ := topo.Distance(0, dev); d != 21 {
		t.Fatalf("distance worker->device = %d, want 21", d)
	}
}

func TestNetdevErrors(t *testing.T) {
	topo, err := Read("testdata/two")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := topo.NetdevNode("nosuch0"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing device: err = %v, want ErrNotExist", err)
	}
	for _, bad := range []string{"", "..", "a/b", "x\x00"} {
		var de *DeviceError
		if _, err := topo.NetdevNode(bad); !errors.As(err, &de) {
			t.Errorf("NetdevNode(%q) err = %v, want *DeviceError", bad, err)
		}
	}
	// numa_node naming an offline node, and garbage.
	root := t.TempDir()
	copyTree(t, "testdata/two", root)
	write(t, filepath.Join(root, "class/net/p0/device/numa_node"), "5\n")
	write(t, filepath.Join(root, "class/net/p1/device/numa_node"), "zero\n")
	topo, err = Read(root)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := topo.NetdevNode("p0"); err == nil {
		t.Errorf("numa_node 5 on a 2-node system: got %d, nil", n)
	}
	var pe *ParseError
	if _, err := topo.NetdevNode("p1"); !errors.As(err, &pe) || pe.Value != "zero" {
		t.Errorf("numa_node garbage: err = %v, want ParseError naming the value", err)
	}
}

func TestBadTrees(t *testing.T) {
	cases := map[string]func(root string){
		"distance count": func(r string) { write(t, filepath.Join(r, "devices/system/node/node1/distance"), "21 10 30\n") },
		"distance text":  func(r string) { write(t, filepath.Join(r, "devices/system/node/node0/distance"), "10 x\n") },
		"cpulist":        func(r string) { write(t, filepath.Join(r, "devices/system/node/node0/cpulist"), "3-1\n") },
		"cpu twice":      func(r string) { write(t, filepath.Join(r, "devices/system/node/node1/cpulist"), "7\n") },
		"missing node":   func(r string) { write(t, filepath.Join(r, "devices/system/node/online"), "0-2\n") },
		"no nodes":       func(r string) { write(t, filepath.Join(r, "devices/system/node/online"), "\n") },
	}
	for name, mutate := range cases {
		t.Run(name, func(t *testing.T) {
			root := t.TempDir()
			copyTree(t, "testdata/two", root)
			mutate(root)
			if topo, err := Read(root); err == nil {
				t.Fatalf("Read accepted a bad tree: %+v", topo.Nodes)
			}
		})
	}
	if _, err := Read(t.TempDir()); err == nil {
		t.Fatal("Read of an empty directory succeeded")
	}
}

func TestParseList(t *testing.T) {
	good := map[string][]int{
		"":            nil,
		"0":           {0},
		"0-3":         {0, 1, 2, 3},
		"0-1,8,10-11": {0, 1, 8, 10, 11},
		"5,1-2,2":     {1, 2, 5},
		" 4\n":        {4},
	}
	for in, want := range good {
		got, err := ParseList(in)
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("ParseList(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"-", "1-", "-1", "a", "1,,2", "3-1", "1-2-3", "+1", "99999999", "0-70000"} {
		if got, err := ParseList(in); err == nil {
			t.Errorf("ParseList(%q) = %v, want error", in, got)
		}
	}
}

func FuzzParseList(f *testing.F) {
	for _, s := range []string{"0", "0-3", "0-1,8,10-11", "", "3-1", "1,,2", "65535", "0-65536"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		l, err := ParseList(s)
		if err != nil {
			return
		}
		if !slices.IsSorted(l) || len(slices.Compact(slices.Clone(l))) != len(l) {
			t.Fatalf("ParseList(%q) = %v: not sorted and unique", s, l)
		}
		for _, v := range l {
			if v < 0 || v > maxListID {
				t.Fatalf("ParseList(%q) gave %d", s, v)
			}
		}
	})
}

func write(t *testing.T, path, s string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		write(t, filepath.Join(dst, rel), string(b))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
