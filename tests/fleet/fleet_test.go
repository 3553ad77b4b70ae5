// Package fleet_test runs scrubd as a fleet: three agents, each in its own
// network namespace on the simulated NIC, are iBGP route-reflector clients
// of a real route reflector (Debian's gobgpd), fed with FlowSpec by ExaBGP
// as the detector, and scraped by a real Prometheus (Debian's prometheus)
// that loads deploy/prometheus's rules. It measures convergence of 1000
// routes, checks that a route one agent's protect list refuses is refused
// there only, that the agents' API and metrics agree with the reflector's
// RIB, and restarts the reflector under the agents (killed, then started
// with -r): no rule leaves, moves or loses its counters, and a route
// withdrawn while the reflector was down is swept by its End-of-RIB.
//
// It needs root (network namespaces) and the Debian packages gobgpd,
// exabgp and prometheus; it skips without them, and fails instead when
// CI=true.
package fleet_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/vishvananda/netns"

	agentapi "github.com/scrubd/scrubd/agent/api"
)

const (
	asn    = 65000
	rrAddr = "10.99.0.1"
	detAdr = "10.99.0.2"
	monAdr = "10.99.0.9"
	nRoute = 1000
	// The reflector's advertised restart time: how long the agents keep
	// its rules while it is down.
	rrRestart = 60
)

// agentDef is one agent: its namespace, its interface address (metrics),
// the second address its BGP session dials from (flowspec local_address)
// and its protect list.
type agentDef struct {
	name, addr, bgpAddr, protect string
}

var agents = []agentDef{
	{"a1", "10.99.0.11", "10.99.0.111", ""},
	{"a2", "10.99.0.12", "10.99.0.112", "203.0.113.200/32"},
	{"a3", "10.99.0.13", "10.99.0.113", ""},
}

// protectedDst is the destination a2 protects: the route to it is refused
// on a2 only.
const protectedDst = "203.0.113.200/32"

func need(t *testing.T) {
	t.Helper()
	ci := os.Getenv("CI") == "true"
	miss := func(why string) {
		if ci {
			t.Fatalf("CI=true: %s", why)
		}
		t.Skip(why)
	}
	if os.Geteuid() != 0 {
		miss("needs root (network namespaces)")
	}
	for _, b := range []string{"ip", "gobgpd", "gobgp", "exabgp", "prometheus", "tail"} {
		if _, err := exec.LookPath(b); err != nil {
			miss(b + " not installed (Debian packages iproute2, gobgpd, exabgp, prometheus)")
		}
	}
}

// fleet is the running lab.
type fleet struct {
	t      *testing.T
	dir    string
	prefix string
	nss    []string
	mu     sync.Mutex
	procs  map[string]*exec.Cmd
	logs   map[string]string
	scrubd string
}

func (f *fleet) ns(n string) string { return f.prefix + "-" + n }

func run(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// netns builds the namespaces: a hub with a bridge, and one namespace per
// node with a veth into the bridge.
func (f *fleet) netns(nodes map[string][]string) {
	t := f.t
	hub := f.ns("hub")
	run(t, "ip", "netns", "add", hub)
	f.nss = append(f.nss, hub)
	run(t, "ip", "-n", hub, "link", "add", "br0", "type", "bridge")
	run(t, "ip", "-n", hub, "link", "set", "br0", "up")
	names := make([]string, 0, len(nodes))
	for n := range nodes {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		ns := f.ns(n)
		run(t, "ip", "netns", "add", ns)
		f.nss = append(f.nss, ns)
		run(t, "ip", "-n", hub, "link", "add", "h-"+n, "type", "veth", "peer", "name", "eth0", "netns", ns)
		run(t, "ip", "-n", hub, "link", "set", "h-"+n, "master", "br0", "up")
		run(t, "ip", "-n", ns, "link", "set", "lo", "up")
		for _, a := range nodes[n] {
			run(t, "ip", "-n", ns, "addr", "add", a+"/24", "dev", "eth0")
		}
		run(t, "ip", "-n", ns, "link", "set", "eth0", "up")
	}
}

// start runs a process in a namespace, its output in the test's directory.
func (f *fleet) start(name, ns string, env []string, args ...string) *exec.Cmd {
	f.t.Helper()
	logf := filepath.Join(f.dir, name+".log")
	lf, err := os.OpenFile(logf, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		f.t.Fatal(err)
	}
	cmd := exec.Command("ip", append([]string{"netns", "exec", ns}, args...)...)
	cmd.Stdout, cmd.Stderr = lf, lf
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		f.t.Fatalf("%s: %v", name, err)
	}
	lf.Close()
	f.mu.Lock()
	f.procs[name] = cmd
	f.logs[name] = logf
	f.mu.Unlock()
	return cmd
}

