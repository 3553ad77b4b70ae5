//go:build linux

// Command aclbench compares scrubd's classifier with DPDK's rte_acl on the
// same ClassBench-style IPv4 rule sets and the same packets, through DPDK's
// own test program (dpdk-test-acl, Debian's dpdk-dev, DPDK 22.11).
//
//	go run ./swpath/classifier/cmd/aclbench            # 1k, 10k, 100k rules
//	go run ./swpath/classifier/cmd/aclbench -rules 1k -rounds 1
//	go run ./swpath/classifier/cmd/aclbench -ipv6 -rules 1k,10k
//
// It runs as root (dpdk-test-acl's EAL; it installs dpdk-dev with apt-get
// when the tool is missing). rte_acl gets 2 MiB huge pages, as DPDK has in
// production: the run sets enough aside through /proc/sys/vm/nr_hugepages
// and gives them back at its end (huge.go); with -huge=false, or where the
// kernel cannot set them aside, it runs on 4 KiB pages (--no-huge), which
// cost its 100k-rule lookups a tenth to a fifth more here (BENCHMARKS.md).
// With -ipv6 the same sets are written with each IPv4 prefix a.b.c.d/n as
// 2001:db8:aabb:ccdd::/(32+n), and dpdk-test-acl runs with --ipv6.
//
// For each rule count it writes the rule set (traffic.ClassBenchRules) in
// dpdk-test-acl's rule format, in decision order, and two traces in its
// trace format: fresh (every packet a new 5-tuple, as in a spoofed flood)
// and flows (packets of 1000 flows). It then
//
//  1. checks that rte_acl's first match (its --verbose=2 dump) is the rule
//     scrubd decides, for every packet, and that scrubd's three APIs agree;
//  2. times both, pinned to one CPU, interleaved round by round: every
//     rte_acl algorithm this CPU runs, and scrubd's Table.Decide (one packet
//     at a time), Table.DecideBurst and Worker.ClassifyBurst (flow cache and
//     counters), bursts of 256 packets on both sides (dpdk-test-acl's
//     default --tracestep);
//  3. prints the table: CPU ns per packet, medians over the rounds, and the
//     ratio of scrubd's best API to rte_acl's scalar mode and to its best;
//  4. with more than one rule count, times scrubd's APIs on every count's
//     fresh trace again side by side (-scale-rounds rounds, each timing
//     the counts pass by pass, in turn) and prints each count's cost
//     against the first's, the ratio taken within each round (scale.go):
//     the table's rows are minutes apart, and between phases this
//     machine's speed moves by more than the sets differ.
//
// Times are CPU time: scrubd's is the benchmark thread's
// (CLOCK_THREAD_CPUTIME_ID); rte_acl's is the CPU time of dpdk-test-acl's
// searching thread (/proc/PID/schedstat) from the end of its first pass
// over the trace to the end of its last, read as each pass ends (its
// --verbose=1 line, line-buffered through stdbuf). Wall time of the same
// passes is printed beside each.
//
// Priority: rte_acl's highest priority wins and dpdk-test-acl gives line n
// priority RTE_ACL_MAX_PRIORITY - n; scrubd's lowest priority number wins,
// ties by position. Writing the rules in scrubd's decision order makes the
// two first matches the same rule.
package main

import (
	"flag"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/scrubd/scrubd/swpath/classifier"
	"github.com/scrubd/scrubd/swpath/internal/sys"
	"github.com/scrubd/scrubd/swpath/packet"
	"github.com/scrubd/scrubd/swpath/rule"
	"github.com/scrubd/scrubd/swpath/traffic"
)

const burst = 256

type options struct {
	rules    []int
	traffics []string
	packets  int
	flows    int
	rounds   int
	cpu      int
	algs     []string
	target   time.Duration
	dir      string
	verify   bool
	timing   bool
	seed     uint64
	// scaleRounds: rounds of the side-by-side timing of every rule
	// count (timeScaling).
	scaleRounds int
	family      rule.Family
	// huge: rte_acl runs on huge pages (reserveHuge).
	huge bool
}

