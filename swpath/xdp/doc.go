// Package xdp is scrubd's XDP software engine: an eBPF program (bpf/scrub.c,
// compiled by bpf2go; the objects are committed) that enforces a rule.Set on
// any Linux netdev with the match semantics of package rule, plus the Go side
// that compiles rule sets into its maps, swaps them atomically, attaches the
// program, pins it under bpffs and reads its counters.
//
// # Layout in the kernel
//
// A rule set is compiled into a tuple space: a small array of masks (sorted by
// the best rank they hold, so the walk stops as soon as no remaining mask can
// beat the match found), one hash keyed by mask id plus masked tuple
// (family, protocol, exact ports, source and destination prefixes), and an
// array of entries holding the residual conditions that a mask cannot express
// cheaply: port, ICMP and length ranges (checked as ranges in the entry rather
// than expanded into prefixes, which would multiply masks and entries), TCP
// flags, fragment states and DSCP. A rule becomes one or more entries: one
// per protocol in its list, one per exact port when its ports are few single
// values, one per chunk of RangesPerEntry ranges otherwise. The lowest rank
// that matches decides, rank being the rule's place in the deciding order
// (priority, then index), as rule.Set.Decide.
//
// Prefix lengths are rounded down to steps of 16 (IPv4) or 32 (IPv6) bits in
// masks, with the exact prefix checked in the entry (tuple merging): fewer
// masks to walk, slightly longer lists. A list is kept short as in
// TupleMerge (Daly and Torng, 2017): an entry whose coarse masked tuple
// already holds two entries goes under a mask with steps of 8 (IPv4) or 16
// (IPv6) bits instead, as long as masks are left under MaxMasks once the
// coarse masks are counted. ClassBench-style 10k rules: 44 masks instead of
// 27, the longest list 4 entries instead of 63, about 47 to 7 entries
// walked per packet.
//
// A Bloom filter (one bit per key, 2^20 bits per generation, one
// multiply-shift hash) sits in front of the hash: a mask whose bit for the
// packet is clear is skipped without a lookup, which halves the cost of a
// walk over many masks (ClassBench-style 1000 rules, 27 masks: about 1.9 to
// 1.0-1.2 µs per packet).
//
// The hash value is the first entry of its list itself (no second lookup);
// later entries of a list are walked with bpf_loop. Every entry whose mask
// is only an exact destination port (with or without family and protocol,
// which the entry then checks) goes into one "port mask", a 65536-element
// array by destination port holding its list's first entry in a 16-byte
// short form: the usual DDoS rule ("drop udp dport 53") costs one indexed
// load. When that mask comes first, the program has a fast path for plain
// IPv4 UDP and TCP (no VLAN, no IP options, not a non-first fragment): the
// port's first entry decides directly when its only conditions are protocol
// and family and no other mask can beat its rank (flags Replace sets in each
// port's head of the new generation, per protocol; the generation word only
// says whether the fast path applies, in its low byte with the generation
// bit, so that no copy of the word can pair one generation with the other's
// answer); everything else takes the general parse and walk, a separate
// function, which decides the same way (TestDifferentialPortSets).
//
// The generation word and the port heads are the program's global variables
// (its .bss, memory-mapped by the Go side): the fast path reads them at
// known addresses, with no map lookup and no key on the stack, and the
// packet's only map lookup is its rule's per-CPU counter. The inline mode
// is a load-time constant, so host mode carries no redirect code.
//
// The verifier needs bounds, so some are explicit: MaxMasks masks per lookup,
// MaxChain rules sharing one masked tuple, MaxEntriesPerRule expansions of a
// rule, MaxRules rules. Compile checks them and refuses a set that exceeds
// one with a *LimitError naming the rule and the limit; nothing is dropped
// silently.
//
// # Replacement
//
// The masks, keys and entries of each generation live in an array of maps
// with two slots (generations); the port mask's heads live in one global
// array with a half per generation (index generation<<16 | port). Replace
// builds the inactive generation's maps from scratch and installs them,
// rewrites the inactive half of the port array in place (after the installs:
// each update of an array of maps waits for an RCU grace period, so no packet
// that read the generation word before the last flip is still reading that
// half), then flips the 32-bit generation word; a packet reads that word once
// and uses one generation throughout, so it is classified entirely by the
// old or entirely by the new set, and a rule present in both drops during the
// swap (TestVethSwapUnderLoad).
//
// # Counters
//
// Per-CPU per-rule packet and byte counters, indexed by a slot that stays
// with a rule id across replacements and split by the action the rule
// decided with, and per-verdict counters; Counters and Verdicts sum them over
// CPUs. A packet a rule decides is counted once, in the rule's counter: the
// Dropped and Accepted verdicts are the sums of the rule counters by action,
// plus what Replace moved into the verdict map from slots it reused for new
// rules. (An agent killed between zeroing such a slot and that move loses
// those counts from the verdict totals; rule counters are unaffected.) In Inline mode, RedirectFailures counts the
// passed packets that found no peer in the devmap (its interface removed)
// and went to the local stack instead.
//
// # Kernel
//
// The program needs Linux 5.17 or later (bpf_loop; 5.18 inlines it), with
// BPF_F_INNER_MAP (5.10), memory-mapped arrays (5.5) and batch map
// operations. With a PinPath, the globals are pinned by hand as "globals"
// (bpffs refuses the dot of ".bss") and taken over with the other maps, and
// each interface's link is pinned as link-<ifindex>-<native|generic>; one
// Engine serves any number of interfaces with one rule set and one set of
// counters.
// Pinned maps of an older scrubd version are not compatible with this layout
// (the port heads moved from the "ports" map into the globals and rule_stats
// values grew to 32 bytes, by action, on 2026-11-30): New refuses them with
// an error saying so; unpin them (or use a new PinPath) when upgrading.
package xdp
