// Command mutation checks that the test suite catches realistic bugs. For
// each mutation it copies the source tree (the files git tracks, plus new
// ones it does not ignore) into a temporary directory, applies the edit
// there (exact text replacements, each of which must match as often as
// stated, or the mutation is reported as stale), runs the tests of the
// packages that guard the code with a deadline, and reports whether they
// failed ("caught"). A mutation the tests pass, one whose tests ran into
// the deadline, and one that no longer applies all fail the check.
//
//	go run ./tests/mutation            # every mutation
//	go run ./tests/mutation -run tie   # those whose name contains "tie"
//
// tests/all.sh runs it as the "mutation check" step.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/cpu"
)

// edit replaces old by new in file; n is how many times old must occur.
type edit struct {
	file, old, new string
	n              int
}

type mutation struct {
	name  string
	edits []edit
	pkgs  []string // go test targets
	run   string   // -run pattern ("" for all)
	long  bool     // run without -short (the short runs do not reach it)
	// cpu: what the CPU needs for the tests to reach the mutated code
	// (cpuAVX512, cpuVBMI2), "" for any CPU. Where it lacks that, the
	// mutation is only checked to apply, and reported as skipped.
	cpu string
	// arch: the GOARCH the tests must be built for to reach the mutated
	// code ("arm64" for its stubs), "" for this machine's. Elsewhere they
	// run under qemu-user (qemuFor), as tests/all.sh's arm64 step does.
	arch string
}

// qemuFor names the qemu-user binary that runs each foreign arch's tests.
var qemuFor = map[string]string{"arm64": "qemu-aarch64-static"}

// foreign reports whether m's tests run under qemu-user here, and the
// binary that runs them; err says why they cannot (no emulator known, or
// none installed).
func foreign(m mutation) (bool, string, error) {
	if m.arch == "" || m.arch == runtime.GOARCH {
		return false, "", nil
	}
	q, ok := qemuFor[m.arch]
	if !ok {
		return true, "", fmt.Errorf("no qemu-user binary known for GOARCH %s", m.arch)
	}
	path, err := exec.LookPath(q)
	if err != nil {
		return true, "", fmt.Errorf("%s (Debian's qemu-user-static) is not installed: %w", q, err)
	}
	return true, path, nil
}

// The CPU features of mutation.cpu: the classifier's lane stubs
// (lanesWalk: AVX-512 F, VL and BW, and BMI2), and its tight blocks'
// (lanesTight: AVX-512 VBMI2 besides).
const (
	cpuAVX512 = "AVX-512 (F, VL, BW) and BMI2"
	cpuVBMI2  = "AVX-512 (F, VL, BW, VBMI2) and BMI2"
	cpuAVX2   = "AVX2, BMI1 and BMI2"
)

// cpuHas reports whether this CPU has feature f (a mutation's cpu).
func cpuHas(f string) bool {
	lanes := runtime.GOARCH == "amd64" && cpu.X86.HasAVX512F && cpu.X86.HasAVX512VL && cpu.X86.HasAVX512BW && cpu.X86.HasBMI2
	switch f {
	case "":
		return true
	case cpuAVX512:
		return lanes
	case cpuVBMI2:
		return lanes && cpu.X86.HasAVX512VBMI2
	case cpuAVX2:
		return runtime.GOARCH == "amd64" && cpu.X86.HasAVX2 && cpu.X86.HasBMI1 && cpu.X86.HasBMI2
	}
	fatal(fmt.Errorf("unknown CPU feature %q", f))
	return false
}