func main() {
	var o options
	rules := flag.String("rules", "1k,10k,100k", "rule counts (k = 1000), comma-separated")
	traffics := flag.String("traffic", "fresh,flows", "traces: fresh (every packet a new 5-tuple), flows (-flows flows)")
	flag.IntVar(&o.packets, "packets", 262144, "packets per trace")
	flag.IntVar(&o.flows, "flows", 1000, "flows of the flows trace")
	flag.IntVar(&o.rounds, "rounds", 3, "interleaved timing rounds (medians are printed)")
	flag.IntVar(&o.cpu, "cpu", 1, "CPU to pin to (both programs); -1: no pinning")
	algs := flag.String("algs", "", "rte_acl algorithms (default: every one this CPU runs: "+strings.Join(cpuAlgs(), ",")+")")
	flag.DurationVar(&o.target, "target", 400*time.Millisecond, "CPU time per timed run")
	flag.StringVar(&o.dir, "dir", "", "directory for rule and trace files (default: a temporary one)")
	install := flag.Bool("install", true, "install dpdk-dev with apt-get when dpdk-test-acl is missing")
	flag.BoolVar(&o.verify, "verify", true, "check rte_acl's first match against scrubd's on every packet first")
	flag.BoolVar(&o.timing, "time", true, "time both after the check")
	flag.IntVar(&o.scaleRounds, "scale-rounds", 7, "side-by-side rounds over every rule count's fresh trace after the table (0: none)")
	flag.Uint64Var(&o.seed, "seed", 99, "traffic seed")
	flag.BoolVar(&o.huge, "huge", true, "give rte_acl 2 MiB huge pages, as DPDK has in production (reserved through /proc/sys/vm/nr_hugepages for the run and given back after; false or none free: --no-huge, 4 KiB pages)")
	ipv6 := flag.Bool("ipv6", false, "IPv6: the same rule sets with each IPv4 prefix a.b.c.d/n written as 2001:db8:aabb:ccdd::/(32+n), dpdk-test-acl --ipv6")
	flag.Parse()
	o.family = rule.IPv4
	if *ipv6 {
		o.family = rule.IPv6
	}
	var err error
	if o.rules, err = parseCounts(*rules); err != nil {
		fatal(err)
	}
	o.traffics = strings.Split(*traffics, ",")
	for _, t := range o.traffics {
		if t != "fresh" && t != "flows" {
			fatal(fmt.Errorf("-traffic: %q is neither fresh nor flows", t))
		}
	}
	o.algs = cpuAlgs()
	if *algs != "" {
		o.algs = strings.Split(*algs, ",")
		for _, a := range o.algs {
			if !slices.Contains(allAlgs, a) {
				fatal(fmt.Errorf("-algs: unknown algorithm %q (known: %s)", a, strings.Join(allAlgs, ",")))
			}
		}
	}
	if o.packets < burst || o.rounds < 1 || o.scaleRounds < 0 {
		fatal(fmt.Errorf("-packets must be at least %d, -rounds at least 1 and -scale-rounds at least 0", burst))
	}
	if err := ensureTool(*install); err != nil {
		fatal(err)
	}
	if o.cpu >= 0 {
		if err := sys.SetProcessAffinity([]int{o.cpu}); err != nil {
			fatal(fmt.Errorf("-cpu %d: %w", o.cpu, err))
		}
	}
	dir, done, err := tmpDir(o.dir)
	if err != nil {
		fatal(err)
	}
	giveBack := func() {}
	if o.huge {
		mb := 0
		for _, n := range o.rules {
			mb = max(mb, ealMB(n))
		}
		giveBack, err = reserveHuge(mb)
		if err != nil {
			fmt.Fprintf(os.Stderr, "aclbench: rte_acl runs on 4 KiB pages (--no-huge): %v\n", err)
			o.huge = false
		}
	}
	// An interrupted run gives the huge pages back too (dpdk-test-acl, in
	// the same process group, gets the terminal's signal as well).
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	stopped := make(chan struct{})
	go func() {
		select {
		case s := <-sigs:
			giveBack()
			done()
			fmt.Fprintf(os.Stderr, "aclbench: %v: stopped, huge pages given back\n", s)
			os.Exit(130)
		case <-stopped:
		}
	}()
	err = run(&o, dir)
	signal.Stop(sigs)
	close(stopped)
	giveBack()
	done()
	if err != nil {
		fatal(err)
	}
}

