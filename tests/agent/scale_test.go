package agent_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/osrg/gobgp/v3/pkg/packet/bgp"

	agentapi "github.com/scrubd/scrubd/agent/api"
	"github.com/scrubd/scrubd/agent/config"
	"github.com/scrubd/scrubd/agent/placement"
	"github.com/scrubd/scrubd/agent/sim"
	"github.com/scrubd/scrubd/internal/cputime"
	"github.com/scrubd/scrubd/swpath/traffic"
)

// classBenchFile is a rule file of n ClassBench-style drop rules (each with
// its action and a source or destination of at least /8).
func classBenchFile(t testing.TB, n int) string {
	t.Helper()
	var b strings.Builder
	b.WriteString("rules:\n")
	for _, r := range traffic.ClassBenchRules(1, n).Rules {
		js, err := json.Marshal(r.Spec())
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "  - %s\n", js)
	}
	return b.String()
}

// waitLong is waitFor with a deadline for loads of 100k rules on a shared
// machine: it bounds the test, it measures nothing.
func waitLong(t testing.TB, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Minute); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("timed out waiting for %s", what)
}

// 100k ClassBench-style rules from a rule file through the daemon on the
// simulated NIC with a 4096-entry table: once ready every rule is enforced
// in hardware or in software, the two counts add up to the file's rules,
// the hardware count is what the simulated table holds, and the software
// engine holds every rule placed there. A second agent, stopped while it
// is still placing the file, returns cleanly (no error, not ready) and a
// third start on its state directory is ready with every rule placed.
func TestAgentHundredThousandRules(t *testing.T) {
	if testing.Short() {
		t.Skip("100k rules through the daemon: not in -short")
	}
	const n = 100000
	rules := classBenchFile(t, n)
	cfg := testConfig(t, rules, func(c *config.Config) {
		c.Offload.MaxEntries = 4096
		c.Place.Interval = time.Second
		c.Rules.Poll = time.Second
	})
	nic, err := sim.New(sim.Options{HWEntries: 4096, Workers: 2, Queues: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer nic.Close()
	a := start(t, &cfg, nic)
	waitLong(t, "the first placement round", func() bool { return a.d.Placer.View().Ready })
	v := a.d.Placer.View()
	var hw, sw int
	for _, r := range v.Rules.All() {
		switch r.Path {
		case placement.HW:
			hw++
		case placement.SW:
			sw++
		default:
			t.Errorf("rule %s (%s) enforced nowhere: path %q, %s", r.ID, r.Action, r.Path, r.Reason)
		}
	}
	if v.Rules.Len() != n || hw+sw != n {
		t.Fatalf("%d rules in the view, %d in hardware + %d in software; want %d", v.Rules.Len(), hw, sw, n)
	}
	if hw == 0 || sw == 0 {
		t.Errorf("hardware %d, software %d: a 4096-entry table takes some of 100k rules, not all", hw, sw)
	}
	if used := nic.Device().Capacity().Entries; used < hw || v.HWBudget.UsedEntries != used {
		t.Errorf("simulated table holds %d entries, placement counts %d, for %d rules in hardware", used, v.HWBudget.UsedEntries, hw)
	}
	inSW := map[string]bool{}
	if set := nic.SW().Stats().Set; set != nil {
		for i := range set.Rules {
			inSW[set.Rules[i].ID] = true
		}
	}
	missing := 0
	for _, r := range v.Rules.All() {
		if _, ok := inSW[r.ID]; r.Path == placement.SW && !ok {
			missing++
		}
	}
	if missing > 0 {
		t.Errorf("%d rules placed in software are not in the software engine's set (%d there)", missing, len(inSW))
	}
	t.Logf("ready: %d rules in hardware (%d entries of 4096), %d in software", hw, v.HWBudget.UsedEntries, sw)
	a.stop(t)

	// SIGTERM mid-load: the daemon's context ends while the first round
	// places the file (the signal handler of scrubd run cancels it).
	cfg2 := testConfig(t, rules, func(c *config.Config) { c.Offload.MaxEntries = 4096 })
	nic2, err := sim.New(sim.Options{HWEntries: 4096, Workers: 2, Queues: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer nic2.Close()
	b := start(t, &cfg2, nic2)
	waitLong(t, "placement to start", func() bool { return nic2.Device().Capacity().Entries > 0 })
	wasReady := b.d.Placer.View().Ready
	b.cancel()
	select {
	case err := <-b.done:
		if err != nil {
			t.Fatalf("stopped mid-load: %v", err)
		}
	case <-time.After(5 * time.Minute):
		t.Fatal("the agent did not stop after its context ended mid-load")
	}
	if wasReady {
		t.Log("the first round ended before the stop; the stop was not mid-load this time")
	}
	if b.d.Placer.View().Ready && !wasReady {
		t.Error("stopped mid-load, yet the view says the first round completed")
	}
	c := start(t, &cfg2, nic2)
	defer c.stop(t)
	waitLong(t, "ready after the interrupted start", func() bool { return c.d.Placer.View().Ready })
	hw, sw = 0, 0
	for _, r := range c.d.Placer.View().Rules.All() {
		switch r.Path {
		case placement.HW:
			hw++
		case placement.SW:
			sw++
		}
	}
	if hw+sw != n {
		t.Errorf("after the interrupted start: %d in hardware + %d in software, want %d", hw, sw, n)
	}
}

// The intake limits through the daemon: a rule file over
// rules.max_rules_per_source is refused at start and counted in
// scrubd_rule_file_refusals_total; API adds past the bound get 413 naming
// it, an API replace past it gets 413 and changes nothing; a rule with a
// list over rules.guard.max_list_entries gets 422 naming the field.
func TestAgentIntakeLimits(t *testing.T) {
	var file strings.Builder
	file.WriteString("rules:\n")
	for i := range 4 {
		fmt.Fprintf(&file, "  - {id: f%d, action: drop, match: {dst: 203.0.113.%d/32}}\n", i, i)
	}
	cfg := testConfig(t, file.String(), func(c *config.Config) {
		c.Rules.MaxRulesPerSource = 3
		c.Rules.Guard.MaxListEntries = 4
	})
	nic, err := sim.New(sim.Options{HWEntries: 50})
	if err != nil {
		t.Fatal(err)
	}
	defer nic.Close()
	a := start(t, &cfg, nic)
	defer a.stop(t)
	waitFor(t, "first round", func() bool { return a.d.Placer.View().Ready })
	if st := a.d.Files.Status()[0]; st.Refusals != 1 || !strings.Contains(st.Err, "source file:"+cfg.Rules.Files[0]+" would hold 4 rules, more than the 3 of rules.max_rules_per_source") {
		t.Errorf("rule file status %+v", st)
	}
	if p, _ := a.path("f0"); p != "" {
		t.Errorf("a rule of the refused file is placed on %s", p)
	}
	if code, body := status(t, "http://"+a.d.HTTPAddr+"/metrics"); code != 200 || !strings.Contains(body, "scrubd_rule_file_refusals_total 1\n") {
		t.Errorf("metrics %d: no scrubd_rule_file_refusals_total 1", code)
	}
	c := agentapi.NewUnixClient(cfg.API.Socket)
	ctx := context.Background()
	for i := range 3 {
		if _, err := c.Add(ctx, fmt.Appendf(nil, `{id: a%d, action: drop, match: {dst: 198.51.100.%d/32}}`, i, i)); err != nil {
			t.Fatal(err)
		}
	}
	_, err = c.Add(ctx, []byte(`{id: a3, action: drop, match: {dst: 198.51.100.3/32}}`))
	if apiCode(err) != http.StatusRequestEntityTooLarge || !strings.Contains(err.Error(), "source api would hold 4 rules, more than the 3 of rules.max_rules_per_source") {
		t.Errorf("4th API rule: %v", err)
	}
	_, err = c.Replace(ctx, []byte("rules:\n  - {id: r0, action: drop, match: {dst: 198.51.100.10/32}}\n  - {id: r1, action: drop, match: {dst: 198.51.100.11/32}}\n"+
		"  - {id: r2, action: drop, match: {dst: 198.51.100.12/32}}\n  - {id: r3, action: drop, match: {dst: 198.51.100.13/32}}\n"))
	if apiCode(err) != http.StatusRequestEntityTooLarge {
		t.Errorf("replace with 4: %v", err)
	}
	list, err := c.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 3 {
		t.Errorf("after the refused replace the API lists %d rules, want the 3 added", len(list))
	}
	_, err = c.Put(ctx, "a0", []byte(`{id: a0, action: drop, match: {dst: 198.51.100.0/32, proto: udp, dst_port: [1, 3, 5, 7, 9]}}`))
	if apiCode(err) != http.StatusUnprocessableEntity || !strings.Contains(err.Error(), "match.dst_port: 5 entries, more than the 4 of rules.guard.max_list_entries") {
		t.Errorf("a port list of 5: %v", err)
	}
}

// flowSpecAgent starts an agent with rule file rules on a new simulated
// NIC (4096 entries, the modelled insertion rate) with FlowSpec from a
// GoBGP peer in this process (routes to 10.0.0.0/8 allowed, priority
// 500), waits for its first placement round and the BGP session, and
// returns the agent, the NIC and the peer (the caller stops the agent
// and closes the NIC) and the peer's route for UDP to 10.x.y.z/32 by i.
func flowSpecAgent(b *testing.B, rules string) (a *agent, nic *sim.NIC, pr *peer, nlri func(i int) bgp.AddrPrefixInterface) {
	bgpPort := freePort(b)
	cfg := testConfig(b, rules, func(c *config.Config) {
		c.Offload.MaxEntries = 4096
		c.Rules.Poll = time.Second
		fs := &c.FlowSpec
		fs.Enabled, fs.ASN, fs.RouterID, fs.ListenPort, fs.ListenAddress = true, 65010, "192.0.2.10", int32(bgpPort), "127.0.0.1"
		fs.Neighbors = []config.Neighbor{{Address: "127.0.0.2", ASN: 65000, Passive: true}}
		fs.OnSessionDown, fs.HoldTime, fs.Priority = "hold", time.Hour, 500
		fs.AllowedDestinations = []string{"10.0.0.0/8"}
	})
	nic, err := sim.New(sim.Options{HWEntries: 4096, Workers: 2, Queues: 2})
	if err != nil {
		b.Fatal(err)
	}
	a = start(b, &cfg, nic)
	waitLong(b, "the first placement round", func() bool { return a.d.Placer.View().Ready })
	pr = startPeer(b, bgpPort)
	waitLong(b, "the BGP session", func() bool {
		st, ok := a.d.Speaker.Stats().Sessions["127.0.0.2"]
		return ok && st
	})
	udp := bgp.NewFlowSpecComponent(bgp.FLOW_SPEC_TYPE_IP_PROTO, []*bgp.FlowSpecComponentItem{bgp.NewFlowSpecComponentItem(bgp.DEC_NUM_OP_EQ|bgp.DEC_NUM_OP_END, 17)})
	nlri = func(i int) bgp.AddrPrefixInterface {
		addr := fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255)
		return bgp.NewFlowSpecIPv4Unicast([]bgp.FlowSpecComponentInterface{bgp.NewFlowSpecDestinationPrefix(bgp.NewIPAddrPrefix(32, addr)), udp})
	}
	return a, nic, pr, nlri
}

// BenchmarkFlowSpecBurst: a GoBGP peer announces a burst of 10k FlowSpec
// routes (UDP to distinct /32s) to the agent on the simulated NIC (4096
// entries, the modelled insertion rate); timed from the first
// announcement until every route's rule is placed in hardware or
// software. Reported: ns per route from the first announcement to all
// placed, and ms from the last announcement to all placed.
func BenchmarkFlowSpecBurst(b *testing.B) {
	const n = 10000
	for b.Loop() {
		b.StopTimer()
		a, nic, pr, nlri := flowSpecAgent(b, "rules: []\n")
		b.StartTimer()
		t0 := time.Now()
		for i := range n {
			pr.route(b, nlri(i), false)
		}
		last := time.Now()
		waitLong(b, "every route placed", func() bool {
			v := a.d.Placer.View()
			placed := 0
			for _, r := range v.Rules.All() {
				if r.Path == placement.HW || r.Path == placement.SW {
					placed++
				}
			}
			return placed == n
		})
		done := time.Now()
		b.StopTimer()
		b.ReportMetric(float64(done.Sub(t0).Nanoseconds())/n, "ns/route")
		b.ReportMetric(float64(done.Sub(last).Milliseconds()), "ms-after-last")
		b.ReportMetric(float64(last.Sub(t0).Milliseconds()), "ms-announce")
		a.stop(b)
		nic.Close()
		b.StartTimer()
	}
}

// BenchmarkFlowSpecChurn: beside a rule file of bg ClassBench-style rules
// (0 or 100k) on the simulated NIC (4096 entries), a GoBGP peer announces
// 10k FlowSpec routes and, once they are all placed, withdraws them all:
// the churn of an attack's mitigation ending. Reported for the
// announcements: ms from the last until every route's rule is placed
// (announce-ms-after-last), ms to send them (announce-ms), and the process's CPU time meanwhile
// (announce-cpu-ms, the peer's included). For the withdrawals (the
// timed part): ms from the last withdrawal until no rule of the routes is
// left in the store or the placement view (ms-after-last), ms to send
// them (ms-withdraw), and the process's CPU time from the first
// withdrawal to the end (cpu-ms: every placement round the burst caused;
// a removal leaves a hole in the placer's set, closed once holes pass an
// eighth of it, see placement's compact).
func BenchmarkFlowSpecChurn(b *testing.B) {
	const n = 10000
	for _, bg := range []int{0, 100000} {
		b.Run(fmt.Sprintf("file=%dk", bg/1000), func(b *testing.B) {
			rules := "rules: []\n"
			if bg > 0 {
				rules = classBenchFile(b, bg)
			}
			for b.Loop() {
				b.StopTimer()
				a, nic, pr, nlri := flowSpecAgent(b, rules)
				a0, ac0 := time.Now(), cputime.Process()
				for i := range n {
					pr.route(b, nlri(i), false)
				}
				alast := time.Now()
				placed := func() int {
					k := 0
					for _, r := range a.d.Placer.View().Rules.All() {
						if strings.HasPrefix(r.ID, "fs-") && (r.Path == placement.HW || r.Path == placement.SW) {
							k++
						}
					}
					return k
				}
				waitLong(b, "every route placed", func() bool { return placed() == n })
				adone, ac1 := time.Now(), cputime.Process()
				b.StartTimer()
				t0, c0 := time.Now(), cputime.Process()
				for i := range n {
					pr.route(b, nlri(i), true)
				}
				last := time.Now()
				waitLong(b, "every route's rule gone", func() bool {
					for _, c := range a.d.Store.Counts() {
						if strings.HasPrefix(c.Source, "bgp:") && c.N > 0 {
							return false
						}
					}
					v := a.d.Placer.View()
					for i := range v.Rules.Len() {
						if strings.HasPrefix(v.Rules.ID(i), "fs-") {
							return false
						}
					}
					return true
				})
				done, c1 := time.Now(), cputime.Process()
				b.StopTimer()
				b.ReportMetric(float64(done.Sub(last).Milliseconds()), "ms-after-last")
				b.ReportMetric(float64(last.Sub(t0).Milliseconds()), "ms-withdraw")
				b.ReportMetric(float64((c1 - c0).Milliseconds()), "cpu-ms")
				b.ReportMetric(float64(adone.Sub(alast).Milliseconds()), "announce-ms-after-last")
				b.ReportMetric(float64(alast.Sub(a0).Milliseconds()), "announce-ms")
				b.ReportMetric(float64((ac1 - ac0).Milliseconds()), "announce-cpu-ms")
				a.stop(b)
				nic.Close()
				b.StartTimer()
			}
		})
	}
}
