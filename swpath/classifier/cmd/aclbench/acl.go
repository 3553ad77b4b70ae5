//go:build linux

package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/scrubd/scrubd/swpath/rule"
)

// testACL is the DPDK tool the benchmark drives (Debian: dpdk-dev).
const testACL = "dpdk-test-acl"

// Algorithms of rte_acl_classify, by their dpdk-test-acl --alg names.
var allAlgs = []string{"scalar", "sse", "avx2", "avx512x16", "avx512x32"}

// decisionOrder returns the rule indexes of set in decision order: by
// priority (lowest number first), ties by position in the set. rte_acl
// picks the highest priority, and dpdk-test-acl gives the rule on line n
// priority RTE_ACL_MAX_PRIORITY - n, so writing the rules in this order
// makes its first match ours.
func decisionOrder(set *rule.Set) []int {
	order := make([]int, len(set.Rules))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		pa, pb := set.Rules[a].Priority, set.Rules[b].Priority
		switch {
		case pa < pb:
			return -1
		case pa > pb:
			return 1
		}
		return 0
	})
	return order
}

// aclRule writes r as a line of dpdk-test-acl's rule format for family
// (IPv4, or IPv6 for --ipv6): '@' src/len dst/len sport_lo : sport_hi
// dport_lo : dport_hi proto/mask.
// It fails, naming the rule and the condition, on what that format cannot
// say with the same meaning: more than one protocol or port range, ports
// without a protocol that carries them (our ports need an L4 header with
// ports; rte_acl would match any protocol), and every other condition.
func aclRule(r *rule.Rule, family rule.Family) (string, error) {
	m := &r.Match
	bad := func(what string) (string, error) {
		return "", fmt.Errorf("rule %q: %s cannot be written for dpdk-test-acl", r.ID, what)
	}
	fam := m.Family()
	if fam == rule.FamilyAny {
		return bad("a rule without a prefix (it would match both families)")
	}
	if fam != family {
		return bad(fmt.Sprintf("an IPv%d prefix in an IPv%d file", fam, family))
	}
	if m.Port != nil || m.ICMPType != nil || m.ICMPCode != nil || m.HasTCPFlags || m.Fragment != 0 || m.Length != nil || m.DSCP != 0 {
		return bad("a condition other than prefixes, protocol and port ranges")
	}
	if len(m.Proto) > 1 {
		return bad(fmt.Sprintf("protocol list %v", m.Proto))
	}
	if len(m.SrcPort) > 1 || len(m.DstPort) > 1 {
		return bad("more than one port range")
	}
	if (m.SrcPort != nil || m.DstPort != nil) && (len(m.Proto) != 1 || (m.Proto[0] != rule.ProtoTCP && m.Proto[0] != rule.ProtoUDP && m.Proto[0] != rule.ProtoSCTP)) {
		return bad("ports without tcp, udp or sctp")
	}
	pfx := func(p netip.Prefix) string {
		if !p.IsValid() {
			if family == rule.IPv6 {
				return "::/0"
			}
			return "0.0.0.0/0"
		}
		return p.Masked().String()
	}
	ports := func(rs rule.Ranges) string {
		if rs == nil {
			return "0 : 65535"
		}
		return fmt.Sprintf("%d : %d", rs[0].Lo, rs[0].Hi)
	}
	proto := "0x00/0x00"
	if len(m.Proto) == 1 {
		proto = fmt.Sprintf("0x%02x/0xff", m.Proto[0])
	}
	return fmt.Sprintf("@%s %s %s %s %s", pfx(m.Src), pfx(m.Dst), ports(m.SrcPort), ports(m.DstPort), proto), nil
}

// writeRules writes set in decision order to path and returns the rule
// index of each line (line i of the file is rule order[i]).
func writeRules(path string, set *rule.Set, family rule.Family) ([]int, error) {
	order := decisionOrder(set)
	var b bytes.Buffer
	for _, i := range order {
		l, err := aclRule(&set.Rules[i], family)
		if err != nil {
			return nil, err
		}
		b.WriteString(l)
		b.WriteByte('\n')
	}
	return order, os.WriteFile(path, b.Bytes(), 0o644)
}

// traceLine is one packet in dpdk-test-acl's trace format: IPv4 addresses
// as numbers, IPv6 addresses in text (--ipv6).
func traceLine(f *rule.Fields) string {
	if f.Family == rule.IPv6 {
		return fmt.Sprintf("%s %s %d %d %d", f.Src.Netip(rule.IPv6), f.Dst.Netip(rule.IPv6), f.SrcPort, f.DstPort, f.Proto)
	}
	return fmt.Sprintf("0x%08x 0x%08x %d %d %d", uint32(f.Src.Hi>>32), uint32(f.Dst.Hi>>32), f.SrcPort, f.DstPort, f.Proto)
}