// ealMB is the EAL memory (-m, MiB) dpdk-test-acl gets for n rules: 4096
// for 100k rules, which 1024 does not hold.
func ealMB(n int) int {
	if n > 20000 {
		return 4096
	}
	return 1024
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "aclbench:", err)
	os.Exit(1)
}

func parseCounts(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		mul := 1
		t := strings.TrimSpace(f)
		if strings.HasSuffix(t, "k") {
			mul, t = 1000, strings.TrimSuffix(t, "k")
		}
		n, err := strconv.Atoi(t)
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("-rules: %q is not a positive count", f)
		}
		out = append(out, n*mul)
	}
	return out, nil
}

// trace is one packet trace: parsed fields and frame lengths.
type trace struct {
	name string
	fs   []rule.Fields
	lens []uint32
}

// makeTrace draws n IPv4 packets steered at set (95 % built from a rule) from
// the project's generator, keeping those a 5-tuple describes as scrubd sees
// them (see traceable). flows 0: every packet new.
func makeTrace(name string, set *rule.Set, n, flows int, seed uint64, family rule.Family) *trace {
	v6 := 1e-12 // random frames: of the file's family
	if family == rule.IPv6 {
		v6 = 1
	}
	g := traffic.NewGenerator(traffic.Config{Seed: seed, Rules: set, RuleFraction: 0.95, IPv6Fraction: v6, Flows: flows})
	tr := &trace{name: name, fs: make([]rule.Fields, 0, n), lens: make([]uint32, 0, n)}
	var buf []byte
	var f rule.Fields
	for len(tr.fs) < n {
		buf = g.Next(buf[:0])
		packet.Parse(buf, &f)
		if traceable(&f, family) {
			tr.fs = append(tr.fs, f)
			tr.lens = append(tr.lens, uint32(len(buf)))
		}
	}
	return tr
}

// row is the result for one rule count and trace.
type row struct {
	rules   int
	traffic string
	scrubd  map[string][]float64 // API -> cpu ns/pkt per round
	wall    map[string][]float64 // scrubd API wall ns/pkt, rte alg TSC ns/pkt
	rte     map[string][]float64 // alg -> cpu ns/pkt per round
	hitPct  float64
	checked int
}

// setInfo is the size of one rule count's structures.
type setInfo struct {
	rules      int
	ourBytes   int
	ourBuild   time.Duration
	lookup     string // what decides: "4 trees" or "17 hash tables"
	rteBytes   int64
	rteRunCPU  time.Duration // CPU of a one-iteration dpdk-test-acl run: start-up, parsing, build, one pass
	rteAlgUsed string
}

var apis = []string{"Decide", "DecideBurst", "ClassifyBurst"}