// stop ends a process (its whole group) with sig, then SIGKILL after 5 s.
func (f *fleet) stop(name string, sig syscall.Signal) {
	f.mu.Lock()
	cmd := f.procs[name]
	delete(f.procs, name)
	f.mu.Unlock()
	if cmd == nil || cmd.Process == nil {
		return
	}
	_ = syscall.Kill(-cmd.Process.Pid, sig)
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
	}
}

func (f *fleet) cleanup() {
	f.mu.Lock()
	names := make([]string, 0, len(f.procs))
	for n := range f.procs {
		names = append(names, n)
	}
	f.mu.Unlock()
	for _, n := range names {
		f.stop(n, syscall.SIGTERM)
	}
	if d := os.Getenv("SCRUBD_FLEET_LOGS"); d != "" {
		// Keep every log for a look afterwards.
		for n, l := range f.logs {
			if b, err := os.ReadFile(l); err == nil {
				_ = os.WriteFile(filepath.Join(d, n+".log"), b, 0o644)
			}
		}
	}
	if f.t.Failed() {
		for n, l := range f.logs {
			b, _ := os.ReadFile(l)
			if len(b) > 6000 {
				b = b[len(b)-6000:]
			}
			f.t.Logf("---- %s (tail) ----\n%s", n, b)
		}
	}
	for _, ns := range f.nss {
		_ = exec.Command("ip", "netns", "del", ns).Run()
	}
}

// nsClient is an HTTP client whose connections are made inside a network
// namespace: each dial runs on an OS thread moved into it, which is never
// returned to the scheduler (the thread ends with its goroutine).
func nsClient(ns string) *http.Client {
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		type res struct {
			c   net.Conn
			err error
		}
		ch := make(chan res, 1)
		go func() {
			runtime.LockOSThread() // not unlocked: the thread exits with this goroutine
			h, err := netns.GetFromName(ns)
			if err != nil {
				ch <- res{nil, err}
				return
			}
			defer h.Close()
			if err := netns.Set(h); err != nil {
				ch <- res{nil, err}
				return
			}
			var d net.Dialer
			c, err := d.DialContext(ctx, network, addr)
			ch <- res{c, err}
		}()
		r := <-ch
		return r.c, r.err
	}
	return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DialContext: dial, DisableKeepAlives: true}}
}