var mutations = []mutation{
	{
		name: "flow-cache key drops DSCP bit 0",
		edits: []edit{{"swpath/classifier/cachekey_gen.go",
			"uint64(f.DSCP)<<32", "uint64(f.DSCP&^1)<<32", 1}},
		pkgs: []string{"./swpath/classifier/", "./tests/varyfield/"}, run: "TestCacheKeyFollowsFieldTable|TestVaryOneField|TestWorkerCache",
	},
	{
		name: "flow cache: the cost rule never bypasses",
		edits: []edit{{"swpath/classifier/flowcache.go",
			"low = c.strikes >= costStrikes", "low = false", 1}},
		pkgs: []string{"./swpath/classifier/"}, run: "TestCache",
	},
	{
		name: "flow cache: one costly window bypasses",
		edits: []edit{{"swpath/classifier/flowcache.go",
			"costStrikes     = 2", "costStrikes     = 1", 1}},
		pkgs: []string{"./swpath/classifier/"}, run: "TestCache",
	},
	{
		name: "flow cache: a filling cache judged as a full one",
		edits: []edit{{"swpath/classifier/flowcache.go",
			"rising := hit > c.lastHit+costScale/16", "rising := hit < 0", 1}},
		pkgs: []string{"./swpath/classifier/"}, run: "TestCache",
	},
	{
		name: "flow cache: the lookup's cost never measured again",
		edits: []edit{{"swpath/classifier/flowcache.go",
			"c.sinceOff >= cacheRefresh ||", "false ||", 1}},
		pkgs: []string{"./swpath/classifier/"}, run: "TestCache",
	},
	{
		name: "flow cache: a preempted bypassed burst averaged in",
		edits: []edit{{"swpath/classifier/flowcache.go",
			"case s > costOutlier*c.offCost:", "case false:", 1}},
		pkgs: []string{"./swpath/classifier/"}, run: "TestCache",
	},
	{
		name: "dv: the worker's counters leave out the flow cache's hits",
		edits: []edit{{"swpath/dv/worker.go",
			"\tc.CacheHits = w.cls.CacheHits()\n", "\n", 1}},
		pkgs: []string{"./swpath/dv/"}, run: "TestCacheHitsCounted",
	},
	{
		name: "simulated table's key drops a TOS bit",
		edits: []edit{{"offload/sim/simkey_gen.go",
			"uint64(k.TOS&s.TOSMask) |", "uint64(k.TOS&s.TOSMask&^4) |", 1}},
		pkgs: []string{"./offload/sim/", "./tests/varyfield/"},
	},
	{
		name:  "RX: FromDevice after the owner scan removed",
		edits: []edit{{"swpath/dv/rxq.go", "\t\tbarrier.FromDevice()\n", "\n", 1}},
		pkgs:  []string{"./swpath/dv/"}, run: "TestBarrierPlacement",
	},
	{
		name: "RX: ToDevice before the CQ doorbell record removed",
		edits: []edit{{"swpath/dv/rxq.go",
			"\t\tbarrier.ToDevice()\n\t\tprm.StoreDBR(q.cqDBR", "\t\tprm.StoreDBR(q.cqDBR", 1}},
		pkgs: []string{"./swpath/dv/"}, run: "TestBarrierPlacement",
	},
	{
		name:  "RX: Full before the RQ doorbell record removed",
		edits: []edit{{"swpath/dv/rxq.go", "\tbarrier.Full()\n", "\n", 1}},
		pkgs:  []string{"./swpath/dv/"}, run: "TestBarrierPlacement",
	},
	{
		name: "TX: ToDevice before the SQ doorbell record removed",
		edits: []edit{{"swpath/dv/txq.go",
			"\tbarrier.ToDevice()\n\tprm.StoreDBR(t.qpDBR", "\tprm.StoreDBR(t.qpDBR", 1}},
		pkgs: []string{"./swpath/dv/"}, run: "TestBarrierPlacement",
	},
	{
		name:  "TX: WCStart before the BlueFlame write removed",
		edits: []edit{{"swpath/dv/txq.go", "\tbarrier.WCStart()\n", "\n", 1}},
		pkgs:  []string{"./swpath/dv/"}, run: "TestBarrierPlacement",
	},
	{
		name:  "TX: FlushWC after the BlueFlame write removed",
		edits: []edit{{"swpath/dv/txq.go", "\tbarrier.FlushWC()\n", "\n", 1}},
		pkgs:  []string{"./swpath/dv/"}, run: "TestBarrierPlacement",
	},
	{
		name:  "TX: FromDevice in Reap removed",
		edits: []edit{{"swpath/dv/txq.go", "\t\tbarrier.FromDevice()\n", "\n", 1}},
		pkgs:  []string{"./swpath/dv/"}, run: "TestBarrierPlacement",
	},
	{
		name: "TX: ToDevice before the send CQ doorbell record removed",
		edits: []edit{{"swpath/dv/txq.go",
			"\t\tbarrier.ToDevice()\n\t\tprm.StoreDBR(t.cqDBR", "\t\tprm.StoreDBR(t.cqDBR", 1}},
		pkgs: []string{"./swpath/dv/"}, run: "TestBarrierPlacement",
	},
	{
		name: "doorbell record written with a locked atomic store",
		edits: []edit{{"swpath/dv/prm/mmio.go",
			"func store32(p *uint32, v uint32) { barrier.MMIOWrite32(p, v) }",
			"func store32(p *uint32, v uint32) { atomic.StoreUint32(p, v) }", 1},
			{"swpath/dv/prm/mmio.go", `import "github.com/scrubd/scrubd/swpath/barrier"`,
				"import (\n\t\"sync/atomic\"\n\n\t\"github.com/scrubd/scrubd/swpath/barrier\"\n)", 1}},
		pkgs: []string{"./swpath/dv/"}, run: "TestBarrierPlacement",
	},
	{
		name: "mini-CQE slot invalidation removed",
		edits: []edit{{"swpath/dv/rxq.go",
			"\t\t\tprm.StoreWord(q.slot(i), prm.CQEOffWQECnt,\n\t\t\t\tprm.MakeOwnerWord(0, prm.OpOwnInvalid|uint8(i>>q.cqLog2)&1))\n", "", 1}},
		pkgs: []string{"./swpath/dv/", "./swpath/dv/dvsim/"}, run: "TestSessionSlotsInvalidated|TestAccounting",
	},
	{
		name: "mini-CQE array j>=1 moved to title+8j+1 in prm (emulator and driver agree)",
		edits: []edit{{"swpath/dv/prm/layout.go",
			"\treturn 8 * j\n", "\treturn 8*j + 1\n", 1}},
		pkgs: []string{"./swpath/nicemu/"},
	},
	{
		name: "corrupt title's slots left to the owner test",
		edits: []edit{{"swpath/dv/rxq.go",
			"\tclaim := min(cnt, q.cqMask+1)", "\tclaim := min(cnt, 1)", 1}},
		pkgs: []string{"./swpath/dv/"}, run: "TestCorruptTitle",
	},
	{
		name: "classifier: an entry's own port range loses its top port",
		edits: []edit{{"swpath/classifier/lookup.go",
			"f.SrcPort-e.spLo > e.spSpan ||", "f.SrcPort-e.spLo >= e.spSpan ||", 1}},
		pkgs: []string{"./swpath/classifier/"},
	},
	{
		name: "classifier: an entry's own destination port range not checked",
		edits: []edit{{"swpath/classifier/lookup.go",
			" || f.DstPort-e.dpLo > e.dpSpan)", ")", 1}},
		pkgs: []string{"./swpath/classifier/"},
	},
	{
		name: "classifier: a port range above 65535 kept in the entry",
		edits: []edit{{"swpath/classifier/compile.go",
			"len(rs) == 1 && inPorts(rs[0])", "len(rs) == 1", 1}},
		pkgs: []string{"./swpath/classifier/"}, run: "TestPortRangesOutOfBounds",
	},
	{
		name: "classifier: a port range above 65535 cut into wrapped exact ports",
		edits: []edit{{"swpath/classifier/compile.go",
			"\t\tif !inPorts(r) {\n\t\t\treturn nil, false\n\t\t}\n", "", 1}},
		pkgs: []string{"./swpath/classifier/"}, run: "TestPortRangesOutOfBounds",
	},
	{
		name: "classifier: a patched set past the fold bound never folds in the background",
		edits: []edit{{"swpath/classifier/patch.go",
			"\t\tc.foldLater(t)\n", "\t\t_ = t\n", 1}},
		pkgs: []string{"./swpath/classifier/"}, run: "TestPatchStream",
	},
	{
		name: "classifier ties resolved by the later rule",
		edits: []edit{{"swpath/classifier/compile.go",
			"rank: uint64(r.Priority)<<32 | uint64(key),", "rank: uint64(r.Priority)<<32 | uint64(^uint32(key)),", 1}},
		pkgs: []string{"./swpath/classifier/"},
	},
	{
		name: "classifier: the second packet of a pair scanned with the first's ports",
		edits: []edit{{"swpath/classifier/tree_vec2.go",
			"bg, cg := leafScan2(sg, l[2], laneFlags(g),", "bg, cg := leafScan2(sg, l[2], laneFlags(f),", 1}},
		pkgs: []string{"./swpath/classifier/"}, run: "TestDifferential|TestLanesForced",
	},
	{
		name: "classifier: the two-tree lane walk reads tree 1's keys a row late (amd64)",
		edits: []edit{{"swpath/classifier/tree_lanes_amd64.s",
			"\tLEAQ\t-(const_treeGroup*8)(R9), CX\n", "\tLEAQ\t(R9), CX\n", 1}},
		pkgs: []string{"./swpath/classifier/"}, run: "TestWalkLanes", cpu: cpuAVX512,
	},
	{
		name: "classifier: the two-tree lane walk steps no chunk past the first level (amd64)",
		edits: []edit{{"swpath/classifier/tree_lanes_amd64.s",
			"\tORL\tR14, R11\n", "", 1}},
		pkgs: []string{"./swpath/classifier/"}, run: "TestWalkLanes", cpu: cpuAVX512,
	},
	{
		name: "classifier: the two-tree lane walk steps tree 1's chunks down tree 0 (amd64)",
		edits: []edit{{"swpath/classifier/tree_lanes_amd64.s",
			"\tCMPL\tBX, $16\n", "\tCMPL\tBX, $32\n", 1}},
		pkgs: []string{"./swpath/classifier/"}, run: "TestWalkLanes", cpu: cpuAVX512,
	},
	{
		name: "classifier: the two-tree lane walk leaves tree 1 at its root (amd64)",
		edits: []edit{{"swpath/classifier/tree_lanes_amd64.s",
			"\tSHLL\t$16, AX\n\tORL\tAX, R10\n", "\tSHLL\t$16, AX\n", 1}},
		pkgs: []string{"./swpath/classifier/"}, run: "TestWalkLanes", cpu: cpuAVX512,
	},
	{
		name: "classifier: the lane walks take key word 1 for word 2 (amd64)",
		edits: []edit{{"swpath/classifier/tree_lanes_amd64.s",
			"\tVMOVDQU64\t(koff+const_treeGroup*16)(DX)(R8*1), K3, Z5 \\\n", "\tVMOVDQU64\t(koff+const_treeGroup*8)(DX)(R8*1), K3, Z5 \\\n", 1}},
		pkgs: []string{"./swpath/classifier/"}, run: "TestWalkLanes|TestDifferentialClassBench", cpu: cpuAVX512,
	},
	{
		name: "classifier: the lane scan lets a lane with a flag decide (amd64)",
		edits: []edit{{"swpath/classifier/tree_lanes_amd64.s",
			"\tKANDNW\tK1, k, K3 \\\n", "\tKMOVW\tK1, K3 \\\n", 1}},
		pkgs: []string{"./swpath/classifier/"}, run: "TestScanLanes2|TestScanLanesC2|TestDifferentialClassBench", cpu: cpuAVX512,
	},
	{
		name: "classifier: the long-leaf lane scan skips a leaf's second block (amd64)",
		edits: []edit{{"swpath/classifier/tree_lanes_amd64.s",
			"\tCMPL\tb, $8 \\\n", "\tCMPL\tb, $16 \\\n", 1}},
		pkgs: []string{"./swpath/classifier/"}, run: "TestScanLanes2|TestTreesChosen", cpu: cpuAVX512,
	},
	{
		name: "classifier: a burst's long-leaf checks take the second tree's two blocks swapped",
		edits: []edit{{"swpath/classifier/tree_lanes.go",
			"\t\t\tbs[2], bs[3] = leafBlocks(vb[1], n1)\n", "\t\t\tbs[3], bs[2] = leafBlocks(vb[1], n1)\n", 1}},
		pkgs: []string{"./swpath/classifier/"}, run: "TestHolesFoldReplays|TestLanesForced", cpu: cpuAVX512,
	},
	{
		name: "classifier: a burst of a big set counts each packet a byte too long",
		edits: []edit{{"swpath/classifier/classifier.go",
			"\t\tctr[slot[ids[i]]].add(1, uint64(lens[i]))\n", "\t\tctr[slot[ids[i]]].add(1, uint64(lens[i])+1)\n", 1}},
		pkgs: []string{"./swpath/classifier/"}, run: "TestPrefetchCounters",
	},
	{
		name: "classifier: the group walk's scans, where they prefetch, skip a leaf by the key of its second record",
		edits: []edit{{"swpath/classifier/tree.go",
			"\t\t\t\tfe = rec[uint32(n)].key\n", "\t\t\t\tfe = rec[uint32(n)+1].key\n", 1}},
		pkgs: []string{"./swpath/classifier/"}, run: "TestPrefetchLeaves",
	},
	{
		name: "classifier: the lane scans' prefetch adds the packet index to the rest's count, not to the distance (amd64)",
		edits: []edit{{"swpath/classifier/tree_lanes_amd64.s",
			"\tADDQ\tDX, BX \\\n", "\tADDQ\tDX, R12 \\\n", 2}},
		pkgs: []string{"./swpath/classifier/"}, run: "TestScanLanes2|TestScanLanesC2", cpu: cpuAVX512,
	},
	{
		name: "classifier: the lane scan decides a packet that is not IP (amd64)",
		edits: []edit{{"swpath/classifier/tree_lanes_amd64.s",
			"\tTESTL\tBX, BX \\\n\tJEQ\trest \\\n", "\tTESTL\tBX, BX \\\n\tJEQ\t2(PC) \\\n", 1}},
		pkgs: []string{"./swpath/classifier/"}, run: "TestScanLanes2|TestScanLanesC2|TestDifferentialRandom", cpu: cpuAVX512,
	},
	{
		name: "classifier: the group scans leave their decided packets' entries in out, not their rules (amd64)",
		edits: []edit{{"swpath/classifier/tree_lanes_amd64.s",
			"\tVPGATHERDD\t(R10)(Z6*4), K2, Z7\n", "\tVMOVDQA32\tZ6, Z7\n", 1}},
		pkgs: []string{"./swpath/classifier/"}, run: "TestScanLanesC2|TestDifferentialClassBench", cpu: cpuAVX512,
	},
	{
		name: "classifier: a big set's trees of one-block leaves are kept past treeOneBlockMax (lane walk)",
		edits: []edit{{"swpath/classifier/tree.go",
			"oneBudget := min(budget, treeOneBlockMax/treeBytes(0, 1))", "oneBudget := max(budget, treeOneBlockMax/treeBytes(0, 1))", 1}},
		pkgs: []string{"./swpath/classifier/"}, run: "TestLanesLayout", cpu: cpuAVX512,
	},
	{
		name: "classifier: the compact lane scan takes the source word whole by the destination's bit (amd64)",
		edits: []edit{{"swpath/classifier/tree_lanes_amd64.s",
			"\tVPSRAD\t$31, Y4, Y7 \\\n\tADDRESS(p, 0,", "\tVPSLLD\t$1, Y4, Y7 \\\n\tVPSRAD\t$31, Y7, Y7 \\\n\tADDRESS(p, 0,", 1}},
		pkgs: []string{"./swpath/classifier/"}, run: "TestScanLanesC2|TestCBlocksBig", cpu: cpuAVX512,
	},
	{
		name: "classifier: the lane scans narrow a packet's check to the lanes that cannot beat its best (amd64)",
		edits: []edit{{"swpath/classifier/tree_lanes_amd64.s",
			"VPCMPUD\t$1, Y12, Y5, k, k", "VPCMPUD\t$5, Y12, Y5, k, k", 1}},
		pkgs: []string{"./swpath/classifier/"}, run: "TestScanLanes2|TestScanLanesC2|TestDifferentialRandom", cpu: cpuAVX512,
	},
	{
		name: "classifier: the lane scans keep a packet's lanes that need ports it lacks to check (amd64)",
		edits: []edit{{"swpath/classifier/tree_lanes_amd64.s",
			"\tVPTESTMD\tY13, Y5, k, k \\\n", "", 1}},
		pkgs: []string{"./swpath/classifier/"}, run: "TestScanLanes2|TestScanLanesC2", cpu: cpuAVX512,
	},
	{
		name: "classifier: useful keeps the lanes whose entries are above best",
		edits: []edit{{"swpath/classifier/tree_lanes.go",
			"e&laneFull != 0 && e&laneEnt < best", "e&laneFull != 0 && e&laneEnt != best", 1}},
		pkgs: []string{"./swpath/classifier/"}, run: "TestScanLanes2|TestScanLanesC2", cpu: cpuAVX512,
	},
	{
		name: "classifier: the two-block compact scan loads tree 0's block into both halves (amd64)",
		edits: []edit{{"swpath/classifier/tree_lanes_amd64.s",
			"\tVINSERTI64X4\t$1, off(BX), z, z\n", "\tVINSERTI64X4\t$1, off(AX), z, z\n", 1}},
		pkgs: []string{"./swpath/classifier/"}, run: "TestScanLanesC2", cpu: cpuAVX512,
	},
	{
		name: "classifier: the two-block compact scan tests an address word without its prefix's bound (amd64)",
		edits: []edit{{"swpath/classifier/tree_lanes_amd64.s",
			"\tVPTERNLOGD\t$0x06, key, Z5, t\n", "\tVPTERNLOGD\t$0x66, key, Z5, t\n", 1}},
		pkgs: []string{"./swpath/classifier/"}, run: "TestScanLanesC2", cpu: cpuAVX512,
	},
	{
		name: "classifier: the AVX2 compact scan tests every lane of a block, not the leaf's (amd64)",
		edits: []edit{{"swpath/classifier/tree_vec_amd64.s",
			"\tVPAND\tY12, Y13, Y13 \\\n", "", 1}},
		pkgs: []string{"./swpath/classifier/"}, run: "TestCBlockLanes|TestScanLanesC2|TestCGroupForced",
	},
	{
		name: "classifier: the AVX2 compact scan takes tree 1's block's lanes from tree 0's (amd64)",
		edits: []edit{{"swpath/classifier/tree_vec_amd64.s",
			"\tSHRL\t$8, DX\n", "", 1}},
		pkgs: []string{"./swpath/classifier/"}, run: "TestCBlockLanes|TestScanLanesC2|TestCGroupForced",
	},
	{
		name: "classifier: the AVX2 compact scan bounds the ports' differences by their low ends, not their spans (amd64)",
		edits: []edit{{"swpath/classifier/tree_vec_amd64.s",
			"\tVPMINUW\t160(p), Y5, Y6 \\\n", "\tVPMINUW\t64(p), Y5, Y6 \\\n", 1}},
		pkgs: []string{"./swpath/classifier/"}, run: "TestCBlockLanes|TestScanLanesC2|TestCGroupForced",
	},
	{
		name: "classifier: the AVX2 compact scan takes the destination word whole by the source's bit (amd64)",
		edits: []edit{{"swpath/classifier/tree_vec_amd64.s",
			"\tVPSLLD\t$1, Y4, Y7 \\\n", "\tVPSLLD\t$0, Y4, Y7 \\\n", 1}},
		pkgs: []string{"./swpath/classifier/"}, run: "TestCBlockLanes|TestScanLanesC2|TestCGroupForced",
	},
	{
		name: "classifier: the AVX2 compact scan compares the c word with the destination word (amd64)",
		edits: []edit{{"swpath/classifier/tree_vec_amd64.s",
			"\tVPXOR\tY2, Y4, Y5 \\\n", "\tVPXOR\tY1, Y4, Y5 \\\n", 1}},
		pkgs: []string{"./swpath/classifier/"}, run: "TestCBlockLanes|TestScanLanesC2|TestCGroupForced",
	},
	{
		name: "classifier: bursts over compact blocks without the lane walk scan tree 0's leaf for tree 1's",
		edits: []edit{{"swpath/classifier/tree_cblock.go",
			"best[i] = t.cvecBest(&g[i], cur[0][i], cur[1][i], lk[2][i])", "best[i] = t.cvecBest(&g[i], cur[0][i], cur[0][i], lk[2][i])", 1}},
		pkgs: []string{"./swpath/classifier/"}, run: "TestCGroupForced|TestTreesBigLeaves",
	},
	{
		name: "classifier: the group walk of 4-byte node words cuts one bit less",
		edits: []edit{{"swpath/classifier/tree_nodes32.go",
			"&(2<<(x>>n32CutBit&15)-1)]", "&(1<<(x>>n32CutBit&15)-1)]", 1}},
		pkgs: []string{"./swpath/classifier/"}, run: "TestWalkGroups|TestCGroupForced",
	},
	{
		name: "classifier: without the lane walk, no set gets compact blocks",
		edits: []edit{{"swpath/classifier/tree.go",
			"cgroup := !lanesWalk && cvecGroup && ntrees <= 2", "cgroup := false && cvecGroup && ntrees <= 2", 1}},
		pkgs: []string{"./swpath/classifier/"}, run: "TestCGroupForced|TestLanesLayout|TestTreesBigLeaves",
	},
	{
		name: "classifier: the two-block compact scan drops the ports' test (amd64)",
		edits: []edit{{"swpath/classifier/tree_lanes_amd64.s",
			"\tVPTERNLOGD\t$0xf6, Z18, Z17, Z6 \\\n", "\tVPTERNLOGD\t$0xf0, Z18, Z17, Z6 \\\n", 1}},
		pkgs: []string{"./swpath/classifier/"}, run: "TestScanLanesC2|TestCBlockSpans", cpu: cpuAVX512,
	},
	{
		name: "classifier: the two-block compact scan drops the c word's test (amd64)",
		edits: []edit{{"swpath/classifier/tree_lanes_amd64.s",
			"$0xfe, Z16, Z10, Z6 \\\n\tVPTERNLOGD\t$0xf6, Z18, Z17", "$0xfc, Z16, Z10, Z6 \\\n\tVPTERNLOGD\t$0xf6, Z18, Z17", 1}},
		pkgs: []string{"./swpath/classifier/"}, run: "TestScanLanesC2", cpu: cpuAVX512,
	},
	{
		name: "classifier: the two-block tight scan drops the c word's test (amd64)",
		edits: []edit{{"swpath/classifier/tree_lanes_amd64.s",
			"$0xfe, Z16, Z10, Z6 \\\n\tVPTERNLOGD\t$0xf6, Z17, Z18", "$0xfc, Z16, Z10, Z6 \\\n\tVPTERNLOGD\t$0xf6, Z17, Z18", 1}},
		pkgs: []string{"./swpath/classifier/"}, run: "TestScanLanesC2", cpu: cpuVBMI2,
	},
	{
		name: "classifier: the group scans' narrowing lists the packets whose lanes cannot lower their best (amd64)",
		edits: []edit{{"swpath/classifier/tree_lanes_amd64.s",
			"VPCMPUD\t$1, Z15, Z12, K5, K5", "VPCMPUD\t$5, Z15, Z12, K5, K5", 1}},
		pkgs: []string{"./swpath/classifier/"}, run: "TestScanLanesC2", cpu: cpuAVX512,
	},
	{
		name: "classifier: the group scans keep a packet's lanes that need ports it lacks to check (amd64)",
		edits: []edit{{"swpath/classifier/tree_lanes_amd64.s",
			"VPTESTMD\tZ13, Z12, K5, K5", "VPTESTMD\tZ22, Z12, K5, K5", 1}},
		pkgs: []string{"./swpath/classifier/"}, run: "TestScanLanesC2", cpu: cpuAVX512,
	},
	{
		name: "classifier: the group scans' narrowing reads a packet's threshold from the wrong row (amd64)",
		edits: []edit{{"swpath/classifier/tree_lanes_amd64.s",
			"\tLEAQ\t(R14)(R13*2), BX \\\n", "\tLEAQ\t(R14)(R13*1), BX \\\n", 1}},
		pkgs: []string{"./swpath/classifier/"}, run: "TestScanLanesC2", cpu: cpuAVX512,
	},
	{
		name: "classifier: the group scans' narrowing keeps no thresholds for a whole chunk (amd64)",
		edits: []edit{{"swpath/classifier/tree_lanes_amd64.s",
			"\tCMPQ\tBX, AX \\\n\tCMOVQHI\tAX, BX \\\n", "", 1}},
		pkgs: []string{"./swpath/classifier/"}, run: "TestScanLanesC2", cpu: cpuAVX512,
	},
	{
		name: "classifier: the group scans' narrowing tests only a chunk's first packet with lanes to check (amd64)",
		edits: []edit{{"swpath/classifier/tree_lanes_amd64.s",
			"\tBLSRL\tDX, DX \\\n\tJNE\tcand \\\n", "\tBLSRL\tDX, DX \\\n", 1}},
		pkgs: []string{"./swpath/classifier/"}, run: "TestScanLanesC2", cpu: cpuAVX512,
	},
	{
		name: "classifier: the group scans narrow where they are told not to (amd64)",
		edits: []edit{{"swpath/classifier/tree_lanes_amd64.s",
			"\tCMOVLEQ\tBX, R13 \\\n", "", 1}},
		pkgs: []string{"./swpath/classifier/"}, run: "TestScanLanesC2", cpu: cpuAVX512,
	},
	{
		name: "classifier: the group's leaf lanes leave counts past a block unclamped (amd64)",
		edits: []edit{{"swpath/classifier/tree_lanes_amd64.s",
			"\tVPMINUQ\tZ24, Z10, Z10 \\\n", "", 1}},
		pkgs: []string{"./swpath/classifier/"}, run: "TestScanLanesC2", cpu: cpuAVX512,
	},
	{
		name: "classifier: the group's leaf lanes put tree 1's over tree 0's (amd64)",
		edits: []edit{{"swpath/classifier/tree_lanes_amd64.s",
			"\tVPSLLQ\t$8, Z7, Z7 \\\n", "", 1}},
		pkgs: []string{"./swpath/classifier/"}, run: "TestScanLanesC2", cpu: cpuAVX512,
	},
	{
		name: "classifier: the group's leaf lanes lose the long-leaf bit (amd64)",
		edits: []edit{{"swpath/classifier/tree_lanes_amd64.s",
			"\tVPSRLQ\t$31, Z10, Z10 \\\n", "\tVPSRLQ\t$30, Z10, Z10 \\\n", 1}},
		pkgs: []string{"./swpath/classifier/"}, run: "TestScanLanesC2", cpu: cpuAVX512,
	},
	{
		name: "classifier: the group's leaf lanes skip a group's last chunk (amd64)",
		edits: []edit{{"swpath/classifier/tree_lanes_amd64.s",
			"\tMOVQ\tCX, AX \\\n\tADDQ\t$7, AX \\\n", "\tMOVQ\tCX, AX \\\n\tADDQ\t$0, AX \\\n", 1}},
		pkgs: []string{"./swpath/classifier/"}, run: "TestScanLanesC2", cpu: cpuAVX512,
	},
	{
		name: "classifier: the group decide takes each packet's even lanes for its odd ones (amd64)",
		edits: []edit{{"swpath/classifier/tree_lanes_amd64.s",
			"\tVMOVDQA32\tZ24, Z12 \\\n", "\tVMOVDQA32\tZ23, Z12 \\\n", 1}},
		pkgs: []string{"./swpath/classifier/"}, run: "TestScanLanesC2", cpu: cpuAVX512,
	},
	{
		name: "classifier: the group decide decides a packet that is not IP (amd64)",
		edits: []edit{{"swpath/classifier/tree_lanes_amd64.s",
			"\tKORW\tK1, K2, K1 \\\n", "", 1}},
		pkgs: []string{"./swpath/classifier/"}, run: "TestScanLanesC2", cpu: cpuAVX512,
	},
	{
		name: "classifier: the group decide writes past the group's packets (amd64)",
		edits: []edit{{"swpath/classifier/tree_lanes_amd64.s",
			"\tBZHIL\tAX, BX, BX \\\n\tKMOVW\tBX, K7 \\\n", "\tKMOVW\tBX, K7 \\\n", 1}},
		pkgs: []string{"./swpath/classifier/"}, run: "TestScanLanesC2", cpu: cpuAVX512,
	},
	{
		name: "classifier: the group decide leaves the second half of res (amd64)",
		edits: []edit{{"swpath/classifier/tree_lanes_amd64.s",
			"\tVMOVDQU64\tZ12, K3, (laneScratch_res+64)(R8)(R13*8) \\\n", "", 1}},
		pkgs: []string{"./swpath/classifier/"}, run: "TestScanLanesC2", cpu: cpuAVX512,
	},
	{
		name: "classifier: the group decide lists the packets to Go by their mask, not their count (amd64)",
		edits: []edit{{"swpath/classifier/tree_lanes_amd64.s",
			"\tKMOVW\tK1, AX \\\n\tPOPCNTL\tAX, AX \\\n", "\tKMOVW\tK1, AX \\\n", 1}},
		pkgs: []string{"./swpath/classifier/"}, run: "TestScanLanesC2", cpu: cpuAVX512,
	},
	{
		name: "classifier: the group scan keeps the passing lanes for the lanes to check (amd64)",
		edits: []edit{{"swpath/classifier/tree_lanes_amd64.s",
			"\tKMOVW\tK4, laneScratch_chk(R8)(DX*2)\n", "\tKMOVW\tK1, laneScratch_chk(R8)(DX*2)\n", 1}},
		pkgs: []string{"./swpath/classifier/"}, run: "TestScanLanesC2", cpu: cpuAVX512,
	},
	{
		name: "classifier: the group scan does not narrow a set past the cache (amd64)",
		edits: []edit{{"swpath/classifier/tree_lanes_amd64.s",
			"\tCMPB\tnarrow+120(FP), $0\n\tJNE\tloopsC\n", "", 1}},
		pkgs: []string{"./swpath/classifier/"}, run: "TestScanLanesC2", cpu: cpuAVX512,
	},
	{
		name: "classifier: the compact lane scan takes the ports' largest difference from their spans, not the smallest (amd64)",
		edits: []edit{{"swpath/classifier/tree_lanes_amd64.s",
			"VPMINUW\t160(p), Y5, Y6", "VPMAXUW\t160(p), Y5, Y6", 1}},
		pkgs: []string{"./swpath/classifier/"}, run: "TestScanLanesC2|TestCBlockSpans", cpu: cpuAVX512,
	},
	{
		name: "classifier: a compact lane's port range starts one port late",
		edits: []edit{{"swpath/classifier/tree_cblock.go",
			"p := uint32(en.spLo)<<16 | uint32(en.dpLo)", "p := uint32(en.spLo+1)<<16 | uint32(en.dpLo+1)", 1}},
		pkgs: []string{"./swpath/classifier/"}, run: "TestCBlockSpans",
	},
	{
		name: "classifier: a compact lane drops its entry's port ranges without taking them in",
		edits: []edit{{"swpath/classifier/tree_cblock.go",
			"pl.q = pl.q&^half | q&half", "pl.q = pl.q | half", 1}},
		pkgs: []string{"./swpath/classifier/"}, run: "TestCBlockSpans",
	},
	{
		name: "classifier: cblockMask lets a port one past its span through",
		edits: []edit{{"swpath/classifier/tree_cblock.go",
			"dp-uint16(b.p[j]) <= uint16(b.q[j])", "dp-uint16(b.p[j]) <= uint16(b.q[j])+1", 1}},
		pkgs: []string{"./swpath/classifier/"}, run: "TestCBlockLanes|TestScanLanesC2",
	},
	{
		name: "classifier: the compact lane scan's hiLane drops the family bit (amd64)",
		edits: []edit{{"swpath/classifier/tree_lanes_amd64.s",
			"MOVQ\t$0x302ff00000000, BX", "MOVQ\t$0x300ff00000000, BX", 1}},
		pkgs: []string{"./swpath/classifier/"}, run: "TestScanLanesC2", cpu: cpuAVX512,
	},
	{
		name: "classifier: the compact lane scan subtracts the ports' spans, not their low ends (amd64)",
		edits: []edit{{"swpath/classifier/tree_lanes_amd64.s",
			"VPSUBW\t64(p), Y3, Y5", "VPSUBW\t160(p), Y3, Y5", 1}},
		pkgs: []string{"./swpath/classifier/"}, run: "TestScanLanesC2|TestCBlockSpans|TestCBlocksBig", cpu: cpuAVX512},
	{
		name: "classifier: the lane scans take a packet that is not IP with flags, as IP",
		edits: []edit{{"swpath/classifier/tree_lanes.go",
			"s.flags[i] = laneFlags(f) & -uint32(min(f.Family, 1))", "s.flags[i] = laneFlags(f)", 1}},
		pkgs: []string{"./swpath/classifier/"}, run: "TestDifferential|TestTreeBurst|TestCBlock", cpu: cpuAVX512,
	},
	{
		name: "classifier: the lane flags (portsKey) give ports to a packet without its L4 header",
		edits: []edit{{"swpath/classifier/tree_window.go",
			"\treturn uint64(portProtos[f.Proto]) & l4 * portsKeyBit\n", "\treturn (uint64(portProtos[f.Proto]) | l4&0) * portsKeyBit\n", 1}},
		pkgs: []string{"./swpath/classifier/"}, run: "TestDifferential|TestTreeBurst|TestCBlock|TestEdgeRules",
	},
	{
		name: "classifier: the walk of two trees at once never steps tree 1 (amd64)",
		edits: []edit{{"swpath/classifier/tree_lanes_amd64.s",
			"\tstep(R12, const_treeGroup*8, next) \\", "\tJMP\tnext \\", 1}},
		pkgs: []string{"./swpath/classifier/"}, run: "TestWalkLanes", cpu: cpuAVX512,
	},
	{
		name: "classifier: the walk of two trees at once skips tree 1's chunk where tree 0's is at its leaves (amd64)",
		edits: []edit{{"swpath/classifier/tree_lanes_amd64.s",
			"\tstep(SI, 0, tree1) \\", "\tstep(SI, 0, next) \\", 1}},
		pkgs: []string{"./swpath/classifier/"}, run: "TestWalkLanes", cpu: cpuAVX512,
	},
	{
		name: "classifier: the walk of 4-byte node words takes the key word from the shift's bits (amd64)",
		edits: []edit{{"swpath/classifier/tree_lanes_amd64.s",
			"STEPKEY(off, koff, skip, 29, 23)", "STEPKEY(off, koff, skip, 28, 23)", 1}},
		pkgs: []string{"./swpath/classifier/"}, run: "TestWalkLanes", cpu: cpuAVX512,
	},
	{
		name: "classifier: the walk of 4-byte node words cuts one bit more (amd64)",
		edits: []edit{{"swpath/classifier/tree_lanes_amd64.s",
			"MOVQ\t$-2, AX", "MOVQ\t$-4, AX", 1}},
		pkgs: []string{"./swpath/classifier/"}, run: "TestWalkLanes", cpu: cpuAVX512,
	},
	{
		name: "classifier: the walk of 4-byte node words keeps 18 bits of the first child (amd64)",
		edits: []edit{{"swpath/classifier/tree_lanes_amd64.s",
			"STEPCONSTS($0x80000000, $15, $0x7ffff)", "STEPCONSTS($0x80000000, $15, $0x3ffff)", 1}},
		pkgs: []string{"./swpath/classifier/"}, run: "TestWalkLanes", cpu: cpuAVX512,
	},
	{
		name: "classifier: the walk of 4-byte node words compacts its lanes a level early (amd64)",
		edits: []edit{{"swpath/classifier/tree_lanes_amd64.s",
			"MOVL\t$const_nodes32Head, AX", "MOVL\t$(const_nodes32Head-1), AX", 1}},
		pkgs: []string{"./swpath/classifier/"}, run: "TestWalkLanes", cpu: cpuAVX512,
	},
	{
		name: "classifier: the tail of the walk of 4-byte node words numbers lane 0 as lane 1 (amd64)",
		edits: []edit{{"swpath/classifier/tree_lanes_amd64.s",
			"MOVQ\t$0x0706050403020100, AX", "MOVQ\t$0x0706050403020101, AX", 1}},
		pkgs: []string{"./swpath/classifier/"}, run: "TestWalkLanes", cpu: cpuAVX512,
	},
	{
		name: "classifier: the tail of the walk of 4-byte node words writes its lanes back in order (amd64)",
		edits: []edit{{"swpath/classifier/tree_lanes_amd64.s",
			"MOVQ\tR9, off(DI)(AX*8)", "MOVQ\tR9, off(DI)(R8*8)", 1}},
		pkgs: []string{"./swpath/classifier/"}, run: "TestWalkLanes", cpu: cpuAVX512,
	},
	{
		name: "classifier: the tail of the walk of 4-byte node words walks tree 1 with tree 0's keys (amd64)",
		edits: []edit{{"swpath/classifier/tree_lanes_amd64.s",
			"#define DT1KEYS (const_treeGroup*24)", "#define DT1KEYS (const_treeGroup*0)", 1}},
		pkgs: []string{"./swpath/classifier/"}, run: "TestWalkLanes", cpu: cpuAVX512,
	},
	{
		name: "classifier: the tail of the walk of 4-byte node words walks the longer tail's chunks only (amd64)",
		edits: []edit{{"swpath/classifier/tree_lanes_amd64.s",
			"\tCMOVQHI\tAX, R13\n", "\tCMOVQLS\tAX, R13\n", 1}},
		pkgs: []string{"./swpath/classifier/"}, run: "TestWalkLanes", cpu: cpuAVX512,
	},
	{
		name: "classifier: the 4-byte leaf words widen their count one bit off (amd64)",
		edits: []edit{{"swpath/classifier/tree_lanes_amd64.s",
			"VPSRLQ\t$22, Z3, Z5", "VPSRLQ\t$23, Z3, Z5", 1}},
		pkgs: []string{"./swpath/classifier/"}, run: "TestWalkLanes", cpu: cpuAVX512,
	},
	{
		name: "classifier: the 4-byte leaf words lose treeLong (amd64)",
		edits: []edit{{"swpath/classifier/tree_lanes_amd64.s",
			"VPSLLQ\t$62, Z6, Z6", "VPSLLQ\t$61, Z6, Z6", 1}},
		pkgs: []string{"./swpath/classifier/"}, run: "TestWalkLanes", cpu: cpuAVX512,
	},
	{
		name: "classifier: 4-byte node words keep one bit less of the first child",
		edits: []edit{{"swpath/classifier/tree_nodes32.go",
			"n32ChildBits = 19", "n32ChildBits = 18", 1}},
		pkgs: []string{"./swpath/classifier/"}, run: "TestNode32|TestWalkLanes",
	},
	{
		name: "classifier: every set that takes the lane walk gets 4-byte node words",
		edits: []edit{{"swpath/classifier/tree_nodes32.go",
			" || 8*(len(tr.t[0].nodes)+len(tr.t[1].nodes)) <= over {", " {", 1}},
		pkgs: []string{"./swpath/classifier/"}, run: "TestNodes32", cpu: cpuAVX512,
	},
	{
		name: "classifier: the compact lane scan's address bound leaves out the marker bit (amd64)",
		edits: []edit{{"swpath/classifier/tree_lanes_amd64.s",
			"VPTERNLOGD\t$0x14, whole, Y5, Y6", "VPTERNLOGD\t$0x10, whole, Y5, Y6", 1}},
		pkgs: []string{"./swpath/classifier/"}, run: "TestScanLanesC2|TestCBlocksBig", cpu: cpuAVX512,
	},
	{
		name: "classifier: the compact lane scan takes the c word's mask from the wrong bits (amd64)",
		edits: []edit{{"swpath/classifier/tree_lanes_amd64.s",
			"VPSRLD\t$const_cMasks, Y4, Y6", "VPSRLD\t$17, Y4, Y6", 1}},
		pkgs: []string{"./swpath/classifier/"}, run: "TestScanLanesC2|TestCBlocksBig", cpu: cpuAVX512,
	},
	{
		name: "classifier: compact lanes lose the never-passing bit's mask",
		edits: []edit{{"swpath/classifier/tree_cblock.go",
			"hm := c >> cMasks & 0xfff", "hm := c >> cMasks & 0x7ff", 1}},
		pkgs: []string{"./swpath/classifier/"}, run: "TestCBlockLanes",
	},
	{
		name: "classifier: compact lanes keep the IPv6 top bits' masks a bit too low",
		edits: []edit{{"swpath/classifier/tree_cblock.go",
			"(hm>>16&3)<<(cV6Top+cMasks)", "(hm>>16&3)<<(cV6Top+cMasks-1)", 1}},
		pkgs: []string{"./swpath/classifier/"}, run: "TestCBlockLanes",
	},
	{
		name: "classifier: a block scan's lanes that need holds decide without them (sblocks and compact blocks)",
		edits: []edit{{"swpath/classifier/tree_vec.go",
			"e&laneFull == 0 || !t.holds(&t.tr.ents[e&laneEnt], f, misc)", "e&laneFull == 0", 1}},
		pkgs: []string{"./swpath/classifier/"}, run: "TestCBlocksBig|TestLanesForced",
	},
	{
		name: "classifier: Decide over compact blocks ignores the lanes to check",
		edits: []edit{{"swpath/classifier/tree_cblock.go",
			"\tif (n0|n1)&treeLong != 0 || check != 0 {\n\t\tbest = t.cvecRest(", "\tif (n0|n1)&treeLong != 0 {\n\t\tbest = t.cvecRest(", 1}},
		pkgs: []string{"./swpath/classifier/"}, run: "TestCBlocksBig",
	},
	{
		name: "classifier: a record or compact lane that needs ports holds for a packet without them",
		edits: []edit{{"swpath/classifier/tree.go",
			"\treturn f.HasPorts()\n}", "\treturn true\n}", 1}},
		pkgs: []string{"./swpath/classifier/"}, run: "TestCBlocksBig|TestLanesForced|TestCGroupForced",
	},
	{
		name: "classifier: sets of two trees never get compact blocks",
		edits: []edit{{"swpath/classifier/tree.go",
			"if (lanes || cgroup) && treeCBlocks {", "if false && (lanes || cgroup) && treeCBlocks {", 1}},
		pkgs: []string{"./swpath/classifier/"}, run: "TestLanesLayout|TestCBlocksBig",
	},
	{
		name: "classifier: sets past the cache with few entries keep blocks, not compact blocks (cblockMin)",
		edits: []edit{{"swpath/classifier/tree.go",
			"least := cblockMin", "least := 64 * cblockMin", 1}},
		pkgs: []string{"./swpath/classifier/"}, run: "TestLanesLayout", cpu: cpuAVX512,
	},
	{
		name: "classifier: the group's leaf lanes start at the wrong lane (amd64)",
		edits: []edit{{"swpath/classifier/tree_lanes_amd64.s",
			"\tMOVQ\t$7, R13 \\\n", "\tMOVQ\t$3, R13 \\\n", 1}},
		pkgs: []string{"./swpath/classifier/"}, run: "TestScanLanesC2|TestCBlocksBig", cpu: cpuAVX512,
	},
	{
		name: "classifier: AppendMatching over compact blocks lists records whose holds fail",
		edits: []edit{{"swpath/classifier/tree_cblock.go",
			"; t.laneRest(e, f, misc) {\n\t\t\t\tadd(", "; true || t.laneRest(e, f, misc) {\n\t\t\t\tadd(", 1}},
		pkgs: []string{"./swpath/classifier/"}, run: "TestCBlocksPatched",
	},
	{
		name: "classifier: compact blocks are not shared by the leaves",
		edits: []edit{{"swpath/classifier/tree_cblock.go",
			"\t\t\tif left := k - int(cnt); left > 0 {\n\t\t\t\topen[left] = append(open[left], b)\n", "\t\t\tif left := k - int(cnt); left > 99 {\n\t\t\t\topen[left] = append(open[left], b)\n", 1}},
		pkgs: []string{"./swpath/classifier/"}, run: "TestCBlocksBig",
	},
	{
		name: "classifier: the tight lane scan takes the ports' spans a bit off (amd64)",
		edits: []edit{{"swpath/classifier/tree_lanes_amd64.s",
			"VPSHLDD\t$16, Y7, Y6, Y6", "VPSHLDD\t$15, Y7, Y6, Y6", 1}},
		pkgs: []string{"./swpath/classifier/"}, run: "TestCBlockLanes|TestScanLanesC2", cpu: cpuVBMI2,
	},
	{
		name: "classifier: big block arrays are never settled into huge pages",
		edits: []edit{{"swpath/classifier/huge_unsafe.go",
			"\t_ = sys.CollapseHuge(b[:size&^(sys.HugePageSize-1)])\n", "\t_ = b\n", 1}},
		pkgs: []string{"./swpath/classifier/"}, run: "TestHugeAlloc",
	},
	{
		name: "classifier: each tree's tight blocks in an array of its own",
		edits: []edit{{"swpath/classifier/tree_tblock.go",
			"tb[0], tb[1] = all[:len(cblk[0]):len(cblk[0])], all[len(cblk[0]):]", "tb[0], tb[1] = make([]tblock, len(cblk[0])), make([]tblock, len(cblk[1]))", 1}},
		pkgs: []string{"./swpath/classifier/"}, run: "TestHugeAlloc",
	},
	{
		name: "classifier: Go's rare paths scan a long leaf's first block only",
		edits: []edit{{"swpath/classifier/tree_cblock.go",
			"n&treeLong != 0 && next < end {", "n&treeLong != 0 && next < first {", 1}},
		pkgs: []string{"./swpath/classifier/"}, run: "TestLanesForced|TestCBlockSpans",
	},
	{
		name: "classifier: a tight leaf's scan in Go's rare paths takes a flagged lane that cannot beat its best",
		edits: []edit{{"swpath/classifier/tree_tblock.go",
			"e&laneEnt < best && t.laneRest(e, f, misc)", "true && t.laneRest(e, f, misc)", 1}},
		pkgs: []string{"./swpath/classifier/"}, run: "TestTLeafBest", cpu: cpuVBMI2,
	},
	{
		name: "classifier: a tight leaf's scan in Go's rare paths drops its blocks' best rank",
		edits: []edit{{"swpath/classifier/tree_tblock.go",
			"\t\tbest = min(best, tr.tentry(rank))\n", "\t\t_ = rank\n", 1}},
		pkgs: []string{"./swpath/classifier/"}, run: "TestTLeafBest", cpu: cpuVBMI2,
	},
	{
		name: "classifier: the two-block tight scan takes the ports' spans a bit off (amd64)",
		edits: []edit{{"swpath/classifier/tree_lanes_amd64.s",
			"VPSHLDD\t$16, Z7, Z17, Z17", "VPSHLDD\t$15, Z7, Z17, Z17", 1}},
		pkgs: []string{"./swpath/classifier/"}, run: "TestScanLanesC2", cpu: cpuVBMI2,
	},
	{
		name: "classifier: the two-block tight scan takes the source port's low end from the destination's (amd64)",
		edits: []edit{{"swpath/classifier/tree_lanes_amd64.s",
			"\tVPBLENDMW\tZ17, Z7, K7, Z18", "\tVPBLENDMW\tZ7, Z7, K7, Z18", 1}},
		pkgs: []string{"./swpath/classifier/"}, run: "TestScanLanesC2", cpu: cpuVBMI2,
	},
	{
		name: "classifier: a tight set's entries all take the first rank",
		edits: []edit{{"swpath/classifier/tree_tblock.go",
			"if r := tr.ents[e].rule; e == 0 || r != tr.ents[e-1].rule {", "if r := tr.ents[e].rule; e == 0 || r == -2 {", 1}},
		pkgs: []string{"./swpath/classifier/"}, run: "TestLanesForced|TestCBlocksBig", cpu: cpuVBMI2,
	},
	{
		name: "classifier: the rest of a tight scan forgets the scan's best",
		edits: []edit{{"swpath/classifier/tree_tblock.go",
			"\treturn tr.tfirst[k]\n", "\treturn treeNoRank\n", 1}},
		pkgs: []string{"./swpath/classifier/"}, run: "TestLanesForced", cpu: cpuVBMI2,
	},
	{
		name: "classifier: Decide over tight blocks takes a rank for an entry",
		edits: []edit{{"swpath/classifier/tree_cblock.go",
			"\t\treturn tr.tRule(best)\n", "\t\treturn tr.vecRule(best)\n", 1}},
		pkgs: []string{"./swpath/classifier/"}, run: "TestLanesForced", cpu: cpuVBMI2,
	},
	{
		name: "classifier: the tight lane scan for ranks that are rules leaves a packet that nothing decides its last rank (amd64)",
		edits: []edit{{"swpath/classifier/tree_lanes_amd64.s",
			"\tVMOVDQA32\tZ22, K2, Z7\n", "", 1}},
		pkgs: []string{"./swpath/classifier/"}, run: "TestScanLanesC2", cpu: cpuVBMI2,
	},
	{
		name: "classifier: the tight lane scan for IPv6 top bits leaves their values out of the c words (amd64)",
		edits: []edit{{"swpath/classifier/tree_lanes_amd64.s",
			"\tVPTERNLOGD\t$0xfe, Y6, Y7, Y5\n", "\tVPTERNLOGD\t$0xfe, Y6, Y6, Y5\n", 1}},
		pkgs: []string{"./swpath/classifier/"}, run: "TestCBlockLanes|TestScanLanesC2", cpu: cpuVBMI2,
	},
	{
		name: "classifier: the two-block tight scan for IPv6 top bits leaves their values out of the c words (amd64)",
		edits: []edit{{"swpath/classifier/tree_lanes_amd64.s",
			"\tVPTERNLOGD\t$0xfe, Z12, Z16, Z5\n", "\tVPTERNLOGD\t$0xfe, Z12, Z12, Z5\n", 1}},
		pkgs: []string{"./swpath/classifier/"}, run: "TestScanLanesC2", cpu: cpuVBMI2,
	},
	{
		name: "classifier: tight blocks take a lane whose IPv6 top value is not its mask",
		edits: []edit{{"swpath/classifier/tree_tblock.go",
			"l.e&laneEnt >= tEnt || !tTopFits(l.c)", "l.e&laneEnt >= tEnt", 1}},
		pkgs: []string{"./swpath/classifier/"}, run: "TestCBlockLanes",
	},
	{
		name: "classifier: a tight lane drops its IPv6 top bits",
		edits: []edit{{"swpath/classifier/tree_tblock.go",
			"class<<tClassShift | l.c&tTop\n", "class<<tClassShift\n", 1}},
		pkgs: []string{"./swpath/classifier/"}, run: "TestCBlockLanes|TestScanLanesC2",
	},
	{
		name: "classifier: a set whose tight lanes have IPv6 top bits takes the scans without them",
		edits: []edit{
			{"swpath/classifier/tree_lanes.go", "case tr.tight && tr.v6", "case tr.tight && false", 2},
			{"swpath/classifier/tree_cblock.go", "\t\tif tr.v6 {\n\t\t\tbest, check = tleafScan6(", "\t\tif false {\n\t\t\tbest, check = tleafScan6(", 1},
		},
		pkgs: []string{"./swpath/classifier/"}, run: "TestCBlocksBig|TestLanesForced", cpu: cpuVBMI2,
	},
	{
		name: "classifier: the tight lane scan spreads the destination's whole-word bit for the source (amd64)",
		edits: []edit{{"swpath/classifier/tree_lanes_amd64.s",
			"VPSLLD\t$2, Y4, Y7", "VPSLLD\t$3, Y4, Y7", 1}},
		pkgs: []string{"./swpath/classifier/"}, run: "TestCBlockLanes|TestScanLanesC2", cpu: cpuVBMI2,
	},
	{
		name: "classifier: the two-block tight scan takes the destination's whole-word bit from the source's (amd64)",
		edits: []edit{{"swpath/classifier/tree_lanes_amd64.s",
			"\tZDST(3) \\\n", "\tZDST(2) \\\n", 1}},
		pkgs: []string{"./swpath/classifier/"}, run: "TestScanLanesC2", cpu: cpuVBMI2,
	},
	{
		name: "classifier: the two-block tight scan spreads the destination's whole-word bit for the source (amd64)",
		edits: []edit{{"swpath/classifier/tree_lanes_amd64.s",
			"VPSLLD\t$2, Z4, Z7", "VPSLLD\t$3, Z4, Z7", 1}},
		pkgs: []string{"./swpath/classifier/"}, run: "TestScanLanesC2", cpu: cpuVBMI2,
	},
	{
		name: "classifier: tight lanes of different source ports share a class",
		edits: []edit{{"swpath/classifier/tree_tblock.go",
			"l.p&0xffff0000 | l.q>>16}", "l.p&0xffff0000}", 1}},
		pkgs: []string{"./swpath/classifier/"}, run: "TestCBlockLanes|TestScanLanesC2",
	},
	{
		name: "classifier: a tight block expands without its lanes' flags",
		edits: []edit{{"swpath/classifier/tree_tblock.go",
			"e: x&tEnt | x&tFlags,", "e: x & tEnt,", 1}},
		pkgs: []string{"./swpath/classifier/"}, run: "TestCBlockLanes|TestTBlocksFallback",
	},
	{
		name: "classifier: a tight lane's rank loses its entry's flags",
		edits: []edit{{"swpath/classifier/tree_tblock.go",
			"l.e = pos[l.e&laneEnt] | l.e&^laneEnt", "l.e = pos[l.e&laneEnt]", 1}},
		pkgs: []string{"./swpath/classifier/"}, run: "TestCBlockLanes|TestLanesForced", cpu: cpuVBMI2,
	},
	{
		name: "classifier: tight blocks take one class more than their scan can index",
		edits: []edit{{"swpath/classifier/tree_tblock.go",
			"if len(ids) == tNever {", "if len(ids) == tNever+1 {", 1}},
		pkgs: []string{"./swpath/classifier/"}, run: "TestTBlocksFallback",
	},
	{
		name: "classifier: tight blocks take a rank that is the never lane's",
		edits: []edit{{"swpath/classifier/tree_tblock.go",
			"if l.e&laneEnt >= tEnt || !tTopFits(l.c) {", "if l.e&laneEnt > tEnt || !tTopFits(l.c) {", 1}},
		pkgs: []string{"./swpath/classifier/"}, run: "TestTBlocksFallback",
	},
	{
		name: "classifier: sets past tblockMin never get tight blocks",
		edits: []edit{{"swpath/classifier/tree_cblock.go",
			"if !lanesWalk || !lanesTight || tr.blockBytes() <= tblockMin {", "if true || tr.blockBytes() <= tblockMin {", 1}},
		pkgs: []string{"./swpath/classifier/"}, run: "TestLanesLayout|TestLanesForced", cpu: cpuVBMI2,
	},
	{
		name: "classifier: Decide over tight blocks ignores the lanes to check",
		edits: []edit{{"swpath/classifier/tree_cblock.go",
			"\t\tif (n0|n1)&treeLong != 0 || check != 0 {\n\t\t\te0, e1 := &tr.tent[0]", "\t\tif (n0|n1)&treeLong != 0 {\n\t\t\te0, e1 := &tr.tent[0]", 1}},
		pkgs: []string{"./swpath/classifier/"}, run: "TestLanesForced", cpu: cpuVBMI2,
	},
	{
		name: "classifier: a burst over tight blocks checks a passing lane against the other tree's block",
		edits: []edit{{"swpath/classifier/tree_lanes.go",
			"&tr.tent[1][uint32(n1)/vecBlock]", "&tr.tent[0][uint32(n0)/vecBlock]", 1}},
		pkgs: []string{"./swpath/classifier/"}, run: "TestLanesForced", cpu: cpuVBMI2,
	},
	{
		name: "classifier: sets of more than two trees get blocks with the lane walk",
		edits: []edit{{"swpath/classifier/tree.go",
			" || cblocks) && len(tr.t) <= 2)", " || cblocks))", 1}},
		pkgs: []string{"./swpath/classifier/"}, run: "TestLanesLayout", cpu: cpuAVX512,
	},
	{
		name: "classifier: the group's lane walk keeps the leaf a packet that is not IP walked to",
		edits: []edit{{"swpath/classifier/tree.go",
			"\t\t\t\t\tcur[ti][i] = treeLeaf\n", "\t\t\t\t\t_ = i\n", 1}},
		pkgs: []string{"./swpath/classifier/"}, run: "TestLanesForced", cpu: cpuAVX512,
	},
	{
		name: "classifier: the Go scan's pair walks the second packet's tree 1 with the first's key",
		edits: []edit{{"swpath/classifier/tree_vec2.go",
			"uint32(l[m1>>56&3]>>(m1>>48&63))&uint32(m1>>32&0xffff)]\n\t\t}\n\t}\n\tsf, sg := scanSD(f), scanSD(g)\n\tif ",
			"uint32(k[m1>>56&3]>>(m1>>48&63))&uint32(m1>>32&0xffff)]\n\t\t}\n\t}\n\tsf, sg := scanSD(f), scanSD(g)\n\tif ", 1}},
		pkgs: []string{"./swpath/classifier/"}, run: "TestTreesVecForced",
	},
	{
		name: "classifier: a window tests the records past its leaf's count",
		edits: []edit{{"swpath/classifier/tree_window.go",
			"\n\treturn m & (1<<cnt - 1)\n", "\n\treturn m\n", 1}},
		pkgs: []string{"./swpath/classifier/"}, run: "TestWinMask|TestTreeWindows|TestTreesVecForced",
	},
	{
		name: "api: a replace stores the rules protection refuses and answers 200",
		edits: []edit{{"agent/api/api.go",
			"s.Store.ReplaceInForce(Source, set.Rules)", "s.Store.Replace(Source, set.Rules)", 1}},
		pkgs: []string{"./agent/api/"}, run: "FuzzHandler",
	},
	{
		name: "flowspec: a route's component type twice is translated, the last one winning",
		edits: []edit{{"agent/flowspec/translate.go",
			"\t\tif seen[t] {\n", "\t\tif false && seen[t] {\n", 1}},
		pkgs: []string{"./agent/flowspec/"}, run: "FuzzTranslate|TestTranslateAndRefusals",
	},
	{
		name: "flowspec: the guard passes on a message GoBGP's decoder panics on",
		edits: []edit{{"agent/flowspec/bgpguard/guard.go",
			"m, err := decode(&h, msg[bgp.BGP_HEADER_LENGTH:])\n\t\tif err != nil {", "m, err := decode(&h, msg[bgp.BGP_HEADER_LENGTH:])\n\t\tif err != nil && false {", 1}},
		pkgs: []string{"./agent/flowspec/bgpguard/", "./agent/flowspec/"}, run: "TestRelay|TestMalformedUpdateResetsSession",
	},
	{
		name: "flowspec: the guard lets a held-down neighbour's connects through to GoBGP",
		edits: []edit{{"agent/flowspec/bgpguard/guard.go",
			"if until := g.held(n); !until.IsZero() {", "if until := g.held(n); !until.IsZero() && false {", 1}},
		pkgs: []string{"./agent/flowspec/bgpguard/"}, run: "TestMalformedHoldDown$",
	},
	{
		name: "flowspec: the guard logs every refused connection, however many come",
		edits: []edit{{"agent/flowspec/bgpguard/guard.go",
			"if now.Sub(g.logged[reason]) < refusalLogEvery {", "if now.Sub(g.logged[reason]) < 0 {", 1}},
		pkgs: []string{"./agent/flowspec/bgpguard/"}, run: "TestStrangerClosed",
	},
	{
		name: "flowspec: a loopback port taken before GoBGP listens ends the speaker",
		edits: []edit{{"agent/flowspec/speaker.go",
			"if !errors.Is(err, syscall.EADDRINUSE) || try == startTries {", "if !errors.Is(err, syscall.EADDRINUSE) || try >= 1 {", 1}},
		pkgs: []string{"./agent/flowspec/"}, run: "TestStartPicksPortAgain",
	},
	{
		name: "flowspec: the speaker gives the guard no route limit",
		edits: []edit{{"agent/flowspec/speaker.go",
			"MaxRoutes: s.cfg.MaxRoutes, Log: s.log}", "Log: s.log}", 1}},
		pkgs: []string{"./agent/flowspec/"}, run: "TestRouteLimit$",
	},
	{
		name: "flowspec: the guard's route count keeps withdrawn routes",
		edits: []edit{{"agent/flowspec/bgpguard/guard.go",
			"delete(set, string(k))", "delete(set, string(k)+\"x\")", 1}},
		pkgs: []string{"./agent/flowspec/bgpguard/"}, run: "TestRouteLimitHoldDown",
	},
	{
		name: "flowspec: the guard does not hold down a neighbour it reset for the route limit",
		edits: []edit{{"agent/flowspec/bgpguard/guard.go",
			"if hold := g.strike(n, 0); hold > 0 {", "if hold := g.strike(n, 1); hold > 0 {", 1}},
		pkgs: []string{"./agent/flowspec/bgpguard/"}, run: "TestRouteLimitHoldDown",
	},
	{
		name: "flowspec: the speaker reports GoBGP's loopback aliases instead of the neighbours' addresses",
		edits: []edit{{"agent/flowspec/speaker.go",
			"\t\treturn a\n", "\t\t_ = a\n\t\treturn alias\n", 1}},
		pkgs: []string{"./agent/flowspec/"}, run: "TestMalformedUpdateResetsSession",
	},
	{
		name: "flowspec: a fragment term of value 0 with the match bit reads as not-a-fragment",
		edits: []edit{{"agent/flowspec/translate.go",
			"\t\tif v == 0 && it.Op&bgp.BITMASK_FLAG_OP_MATCH != 0 {\n", "\t\tif false {\n", 1}},
		pkgs: []string{"./agent/flowspec/"}, run: "FuzzTranslate|TestFlagsAndFragments",
	},
	{
		name: "flowspec: ports without a protocol hold for SCTP too",
		edits: []edit{{"agent/flowspec/translate.go",
			"\t\tm.Proto = ps\n", "\t\t_ = ps\n", 1}},
		pkgs: []string{"./agent/flowspec/"}, run: "FuzzTranslate|TestTranslateAndRefusals",
	},
	{
		name: "classifier: a window of five records ends after its first half",
		edits: []edit{{"swpath/classifier/tree_window.go",
			"\tif cnt <= recWindow/2 {\n", "\tif cnt <= recWindow/2+1 {\n", 1}},
		pkgs: []string{"./swpath/classifier/"}, run: "TestWinMask|TestTreeWindows",
	},
	{
		name: "classifier: a window's pick takes a record ranked after the best of the other tree",
		edits: []edit{{"swpath/classifier/tree_window.go",
			"		if r.ent >= best {\n\t\t\tbreak\n\t\t}\n", "", 1}},
		pkgs: []string{"./swpath/classifier/"}, run: "TestTreeWindows|TestTreesVecForced",
	},
	{
		name: "classifier: a window set's packets have the ports bit whether or not they have ports",
		edits: []edit{{"swpath/classifier/tree_window.go",
			"\treturn uint64(portProtos[f.Proto]) & l4 * portsKeyBit\n", "\treturn l4&0 | portsKeyBit\n", 1}},
		pkgs: []string{"./swpath/classifier/"}, run: "TestWindowPortsKey",
	},
	{
		name: "classifier: a pair's first records take tree 1's when it ranks after tree 0's",
		edits: []edit{{"swpath/classifier/tree_vec2.go",
			"\tif e1 < e0 {\n", "\tif e1 > e0 {\n", 1}},
		pkgs: []string{"./swpath/classifier/"}, run: "TestTreeWindows|TestWindowPortsKey",
	},
	{
		name: "classifier: a pair's first record that needs holds decides without it",
		edits: []edit{{"swpath/classifier/tree_vec2.go",
			"\tif mf0|mf1 >= chkPortsBit {\n", "\tif mf0|mf1 >= chkPortsBit && false {\n", 1}},
		pkgs: []string{"./swpath/classifier/"}, run: "TestTreeWindows|TestWindowPortsKey",
	},
	{
		name: "classifier: Decide keys a window set's packets without the ports bit",
		edits: []edit{{"swpath/classifier/tree.go",
			"\tk := treeKey{f.Src.Hi, f.Dst.Hi, miscWord(f) | t.tr.miscBits(f)}\n\tsd := scanSD(f)\n",
			"\tk := treeKey{f.Src.Hi, f.Dst.Hi, miscWord(f) | t.tr.topBits(f)}\n\tsd := scanSD(f)\n", 1}},
		pkgs: []string{"./swpath/classifier/"}, run: "TestWindowPortsKey",
	},
	{
		name: "classifier: the ports test of a window set's records is dropped, not moved to their misc word",
		edits: []edit{{"swpath/classifier/tree_window.go",
			"\t\t\t\tr.miscMask = r.miscMask&^chkPortsBit | portsKeyBit\n", "\t\t\t\tr.miscMask = r.miscMask &^ chkPortsBit\n\t\t\t\tr.misc &^= portsKeyBit\n", 1}},
		pkgs: []string{"./swpath/classifier/"}, run: "TestWindowPortsKey",
	},
	{
		name: "classifier: leaves longer than a window are not marked",
		edits: []edit{{"swpath/classifier/tree_window.go",
			"				n |= treeLong\n", "", 1}},
		pkgs: []string{"./swpath/classifier/"}, run: "TestTreeWindows|TestTreesVecForced",
	},
	{
		name:  "rule: the bounds let a range past its field's largest value through",
		edits: []edit{{"swpath/rule/bounds.go", "\tcase r.Lo > max || r.Hi > max:\n", "\tcase false:\n", 1}},
		pkgs:  []string{"./swpath/rule/"}, run: "TestCheckBounds",
	},
	{
		name:  "rule: a guard takes a rule that fails the bounds",
		edits: []edit{{"swpath/rule/guard.go", "\tif e := m.bounds(); e != nil {\n", "\tif e := (*Error)(nil); e != nil {\n", 1}},
		pkgs:  []string{"./swpath/rule/", "./agent/store/"}, run: "TestCheckBounds|TestGuard",
	},
	{
		name: "classifier: a set whose IPv6 entries test the shared top bits is not marked",
		edits: []edit{{"swpath/classifier/tree.go",
			"\t\t\t\ttr.v6 = tr.v6 || m != 0\n", "", 1}},
		pkgs: []string{"./swpath/classifier/"}, run: "TestTreesIPv6",
	},
	{
		name: "classifier: padding leaves a leaf one load from its root",
		edits: []edit{{"swpath/classifier/tree_window.go",
			"\t\t\tcase at+1 < depth:\n", "\t\t\tcase at+1 < depth-1:\n", 1}},
		pkgs: []string{"./swpath/classifier/"}, run: "TestPaddedWalks|TestTreesVecForced",
	},
	{
		name: "classifier: a tree whose root is a leaf is not padded",
		edits: []edit{{"swpath/classifier/tree_window.go",
			"\t\td.root = chain(d.root, depth)\n", "", 1}},
		pkgs: []string{"./swpath/classifier/"}, run: "TestPaddedWalks",
	},
	{
		name: "classifier: the pairs' padded levels walk the second packet's tree 1 with the first's key",
		edits: []edit{{"swpath/classifier/tree_vec2.go",
			"\t\t\tm1 = trs[1].nodes[uint32(m1)+uint32(l[m1>>56&3]>>(m1>>48&63))&uint32(m1>>32&0xffff)]\n\t\t}\n\t}\n\tif f.Family == 0 {",
			"\t\t\tm1 = trs[1].nodes[uint32(m1)+uint32(k[m1>>56&3]>>(m1>>48&63))&uint32(m1>>32&0xffff)]\n\t\t}\n\t}\n\tif f.Family == 0 {", 2}},
		pkgs: []string{"./swpath/classifier/"}, run: "TestPaddedWalks|TestTreesVecForced|TestLanesForced",
	},
	{
		name: "classifier: the build's bounds check does not count a window's records",
		edits: []edit{{"swpath/classifier/tree.go",
			"\t\t\t\tread = recWindow\n", "\t\t\t\t_ = recWindow\n", 1}},
		pkgs: []string{"./swpath/classifier/"}, run: "TestTreeInBounds",
	},
	{
		name: "classifier: a window's pick skips the rest of a record that needs holds",
		edits: []edit{{"swpath/classifier/tree_window.go",
			"if r.miscMask >= chkPortsBit && !t.recRest(", "if false && !t.recRest(", 1}},
		pkgs: []string{"./swpath/classifier/"}, run: "TestTreeWindows|TestTreesVecForced",
	},
	{
		name: "classifier: the two-block scan tests the first block twice (amd64)",
		edits: []edit{{"swpath/classifier/tree_vec_amd64.s",
			"\tMOVQ\tb1+32(FP), DI\n\tBLOCK(SI, AX)\n\tBLOCK(DI, BX)\n",
			"\tMOVQ\tb1+32(FP), DI\n\tBLOCK(SI, AX)\n\tBLOCK(SI, BX)\n", 1}},
		pkgs: []string{"./swpath/classifier/"}, run: "TestLeafScan4|TestDifferentialClassBench",
	},
	{
		name: "classifier: a leaf scan's lanes go to X registers by legacy SSE MOVQ (amd64)",
		edits: []edit{{"swpath/classifier/tree_vec_amd64.s",
			"\tVMOVQ\tBX, X3 \\\n", "\tMOVQ\tBX, X3 \\\n", 1}},
		pkgs: []string{"./swpath/classifier/"}, run: "TestStubsVEX", long: true,
	},
	{
		name: "classifier: the AVX2 scans of two blocks (leafScan2, cblockScan2) return without VZEROUPPER (amd64)",
		edits: []edit{{"swpath/classifier/tree_vec_amd64.s",
			"\tMINIMUM(R10) \\\n\tVZEROUPPER \\\n\tSHLL\t$8, BX \\\n",
			"\tMINIMUM(R10) \\\n\tSHLL\t$8, BX \\\n", 1}},
		pkgs: []string{"./swpath/classifier/"}, run: "TestStubsVEX", long: true,
	},
	{
		name: "classifier: walkQuads2 takes key word 1 for key word 2 (amd64)",
		edits: []edit{{"swpath/classifier/tree_quads_amd64.s",
			"\tVPCMPEQQ\tY9, Y2, Y6 \\\n", "\tVPCMPEQQ\tY8, Y2, Y6 \\\n", 1}},
		pkgs: []string{"./swpath/classifier/"}, run: "TestWalkQuads", cpu: cpuAVX2,
	},
	{
		name: "classifier: walkQuads2 takes the shift one bit low in the node word (amd64)",
		edits: []edit{{"swpath/classifier/tree_quads_amd64.s",
			"\tVPSRLQ\t$48, Y0, Y2 \\\n", "\tVPSRLQ\t$47, Y0, Y2 \\\n", 1}},
		pkgs: []string{"./swpath/classifier/"}, run: "TestWalkQuads", cpu: cpuAVX2,
	},
	{
		name: "classifier: walkQuads2 and walkQuads2d walk tree 1 over tree 0's node words (amd64)",
		edits: []edit{{"swpath/classifier/tree_quads_amd64.s",
			"\tQLEVEL(R12, step, DI, off1, c1, d1) \\\n", "\tQLEVEL(R12, step, SI, off1, c1, d1) \\\n", 1}},
		pkgs: []string{"./swpath/classifier/"}, run: "TestWalkQuads", cpu: cpuAVX2,
	},
	{
		name: "classifier: walkQuads2 drops every chunk after one step (amd64)",
		edits: []edit{{"swpath/classifier/tree_quads_amd64.s",
			"\tCMPL\tR9, $15 \\\n\tJEQ\tlbl \\\n", "\tCMPL\tR9, $15 \\\n\tJMP\tlbl \\\n", 1}},
		pkgs: []string{"./swpath/classifier/"}, run: "TestWalkQuads", cpu: cpuAVX2,
	},
	{
		name: "classifier: walkQuads2d masks a cut of k bits with k+1 (amd64)",
		edits: []edit{{"swpath/classifier/tree_quads_amd64.s",
			"\tVPSUBQ\tY8, Y2, Y2 \\\n", "\tVPSUBQ\tY9, Y2, Y2 \\\n", 1}},
		pkgs: []string{"./swpath/classifier/"}, run: "TestWalkQuads", cpu: cpuAVX2,
	},
	{
		name: "classifier: walkQuads2d starts the lanes of a group rounded to four, not eight (amd64)",
		edits: []edit{{"swpath/classifier/tree_quads_amd64.s",
			"\tANDQ\t$-8, CX\n\tQCONSTS(48)\n", "\tANDQ\t$-4, CX\n\tQCONSTS(48)\n", 1}},
		pkgs: []string{"./swpath/classifier/"}, run: "TestWalkQuads", cpu: cpuAVX2,
	},
	{
		name: "classifier: walkQuads2d starts tree 1's lanes at tree 0's root (amd64)",
		edits: []edit{{"swpath/classifier/tree_quads_amd64.s",
			"\tQFILL(X0, X1, R10, 4, 512, initd, walkd)\n", "\tQFILL(X0, X0, R10, 4, 512, initd, walkd)\n", 1}},
		pkgs: []string{"./swpath/classifier/"}, run: "TestWalkQuads", cpu: cpuAVX2,
	},
	{
		name: "classifier: the NEON cblockScan2 reads a whole source word as a prefix of its value (arm64)",
		edits: []edit{{"swpath/classifier/tree_vec_arm64.s",
			"\tVBIT\tV29.B16, V12.B16, V28.B16 \\\n", "\tVORR\tV12.B16, V28.B16, V28.B16 \\\n", 1}},
		pkgs: []string{"./swpath/classifier/"}, run: "TestCBlockLanes|TestScanLanesC2", arch: "arm64",
	},
	{
		name: "classifier: the NEON cblockScan2 takes the destination's wholeness from the source's bit (arm64)",
		edits: []edit{{"swpath/classifier/tree_vec_arm64.s",
			"\tMOVW\t$const_cDstFull, R3\n", "\tMOVW\t$const_cSrcFull, R3\n", 1}},
		pkgs: []string{"./swpath/classifier/"}, run: "TestCBlockLanes|TestScanLanesC2", arch: "arm64",
	},
	{
		name: "classifier: the NEON cblockScan2 leaves out the ports (arm64)",
		edits: []edit{{"swpath/classifier/tree_vec_arm64.s",
			"\tVAND\tp.B16, s.B16, s.B16 \\\n", "", 1}},
		pkgs: []string{"./swpath/classifier/"}, run: "TestCBlockLanes|TestScanLanesC2", arch: "arm64",
	},
	{
		name: "classifier: the NEON cblockScan2 compares the c word unmasked (arm64)",
		edits: []edit{{"swpath/classifier/tree_vec_arm64.s",
			"\tVAND\tV28.B16, c.B16, c.B16 \\\n", "", 1}},
		pkgs: []string{"./swpath/classifier/"}, run: "TestCBlockLanes|TestScanLanesC2", arch: "arm64",
	},
	{
		name: "classifier: the NEON cblockScan2 sees no lane's flags (arm64)",
		edits: []edit{{"swpath/classifier/tree_vec_arm64.s",
			"\tVCMTST\tV8.S4, e.S4, V29.S4 \\\n", "\tVEOR\tV29.B16, V29.B16, V29.B16 \\\n", 1}},
		pkgs: []string{"./swpath/classifier/"}, run: "TestCBlockLanes|TestScanLanesC2", arch: "arm64",
	},
	{
		name: "classifier: the NEON cblockScan2 scans lanes outside the leaf (arm64)",
		edits: []edit{{"swpath/classifier/tree_vec_arm64.s",
			"\tVAND\tlm.B16, s.B16, s.B16 \\\n", "", 1}},
		pkgs: []string{"./swpath/classifier/"}, run: "TestCBlockLanes|TestScanLanesC2", arch: "arm64",
	},
	{
		name: "classifier: the NEON cblockScan2 scans block 1 under block 0's leaf lanes (arm64)",
		edits: []edit{{"swpath/classifier/tree_vec_arm64.s",
			"\tLSR\t$8, R6, R6\n", "", 1}},
		pkgs: []string{"./swpath/classifier/"}, run: "TestCBlockLanes|TestScanLanesC2", arch: "arm64",
	},
	{
		name: "classifier: cvecBurst takes the destination word for the misc word, in the stub's walk and the scans",
		edits: []edit{{"swpath/classifier/tree_cblock.go",
			"lk[2][i] = w2\n", "lk[2][i] = w1\n", 1}},
		pkgs: []string{"./swpath/classifier/"}, run: "TestCGroupForced",
	},
	{
		name: "classifier: laneKeys8 keeps lanePorts on packets with ports (amd64)",
		edits: []edit{{"swpath/classifier/tree_lanes_amd64.s",
			"\tVPXORQ\tZ27, Z8, Z8\n", "\tVPORQ\tZ27, Z8, Z8\n", 1}},
		pkgs: []string{"./swpath/classifier/"}, run: "TestLaneKeys|TestDifferentialClassBench", cpu: cpuAVX512,
	},
	{
		name: "classifier: laneKeys8 gathers the destination word of every lane, past the group too (amd64)",
		edits: []edit{{"swpath/classifier/tree_lanes_amd64.s",
			"\tKMOVW\tK7, K1\n\tVPGATHERQQ\tconst_fieldsDst(AX)", "\tKXNORW\tK1, K1, K1\n\tVPGATHERQQ\tconst_fieldsDst(AX)", 1}},
		pkgs: []string{"./swpath/classifier/"}, run: "TestLaneKeys", cpu: cpuAVX512,
	},
	{
		name: "classifier: laneKeys8 puts the family one bit too high in the misc word (amd64)",
		edits: []edit{{"swpath/classifier/tree_lanes_amd64.s",
			"\tVPSLLQ\t$40, Z4, Z4\n", "\tVPSLLQ\t$41, Z4, Z4\n", 1}},
		pkgs: []string{"./swpath/classifier/"}, run: "TestLaneKeys|TestDifferentialClassBench", cpu: cpuAVX512,
	},
	{
		name: "placement: a rule changed in place twice takes its last slot as its key",
		edits: []edit{{"agent/placement/delta.go",
			"key := p.set.Key(from[k])", "key := from[k]", 1}},
		pkgs: []string{"./agent/placement/"},
	},
	{
		name: "XDP compiler: port range end exclusive",
		edits: []edit{{"swpath/xdp/compile.go",
			"range16{uint16(r.Lo), uint16(r.Hi)}", "range16{uint16(r.Lo), uint16(r.Hi) - 1}", 1}},
		pkgs: []string{"./swpath/xdp/"}, run: "Compile|Diff|Verdict",
	},
	{
		name: "flower range split: range end exclusive",
		edits: []edit{{"offload/compile/ranges.go",
			"\t\tfor lo <= hi {\n", "\t\tfor lo < hi {\n", 1}},
		pkgs: []string{"./offload/compile/"},
	},
	{
		name: "protect: direction both keeps only the destination side",
		edits: []edit{{"agent/config/config.go",
			"\tcase \"both\":\n\t\treturn []rule.Rule{srcRule, dstRule}, nil", "\tcase \"both\":\n\t\treturn []rule.Rule{dstRule}, nil", 1}},
		pkgs: []string{"./agent/config/", "./agent/protect/"},
	},
	{
		name: "skip_sw and skip_hw swapped",
		edits: []edit{{"offload/tcflower/filter.go",
			"\tSkipHW  Flags = 1 << 0\n\tSkipSW  Flags = 1 << 1\n", "\tSkipHW  Flags = 1 << 1\n\tSkipSW  Flags = 1 << 0\n", 1}},
		pkgs: []string{"./offload/tcflower/", "./agent/hwpath/"},
	},
	{
		name: "placement: a rule whose match changed under its id forgets the engine's last reading (double count)",
		edits: []edit{{"agent/placement/placement.go",
			"\t\tx.hwTot, x.swTot, x.moves, x.swLast = o.hwTot, o.swTot, o.moves, o.swLast\n",
			"\t\tx.hwTot, x.swTot, x.moves = o.hwTot, o.swTot, o.moves\n", 1}},
		pkgs: []string{"./agent/placement/", "./agent/sim/"}, run: "TestCountersAddUp|TestSimCountersAddUp",
	},
	{
		name: "XDP: a reused counter slot not retired into the verdict counters",
		edits: []edit{{"swpath/xdp/engine.go",
			"\t\t\tif slots[i] < e.next {\n", "\t\t\tif false {\n", 1}},
		pkgs: []string{"./swpath/xdp/"}, run: "TestCountersAddUpAcrossMatchChange",
	},
	{
		name: "XDP: a reused counter slot not zeroed for its new rule",
		edits: []edit{{"swpath/xdp/engine.go",
			"if err := e.stats.Put(slots[i], zero); err != nil {", "if err := error(nil); err != nil && zero != nil {", 1}},
		pkgs: []string{"./swpath/xdp/"}, run: "TestCountersAddUpAcrossMatchChange",
	},
	{
		name: "list reply announces one rule fewer than it holds",
		edits: []edit{{"agent/api/api.go",
			"w.Header().Set(CountHeader, strconv.Itoa(len(es)))", "w.Header().Set(CountHeader, strconv.Itoa(len(es)-1))", 1}},
		pkgs: []string{"./agent/api/"}, run: "TestList",
	},
	{
		name: "list widths count a source's bytes, not its characters",
		edits: []edit{{"agent/api/wire.go",
			"utf8.RuneCountInString(e.Source)", "len(e.Source)", 1}},
		pkgs: []string{"./agent/api/", "./agent/cli/"}, run: "TestListNDJSONHeads|TestRulesListEveryKind",
	},
	{
		name: "list client reads the reply as it prints, no read-ahead",
		edits: []edit{{"agent/api/client.go",
			"n, err = eachLine(sp, h.Rules, each)", "n, err = eachLine(resp.Body, h.Rules, each)", 1}},
		pkgs: []string{"./agent/api/"}, run: "TestListSlowReader",
	},
	{
		name: "parser: the fast path reads ports of every protocol",
		edits: []edit{{"swpath/packet/packet.go",
			"ports := l4 & -uint32(k&l4Ports)", "ports := l4", 1}},
		pkgs: []string{"./swpath/packet/"}, run: "TestFastPathMatchesGeneral",
	},
	{
		name: "parser: the fast path reads TCP flags of every protocol",
		edits: []edit{{"swpath/packet/packet.go",
			"b[ethHeaderLen+ipv4MinHdrLen+13] & -(k >> l4FlagsShift & 1)", "b[ethHeaderLen+ipv4MinHdrLen+13]", 1}},
		pkgs: []string{"./swpath/packet/"}, run: "TestFastPathMatchesGeneral",
	},
	{
		name: "parser: the fast path reads ICMP type and code of every protocol",
		edits: []edit{{"swpath/packet/packet.go",
			"icmp := l4 >> 16 & -uint32(k>>l4ICMPShift&1)", "icmp := l4 >> 16", 1}},
		pkgs: []string{"./swpath/packet/"}, run: "TestFastPathMatchesGeneral",
	},
	{
		name: "parser: the fast path takes SCTP for a protocol without ports",
		edits: []edit{{"swpath/packet/packet.go",
			"rule.ProtoSCTP: l4Ports,", "", 1}},
		pkgs: []string{"./swpath/packet/"}, run: "TestFastPathMatchesGeneral",
	},
}