func run(o *options, dir string) error {
	var rows []*row
	var infos []*setInfo
	var scaled []*scaleSet
	defer func() {
		for _, ss := range scaled {
			ss.w.Close()
		}
	}()
	pages := "4 KiB pages (--no-huge)"
	if o.huge {
		pages = "2 MiB huge pages (--in-memory)"
	}
	fmt.Printf("aclbench: IPv%d, %s, %d CPUs, pinned to CPU %d, %s, load %s; rte_acl on %s\n", o.family, cpuModel(), runtime.NumCPU(), o.cpu, runtime.Version(), loadAvg(), pages)
	for _, n := range o.rules {
		set := traffic.ClassBenchRules(uint64(n), n)
		if o.family == rule.IPv6 {
			set = toIPv6(set)
		}
		rulesPath := fileIn(dir, fmt.Sprintf("rules-%d-v%d.txt", n, o.family))
		order, err := writeRules(rulesPath, set, o.family)
		if err != nil {
			return err
		}
		// Build time: the fastest of three builds (wall time; the first
		// ones also pay for growing the heap).
		var tab *classifier.Table
		build := time.Duration(1 << 62)
		for range 3 {
			runtime.GC()
			start := time.Now()
			tab, err = classifier.Compile(set)
			if err != nil {
				return err
			}
			build = min(build, time.Since(start))
		}
		st := tab.Stats()
		lookup := fmt.Sprintf("%d hash tables", st.Tuples)
		if st.Trees > 0 {
			lookup = fmt.Sprintf("%d trees", st.Trees)
		}
		info := &setInfo{rules: n, ourBytes: st.Bytes, ourBuild: build, lookup: lookup, rteBytes: -1}
		infos = append(infos, info)
		mem := ealMB(n)
		for _, tname := range o.traffics {
			flows := 0
			if tname == "flows" {
				flows = o.flows
			}
			tr := makeTrace(tname, set, o.packets, flows, o.seed, o.family)
			tracePath := fileIn(dir, fmt.Sprintf("trace-%d-%s-v%d.txt", n, tname, o.family))
			if err := writeTrace(tracePath, tr.fs); err != nil {
				return err
			}
			base := aclRun{rules: rulesPath, trace: tracePath, nrules: n, ntrace: len(tr.fs), cpu: max(o.cpu, 0), memMB: mem, ipv6: o.family == rule.IPv6, huge: o.huge}
			r := &row{rules: n, traffic: tname, scrubd: map[string][]float64{}, wall: map[string][]float64{}, rte: map[string][]float64{}}
			rows = append(rows, r)
			if o.verify {
				v := base
				v.iter, v.verbose = 1, 2
				res, err := v.run()
				if err != nil {
					return err
				}
				if err := check(set, tab, order, tr, res.matches); err != nil {
					return fmt.Errorf("%d rules, %s trace: %w", n, tname, err)
				}
				r.checked = len(tr.fs)
				info.rteBytes, info.rteRunCPU, info.rteAlgUsed = res.memBytes, res.cpu, res.alg
				fmt.Printf("checked: %d rules, %s trace: rte_acl and scrubd (Decide, DecideBurst, ClassifyBurst) pick the same rule for all %d packets\n", n, tname, len(tr.fs))
			}
			if !o.timing {
				continue
			}
			c, err := classifier.New(set)
			if err != nil {
				return err
			}
			ctab := c.Table()
			w := c.NewWorker()
			for round := range o.rounds {
				for _, alg := range o.algs {
					cpuNs, wallNs, err := timeACL(base, alg, o.target)
					if err != nil {
						return err
					}
					r.rte[alg] = append(r.rte[alg], cpuNs)
					r.wall[alg] = append(r.wall[alg], wallNs)
				}
				for _, api := range apis {
					s0 := c.Snapshot()
					cpuNs, wallNs := timeOurs(api, ctab, w, tr, o.target)
					r.scrubd[api] = append(r.scrubd[api], cpuNs)
					r.wall[api] = append(r.wall[api], wallNs)
					if api == "ClassifyBurst" && round == 0 {
						s1 := c.Snapshot()
						r.hitPct = 100 * float64(s1.CacheHits-s0.CacheHits) / float64(s1.Packets-s0.Packets)
					}
				}
				fmt.Fprintf(os.Stderr, "aclbench: %d rules, %s, round %d/%d done (load %s)\n", n, tname, round+1, o.rounds, loadAvg())
			}
			if tname == "fresh" && o.scaleRounds > 0 && len(o.rules) > 1 {
				scaled = append(scaled, &scaleSet{rules: n, tab: ctab, w: w, tr: tr, cpu: map[string][]float64{}})
				continue
			}
			w.Close()
		}
	}
	if o.timing {
		printTable(os.Stdout, o, rows)
		if len(scaled) > 1 {
			timeScaling(scaled, o)
			printScaling(os.Stdout, o, scaled)
		}
	}
	printSizes(os.Stdout, infos)
	fmt.Printf("\nload at the end: %s\n", loadAvg())
	fmt.Fprint(io.Discard, sink) // keeps the timed loops' results live
	return nil
}

