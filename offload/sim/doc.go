// Package sim is a simulated NIC flow table that behaves like an mlx5 tc
// offload table, for tests and for the agent's --sim mode. It implements
// offload.Backend and a packet datapath:
//
//   - Accepted keys, chains and priorities come from offload.Capabilities
//     (offload.MLX5 by default): an entry with a key the device lacks is
//     refused with EOPNOTSUPP and an mlx5-like extack text, a chain or
//     priority out of range likewise ("Requested ... is out of supported
//     range"), a duplicate match in one table with EEXIST.
//   - Flow groups follow mlx5's auto-grouped tables (fs_core
//     alloc_auto_flow_group): each (chain, priority) table gives its first
//     LargeGroups distinct mask shapes a group of MaxEntries/(LargeGroups+1)
//     entries (a full group of one shape gets another), later shapes get
//     one-entry groups; a table has MaxEntries slots for its groups, the
//     device holds at most MaxEntries entries in all, and an entry that
//     finds no room fails with ENOSPC. An empty group is freed.
//   - Insertion and removal are paced at Capabilities.InsertRate entries per
//     second (DMFS about 5k/s, SMFS about 33k/s) on the injected Clock, in
//     chunks of a tenth of a second, each published when done.
//   - Counters count every packet at once, but Stats returns a snapshot
//     refreshed at most once per StatsPeriod (mlx5 reads flow counters in
//     bulk every second), so readers see hardware-like staleness.
//   - SetGone makes every call fail with ENODEV; Flush drops every entry, as
//     OVS deleting the ingress qdisc on restart does.
//
// Process matches a packet (its rule.Fields, as swpath/packet fills them)
// against the installed entries with offload's entry semantics, lowest
// priority table of chain 0 first (goto-chain is not modelled), and counts
// it on the entry hit. A drop entry drops the packet; a pass entry
// (offload.Entry.Pass, flower's gact pass) ends the lookup with the packet
// let through, so a pass entry at a lower priority number than a drop
// entry that also matches wins, as in tc. Pass entries take entries, mask
// shapes and flow groups in their own table like any other entry. It is lock-free and allocation-free: it reads an
// immutable lookup structure (a tuple-space table: one hash map per mask
// shape) through an atomic pointer that writers replace after each chunk,
// so the NIC emulator's goroutines match packets while the agent installs
// and removes entries. A new snapshot shares every group a chunk did not
// touch; a touched group gets a copy of its small delta map (changes since
// the group's map was built, checked first), folded into a new map once it
// holds more than about the square root of the group's entries, so
// installing one entry at a time costs O(sqrt n) per entry, not a rebuild.
//
// What this does not model: firmware and steering-mode differences beyond
// the insertion rate, the table-level fragmentation of flow-group slots,
// ECN bits (rule.Fields has none), and parser behaviour on malformed
// headers (the simulator sees the fields the shared parser reports).
package sim