// traceable reports whether rte_acl decides f as we do from its 5-tuple:
// the family of the file, and a protocol with ports has them (a non-first
// fragment of a TCP packet has no ports for us; in a 5-tuple it would have
// zeros).
func traceable(f *rule.Fields, family rule.Family) bool {
	if f.Family != family {
		return false
	}
	switch f.Proto {
	case rule.ProtoTCP, rule.ProtoUDP, rule.ProtoSCTP:
		return f.HasPorts()
	}
	return true
}

func writeTrace(path string, fs []rule.Fields) error {
	var b bytes.Buffer
	for i := range fs {
		b.WriteString(traceLine(&fs[i]))
		b.WriteByte('\n')
	}
	return os.WriteFile(path, b.Bytes(), 0o644)
}

// aclRun is one dpdk-test-acl invocation.
type aclRun struct {
	rules, trace string
	nrules       int
	ntrace       int
	alg          string // "" for its default
	iter         int
	verbose      int
	cpu          int // lcore (and CPU) to run on
	memMB        int
	ipv6         bool
	// huge: EAL memory from the 2 MiB huge pages that reserveHuge set
	// aside (--in-memory: no hugetlbfs files, nothing left behind); else
	// --no-huge, 4 KiB pages.
	huge bool
}

func (a aclRun) args() []string {
	eal := []string{"-l", strconv.Itoa(a.cpu), "--no-pci", "--no-telemetry", "-m", strconv.Itoa(a.memMB), "--log-level=lib.acl:debug"}
	if a.huge {
		eal = append(eal, "--in-memory")
	} else {
		eal = append(eal, "--no-huge", "--no-shconf")
	}
	if strings.HasPrefix(a.alg, "avx512") {
		eal = append(eal, "--force-max-simd-bitwidth=512")
	}
	app := []string{"--rulesf=" + a.rules, "--tracef=" + a.trace,
		"--rulenum=" + strconv.Itoa(max(a.nrules, 1)), "--tracenum=" + strconv.Itoa(a.ntrace),
		"--iter=" + strconv.Itoa(a.iter), "--verbose=" + strconv.Itoa(a.verbose)}
	if a.alg != "" {
		app = append(app, "--alg="+a.alg)
	}
	if a.ipv6 {
		app = append(app, "--ipv6")
	}
	return append(append(eal, "--"), app...)
}

// aclResult is what one run reported.
type aclResult struct {
	cpu      time.Duration // process user+system time
	searchS  float64       // seconds of the search loop (its own TSC figure)
	pkts     int64         // packets searched
	memBytes int64         // runtime memory footprint (lib.acl debug log)
	matches  []uint32      // per packet, with verbose >= 2: line index or MaxUint32
	alg      string        // algorithm the context used (its dump)
}

var (
	reSearch = regexp.MustCompile(`search_ip5tuples\s+@lcore \d+: \d+ iterations, (\d+) pkts, \d+ categories, \d+ cycles \(([0-9.]+) sec\)`)
	reTotal  = regexp.MustCompile(`^total: (\d+) bytes`)
	reMatch  = regexp.MustCompile(`^ipv[46]_5tuple: (\d+), category: 0, result: (\d+)`)
	reAlg    = regexp.MustCompile(`^\s*alg=(\d+)`)
)

func (a aclRun) run() (*aclResult, error) {
	cmd := exec.Command(testACL, a.args()...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	res := &aclResult{memBytes: -1}
	if a.verbose >= 2 {
		res.matches = make([]uint32, a.ntrace)
	}
	var tail []string
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 1<<16), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if m := reMatch.FindStringSubmatch(line); m != nil {
			i, _ := strconv.Atoi(m[1])
			r, _ := strconv.ParseUint(m[2], 10, 32)
			if i >= 1 && i <= len(res.matches) {
				res.matches[i-1] = uint32(r)
			}
			continue
		}
		if len(tail) > 30 {
			tail = tail[1:]
		}
		tail = append(tail, line)
		if m := reSearch.FindStringSubmatch(line); m != nil {
			res.pkts, _ = strconv.ParseInt(m[1], 10, 64)
			res.searchS, _ = strconv.ParseFloat(m[2], 64)
		} else if m := reTotal.FindStringSubmatch(line); m != nil {
			res.memBytes, _ = strconv.ParseInt(m[1], 10, 64)
		} else if m := reAlg.FindStringSubmatch(line); m != nil {
			res.alg = m[1]
		}
	}
	_, _ = io.Copy(io.Discard, out)
	err = cmd.Wait()
	for _, l := range strings.Split(stderr.String(), "\n") {
		if m := reTotal.FindStringSubmatch(strings.TrimSpace(l)); m != nil {
			res.memBytes, _ = strconv.ParseInt(m[1], 10, 64)
		}
	}
	if cmd.ProcessState != nil {
		res.cpu = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	}
	if err != nil || res.pkts == 0 {
		return nil, fmt.Errorf("%s %s: %v\n%s%s", testACL, strings.Join(a.args(), " "), err, strings.Join(tail, "\n"), stderr.String())
	}
	return res, nil
}

