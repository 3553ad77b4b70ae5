package metrics

import (
	"bytes"
	"fmt"
	"io"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/scrubd/scrubd/agent/dataplane"
	"github.com/scrubd/scrubd/agent/placement"
	"github.com/scrubd/scrubd/agent/store"
	"github.com/scrubd/scrubd/agent/version"
)

func view(n int) *placement.View {
	v := &placement.View{HWUp: true, SWCapacityPPS: 86e6, SWLoadPPS: 43e6, CyclesPerPacket: 297, MeasuredCyclesPerPacket: 141, Resyncs: 2,
		HWBudget:   dataplane.Budget{MaxEntries: 100, UsedEntries: 40, MaxMasks: 15, UsedMasks: 3},
		HWFailures: map[dataplane.Kind]uint64{dataplane.KindTableFull: 2},
		Moves:      map[[2]placement.Path]uint64{{placement.SW, placement.HW}: 5},
		NIC:        map[string]uint64{"rx_discards_phy": 9, "rx_out_of_buffer": 3},
		SW: dataplane.SWStats{Workers: []dataplane.WorkerStats{{Worker: 0, RxPackets: 10, CacheHits: 6, Cycles: 2970, PoolSize: 4096, PoolFree: 4000}},
			LookupBytes: 9322496, LookupBuild: 27 * time.Millisecond},
		HWPPS: 1e6, SWPPS: 2e6, HWAvgFrame: 64, SWAvgFrame: 1500}
	var rvs []placement.RuleView
	for i := 0; i < n; i++ {
		path := placement.HW
		if i%2 == 1 {
			path = placement.SW
		}
		rvs = append(rvs, placement.RuleView{ID: fmt.Sprintf("r%d", i), Action: "drop", Path: path,
			HW: dataplane.Counter{Packets: 10, Bytes: 640}, SW: dataplane.Counter{Packets: 1, Bytes: 1500}, Moves: 1})
	}
	rvs = append(rvs, placement.RuleView{ID: "allow", Action: "accept", Path: placement.None, SW: dataplane.Counter{Packets: 4}})
	v.Rules = placement.RuleListOf(rvs...)
	return v
}

func scrape(t *testing.T, c *Collector) string {
	t.Helper()
	srv := httptest.NewServer(Handler(NewRegistry(c)))
	defer srv.Close()
	resp, err := srv.Client().Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

func has(t *testing.T, text, line string) {
	t.Helper()
	for _, l := range strings.Split(text, "\n") {
		if l == line {
			return
		}
	}
	t.Errorf("missing line %q", line)
}

func TestBoundedRuleSeries(t *testing.T) {
	v := view(10)
	c := New(Sources{View: func() *placement.View { return v }, RuleCounts: func() []store.Count {
		return []store.Count{{Source: "bgp:192.0.2.1", Status: store.Active, N: 1}, {Source: "file:/x", Status: store.Refused, N: 1}}
	}, Node: "t", FlowSpec: func() FlowSpec {
		return FlowSpec{Refused: map[string]uint64{"unsupported_action": 2}, Sessions: map[string]bool{"192.0.2.1": true, "192.0.2.2": false},
			Malformed: map[string]uint64{"192.0.2.2": 3}, HeldDown: map[string]time.Duration{"192.0.2.2": 90 * time.Second},
			ConnRefused: map[string]uint64{"not_neighbor": 7}, RouteLimited: map[string]uint64{"192.0.2.1": 2}}
	}}, 3)
	out := scrape(t, c)
	has(t, out, `scrubd_rule_dropped_packets_total{path="hw",rule="r0"} 10`)
	has(t, out, `scrubd_rule_dropped_packets_total{path="sw",rule="r2"} 1`)
	// r3..r9 and the accept rule: 7 drop rules summed.
	has(t, out, `scrubd_rule_dropped_packets_total{path="hw",rule="_other"} 70`)
	has(t, out, `scrubd_rule_dropped_bytes_total{path="sw",rule="_other"} 10500`)
	has(t, out, `scrubd_rule_accepted_packets_total{rule="_other"} 4`)
	has(t, out, `scrubd_rule_placement{path="hw",rule="r0"} 1`)
	has(t, out, `scrubd_rule_placement{path="sw",rule="_other"} 4`)
	has(t, out, `scrubd_hw_entries_free 60`)
	has(t, out, `scrubd_hw_masks_free 12`)
	has(t, out, `scrubd_sw_headroom_ratio 0.5`)
	has(t, out, `scrubd_sw_lookup_bytes 9.322496e+06`)
	has(t, out, `scrubd_sw_lookup_build_seconds 0.027`)
	has(t, out, `scrubd_hw_install_failures_total{reason="table_full"} 2`)
	has(t, out, `scrubd_nic_dropped_packets_total{stat="rx_discards_phy"} 9`)
	has(t, out, `scrubd_path_dropped_frame_size_bytes{path="hw"} 64`)
	has(t, out, `scrubd_path_dropped_frame_size_bytes{path="sw"} 1500`)
	has(t, out, `scrubd_placement_moves_total{from="sw",to="hw"} 5`)
	has(t, out, `scrubd_rules{source="bgp",status="active"} 1`)
	has(t, out, `scrubd_flowspec_refused_routes_total{reason="unsupported_action"} 2`)
	has(t, out, `scrubd_flowspec_session_up{peer="192.0.2.1"} 1`)
	has(t, out, `scrubd_flowspec_session_up{peer="192.0.2.2"} 0`)
	has(t, out, `scrubd_flowspec_malformed_messages_total{peer="192.0.2.2"} 3`)
	has(t, out, `scrubd_flowspec_malformed_messages_total{peer="192.0.2.1"} 0`)
	has(t, out, `scrubd_flowspec_hold_down_seconds{peer="192.0.2.2"} 90`)
	has(t, out, `scrubd_flowspec_hold_down_seconds{peer="192.0.2.1"} 0`)
	has(t, out, `scrubd_flowspec_refused_connections_total{reason="not_neighbor"} 7`)
	has(t, out, `scrubd_flowspec_refused_connections_total{reason="held_down"} 0`)
	has(t, out, `scrubd_flowspec_route_limit_resets_total{peer="192.0.2.1"} 2`)
	has(t, out, `scrubd_flowspec_route_limit_resets_total{peer="192.0.2.2"} 0`)
	has(t, out, `scrubd_sw_cycles_per_packet 297`)
	has(t, out, `scrubd_sw_measured_cycles_per_packet 141`)
	has(t, out, `scrubd_hw_resyncs_total 2`)
	has(t, out, `scrubd_sw_worker_flow_cache_hits_total{worker="0"} 6`)
	if n := strings.Count(out, "scrubd_rule_dropped_packets_total{"); n != 8 {
		t.Errorf("%d per-rule packet series, want 4 labels x 2 paths", n)
	}
	// 100k rules stay bounded.
	big := view(100000)
	c2 := New(Sources{View: func() *placement.View { return big }}, 50)
	out = scrape(t, c2)
	if n := strings.Count(out, "scrubd_rule_dropped_packets_total{"); n != 102 {
		t.Errorf("%d series for 100k rules", n)
	}
	// Freed slots go to new rules.
	small := view(2)
	v = small
	out = scrape(t, c)
	promtool(t, out)
	has(t, out, `scrubd_rule_dropped_packets_total{path="hw",rule="r1"} 10`)
	has(t, out, `scrubd_rule_accepted_packets_total{rule="allow"} 4`)
	promtool(t, out)
}

// promtool checks names, help and types. In CI (CI=true) a missing promtool
// fails the test.
func promtool(t *testing.T, text string) {
	t.Helper()
	path, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("promtool not installed (Debian package prometheus)")
		}
		t.Skip("promtool not installed (Debian package prometheus); CI=true makes this a failure")
	}
	cmd := exec.Command(path, "check", "metrics")
	cmd.Stdin = strings.NewReader(text)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("promtool check metrics: %v\n%s", err, out.String())
	}
}

