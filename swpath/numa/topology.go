package numa

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// DefaultRoot is the live sysfs mount.
const DefaultRoot = "/sys"

// Unknown is the node of a device whose NUMA affinity the kernel does not
// know (numa_node -1, or a virtual device).
const Unknown = -1

// Node is one NUMA node.
type Node struct {
	ID   int
	CPUs []int // sorted
	// Distance[i] is the ACPI SLIT distance to Topology.Nodes[i] (10 is
	// local).
	Distance []int
}

// Topology is the set of online nodes.
type Topology struct {
	Root  string // sysfs root it was read from
	Nodes []Node // sorted by ID
	cpu   map[int]int
}

// ParseError reports a sysfs file whose contents could not be parsed.
type ParseError struct {
	Path  string
	Value string
	Err   error
}

func (e *ParseError) Error() string {
	return fmt.Sprintf("numa: %s: cannot parse %q: %v", e.Path, e.Value, e.Err)
}

func (e *ParseError) Unwrap() error { return e.Err }

// ReadLive reads the running kernel's topology from /sys.
func ReadLive() (*Topology, error) { return Read(DefaultRoot) }

// Read reads the topology from the sysfs tree at root ("/sys" for the live
// system).
func Read(root string) (*Topology, error) {
	nodeDir := filepath.Join(root, "devices/system/node")
	online, err := readList(filepath.Join(nodeDir, "online"))
	if errors.Is(err, fs.ErrNotExist) {
		// No NUMA in this kernel: one node with every online CPU.
		cpus, cerr := readList(filepath.Join(root, "devices/system/cpu/online"))
		if cerr != nil {
			return nil, fmt.Errorf("numa: no node directory and no CPU list under %s: %w", root, cerr)
		}
		t := &Topology{Root: root, Nodes: []Node{{ID: 0, CPUs: cpus, Distance: []int{10}}}}
		t.index()
		return t, nil
	}
	if err != nil {
		return nil, err
	}
	if len(online) == 0 {
		return nil, &ParseError{Path: filepath.Join(nodeDir, "online"), Err: errors.New("no online node")}
	}
	t := &Topology{Root: root}
	for _, id := range online {
		dir := filepath.Join(nodeDir, "node"+strconv.Itoa(id))
		cpus, err := readList(filepath.Join(dir, "cpulist"))
		if err != nil {
			return nil, err
		}
		dpath := filepath.Join(dir, "distance")
		draw, err := os.ReadFile(dpath)
		if err != nil {
			return nil, fmt.Errorf("numa: node %d: %w", id, err)
		}
		var dist []int
		for _, f := range strings.Fields(string(draw)) {
			d, err := strconv.Atoi(f)
			if err != nil || d <= 0 {
				return nil, &ParseError{Path: dpath, Value: strings.TrimSpace(string(draw)), Err: fmt.Errorf("distance %q", f)}
			}
			dist = append(dist, d)
		}
		if len(dist) != len(online) {
			return nil, &ParseError{Path: dpath, Value: strings.TrimSpace(string(draw)),
				Err: fmt.Errorf("%d distances for %d online nodes", len(dist), len(online))}
		}
		t.Nodes = append(t.Nodes, Node{ID: id, CPUs: cpus, Distance: dist})
	}
	if err := t.index(); err != nil {
		return nil, err
	}
	return t, nil
}

func (t *Topology) index() error {
	t.cpu = map[int]int{}
	for _, n := range t.Nodes {
		for _, c := range n.CPUs {
			if prev, dup := t.cpu[c]; dup {
				return fmt.Errorf("numa: %s: cpu %d listed in node %d and node %d", t.Root, c, prev, n.ID)
			}
			t.cpu[c] = n.ID
		}
	}
	return nil
}

// IDs returns the node ids in order.
func (t *Topology) IDs() []int {
	ids := make([]int, len(t.Nodes))
	for i, n := range t.Nodes {
		ids[i] = n.ID
	}
	return ids
}