// check compares rte_acl's first match with scrubd's three APIs on every
// packet of tr.
func check(set *rule.Set, tab *classifier.Table, order []int, tr *trace, matches []uint32) error {
	if len(matches) != len(tr.fs) {
		return fmt.Errorf("rte_acl dumped %d results for %d packets", len(matches), len(tr.fs))
	}
	c, err := classifier.New(set)
	if err != nil {
		return err
	}
	w := c.NewWorker()
	defer w.Close()
	ids := make([]int32, len(tr.fs))
	tab.DecideBurst(tr.fs, ids)
	res := make([]classifier.Result, len(tr.fs))
	for off := 0; off < len(tr.fs); off += burst {
		end := min(off+burst, len(tr.fs))
		w.ClassifyBurst(tr.fs[off:end], tr.lens[off:end], res[off:end])
	}
	bad := 0
	var msg strings.Builder
	for i := range tr.fs {
		want := -1
		if matches[i] != noMatch {
			if int(matches[i]) >= len(order) {
				return fmt.Errorf("packet %d: rte_acl result %d is not a line of the rule file", i+1, matches[i])
			}
			want = order[matches[i]]
		}
		got := tab.Decide(&tr.fs[i])
		if got != want || int(ids[i]) != want || int(res[i].Rule) != want {
			bad++
			if bad <= 5 {
				fmt.Fprintf(&msg, "\n  packet %d (%s): rte_acl rule %d, scrubd Decide %d, DecideBurst %d, ClassifyBurst %d",
					i+1, traceLine(&tr.fs[i]), want, got, ids[i], res[i].Rule)
			}
		}
	}
	if bad > 0 {
		return fmt.Errorf("%d of %d packets decided differently:%s", bad, len(tr.fs), msg.String())
	}
	return nil
}

// timeACL returns rte_acl's CPU ns per packet with alg and the wall time
// of the same passes.
func timeACL(base aclRun, alg string, target time.Duration) (cpuNs, wallNs float64, err error) {
	base.alg = alg
	return base.runTimed(target)
}

var sink int32

// timeOurs runs one scrubd API over tr until target CPU time has passed and
// returns thread-CPU and wall ns per packet.
func timeOurs(api string, tab *classifier.Table, w *classifier.Worker, tr *trace, target time.Duration) (cpuNs, wallNs float64) {
	pass := passOf(api, tab, w, tr)
	defer pin()()
	pass() // warm up
	c0, t0 := sys.ThreadCPUTime(), time.Now()
	passes := 0
	for {
		pass()
		passes++
		if sys.ThreadCPUTime()-c0 >= target {
			break
		}
	}
	pkts := float64(passes * len(tr.fs))
	return float64(sys.ThreadCPUTime()-c0) / pkts, float64(time.Since(t0).Nanoseconds()) / pkts
}

// pin keeps the calling goroutine on its thread, whose CPU time the
// timings read (sys.ThreadCPUTime), and the garbage collector off, until
// the function it returns is called.
func pin() (unpin func()) {
	runtime.LockOSThread()
	gc := debug.SetGCPercent(-1)
	return func() {
		debug.SetGCPercent(gc)
		runtime.UnlockOSThread()
	}
}