func main() {
	only := flag.String("run", "", "run only mutations whose name contains this")
	deadline := flag.Duration("deadline", 150*time.Second, "per-mutation deadline for its tests")
	flag.Parse()
	root, err := os.Getwd()
	if err != nil {
		fatal(err)
	}
	files, err := exec.Command("git", "ls-files", "-co", "--exclude-standard").Output()
	if err != nil {
		fatal(fmt.Errorf("git ls-files (run from the repository root): %w", err))
	}
	start := time.Now()
	failed, skipped := 0, 0
	for _, m := range mutations {
		if *only != "" && !strings.Contains(m.name, *only) {
			continue
		}
		if !cpuHas(m.cpu) {
			// The tests cannot reach the code here; the edit must still
			// apply, or the mutation is stale.
			if err := applies(root, m); err != nil {
				failed++
				fmt.Printf("%-14s %6.1fs  %s\n%s\n", "STALE", 0.0, m.name, indent(err.Error()))
				continue
			}
			skipped++
			fmt.Printf("%-14s %6.1fs  %s (needs %s, which this CPU lacks)\n", "skipped", 0.0, m.name, m.cpu)
			continue
		}
		if _, _, err := foreign(m); err != nil {
			if err := applies(root, m); err != nil {
				failed++
				fmt.Printf("%-14s %6.1fs  %s\n%s\n", "STALE", 0.0, m.name, indent(err.Error()))
				continue
			}
			// CI installs qemu-user-static (tests/all.sh): there a
			// missing emulator is a failure, elsewhere a skip.
			if os.Getenv("CI") == "true" {
				failed++
				fmt.Printf("%-14s %6.1fs  %s\n%s\n", "NO EMULATOR", 0.0, m.name, indent(err.Error()))
				continue
			}
			skipped++
			fmt.Printf("%-14s %6.1fs  %s (%v)\n", "skipped", 0.0, m.name, err)
			continue
		}
		t0 := time.Now()
		res, out := try(root, strings.Fields(string(files)), m, *deadline)
		fmt.Printf("%-14s %6.1fs  %s\n", res, time.Since(t0).Seconds(), m.name)
		if res != "caught" {
			failed++
			fmt.Println(indent(tail(out, 40)))
		}
	}
	fmt.Printf("mutation check: %d not caught, %d skipped for this CPU's features or a missing emulator, %v in all\n", failed, skipped, time.Since(start).Round(time.Second))
	if failed > 0 {
		os.Exit(1)
	}
}

