// Package traffic builds and generates Ethernet frames for scrubd's tests and
// benchmarks, and reads and writes them as pcap and pcapng files.
//
// AppendFrame builds one frame from a Frame description (VLAN tags, IPv4
// options, IPv6 extension-header chains, fragments, truncation, non-IP).
// Generator produces a deterministic stream of frames from a seed: random
// traffic, and edge cases derived from a rule set (prefix borders, port-range
// ends, fragments, tags, extension headers, truncated and non-IP frames), with
// a frame-size mix and a flow count that sets the traffic's cardinality.
// Every engine's tests (the Go classifier, XDP, Direct Verbs, flower) and the
// benchmarks use it, so they all see the same packets for the same seed.
package traffic
