// Package classifier is scrubd's software rule classifier over the rule
// model of swpath/rule, with the decisions of (*rule.Set).Decide and nothing
// else: decision trees for sets they suit, else a tuple space search.
//
// # Compiling
//
// Compile turns a rule.Set into an immutable Table. Each rule becomes one or
// more entries: a value and mask over (family, source prefix, destination
// prefix, protocol, source port, destination port); a protocol list and port
// ranges that expand into few prefixes are expanded (one entry each), the rest
// is checked after the hash hit together with every other condition (the
// either-way port, ICMP type and code, TCP flags, fragment state, length,
// DSCP, and the presence of the L4 header). One unexpanded range a port side
// is kept in the entry itself; lists of ranges and the other conditions that
// need more than a word keep a residual beside it.
//
// Entries are placed into hash tables, one mask per table, TupleMerge style:
// an entry goes into an existing table whose mask is no more specific than its
// own when the bucket it lands in holds fewer than a collision limit of
// entries; otherwise a new table is made with the entry's mask relaxed to a
// coarse grid, so later entries with nearby masks share it. Entries are placed
// in decision order (priority, then the rule's key: its index in the set
// unless a change in place moved it, rule.Order), so tables end up sorted by
// the best rule they hold; a lookup walks them in that order and stops as soon
// as the next table's best rule cannot beat the rule found so far (priority
// pruning). Within a bucket entries are in decision order too and the first
// that holds ends the bucket.
//
// A prefilter, built with the tables, files each table under the coarsest
// address key its mask covers (the top 16 bits of both addresses, of one,
// the top 8 bits of both, of one, or none) and maps each key to a bitmask of
// the tables holding a slot with that key. A lookup first computes, from at
// most four hash probes and two array reads, the tables that can hold an
// entry for the packet, and hashes into those only (on ClassBench-style sets
// about half of them). The count of tables probed (Snapshot.TablesProbed,
// Table.Probes) counts those hashed into, not the prefilter reads. Bursts
// use the prefilter only in sets whose prefilter hash is at most 64 KiB,
// and there they take the per-packet walk; a bigger prefilter misses the
// cache on each of its dependent probes, which costs more than the Bloom
// words it spares.
//
// Each hash table carries a one-hash Bloom filter (8 bits per slot) that
// answers most misses from a few kilobytes, and a slot (64 bytes, one cache
// line) holds its key, the position of its entries and the rank and rule of
// its best entry, so that a slot whose best entry checks nothing more (or
// only that the packet has ports) decides without reading an entry, and a
// slot whose best entry cannot beat the packet's best so far is skipped. A
// bucket scan reads a 32-byte check per entry (the top 32 bits of both
// addresses under the entry's own prefixes, and its own protocol and port
// value and mask: two compares), and the 56-byte entry only for the entry
// that decides or needs more checks. Small port ranges (16 values or fewer)
// become exact ports, so rule sets of single ports and short ranges share
// one mask.
//
// # Decision trees
//
// Compile also cuts the same entries into decision trees (tree.go): the
// entries are split into up to five groups by which address prefix is long
// (source of 16 bits or more, else destination, else source of 8 or more,
// else destination, else the rest; IPv6 prefixes counted from bit 32, past
// a shared prefix such as 2001:db8::/32; the two groups of 8 bits or more
// join the two of 16 or more, so that ClassBench-style sets make two trees
// rather than four: a walk and a leaf scan fewer per packet, for longer
// leaves and more copies), and each group becomes a tree whose
// nodes take k bits of one field (an address's high word, the protocol or a
// port) and name a child per value, down to leaves of at most 8 entries
// (16 in sets of more than 8192 entries; more where no cut separates
// them) in decision order. A packet walks
// each tree to one leaf (a load per level) and scans it with the 32-byte
// entry checks, in leaf records that also hold the entry's index and rule
// (40 bytes; 32 in trees of more than 1 MiB, whose records keep the
// address mask as its two prefix lengths beside the entry's index, so
// that a leaf of 16 records spans 8 cache lines instead of 10: sets of
// 2^21-1 entries or more keep the hash tables); the best-ranked entry
// found in any tree decides. For
// IPv6 those checks hold bits 32-63 of the addresses, and two bits of the
// packet's misc word say whether its addresses' top 32 bits are the set's
// most common top of IPv6 prefixes of 32 bits or more (tree_v6.go): an
// entry whose prefixes have that top, or none, needs no holds for its
// addresses, so an IPv6 set costs what the same set as IPv4 does. A set
// decides with the trees when it has more than one hash table and the
// trees fit (at most 16 leaf records per entry, plus 65536, and no leaf
// over 255 entries; a build that passes either limit stops there);
// otherwise, and for a set of one hash table, with the
// hash tables below. Only the lookup that decides is built: when the trees
// decide, Compile assigns entries to hash tables only until it has counted
// three of them (enough to choose the trees and the flow cache) and builds
// no hash table, entry array or prefilter; Stats reports Trees or Tuples
// accordingly. AppendMatching (every rule whose match holds, for dry runs)
// walks every tree to its leaf and checks every record there, or probes
// every hash table.
//
// # Classifying
//
// Table.Decide is the single-packet lookup and Table.DecideBurst the burst
// lookup (no counters). With the trees, Decide walks every tree a level
// at a time (the trees' loads of one level overlap) and then scans the
// leaves; a burst on trees of at most 1 MiB (about 1k ClassBench-style
// rules) does the same packet by packet. In those sets, when they make at
// most four trees and the build has a scan stub (AVX2 on amd64, NEON on
// arm64; not under the purego tag), every leaf's records also start a
// block of eight, their checks in 32-bit lanes with each record's entry
// and flags (tree_vec.go), and one call per packet tests the first block
// of each of its leaves without a branch (two blocks in sets of two
// trees, four in sets of three or four): it returns the best entry
// among the passing records that need no more checks, and which passing
// records need holds or ports; only those are then checked in Go, and
// only a leaf of more than eight records is scanned in Go. A burst there
// takes two packets at a time, their walks a level at a time together,
// so that one packet's loads wait beside the other's (tree_vec2.go). The
// rule of the deciding entry comes from an array of 4 bytes an entry. A flood's
// leaf scans were a chain of mispredicted branches (each leaf's loop
// ending at a random length); at 1k rules they took about two thirds of
// the lookup, and the lookup now takes about 0.74 of its time before
// (BENCHMARKS.md). Where no stub runs, the Go scan tests each record's
// check before its rank, and a burst on a set of two trees takes two
// packets at a time there too, each leaf scanned as a window: a fixed
// eight records from the leaf's first (four for a leaf of at most four),
// each record's pass a conditional move rather than a branch, masked to
// the leaf's count (tree_window.go); each packet's first passing record
// of each tree decides it with conditional moves too (winFirst), unless
// it needs holds, as a window set's records test the packet's ports in
// their misc word (portsKeyBit). Where pairs walk two trees (not the
// lane walk), every leaf is at least two loads from its root, chains of
// one-child nodes making up the difference, so the pairs take the first
// two levels of all four walks without a branch (treePad). Bigger trees
// are walked in
// groups of 128 packets, tree by tree and level by level (every packet's
// load of one level before any of the next, so their cache misses
// overlap), reads the first
// record of every leaf, then scans the leaves (in trees of more than 16
// MiB, about 100k ClassBench-style rules, the scan of a tree's leaves
// instead prefetches the records of the leaves of the packets eight
// ahead and reads each leaf's first record as it comes: PREFETCHT0 and
// PRFM stubs, none under the purego tag); the group walk's working
// memory (35 KiB with the lane walk's) is the worker's, as clearing it on
// the stack cost a burst of one packet twice its Decide, and DecideBurst,
// which has no worker, walks bursts of fewer than 4 packets one at a time.
// Where the CPU has AVX-512 (amd64; tree_lanes.go), bursts write their
// lane words eight packets at a time, four gathers a chunk (laneKeys8, for
// sets without IPv6 top bits), and walk eight packets to a zmm register
// instead, a gather a level over groups of up to 128 (walkLanes8; a set's
// two trees a level at a time together, walkLanes8x2, each level over the
// chunks the level before left unfinished, listed in a mask; over a copy
// of the node words in 4 bytes where they pass 512 KiB, about 20k
// ClassBench-style rules, whose walks past three levels go on compacted,
// eight unfinished lanes to a gather: tree_nodes32.go,
// walkLanes8x2d): sets of two trees with blocks then scan the first blocks
// of every packet's leaves in one call a group, which decides every packet
// it can (scanLanes2). Sets of two trees past the first-level cache (from
// about 800 ClassBench-style rules to 100k and more) get compact blocks
// (tree_cblock.go, cblockMin): leaves of one block, each record's check in
// 24 bytes instead of 76 (its values, a marker bit past each address
// prefix, the ports as ranges, which hold an entry's one port range a side
// too, and one word of whole-field choices, from which the scan rebuilds
// the masks in registers: scanLanesC2 for a group, both of a packet's
// blocks in one zmm register, the group decided sixteen packets to an
// instruction at the end; cleafScan2 for Decide),
// leaves sharing blocks (each a run of a block's lanes, which the scans
// mask), where every entry's check fits and their records come to at most
// 64 MiB. Past 6 MiB of compact blocks (about 30k rules), a set whose
// lanes make at most 31 combinations of protocol, family and source-port
// range (classes), and whose IPv6 top bits are all their masks, gets
// tight blocks instead (tree_tblock.go, tblockMin): 16 bytes a record,
// two cache lines a block, both trees' in one array on transparent huge
// pages from 4 MiB on (hugeAlloc, where the kernel has them), the class's words looked up in registers by
// the scan (scanLanesT2, both blocks in one zmm register and the group
// decided at its end as scanLanesC2's, tleafScan2; scanLanesT6 and
// tleafScan6 put a
// record's top bits back), and each record's rule's rank in decision
// order in place of its entry, so that the best found names the rule
// (itself, where the set's rules are in decision order) without a load
// an entry. Where a check does not fit, sets of two
// trees up to 6 MiB of trees (about 20k rules) get blocks: leaves of one block where their
// records stay under 4 MiB (about 15k rules), else leaves of up to 16
// records scanned two blocks a leaf (scanLanes4). In sets whose trees pass
// 1 MiB, the scan of a packet first prefetches the first blocks of the
// packet eight after it (lanePrefetch). The other big sets keep the group
// walk, with the lane walk. Only packets that are not IP, that have a
// passing record needing holds that could beat the best of the scan (in
// sets past 1 MiB of trees; in smaller ones, any such record), or a leaf
// longer than the blocks scanned are finished in Go; arm64 has no gather,
// and keeps the walks above. Where the CPU has AVX2 but not AVX-512, and
// on arm64 (cvecGroup), sets of two trees past 1 MiB of trees or of more
// than 8,192 entries get compact blocks of leaves of one block too
// (cgroupMin), instead of the group walk's records: a burst walks a
// group's two trees level by level (on amd64 four lanes to an instruction
// with AVX2's gathers, walkQuads, over 4-byte node words past 512 KiB; on
// arm64 in Go, walkGroup), then scans each packet's two blocks with
// AVX2's eight 32-bit lanes or NEON's four (cblockScan2, the blocks of the
// packet eight ahead prefetched), and looks the rules up in a pass of
// their own (cvecBurst). With the hash tables: for
// small sets (prefilter hash at most 64 KiB, as about 1k ClassBench-style
// rules) DecideBurst is the single-packet walk in
// a loop, which was the faster there. For bigger ones it is staged over
// groups of up to 64 packets: the hash and Bloom bit of every table for
// every packet (kept without a branch when the bit is set), then the slots
// of the kept probes, then the entries of the slots hit. The loads
// of one stage do not depend on each other, so their cache misses overlap,
// and the unpredictable Bloom outcome is data rather than a branch. The
// hashing stage goes table by table, in best-rank order, so packets find
// their likely best entries first and prune more later. It
// probes every table (no table pruning, only slot and entry pruning by the
// packet's best rank so far), and decides exactly as the single-packet
// walk does. Sets of more than 63 tables use the single-packet
// walk for bursts too. A
// Classifier holds the current Table in an atomic pointer: Swap compiles a new
// set and publishes it whole, readers never block, and a burst loads the
// pointer once, so no packet sees half a rule set. Workers (one per packet
// goroutine, not safe for concurrent use) classify single packets or bursts
// and keep per-rule hit counters (packets and bytes, by the deciding rule and
// so by its action) in their own memory, so there is no shared cache line
// per packet. Only the worker adds to its counters, so on 64-bit processors
// it adds with plain loads and stores, once per packet (once per rule hit
// and burst for sets of at most 64 rules), and Snapshot reads them with
// atomic loads; under the race detector and on 32-bit processors the adds
// are atomic. A burst first lists the packets some rule decided, without
// a branch (on a flood about half pass, and a branch on it was
// mispredicted for about every other packet), then adds them; a worker
// of 4096 counter slots or more (64 KiB of counters) first prefetches the
// counters the burst's decisions add to (PREFETCHT0 and PRFM stubs, none
// under the purego tag). The worker's statistics (packets, tables
// probed, cache hits) are added the same way.
// Counters are keyed by rule ID: a rule kept across a Swap keeps its counts;
// a rule whose ID leaves the set loses them (read them with Snapshot before
// the Swap), and an ID added again later starts from zero. The counter slot
// of a removed rule is recycled, zeroed, for a later new rule once no worker
// is still in a burst on a table that maps a rule to it (each worker
// publishes the generation of the table of its burst), so memory stays
// bounded by the largest set plus the rules removed while a burst was in
// flight, however many IDs come and go, and no burst on an old table ever
// adds to a slot now owned by another rule. Packets that in-flight bursts
// on an old table credit to a removed rule are dropped with its counts.
// Snapshot sums the counters over workers, open and closed.
//
// Patch is Swap for a change of a few rules, at a cost that follows the
// change: the current table stays as the base, its removed and changed
// rules masked, and the added and changed rules are compiled alone into a
// small overlay that every lookup probes too; the better of the two in the
// new set's order decides. Past max(64, √n) overlay rules (or n/16 masked
// ones) the set is compiled whole on a goroutine of the classifier's and
// published in the patched table's place (patch.go says what stays
// linear).
//
// A set may have holes (rule.Set's Holes: positions of Rules that are not
// rules of the set, left by removals in place so that the array engines
// read is not copied). A hole has no entry, never decides, holds no
// counter slot and counts zero in Snapshot and CountsInto, even when a
// live rule has its ID; every rule keeps its index, so a removal in place
// renumbers nothing. Patch takes sets with holes on either side: removed
// and added name rules, never holes, and a hole of the current set is a
// rule of neither.
//
// A rule changed in place is appended as a copy, its old position a hole,
// and decides at the old position's place in the order: its key
// (rule.Order, rule.Set.Key). Every lookup ranks a rule by priority, then
// key, and answers its position (index in Rules), as rule.Set.Decide
// does: Compile, Swap and folds rank entries by key, and Patch's base and
// overlay keep each rule's rank and position apart (patch.go), so that a
// change in place takes the in-place patch (removed the old position,
// added the copy's) and renumbers nothing.
//
// A worker also keeps a two-way flow cache of 8192 decisions keyed by the
// packet fields that some rule of the set looks at (fields no rule reads
// are left out, so packets of a flow that differ only in, say, length share
// an entry). A Swap empties it before the worker's next burst. It is off
// for sets of fewer than three hash tables, where a lookup is cheaper than
// a miss, and turns itself off for the next 8192 packets when a window of
// 32 packets through it (one burst, or several bursts or single packets)
// hits less than one time in eight (high-cardinality floods; the first
// burst after it was emptied does not count), for twice as many each time
// the window after a bypass misses again, up to 65536, and from 8192 again
// after a window that hits. A burst through the cache
// probes it for every packet, then decides the packets it missed together
// with the staged burst lookup and caches them; a bypassed burst goes
// through the staged lookup whole. A hit rate alone does not say the cache
// pays: where lookups are cheap, a cache that hits one packet in three
// still costs more than it spares. So bursts (ClassifyBurst,
// ClassifyFrames) time their lookups with the processor's counter, and two
// windows of 512 packets in a row through the cache that cost more cycles
// a packet than bypassed bursts do (measured on the first 512 packets
// after the cache's first 512, and again every 65536) bypass it too,
// unless its hit rate is still rising. So on a flood the cache costs the
// probes and inserts of a few bursts in every 65536 packets, and when
// the flood gives way to few flows the cache is back within two bypasses.
// Worker.SetCachePolicy keeps it on (CacheAlways) or off (CacheNever).
//
// Nothing on the lookup path allocates (tested with testing.AllocsPerRun).
package classifier