// reOnce is the line dpdk-test-acl prints after each pass over the trace
// at --verbose=1.
var reOnce = regexp.MustCompile(`^search_ip5tuples_once\(1, \d+, [a-z0-9]+\) returns (\d+)`)

// runTimed runs an unbounded number of passes (--iter 1000000) with line
// buffered output and reads the process's CPU time (its main thread, the
// lcore that searches, from /proc/PID/schedstat in ns) each time a pass
// ends. It stops the program once target CPU time has passed since the end
// of the first pass and returns CPU and wall ns per packet over the passes
// after the first: start-up, rule parsing, build and trace parsing are not
// in the figure, and neither is time the CPU spent on other programs.
func (a aclRun) runTimed(target time.Duration) (cpuNs, wallNs float64, err error) {
	a.iter, a.verbose = 1000000, 1
	args := append([]string{"-oL", testACL}, a.args()...)
	cmd := exec.Command("stdbuf", args...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return 0, 0, err
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return 0, 0, err
	}
	stat := fmt.Sprintf("/proc/%d/schedstat", cmd.Process.Pid)
	var first, last int64
	var t0, t1 time.Time
	var pkts0, pkts int64
	passes := 0
	var tail []string
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		line := sc.Text()
		m := reOnce.FindStringSubmatch(line)
		if m == nil {
			if len(tail) > 30 {
				tail = tail[1:]
			}
			tail = append(tail, line)
			continue
		}
		ns, err := schedNs(stat)
		if err != nil {
			break
		}
		n, _ := strconv.ParseInt(m[1], 10, 64)
		passes++
		if passes == 1 {
			first, t0, pkts0 = ns, time.Now(), n
			continue
		}
		last, t1 = ns, time.Now()
		pkts += n
		if time.Duration(last-first) >= target {
			break
		}
	}
	_ = cmd.Process.Kill()
	_, _ = io.Copy(io.Discard, out)
	_ = cmd.Wait()
	if passes < 2 || pkts == 0 || pkts0 == 0 {
		return 0, 0, fmt.Errorf("%s %s: fewer than two passes timed\n%s%s", testACL, strings.Join(a.args(), " "), strings.Join(tail, "\n"), stderr.String())
	}
	return float64(last-first) / float64(pkts), float64(t1.Sub(t0).Nanoseconds()) / float64(pkts), nil
}

// schedNs returns the first field of a schedstat file: time on a CPU, ns.
func schedNs(path string) (int64, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	f := strings.Fields(string(data))
	if len(f) == 0 {
		return 0, fmt.Errorf("%s: empty", path)
	}
	return strconv.ParseInt(f[0], 10, 64)
}

// ensureTool finds dpdk-test-acl, installing Debian's dpdk-dev (DPDK 22.11
// in bookworm) when it is missing and install is set.
func ensureTool(install bool) error {
	if _, err := exec.LookPath(testACL); err == nil {
		return nil
	}
	if !install {
		return errors.New(testACL + " not found: install Debian's dpdk-dev (or run without -install=false)")
	}
	fmt.Fprintln(os.Stderr, "aclbench: installing dpdk-dev for", testACL)
	cmd := exec.Command("apt-get", "install", "-y", "--no-install-recommends", "dpdk-dev")
	cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("apt-get install dpdk-dev: %w (as root, after apt-get update)", err)
	}
	_, err := exec.LookPath(testACL)
	return err
}

// cpuAlgs returns the rte_acl algorithms this CPU runs.
func cpuAlgs() []string {
	data, _ := os.ReadFile("/proc/cpuinfo")
	flags := map[string]bool{}
	for _, l := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(l, "flags") {
			for _, f := range strings.Fields(l) {
				flags[f] = true
			}
			break
		}
	}
	var out []string
	for _, a := range allAlgs {
		switch a {
		case "sse":
			if !flags["sse4_1"] {
				continue
			}
		case "avx2":
			if !flags["avx2"] {
				continue
			}
		case "avx512x16", "avx512x32":
			if !flags["avx512f"] || !flags["avx512bw"] || !flags["avx512vl"] || !flags["avx512cd"] || !flags["avx512dq"] {
				continue
			}
		}
		out = append(out, a)
	}
	return out
}

// noMatch is dpdk-test-acl's result for a packet no rule matches.
const noMatch = math.MaxUint32

func tmpDir(dir string) (string, func(), error) {
	if dir != "" {
		return dir, func() {}, os.MkdirAll(dir, 0o755)
	}
	d, err := os.MkdirTemp("", "aclbench")
	if err != nil {
		return "", nil, err
	}
	return d, func() { os.RemoveAll(d) }, nil
}

func fileIn(dir, name string) string { return filepath.Join(dir, name) }