// Node returns the node with the given id.
func (t *Topology) Node(id int) (*Node, bool) {
	for i := range t.Nodes {
		if t.Nodes[i].ID == id {
			return &t.Nodes[i], true
		}
	}
	return nil, false
}

// NodeOfCPU returns the node holding cpu, or Unknown.
func (t *Topology) NodeOfCPU(cpu int) int {
	if n, ok := t.cpu[cpu]; ok {
		return n
	}
	return Unknown
}

// Distance returns the SLIT distance between two nodes.
func (t *Topology) Distance(from, to int) (int, error) {
	a, ok := t.Node(from)
	if !ok {
		return 0, fmt.Errorf("numa: distance: from node %d is not online", from)
	}
	for i, n := range t.Nodes {
		if n.ID == to {
			return a.Distance[i], nil
		}
	}
	return 0, fmt.Errorf("numa: distance: to node %d is not online", to)
}

// DeviceError reports a network device whose node could not be read.
type DeviceError struct {
	Dev string
	Err error
}

func (e *DeviceError) Error() string { return fmt.Sprintf("numa: netdev %q: %v", e.Dev, e.Err) }
func (e *DeviceError) Unwrap() error { return e.Err }

// NetdevNode returns the NUMA node of network device dev, from
// class/net/DEV/device/numa_node. It returns Unknown, nil when the kernel
// reports -1 or the device has no parent bus device (veth, bridge, lo). It
// is an error if dev does not exist or names a node that is not online.
func (t *Topology) NetdevNode(dev string) (int, error) {
	if dev == "" || strings.ContainsAny(dev, "/\x00") || dev == "." || dev == ".." {
		return Unknown, &DeviceError{Dev: dev, Err: errors.New("invalid interface name")}
	}
	netDir := filepath.Join(t.Root, "class/net", dev)
	if _, err := os.Stat(netDir); err != nil {
		return Unknown, &DeviceError{Dev: dev, Err: err}
	}
	p := filepath.Join(netDir, "device/numa_node")
	b, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return Unknown, nil
	}
	if err != nil {
		return Unknown, &DeviceError{Dev: dev, Err: err}
	}
	s := strings.TrimSpace(string(b))
	n, err := strconv.Atoi(s)
	if err != nil {
		return Unknown, &DeviceError{Dev: dev, Err: &ParseError{Path: p, Value: s, Err: err}}
	}
	if n < 0 {
		return Unknown, nil
	}
	if _, ok := t.Node(n); !ok {
		return Unknown, &DeviceError{Dev: dev, Err: fmt.Errorf("numa_node %d is not an online node %v", n, t.IDs())}
	}
	return n, nil
}

func readList(path string) ([]int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	s := strings.TrimSpace(string(b))
	l, err := ParseList(s)
	if err != nil {
		return nil, &ParseError{Path: path, Value: s, Err: err}
	}
	return l, nil
}

// maxListID bounds ids in a list so a corrupt file cannot make ParseList
// allocate without limit.
const maxListID = 1 << 16

// ParseList parses the kernel's list format ("0-3,8,10-11", possibly empty)
// used by cpulist and node/online, and returns the sorted, de-duplicated
// ids.
func ParseList(s string) ([]int, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, nil
	}
	var out []int
	for part := range strings.SplitSeq(s, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := parseID(lo)
		if err != nil {
			return nil, err
		}
		b := a
		if isRange {
			if b, err = parseID(hi); err != nil {
				return nil, err
			}
			if b < a {
				return nil, fmt.Errorf("range %q is descending", part)
			}
		}
		for i := a; i <= b; i++ {
			out = append(out, i)
		}
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

func parseID(s string) (int, error) {
	if s == "" || strings.TrimLeft(s, "0123456789") != "" {
		return 0, fmt.Errorf("id %q is not a decimal number", s)
	}
	n, err := strconv.Atoi(s)
	if err != nil || n > maxListID {
		return 0, fmt.Errorf("id %q out of range 0..%d", s, maxListID)
	}
	return n, nil
}