func TestPromtoolFullScrape(t *testing.T) {
	v := view(5)
	c := New(Sources{View: func() *placement.View { return v },
		StateWrites: func() (uint64, uint64, uint64) { return 7, 2, 1 }}, 10)
	text := scrape(t, c)
	promtool(t, text)
	has(t, text, `scrubd_state_writes_total{kind="journal"} 7`)
	has(t, text, `scrubd_state_writes_total{kind="whole"} 2`)
	has(t, text, `scrubd_state_save_failures_total 1`)
}

// /readyz answers 503 with what is pending until the gate opens, then 200;
// /healthz answers 200 throughout.
func TestReadyz(t *testing.T) {
	var ready atomic.Bool
	h := HandlerWithReadiness(NewRegistry(New(Sources{}, 1)), func() (bool, string) {
		if !ready.Load() {
			return false, "pending: first placement round"
		}
		return true, "ready: 3 rules placed"
	})
	srv := httptest.NewServer(h)
	defer srv.Close()
	get := func(path string) (int, string) {
		resp, err := srv.Client().Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get("/readyz"); code != 503 || !strings.Contains(body, "pending: first placement round") {
		t.Errorf("before: %d %q", code, body)
	}
	if code, _ := get("/healthz"); code != 200 {
		t.Errorf("healthz before ready: %d", code)
	}
	ready.Store(true)
	if code, body := get("/readyz"); code != 200 || !strings.Contains(body, "3 rules placed") {
		t.Errorf("after: %d %q", code, body)
	}
}

// scrubd_info carries the release the agent runs (agent/version's Version,
// set at link time by deploy/build.sh) beside the node name.
func TestInfoVersion(t *testing.T) {
	old := version.Version
	version.Version = "v9.8.7-3-gabcdef0"
	defer func() { version.Version = old }()
	out := scrape(t, New(Sources{Node: "edge-1"}, 1))
	has(t, out, `scrubd_info{node="edge-1",version="v9.8.7-3-gabcdef0"} 1`)
	promtool(t, out)
}

// Protected packets lost are exported per cause, every cause of
// dataplane.LostCauses present (0 where none was lost), nothing else.
func TestProtectedLost(t *testing.T) {
	lost := map[string]uint64{dataplane.LostOutOfBuffer: 24000, dataplane.LostSWRule: 3, "made_up": 7}
	out := scrape(t, New(Sources{ProtectedLost: func() map[string]uint64 { return lost }}, 1))
	has(t, out, `scrubd_protected_lost_packets_total{cause="out_of_buffer"} 24000`)
	has(t, out, `scrubd_protected_lost_packets_total{cause="sw_rule"} 3`)
	has(t, out, `scrubd_protected_lost_packets_total{cause="hw_rule"} 0`)
	has(t, out, `scrubd_protected_lost_packets_total{cause="unforwarded"} 0`)
	if n := strings.Count(out, "scrubd_protected_lost_packets_total{"); n != 4 {
		t.Errorf("%d protected-loss series, want the 4 causes", n)
	}
	promtool(t, out)
	// No source (a real NIC): no series at all.
	if out := scrape(t, New(Sources{}, 1)); strings.Contains(out, "scrubd_protected_lost_packets_total") {
		t.Error("protected-loss series without a source")
	}
}