func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for time.Since(start) < d {
		if cond() {
			return time.Since(start)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("timed out after %v waiting for %s", d, what)
	return 0
}

// routeSpec is one FlowSpec route of the test's set: a /32 destination in
// 203.0.113.0/24 or 198.51.100.0/24 and a protocol.
type routeSpec struct {
	dst   string
	proto string
}

func routeSet() []routeSpec {
	var out []routeSpec
	for i := 0; len(out) < nRoute; i++ {
		base := "203.0.113."
		if i%512 >= 256 {
			base = "198.51.100."
		}
		proto := "udp"
		if i >= 512 {
			proto = "tcp"
		}
		out = append(out, routeSpec{dst: fmt.Sprintf("%s%d/32", base, i%256), proto: proto})
	}
	return out
}

func (r routeSpec) exa(verb string) string {
	return fmt.Sprintf("%s flow route { match { destination %s; protocol %s; } then { discard; } }\n", verb, r.dst, r.proto)
}

// exabgp sends commands through the API process (tail -F of a file).
func (f *fleet) exabgp(lines []string) {
	fh, err := os.OpenFile(filepath.Join(f.dir, "exabgp.cmds"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		f.t.Fatal(err)
	}
	defer fh.Close()
	if _, err := fh.WriteString(strings.Join(lines, "")); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fleet) rrConfig() string {
	var b strings.Builder
	fmt.Fprintf(&b, "[global.config]\n  as = %d\n  router-id = %q\n  port = 179\n  local-address-list = [%q]\n\n", asn, rrAddr, rrAddr)
	nb := func(addr string, passive bool, fams ...string) {
		fmt.Fprintf(&b, "[[neighbors]]\n  [neighbors.config]\n    neighbor-address = %q\n    peer-as = %d\n", addr, asn)
		fmt.Fprintf(&b, "  [neighbors.transport.config]\n    passive-mode = %v\n    local-address = %q\n", passive, rrAddr)
		fmt.Fprintf(&b, "  [neighbors.timers.config]\n    connect-retry = 1\n    hold-time = 9\n    keepalive-interval = 3\n")
		fmt.Fprintf(&b, "  [neighbors.route-reflector.config]\n    route-reflector-client = true\n    route-reflector-cluster-id = %q\n", rrAddr)
		fmt.Fprintf(&b, "  [neighbors.graceful-restart.config]\n    enabled = true\n    restart-time = %d\n    deferral-time = 60\n", rrRestart)
		for _, fam := range fams {
			fmt.Fprintf(&b, "  [[neighbors.afi-safis]]\n    [neighbors.afi-safis.config]\n      afi-safi-name = %q\n    [neighbors.afi-safis.mp-graceful-restart.config]\n      enabled = true\n", fam)
		}
		b.WriteString("\n")
	}
	// The detector and the agents dial the reflector.
	nb(detAdr, true, "ipv4-flowspec")
	for _, a := range agents {
		nb(a.bgpAddr, true, "ipv4-flowspec", "ipv6-flowspec")
	}
	return b.String()
}

func (f *fleet) startReflector(restarting bool) {
	args := []string{"gobgpd", "-f", filepath.Join(f.dir, "rr.toml"), "-p", "-l", "info", "--api-hosts=127.0.0.1:50051", "--pprof-disable"}
	if restarting {
		args = append(args, "-r")
	}
	f.start("gobgpd", f.ns("rr"), nil, args...)
}

// rib returns the reflector's IPv4 FlowSpec RIB as (destination, protocol)
// pairs, read with the gobgp client.
func (f *fleet) rib() map[routeSpec]bool {
	f.t.Helper()
	out, err := exec.Command("ip", "netns", "exec", f.ns("rr"), "gobgp", "-u", "127.0.0.1", "-p", "50051", "global", "rib", "-a", "ipv4-flowspec", "-j").Output()
	if err != nil {
		return nil
	}
	var rib map[string][]struct {
		NLRI struct {
			Value []struct {
				Type  int             `json:"type"`
				Value json.RawMessage `json:"value"`
			} `json:"value"`
		} `json:"nlri"`
	}
	if err := json.Unmarshal(out, &rib); err != nil {
		f.t.Fatalf("gobgp global rib: %v\n%.2000s", err, out)
	}
	res := map[routeSpec]bool{}
	re := regexp.MustCompile(`\[destination: ([0-9./]+)\]\[protocol: ==(\w+) ?\]`)
	for k := range rib {
		m := re.FindStringSubmatch(k)
		if m == nil {
			f.t.Fatalf("unexpected RIB key %q", k)
		}
		res[routeSpec{dst: m[1], proto: m[2]}] = true
	}
	return res
}

var protoName = map[string]string{"17": "udp", "6": "tcp", "udp": "udp", "tcp": "tcp"}

// list reads an agent's FlowSpec rules through its API.
func (f *fleet) list(a agentDef) (map[routeSpec]agentapi.RuleInfo, error) {
	c := agentapi.NewUnixClient(filepath.Join(f.dir, a.name, "api.sock"))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	l, err := c.List(ctx)
	if err != nil {
		return nil, err
	}
	out := map[routeSpec]agentapi.RuleInfo{}
	for _, r := range l {
		if r.Source != "bgp" {
			continue
		}
		m := r.Rule.Match
		var proto string
		if len(m.Proto) > 0 {
			proto = protoName[m.Proto[0]]
		}
		out[routeSpec{dst: m.Dst, proto: proto}] = r
	}
	return out, nil
}

func (f *fleet) count(a agentDef) int {
	l, err := f.list(a)
	if err != nil {
		return -1
	}
	return len(l)
}

// prom runs an instant query on the fleet's Prometheus.
func (f *fleet) prom(q string) (map[string]float64, error) {
	resp, err := nsClient(f.ns("mon")).Get("http://" + monAdr + ":9090/api/v1/query?query=" + url.QueryEscape(q))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var r struct {
		Status string `json:"status"`
		Data   struct {
			Result []struct {
				Metric map[string]string `json:"metric"`
				Value  [2]any            `json:"value"`
			} `json:"result"`
		} `json:"data"`
		Error string `json:"error"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return nil, err
	}
	if r.Status != "success" {
		return nil, fmt.Errorf("query %s: %s", q, r.Error)
	}
	out := map[string]float64{}
	for _, s := range r.Data.Result {
		v, _ := strconv.ParseFloat(fmt.Sprint(s.Value[1]), 64)
		keys := make([]string, 0, len(s.Metric))
		for k, val := range s.Metric {
			if k != "__name__" && k != "job" {
				keys = append(keys, k+"="+val)
			}
		}
		sort.Strings(keys)
		out[strings.Join(keys, ",")] = v
	}
	return out, nil
}

func repoRoot(t *testing.T) string {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Clean(filepath.Join(wd, "..", ".."))
}

func TestFleet(t *testing.T) {
	need(t)
	root := repoRoot(t)
	f := &fleet{t: t, dir: t.TempDir(), prefix: fmt.Sprintf("sf%d", os.Getpid()%100000), procs: map[string]*exec.Cmd{}, logs: map[string]string{}}
	t.Cleanup(f.cleanup)

	// The agent binary.
	f.scrubd = filepath.Join(f.dir, "scrubd")
	build := exec.Command("go", "build", "-o", f.scrubd, "./agent/cmd/scrubd")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}

	nodes := map[string][]string{"rr": {rrAddr}, "det": {detAdr}, "mon": {monAdr}}
	for _, a := range agents {
		nodes[a.name] = []string{a.addr, a.bgpAddr}
	}
	f.netns(nodes)

	// The reflector.
	if err := os.WriteFile(filepath.Join(f.dir, "rr.toml"), []byte(f.rrConfig()), 0o644); err != nil {
		t.Fatal(err)
	}
	f.startReflector(false)

	// The detector: ExaBGP, dialing the reflector; routes come through its
	// API process. ExaBGP sets the restart-state bit in every OPEN it sends,
	// so a restarting gobgpd does not wait for its End-of-RIB (RFC 4724
	// section 4.1 excludes such peers): what keeps the agents' End-of-RIB
	// from coming before the detector's table is that ExaBGP redials within
	// seconds (its back-off starts at 0 s and grows by one) while an agent
	// whose first redial found the reflector down waits connect_retry to
	// twice that (10-20 s here).
	if err := os.WriteFile(filepath.Join(f.dir, "exabgp.cmds"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	exaConf := fmt.Sprintf(`process cmds {
    run /usr/bin/tail -n +1 -F %s;
    encoder text;
}
neighbor %s {
    router-id %s;
    local-address %s;
    local-as %d;
    peer-as %d;
    hold-time 9;
    capability { graceful-restart %d; }
    family { ipv4 flow; }
    api { processes [ cmds ]; }
}
`, filepath.Join(f.dir, "exabgp.cmds"), rrAddr, detAdr, detAdr, asn, asn, rrRestart)
	if err := os.WriteFile(filepath.Join(f.dir, "exabgp.conf"), []byte(exaConf), 0o644); err != nil {
		t.Fatal(err)
	}
	f.start("exabgp", f.ns("det"), []string{"exabgp_daemon_user=root", "exabgp_daemon_daemonize=false", "exabgp_api_ack=false",
		"exabgp_api_cli=false", "exabgp_tcp_bind=", "exabgp_log_destination=stdout", "exabgp_daemon_drop=false"},
		"exabgp", filepath.Join(f.dir, "exabgp.conf"))

	// The agents.
	for _, a := range agents {
		d := filepath.Join(f.dir, a.name)
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		protect := "protect: []\n"
		if a.protect != "" {
			protect = fmt.Sprintf("protect:\n  - {prefix: %s, note: a service this agent must never drop}\n", a.protect)
		}
		cfg := fmt.Sprintf(`node: %s
link_gbps: 100
state_dir: %s
api: {socket: %s/api.sock}
metrics: {listen: "%s:9477", max_rule_series: 2000}
%sflowspec:
  enabled: true
  asn: %d
  router_id: %s
  listen_port: -1
  neighbors:
    - {address: %s, asn: %d, local_address: %s, description: route reflector}
  allowed_destinations: [203.0.113.0/24, 198.51.100.0/24]
  on_session_down: hold
  hold_time: 5s
  connect_retry: 10s
  graceful_restart: {restart_time: 120s}
offload: {backend: sim, max_entries: 64}
software: {engine: dv, workers: 2, ghz: 2.13, cycles_per_packet: 297}
placement: {interval: 1s, min_dwell: 10m}
`, a.name, d, d, a.addr, protect, asn, a.addr, rrAddr, asn, a.bgpAddr)
		if err := os.WriteFile(filepath.Join(d, "scrubd.yaml"), []byte(cfg), 0o644); err != nil {
			t.Fatal(err)
		}
		f.start(a.name, f.ns(a.name), nil, f.scrubd, "run", "--config", filepath.Join(d, "scrubd.yaml"), "--sim-scale", "100000")
	}

	// Prometheus, with deploy/prometheus's rules.
	var targets []string
	for _, a := range agents {
		targets = append(targets, fmt.Sprintf("%q", a.addr+":9477"))
	}
	promConf := fmt.Sprintf(`global: {scrape_interval: 1s, evaluation_interval: 1s}
rule_files: [%q, %q]
scrape_configs:
  - job_name: scrubd
    static_configs: [{targets: [%s]}]
`, filepath.Join(root, "deploy/prometheus/recording.yml"), filepath.Join(root, "deploy/prometheus/alerts.yml"), strings.Join(targets, ", "))
	if err := os.WriteFile(filepath.Join(f.dir, "prometheus.yml"), []byte(promConf), 0o644); err != nil {
		t.Fatal(err)
	}
	f.start("prometheus", f.ns("mon"), nil, "prometheus", "--config.file="+filepath.Join(f.dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(f.dir, "prom"), "--web.listen-address="+monAdr+":9090")

	// Sessions: every agent and the detector established on the reflector.
	waitFor(t, 60*time.Second, "BGP sessions on the reflector", func() bool {
		out, err := exec.Command("ip", "netns", "exec", f.ns("rr"), "gobgp", "-u", "127.0.0.1", "-p", "50051", "neighbor", "-j").Output()
		if err != nil {
			return false
		}
		var ns []struct {
			State struct {
				NeighborAddress string `json:"neighbor_address"`
				SessionState    int    `json:"session_state"`
			} `json:"state"`
		}
		if json.Unmarshal(out, &ns) != nil {
			return false
		}
		up := 0
		for _, n := range ns {
			if n.State.SessionState == 6 { // ESTABLISHED
				up++
			}
		}
		return up == len(agents)+1
	})
	for _, a := range agents {
		waitFor(t, 30*time.Second, a.name+" API", func() bool { return f.count(a) == 0 })
	}

	routes := routeSet()
	want := map[routeSpec]bool{}
	nProtected := 0
	for _, r := range routes {
		want[r] = true
		if r.dst == protectedDst {
			nProtected++
		}
	}
	converge := func(label string, n int) {
		t.Helper()
		start := time.Now()
		var wg sync.WaitGroup
		times := make([]time.Duration, len(agents))
		errs := make([]error, len(agents))
		for i, a := range agents {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for time.Since(start) < 60*time.Second {
					if l, err := f.list(a); err == nil && len(l) == n && placed(l) {
						times[i] = time.Since(start)
						return
					}
					// Each poll lists 1000 rules; polling harder loads the
					// machine the agents run on.
					time.Sleep(100 * time.Millisecond)
				}
				errs[i] = fmt.Errorf("%s: %d rules after 60 s, want %d", a.name, f.count(a), n)
			}()
		}
		// The reflector's RIB, for comparison: how much of the time is the
		// detector's and the reflector's.
		var ribTime time.Duration
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Since(start) < 60*time.Second {
				if len(f.rib()) == n {
					ribTime = time.Since(start)
					return
				}
				time.Sleep(250 * time.Millisecond)
			}
		}()
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		t.Logf("%s: reflector RIB after %v; converged on %s, %s, %s after %v, %v, %v", label, ribTime.Round(time.Millisecond),
			agents[0].name, agents[1].name, agents[2].name, times[0].Round(time.Millisecond), times[1].Round(time.Millisecond), times[2].Round(time.Millisecond))
	}

	// 1. Announce 1000 routes.
	var cmds []string
	for _, r := range routes {
		cmds = append(cmds, r.exa("announce"))
	}
	f.exabgp(cmds)
	converge(fmt.Sprintf("announce %d routes", nRoute), nRoute)

	// The reflector's RIB, each agent's API: the same routes.
	waitFor(t, 10*time.Second, "reflector RIB", func() bool { return len(f.rib()) == nRoute })
	rib := f.rib()
	for r := range want {
		if !rib[r] {
			t.Fatalf("route %v missing from the reflector's RIB", r)
		}
	}
	for _, a := range agents {
		l, err := f.list(a)
		if err != nil {
			t.Fatal(err)
		}
		for r := range rib {
			e, ok := l[r]
			if !ok {
				t.Fatalf("%s: route %v of the reflector's RIB has no rule", a.name, r)
			}
			// The protected destination's route is refused on a2 only.
			refused := e.Status == "refused"
			if wantRefused := a.protect != "" && r.dst == protectedDst; refused != wantRefused {
				t.Fatalf("%s: rule for %v status %s (%s)", a.name, r, e.Status, e.Reason)
			}
		}
	}

	// 2. Withdraw all of them.
	cmds = cmds[:0]
	for _, r := range routes {
		cmds = append(cmds, r.exa("withdraw"))
	}
	f.exabgp(cmds)
	converge(fmt.Sprintf("withdraw %d routes", nRoute), 0)
	waitFor(t, 10*time.Second, "reflector RIB empty", func() bool { return len(f.rib()) == 0 })

	// 3. Announce again: the restart runs with the full set in force.
	cmds = cmds[:0]
	for _, r := range routes {
		cmds = append(cmds, r.exa("announce"))
	}
	f.exabgp(cmds)
	converge(fmt.Sprintf("announce %d routes again", nRoute), nRoute)

	// Prometheus scrapes all three, and its view agrees with the API.
	var last string
	defer func() {
		if t.Failed() && last != "" {
			t.Logf("last Prometheus answer: %s", last)
		}
	}()
	waitFor(t, 30*time.Second, "Prometheus scraping three agents with the rules in force", func() bool {
		up, err := f.prom(`up{job="scrubd"} == 1`)
		last = fmt.Sprintf("up: %v %v", up, err)
		if err != nil || len(up) != len(agents) {
			return false
		}
		v, err := f.prom(`scrubd_rules{source="bgp"}`)
		last = fmt.Sprintf("scrubd_rules: %v %v", v, err)
		if err != nil {
			return false
		}
		for _, a := range agents {
			active, refused := float64(nRoute), 0.0
			if a.protect != "" {
				active, refused = nRoute-float64(nProtected), float64(nProtected)
			}
			if v["instance="+a.addr+":9477,source=bgp,status=active"] != active ||
				v["instance="+a.addr+":9477,source=bgp,status=refused"] != refused {
				return false
			}
		}
		return true
	})
	// deploy/prometheus's recording rules run on the fleet's series (their
	// group is evaluated every 15 s).
	waitFor(t, 40*time.Second, "recording rules on the fleet", func() bool {
		rec, err := f.prom(`scrubd:flowspec_sessions_up:sum`)
		last = fmt.Sprintf("scrubd:flowspec_sessions_up:sum: %v %v", rec, err)
		if err != nil || rec[""] != float64(len(agents)) {
			return false
		}
		rules, err := f.prom(`scrubd:rules:sum{source="bgp"}`)
		last = fmt.Sprintf("scrubd:rules:sum: %v %v", rules, err)
		return err == nil && rules["source=bgp,status=active"] == float64(len(agents)*nRoute-nProtected) &&
			rules["source=bgp,status=refused"] == float64(nProtected)
	})

	// 4. The reflector restarts under the agents. First a steady state:
	// the placement of every rule unchanged for 3 s, counters moving. The
	// agents' min_dwell (10m) keeps traffic from moving a rule during the
	// test: the load-driven swap of the busiest rules into the full table
	// comes whenever the engine's cost is first measured, which on a
	// loaded machine fell inside the restart and was taken for a move the
	// restart caused.
	type snap map[string]agentapi.RuleInfo // by rule id
	byID := func(a agentDef) snap {
		l, err := f.list(a)
		if err != nil {
			t.Fatal(err)
		}
		out := snap{}
		for _, r := range l {
			out[r.Rule.ID] = r
		}
		return out
	}
	stable := func() bool {
		before := make([]snap, len(agents))
		for i, a := range agents {
			before[i] = byID(a)
		}
		time.Sleep(3 * time.Second)
		for i, a := range agents {
			now := byID(a)
			for id, r := range before[i] {
				if now[id].Path != r.Path || now[id].Moves != r.Moves {
					return false
				}
			}
		}
		return true
	}
	waitFor(t, 60*time.Second, "placement steady", stable)
	before := make([]snap, len(agents))
	for i, a := range agents {
		before[i] = byID(a)
	}
	// Rules that drop traffic of the simulated NIC's mix.
	var busy []string
	for id, r := range before[0] {
		if r.HW.Packets+r.SW.Packets > 0 {
			busy = append(busy, id)
		}
	}
	if len(busy) == 0 {
		t.Fatal("no rule counts traffic: the counter check would prove nothing")
	}

	// A route withdrawn while the reflector is down: it will not come
	// back, and the End-of-RIB must sweep it. One route is one rule id on
	// every agent (the id hashes the route, not the peer or the node).
	// It is one in software on every agent: sweeping a rule out of a full
	// hardware table lets placement promote another, a move the sweep
	// causes and the restart does not.
	var gone routeSpec
	goneID := ""
	for id, r := range before[0] {
		m := r.Rule.Match
		if len(m.Proto) != 1 || r.HW.Packets+r.SW.Packets > 0 || goneID != "" {
			continue
		}
		inSW := true
		for i := range agents {
			inSW = inSW && before[i][id].Path == "sw"
		}
		if inSW {
			gone, goneID = routeSpec{dst: m.Dst, proto: protoName[m.Proto[0]]}, id
		}
	}
	if goneID == "" {
		t.Fatal("no route in software on every agent to withdraw")
	}
	for i := range agents {
		if len(before[i]) != len(before[0]) || before[i][goneID].Rule.ID != goneID {
			t.Fatalf("%s: %d rules, rule %q of %v missing: rule ids differ between agents", agents[i].name, len(before[i]), goneID, gone)
		}
	}

	// Watch every agent through the restart: rules in force, and any rule
	// that leaves (but the withdrawn one) or moves.
	type watch struct {
		min    int
		left   map[string]bool
		moved  map[string]bool
		polls  int
		staleN int
	}
	watches := make([]*watch, len(agents))
	stopWatch := make(chan struct{})
	var wwg sync.WaitGroup
	for i, a := range agents {
		w := &watch{min: 1 << 30, left: map[string]bool{}, moved: map[string]bool{}}
		watches[i] = w
		wwg.Add(1)
		go func() {
			defer wwg.Done()
			for {
				select {
				case <-stopWatch:
					return
				case <-time.After(100 * time.Millisecond):
				}
				l, err := f.list(a)
				if err != nil {
					continue
				}
				w.polls++
				n, stale := 0, 0
				now := map[string]agentapi.RuleInfo{}
				for _, r := range l {
					now[r.Rule.ID] = r
					if r.Status != "refused" && r.Rule.ID != goneID {
						n++
					}
					if r.StaleAt != "" {
						stale++
					}
				}
				w.min = min(w.min, n)
				w.staleN = max(w.staleN, stale)
				for id, r := range before[i] {
					cur, ok := now[id]
					if !ok && id != goneID {
						w.left[id] = true
					}
					if ok && cur.Path != r.Path {
						w.moved[id] = true
					}
				}
			}
		}()
	}

	// Killed: no NOTIFICATION, the agents see the connection close.
	killAt := time.Now()
	f.stop("gobgpd", syscall.SIGKILL)
	f.exabgp([]string{gone.exa("withdraw")})
	for _, a := range agents {
		waitFor(t, 15*time.Second, a.name+" marks the reflector's rules stale", func() bool {
			l, err := f.list(a)
			if err != nil {
				return false
			}
			for _, r := range l {
				if r.StaleAt == "" {
					return false
				}
			}
			return len(l) == nRoute
		})
	}
	staleAt := time.Since(killAt)
	time.Sleep(500 * time.Millisecond)
	upAt := time.Since(killAt)
	f.startReflector(true)
	waitFor(t, 60*time.Second, "the restarted reflector holding the detector's table", func() bool { return len(f.rib()) == nRoute-1 })
	ribAt := time.Since(killAt)
	var back []time.Duration
	for _, a := range agents {
		waitFor(t, 90*time.Second, a.name+" resynchronised (End-of-RIB swept the withdrawn route, nothing stale)", func() bool {
			l, err := f.list(a)
			if err != nil || len(l) != nRoute-1 {
				return false
			}
			if _, ok := l[gone]; ok {
				return false
			}
			for _, r := range l {
				if r.StaleAt != "" {
					return false
				}
			}
			return true
		})
		back = append(back, time.Since(killAt))
	}
	time.Sleep(time.Second)
	close(stopWatch)
	wwg.Wait()

	for i, a := range agents {
		w := watches[i]
		wantMin := nRoute - 1 // every rule but the withdrawn one in force (a2: the protected ones refused)
		if a.protect != "" {
			wantMin -= nProtected
		}
		// staleN == nRoute: the watch saw the reflector's rules stale, so
		// it polled while the reflector was away.
		if w.staleN != nRoute || w.min < wantMin || len(w.left) > 0 || len(w.moved) > 0 {
			t.Fatalf("%s through the restart: %d polls, most stale %d (want %d), fewest rules in force %d (want >= %d), left %v, moved %v",
				a.name, w.polls, w.staleN, nRoute, w.min, wantMin, w.left, w.moved)
		}
		after := byID(a)
		if _, ok := after[goneID]; ok || goneID == "" {
			t.Fatalf("%s: withdrawn route %v (rule %q) not swept", a.name, gone, goneID)
		}
		for id, r := range before[i] {
			if id == goneID {
				continue
			}
			c, ok := after[id]
			if !ok || c.Path != r.Path || c.Moves != r.Moves {
				t.Fatalf("%s: rule %s before %s/%d moves, after %s/%d (present %v)", a.name, id, r.Path, r.Moves, c.Path, c.Moves, ok)
			}
		}
		var grew []string
		for _, id := range busy {
			b, c := before[i][id], after[id]
			if c.HW.Packets+c.SW.Packets < b.HW.Packets+b.SW.Packets {
				t.Fatalf("%s: rule %s counters went back: %d+%d before, %d+%d after", a.name, id, b.HW.Packets, b.SW.Packets, c.HW.Packets, c.SW.Packets)
			}
			grew = append(grew, fmt.Sprintf("%s %s %d->%d", id, c.Path, b.HW.Packets+b.SW.Packets, c.HW.Packets+c.SW.Packets))
		}
		sort.Strings(grew)
		t.Logf("%s: dropped packets (modelled) per counting rule before -> after the restart: %s", a.name, strings.Join(grew, ", "))
		t.Logf("reflector restart, %s: %d polls, fewest rules in force %d, most stale %d, none left or moved; %d counting rules kept their counters", a.name, w.polls, w.min, w.staleN, len(busy))
	}
	t.Logf("reflector killed; rules stale on all agents after %v; reflector started again (-r) at %v, held the detector's %d routes at %v; agents resynchronised at %v",
		staleAt.Round(time.Millisecond), upAt.Round(time.Millisecond), nRoute-1, ribAt.Round(time.Millisecond), roundAll(back))

	// A route that drops traffic, withdrawn and announced again within the
	// agents' counter memory (the longer of hold_time and restart_time:
	// 120 s): its rule (the same id on every agent) leaves and comes back,
	// and its counters continue from where they were: the first reading
	// after its return is not below the last before the withdraw (from
	// zero it would be a few seconds' worth, far below).
	busyID := busy[0]
	var busyRoute routeSpec
	if m := before[0][busyID].Rule.Match; len(m.Proto) == 1 {
		busyRoute = routeSpec{dst: m.Dst, proto: protoName[m.Proto[0]]}
	}
	// get reads one rule; a slow answer is retried, not fatal.
	get := func(a agentDef) (agentapi.RuleInfo, bool, error) {
		l, err := f.list(a)
		if err != nil {
			return agentapi.RuleInfo{}, false, err
		}
		r, ok := l[busyRoute]
		return r, ok, nil
	}
	mid := make([]uint64, len(agents))
	for i, a := range agents {
		r := byID(a)[busyID]
		mid[i] = r.HW.Packets + r.SW.Packets
	}
	f.exabgp([]string{busyRoute.exa("withdraw")})
	for _, a := range agents {
		waitFor(t, 30*time.Second, a.name+" removes the withdrawn rule", func() bool { _, ok, err := get(a); return err == nil && !ok })
	}
	// Placement applies store changes in bursts (up to 250 ms): let it see
	// the rule gone before the route comes back.
	time.Sleep(time.Second)
	f.exabgp([]string{busyRoute.exa("announce")})
	for i, a := range agents {
		var r agentapi.RuleInfo
		waitFor(t, 30*time.Second, a.name+" has the rule back and placed", func() bool {
			var ok bool
			var err error
			r, ok, err = get(a)
			return err == nil && ok && (r.Path == "hw" || r.Path == "sw")
		})
		if r.Rule.ID != busyID {
			t.Fatalf("%s: route %v back as rule %s, was %s", a.name, busyRoute, r.Rule.ID, busyID)
		}
		if r.HW.Packets+r.SW.Packets < mid[i] {
			t.Fatalf("%s: rule %s back with %d packets, %d before the withdraw: its counters restarted", a.name, busyID, r.HW.Packets+r.SW.Packets, mid[i])
		}
		t.Logf("%s: rule %s (%v) withdrawn and announced again: %d packets before, %d after", a.name, busyID, busyRoute, mid[i], r.HW.Packets+r.SW.Packets)
	}

	// The reflector's RIB and the agents agree after the restart.
	rib = f.rib()
	if len(rib) != nRoute-1 || rib[gone] {
		t.Fatalf("reflector RIB after restart: %d routes, withdrawn one present %v", len(rib), rib[gone])
	}
	for _, a := range agents {
		l, _ := f.list(a)
		keys := make([]routeSpec, 0, len(l))
		for r := range l {
			keys = append(keys, r)
		}
		for _, r := range keys {
			if !rib[r] {
				t.Fatalf("%s: rule %v not in the reflector's RIB", a.name, r)
			}
		}
	}
}

func placed(l map[routeSpec]agentapi.RuleInfo) bool {
	for _, r := range l {
		if r.Status != "refused" && r.Path != "hw" && r.Path != "sw" {
			return false
		}
	}
	return true
}

func roundAll(ds []time.Duration) []time.Duration {
	out := make([]time.Duration, len(ds))
	for i, d := range ds {
		out[i] = d.Round(time.Millisecond)
	}
	return out
}