// applies reports whether m's edits apply to the tree at root (each old
// text occurs as often as stated), without running anything.
func applies(root string, m mutation) error {
	for _, e := range m.edits {
		b, err := os.ReadFile(filepath.Join(root, e.file))
		if err != nil {
			return err
		}
		if c := strings.Count(string(b), e.old); c != e.n {
			return fmt.Errorf("%s: %q occurs %d times, want %d", e.file, e.old, c, e.n)
		}
	}
	return nil
}

// try applies m to a copy of the tree and runs its tests. The result is
// "caught", "NOT CAUGHT", "TIMED OUT" or "STALE" (the edit did not apply).
func try(root string, files []string, m mutation, deadline time.Duration) (string, string) {
	dir, err := os.MkdirTemp("", "mutation-")
	if err != nil {
		fatal(err)
	}
	defer os.RemoveAll(dir)
	for _, f := range files {
		if err := copyFile(filepath.Join(root, f), filepath.Join(dir, f)); err != nil {
			if errors.Is(err, os.ErrNotExist) {
				continue // deleted in the working tree, not yet committed
			}
			fatal(err)
		}
	}
	for _, e := range m.edits {
		p := filepath.Join(dir, e.file)
		b, err := os.ReadFile(p)
		if err != nil {
			return "STALE", err.Error()
		}
		if c := strings.Count(string(b), e.old); c != e.n {
			return "STALE", fmt.Sprintf("%s: %q occurs %d times, want %d", e.file, e.old, c, e.n)
		}
		if err := os.WriteFile(p, []byte(strings.ReplaceAll(string(b), e.old, e.new)), 0o644); err != nil {
			fatal(err)
		}
	}
	args := []string{"test", "-count=1", "-timeout", deadline.String()}
	if !m.long {
		args = append(args, "-short")
	}
	if m.run != "" {
		args = append(args, "-run", m.run)
	}
	qemu, emu, _ := foreign(m)
	if qemu {
		args = append(args, "-exec", emu)
	}
	args = append(args, m.pkgs...)
	ctx, cancel := context.WithTimeout(context.Background(), deadline+30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = dir
	if m.arch != "" {
		cmd.Env = append(os.Environ(), "GOARCH="+m.arch)
	}
	// The deadline kills the go command's whole process group: a test
	// binary spinning in an assembly loop that a mutation made endless
	// cannot be stopped by its own -timeout (its panic waits to stop a
	// goroutine that never yields) and would otherwise outlive the check
	// on one of the machine's CPUs.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 10 * time.Second
	out, err := cmd.CombinedOutput()
	switch {
	case ctx.Err() != nil || strings.Contains(string(out), "panic: test timed out"):
		return "TIMED OUT", string(out)
	case err == nil:
		return "NOT CAUGHT", string(out)
	case !strings.Contains(string(out), "--- FAIL") && !strings.Contains(string(out), "\nfatal error: "):
		// No test failed, and no test binary died of a fault (a stub's
		// read past its memory): the go command did (a mutation that does
		// not compile proves nothing about the tests).
		return "STALE", string(out)
	}
	return "caught", string(out)
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	st, err := in.Stat()
	if err != nil || st.IsDir() {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, st.Mode().Perm())
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

func tail(s string, n int) string {
	l := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(l) > n {
		l = l[len(l)-n:]
	}
	return strings.Join(l, "\n")
}

func indent(s string) string { return "    " + strings.ReplaceAll(s, "\n", "\n    ") }

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "mutation:", err)
	os.Exit(2)
}