// passOf returns one pass of scrubd's API api over tr, in bursts of
// burst packets for the burst APIs.
func passOf(api string, tab *classifier.Table, w *classifier.Worker, tr *trace) func() {
	ids := make([]int32, burst)
	res := make([]classifier.Result, burst)
	fs, lens := tr.fs, tr.lens
	switch api {
	case "Decide":
		return func() {
			for i := range fs {
				sink += int32(tab.Decide(&fs[i]))
			}
		}
	case "DecideBurst":
		return func() {
			for off := 0; off < len(fs); off += burst {
				end := min(off+burst, len(fs))
				tab.DecideBurst(fs[off:end], ids)
			}
			sink += ids[0]
		}
	case "ClassifyBurst":
		return func() {
			for off := 0; off < len(fs); off += burst {
				end := min(off+burst, len(fs))
				w.ClassifyBurst(fs[off:end], lens[off:end], res)
			}
			sink += res[0].Rule
		}
	}
	panic("aclbench: no API " + api)
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func printTable(out *os.File, o *options, rows []*row) {
	fmt.Fprintf(out, "\nCPU ns per packet, median of %d interleaved rounds (wall in brackets)\n\n", o.rounds)
	hdr := "| rules | traffic | scrubd Decide | scrubd DecideBurst | scrubd ClassifyBurst |"
	sep := "|---|---|---|---|---|"
	for _, a := range o.algs {
		hdr += " rte_acl " + a + " |"
		sep += "---|"
	}
	hdr += " best scrubd / rte_acl scalar | best scrubd / best rte_acl |"
	sep += "---|---|"
	fmt.Fprintln(out, hdr)
	fmt.Fprintln(out, sep)
	for _, r := range rows {
		best, bestAPI := 0.0, ""
		line := fmt.Sprintf("| %s | %s |", countName(r.rules), trafficName(r.traffic, o.flows))
		for _, api := range apis {
			m := median(r.scrubd[api])
			if bestAPI == "" || m < best {
				best, bestAPI = m, api
			}
			extra := ""
			if api == "ClassifyBurst" {
				extra = fmt.Sprintf(", %.0f %% cache hits", r.hitPct)
			}
			line += fmt.Sprintf(" %.1f (%.1f wall%s) |", m, median(r.wall[api]), extra)
		}
		rteBest, rteBestAlg := 0.0, ""
		for _, a := range o.algs {
			m := median(r.rte[a])
			if rteBestAlg == "" || m < rteBest {
				rteBest, rteBestAlg = m, a
			}
			line += fmt.Sprintf(" %.1f [%.1f] |", m, median(r.wall[a]))
		}
		scalar := median(r.rte["scalar"])
		if scalar > 0 {
			line += fmt.Sprintf(" %.2f× |", best/scalar)
		} else {
			line += " – |"
		}
		line += fmt.Sprintf(" %.2f× (%s vs %s) |", best/rteBest, bestAPI, rteBestAlg)
		fmt.Fprintln(out, line)
	}
}

func printSizes(out *os.File, infos []*setInfo) {
	fmt.Fprintf(out, "\n| rules | scrubd lookup | scrubd memory | scrubd bytes/rule | scrubd build (best of 3) | rte_acl runtime memory | rte_acl bytes/rule | dpdk-test-acl one-pass run (CPU: start-up, parsing, build, one pass) |\n|---|---|---|---|---|---|---|---|\n")
	for _, in := range infos {
		rte, per := "–", "–"
		if in.rteBytes >= 0 {
			rte = fmt.Sprintf("%.2f MiB", float64(in.rteBytes)/(1<<20))
			per = fmt.Sprintf("%.0f", float64(in.rteBytes)/float64(in.rules))
		}
		fmt.Fprintf(out, "| %s | %s | %.2f MiB | %.0f | %d ms | %s | %s | %d ms |\n", countName(in.rules), in.lookup,
			float64(in.ourBytes)/(1<<20), float64(in.ourBytes)/float64(in.rules), in.ourBuild.Milliseconds(), rte, per, in.rteRunCPU.Milliseconds())
	}
}

// toIPv6 returns set with every IPv4 prefix a.b.c.d/n as the IPv6 prefix
// 2001:db8:aabb:ccdd::/(32+n) (a wildcard stays one), so that the IPv6 sets
// have the IPv4 sets' structure.
func toIPv6(set *rule.Set) *rule.Set {
	out := &rule.Set{Rules: make([]rule.Rule, len(set.Rules))}
	conv := func(p netip.Prefix) netip.Prefix {
		if !p.IsValid() {
			return p
		}
		v4 := p.Addr().As4()
		var b [16]byte
		b[0], b[1], b[2], b[3] = 0x20, 0x01, 0x0d, 0xb8
		copy(b[4:8], v4[:])
		return netip.PrefixFrom(netip.AddrFrom16(b), 32+p.Bits()).Masked()
	}
	for i, r := range set.Rules {
		r.Match.Src, r.Match.Dst = conv(r.Match.Src), conv(r.Match.Dst)
		out.Rules[i] = r
	}
	return out
}

func countName(n int) string {
	if n%1000 == 0 {
		return strconv.Itoa(n/1000) + "k"
	}
	return strconv.Itoa(n)
}

func trafficName(t string, flows int) string {
	if t == "fresh" {
		return "fresh 5-tuples"
	}
	return strconv.Itoa(flows) + " flows"
}

func cpuModel() string {
	data, _ := os.ReadFile("/proc/cpuinfo")
	for _, l := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(l, "model name") {
			if i := strings.Index(l, ":"); i >= 0 {
				return strings.TrimSpace(l[i+1:])
			}
		}
	}
	return runtime.GOARCH
}

func loadAvg() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(data))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}
