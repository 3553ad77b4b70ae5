// Package numa reads the machine's NUMA topology from sysfs and places
// memory and threads on nodes.
//
// Topology comes from a sysfs root that tests point at a fake tree
// (testdata/): node/online, nodeN/cpulist, nodeN/distance under
// devices/system/node, and the node of a network device from
// class/net/DEV/device/numa_node. A kernel that reports -1 there (no
// affinity known, typical on one-node machines and in VMs), and a virtual
// device with no device link, both give Unknown: the caller decides what
// that means (swpath/pool falls back to the first node, as VPP does with
// node 0). A kernel without NUMA support has no node directory; that reads
// as one node 0 holding every online CPU.
//
// Bind (mbind(2) with MPOL_BIND) puts not-yet-touched memory on a node,
// NodeOfMemory (get_mempolicy(2)) reads back where a page is, and PinThread
// (sched_setaffinity(2)) keeps a locked worker thread on its CPUs.
package numa
