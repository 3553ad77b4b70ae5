// Package metrics exports scrubd's state to Prometheus. It is the only
// package that imports the Prometheus client: a scrape-time Collector reads
// the placement View (which the placement goroutine publishes) and the rule
// store, so no Prometheus call ever runs per packet.
//
// The point of the metrics is the comparison between the hardware and the
// software path: every per-rule and per-path series carries path="hw" or
// path="sw".
//
// Per-rule series are bounded: at most MaxRuleSeries rules get their own
// rule label, assigned first come and kept while the rule exists; the rest
// are summed into rule="_other". A freed slot goes to the next rule, so
// "_other" can step down: Prometheus treats that as a counter reset.
package metrics

import (
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/scrubd/scrubd/agent/dataplane"
	"github.com/scrubd/scrubd/agent/placement"
	"github.com/scrubd/scrubd/agent/store"
	"github.com/scrubd/scrubd/agent/version"
)

// OtherRule is the rule label of the aggregated series.
const OtherRule = "_other"

// Sources are what the collector reads at scrape time.
type Sources struct {
	View func() *placement.View
	// RuleCounts returns the store's rules counted by source and status
	// (store.Store.Counts: kept as rules come and go, no copy of them).
	RuleCounts func() []store.Count
	Node       string
	// FlowSpec, when set, returns the FlowSpec speaker's state.
	FlowSpec func() FlowSpec
	// StateCorrupt, when set, returns how many times the state file was
	// found corrupt and moved aside.
	StateCorrupt func() uint64
	// StateWrites, when set, returns how many times the state saver
	// appended a source's changes to its journal, wrote a source whole,
	// and failed a save.
	StateWrites func() (journaled, whole, failed uint64)
	// RuleFileRefusals, when set, returns how many times a rule file was
	// refused (at start or on a reload; its rules in force stayed).
	RuleFileRefusals func() uint64
	// ProtectedLost, when set, returns the protected packets lost so far by
	// cause (dataplane.LostCauses): a data plane that implements
	// dataplane.ProtectedLoss (the simulated NIC). Keys outside
	// dataplane.LostCauses are not exported.
	ProtectedLost func() map[string]uint64
}

// FlowSpec is the FlowSpec speaker's state, per configured neighbour where
// it says so.
type FlowSpec struct {
	Refused  map[string]uint64 // routes refused, by reason
	Sessions map[string]bool   // per neighbour: established
	// Malformed counts per neighbour the messages kept from the BGP
	// speaker because its decoder panics on them.
	Malformed map[string]uint64
	// RouteLimited counts per neighbour the sessions reset for announcing
	// more routes than flowspec.max_routes in one family.
	RouteLimited map[string]uint64
	// HeldDown is, per neighbour held down (for repeating such messages,
	// or for the route limit), how long the hold-down has left.
	HeldDown map[string]time.Duration
	// ConnRefused counts the BGP connections refused, by reason (each of
	// FlowSpecConnRefusals is served, 0 until it counts).
	ConnRefused map[string]uint64
}

// FlowSpecConnRefusals are the reasons of
// scrubd_flowspec_refused_connections_total (package bgpguard's).
var FlowSpecConnRefusals = []string{"not_neighbor", "connection_limit", "held_down"}

// Collector is a prometheus.Collector over the agent's state.
type Collector struct {
	src Sources
	max int

	mu    sync.Mutex
	slots map[string]bool // rules with their own series

	ruleDroppedPkts, ruleDroppedBytes, ruleAcceptedPkts *prometheus.Desc
	rulePlacement, ruleMoves, ruleRate                  *prometheus.Desc
	pathRate, pathFrame                                 *prometheus.Desc
	swCPP, swCap, swLoad, swHeadroom, swMeasured        *prometheus.Desc
	swLookupBytes, swLookupBuild                        *prometheus.Desc
	hwResyncs                                           *prometheus.Desc
	wRx, wRxBytes, wDrop, wPass, wOOB, wUnfwd, wCycles  *prometheus.Desc
	wCacheHits                                          *prometheus.Desc
	poolFree, poolSize, poolFail                        *prometheus.Desc
	hwUsed, hwFree, hwMax, maskUsed, maskFree, hwUp     *prometheus.Desc
	hwFail, nic, moves, rules, info                     *prometheus.Desc
	fsRefused, fsUp, fsMalformed, fsHeld, fsConnRefused *prometheus.Desc
	fsRouteLimited                                      *prometheus.Desc
	stateCorrupt, stateWrites, stateFailures            *prometheus.Desc
	ruleFileRefusals                                    *prometheus.Desc
	protectedLost                                       *prometheus.Desc
	version                                             string
}

// New returns a collector with at most maxRuleSeries per-rule series.
func New(src Sources, maxRuleSeries int) *Collector {
	if maxRuleSeries < 1 {
		maxRuleSeries = 1
	}
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc("scrubd_"+name, help, labels, nil)
	}
	return &Collector{src: src, max: maxRuleSeries, slots: map[string]bool{}, version: version.Get().Version,
		ruleDroppedPkts:  d("rule_dropped_packets_total", "Packets dropped by a drop rule, per path (hw: NIC flow table, sw: software engine).", "rule", "path"),
		ruleDroppedBytes: d("rule_dropped_bytes_total", "Bytes dropped by a drop rule, per path.", "rule", "path"),
		ruleAcceptedPkts: d("rule_accepted_packets_total", "Packets an accept (allow-list or protect) rule decided in software.", "rule"),
		rulePlacement:    d("rule_placement", "1 for the path a rule is enforced on now (hw, sw; none for accept rules).", "rule", "path"),
		ruleMoves:        d("rule_moves_total", "Times placement moved a rule between paths.", "rule"),
		ruleRate:         d("rule_packets_per_second", "Packet rate a rule decided over the last placement round, per path.", "rule", "path"),
		pathRate:         d("path_dropped_packets_per_second", "Packet rate dropped by rules on each path over the last placement round.", "path"),
		pathFrame:        d("path_dropped_frame_size_bytes", "Mean size in bytes of the frames rules dropped on each path over the last placement round.", "path"),
		swCPP:            d("sw_cycles_per_packet", "Cycles per packet the capacity model uses (calibrated or configured; the live figure with cycles_per_packet auto)."),
		swMeasured:       d("sw_measured_cycles_per_packet", "Cycles per received packet the software engine measured over the last round (0: none measured)."),
		hwResyncs:        d("hw_resyncs_total", "Times the hardware table was found to have lost scrubd's rules (qdisc deleted, e.g. OVS restarting) and they were reinstalled."),
		swCap:            d("sw_capacity_packets_per_second", "Software capacity: the smaller of the CPU's (workers x clock / cycles per packet) and the receive rings' (queues x drain rate / the workers' imbalance; what the workers received while out-of-buffer grew)."),
		swLoad:           d("sw_load_packets_per_second", "Packets per second offered to the software path over the last round: what the workers received plus what the rings had no buffer for (out-of-buffer)."),
		swHeadroom:       d("sw_headroom_ratio", "1 - load/capacity of the software path (negative when overloaded)."),
		swLookupBytes:    d("sw_lookup_bytes", "Memory of the software lookup's structures for the rules in force (the classifier's hash tables or decision trees; 0 for xdp)."),
		swLookupBuild:    d("sw_lookup_build_seconds", "How long building the software lookup in force took: a whole rule set's compile, or the patch of the rules that changed (0 for xdp)."),
		wRx:              d("sw_worker_received_packets_total", "Packets a software worker received.", "worker"),
		wRxBytes:         d("sw_worker_received_bytes_total", "Bytes a software worker received.", "worker"),
		wDrop:            d("sw_worker_dropped_packets_total", "Packets a software worker dropped.", "worker"),
		wPass:            d("sw_worker_passed_packets_total", "Packets a software worker passed on.", "worker"),
		wOOB:             d("sw_worker_out_of_buffer_total", "Packets lost because the worker's receive ring had no buffer posted.", "worker"),
		wUnfwd:           d("sw_worker_unforwarded_packets_total", "Passed packets an inline software path could not send on (send queue full, or no peer to redirect to).", "worker"),
		wCycles:          d("sw_worker_cycles_total", "CPU cycles a software worker spent processing packets.", "worker"),
		wCacheHits:       d("sw_worker_flow_cache_hits_total", "Packets a software worker's flow cache decided without a rule lookup (dv; 0 for xdp). Near received on traffic of few flows; near 0 on a flood of new 5-tuples, where the cache turns itself off.", "worker"),
		poolFree:         d("sw_pool_free_buffers", "Free buffers in a worker's pool.", "worker", "node"),
		poolSize:         d("sw_pool_buffers", "Buffers in a worker's pool.", "worker", "node"),
		poolFail:         d("sw_pool_alloc_failures_total", "Buffer allocations that found the pool empty.", "worker", "node"),
		hwUsed:           d("hw_entries_used", "Hardware flow-table entries scrubd uses."),
		hwFree:           d("hw_entries_free", "Hardware flow-table entries left (0 when the size is unknown)."),
		hwMax:            d("hw_entries_max", "Hardware flow-table entries scrubd may use (0: unknown)."),
		maskUsed:         d("hw_masks_used", "Distinct mask shapes (flow groups) scrubd's entries use."),
		maskFree:         d("hw_masks_free", "Mask shapes (flow groups) left (0 when unbounded)."),
		hwUp:             d("hw_up", "1 while the hardware path works, 0 after the backend reported the device gone."),
		hwFail:           d("hw_install_failures_total", "Hardware operations that failed, by reason.", "reason"),
		nic:              d("nic_dropped_packets_total", "The NIC's own drop counters by ethtool name (rx_discards_phy, rx_out_of_buffer, ... as mlx5's counters.rst names them); never packet totals such as rx_packets_phy.", "stat"),
		moves:            d("placement_moves_total", "Placement moves between paths.", "from", "to"),
		rules:            d("rules", "Rules in the store by source kind and status.", "source", "status"),
		info:             d("info", "Agent information: the node name and the release (agent/version) it runs; always 1.", "node", "version"),
		fsRefused:        d("flowspec_refused_routes_total", "FlowSpec routes refused (not turned into rules), by reason.", "reason"),
		fsUp:             d("flowspec_session_up", "1 while the BGP session with a FlowSpec neighbour is established.", "peer"),
		fsMalformed:      d("flowspec_malformed_messages_total", "BGP messages from a FlowSpec neighbour that GoBGP's decoder panics on: kept from it, each resetting the session.", "peer"),
		fsConnRefused:    d("flowspec_refused_connections_total", "BGP connections the agent's guard closed unserved, by reason: not_neighbor (from an address that is no configured neighbour), connection_limit (the neighbour had two already), held_down.", "reason"),
		fsRouteLimited:   d("flowspec_route_limit_resets_total", "Sessions with a FlowSpec neighbour reset because it announced more routes than flowspec.max_routes in one address family.", "peer"),
		fsHeld:           d("flowspec_hold_down_seconds", "How long a FlowSpec neighbour stays held down, for repeated malformed messages or for flowspec.max_routes (no session with it until then); 0 when it is not.", "peer"),
		stateCorrupt:     d("state_file_corrupt_total", "Times the state file could not be read as state and was moved aside (the agent started from its sources)."),
		stateWrites:      d("state_writes_total", "Writes of a source's state: journal (its changes appended to its journal) or whole (its snapshot written anew, the journal folded in).", "kind"),
		stateFailures:    d("state_save_failures_total", "State saves that failed (the state directory full or unwritable): the rules stay in force, but a restart would lose the changes since the last good save; the agent retries every 2 s and on every API change."),
		ruleFileRefusals: d("rule_file_refusals_total", "Times a rule file was refused at start or on a reload (not valid, a rule refused by the guard, over rules.max_rules_per_source); the rules in force stayed."),
		protectedLost:    d("protected_lost_packets_total", "Packets of protected traffic lost, by cause: hw_rule, sw_rule (a drop rule on that path), out_of_buffer (no receive buffer posted), unforwarded (passed, the send queue full). Only where the data plane can tell protected packets among the lost ones (the simulated NIC).", "cause"),
	}
}

// Describe sends every descriptor.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.ruleDroppedPkts, c.ruleDroppedBytes, c.ruleAcceptedPkts, c.rulePlacement,
		c.ruleMoves, c.ruleRate, c.pathRate, c.pathFrame, c.swCPP, c.swCap, c.swLoad, c.swHeadroom, c.wRx, c.wRxBytes,
		c.wDrop, c.wPass, c.wOOB, c.wUnfwd, c.wCycles, c.wCacheHits, c.poolFree, c.poolSize, c.poolFail, c.hwUsed, c.hwFree, c.hwMax,
		c.maskUsed, c.maskFree, c.hwUp, c.hwFail, c.nic, c.moves, c.rules, c.info, c.fsRefused, c.fsUp, c.fsMalformed, c.fsHeld, c.fsConnRefused, c.fsRouteLimited, c.swMeasured, c.hwResyncs, c.stateCorrupt, c.stateWrites, c.stateFailures, c.ruleFileRefusals, c.protectedLost, c.swLookupBytes, c.swLookupBuild} {
		ch <- d
	}
}

// labelFor assigns rule series slots (sticky, first come).
func (c *Collector) labels(ids []string) map[string]string {
	c.mu.Lock()
	defer c.mu.Unlock()
	live := map[string]bool{}
	for _, id := range ids {
		live[id] = true
	}
	for id := range c.slots {
		if !live[id] {
			delete(c.slots, id)
		}
	}
	out := make(map[string]string, len(ids))
	for _, id := range ids {
		if !c.slots[id] && len(c.slots) < c.max {
			c.slots[id] = true
		}
		if c.slots[id] {
			out[id] = id
		} else {
			out[id] = OtherRule
		}
	}
	return out
}

type agg struct{ hwP, hwB, swP, swB, acc, moves, hwR, swR float64 }

// Collect reads the sources and sends every metric.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	ch <- prometheus.MustNewConstMetric(c.info, prometheus.GaugeValue, 1, c.src.Node, c.version)
	type key struct{ src, st string }
	n := map[key]float64{}
	if c.src.RuleCounts != nil {
		for _, rc := range c.src.RuleCounts() {
			n[key{sourceKind(rc.Source), string(rc.Status)}] += float64(rc.N)
		}
	}
	for k, v := range n {
		ch <- prometheus.MustNewConstMetric(c.rules, prometheus.GaugeValue, v, k.src, k.st)
	}
	if c.src.StateCorrupt != nil {
		ch <- prometheus.MustNewConstMetric(c.stateCorrupt, prometheus.CounterValue, float64(c.src.StateCorrupt()))
	}
	if c.src.StateWrites != nil {
		j, w, f := c.src.StateWrites()
		ch <- prometheus.MustNewConstMetric(c.stateWrites, prometheus.CounterValue, float64(j), "journal")
		ch <- prometheus.MustNewConstMetric(c.stateWrites, prometheus.CounterValue, float64(w), "whole")
		ch <- prometheus.MustNewConstMetric(c.stateFailures, prometheus.CounterValue, float64(f))
	}
	if c.src.RuleFileRefusals != nil {
		ch <- prometheus.MustNewConstMetric(c.ruleFileRefusals, prometheus.CounterValue, float64(c.src.RuleFileRefusals()))
	}
	if c.src.ProtectedLost != nil {
		lost := c.src.ProtectedLost()
		for _, cause := range dataplane.LostCauses {
			ch <- prometheus.MustNewConstMetric(c.protectedLost, prometheus.CounterValue, float64(lost[cause]), cause)
		}
	}
	if c.src.FlowSpec != nil {
		fs := c.src.FlowSpec()
		for k, n := range fs.Refused {
			ch <- prometheus.MustNewConstMetric(c.fsRefused, prometheus.CounterValue, float64(n), k)
		}
		for _, r := range FlowSpecConnRefusals {
			ch <- prometheus.MustNewConstMetric(c.fsConnRefused, prometheus.CounterValue, float64(fs.ConnRefused[r]), r)
		}
		for p, up := range fs.Sessions {
			v := 0.0
			if up {
				v = 1
			}
			ch <- prometheus.MustNewConstMetric(c.fsUp, prometheus.GaugeValue, v, p)
			// One series per configured neighbour, 0 until it counts.
			ch <- prometheus.MustNewConstMetric(c.fsMalformed, prometheus.CounterValue, float64(fs.Malformed[p]), p)
			ch <- prometheus.MustNewConstMetric(c.fsHeld, prometheus.GaugeValue, fs.HeldDown[p].Seconds(), p)
			ch <- prometheus.MustNewConstMetric(c.fsRouteLimited, prometheus.CounterValue, float64(fs.RouteLimited[p]), p)
		}
	}
	if c.src.View == nil {
		return
	}
	v := c.src.View()
	if v == nil {
		return
	}
	ids := make([]string, v.Rules.Len())
	for i, r := range v.Rules.All() {
		ids[i] = r.ID
	}
	lab := c.labels(ids)
	sums := map[string]*agg{}
	var order []string
	placed := map[[2]string]float64{}
	for _, r := range v.Rules.All() {
		l := lab[r.ID]
		a := sums[l]
		if a == nil {
			a = &agg{}
			sums[l] = a
			order = append(order, l)
		}
		if r.Action == "accept" {
			a.acc += float64(r.SW.Packets)
		} else {
			a.hwP += float64(r.HW.Packets)
			a.hwB += float64(r.HW.Bytes)
			a.swP += float64(r.SW.Packets)
			a.swB += float64(r.SW.Bytes)
		}
		a.moves += float64(r.Moves)
		a.hwR += r.HWPPS
		a.swR += r.SWPPS
		placed[[2]string{l, string(r.Path)}]++
	}
	for _, l := range order {
		a := sums[l]
		ch <- prometheus.MustNewConstMetric(c.ruleDroppedPkts, prometheus.CounterValue, a.hwP, l, "hw")
		ch <- prometheus.MustNewConstMetric(c.ruleDroppedPkts, prometheus.CounterValue, a.swP, l, "sw")
		ch <- prometheus.MustNewConstMetric(c.ruleDroppedBytes, prometheus.CounterValue, a.hwB, l, "hw")
		ch <- prometheus.MustNewConstMetric(c.ruleDroppedBytes, prometheus.CounterValue, a.swB, l, "sw")
		ch <- prometheus.MustNewConstMetric(c.ruleAcceptedPkts, prometheus.CounterValue, a.acc, l)
		ch <- prometheus.MustNewConstMetric(c.ruleMoves, prometheus.CounterValue, a.moves, l)
		ch <- prometheus.MustNewConstMetric(c.ruleRate, prometheus.GaugeValue, a.hwR, l, "hw")
		ch <- prometheus.MustNewConstMetric(c.ruleRate, prometheus.GaugeValue, a.swR, l, "sw")
		for _, p := range []placement.Path{placement.HW, placement.SW, placement.None} {
			// For a single rule this is 0 or 1; for _other, how many rules.
			ch <- prometheus.MustNewConstMetric(c.rulePlacement, prometheus.GaugeValue, placed[[2]string{l, string(p)}], l, string(p))
		}
	}
	ch <- prometheus.MustNewConstMetric(c.pathRate, prometheus.GaugeValue, v.HWPPS, "hw")
	ch <- prometheus.MustNewConstMetric(c.pathRate, prometheus.GaugeValue, v.SWPPS, "sw")
	ch <- prometheus.MustNewConstMetric(c.pathFrame, prometheus.GaugeValue, v.HWAvgFrame, "hw")
	ch <- prometheus.MustNewConstMetric(c.pathFrame, prometheus.GaugeValue, v.SWAvgFrame, "sw")
	ch <- prometheus.MustNewConstMetric(c.swCPP, prometheus.GaugeValue, v.CyclesPerPacket)
	ch <- prometheus.MustNewConstMetric(c.swMeasured, prometheus.GaugeValue, v.MeasuredCyclesPerPacket)
	ch <- prometheus.MustNewConstMetric(c.hwResyncs, prometheus.CounterValue, float64(v.Resyncs))
	ch <- prometheus.MustNewConstMetric(c.swCap, prometheus.GaugeValue, v.SWCapacityPPS)
	ch <- prometheus.MustNewConstMetric(c.swLoad, prometheus.GaugeValue, v.SWLoadPPS)
	head := 0.0
	if v.SWCapacityPPS > 0 {
		head = 1 - v.SWLoadPPS/v.SWCapacityPPS
	}
	ch <- prometheus.MustNewConstMetric(c.swHeadroom, prometheus.GaugeValue, head)
	ch <- prometheus.MustNewConstMetric(c.swLookupBytes, prometheus.GaugeValue, float64(v.SW.LookupBytes))
	ch <- prometheus.MustNewConstMetric(c.swLookupBuild, prometheus.GaugeValue, v.SW.LookupBuild.Seconds())
	for _, w := range v.SW.Workers {
		ws := strconv.Itoa(w.Worker)
		ns := strconv.Itoa(w.PoolNode)
		ch <- prometheus.MustNewConstMetric(c.wRx, prometheus.CounterValue, float64(w.RxPackets), ws)
		ch <- prometheus.MustNewConstMetric(c.wRxBytes, prometheus.CounterValue, float64(w.RxBytes), ws)
		ch <- prometheus.MustNewConstMetric(c.wDrop, prometheus.CounterValue, float64(w.Dropped), ws)
		ch <- prometheus.MustNewConstMetric(c.wPass, prometheus.CounterValue, float64(w.Passed), ws)
		ch <- prometheus.MustNewConstMetric(c.wOOB, prometheus.CounterValue, float64(w.OutOfBuffer), ws)
		ch <- prometheus.MustNewConstMetric(c.wUnfwd, prometheus.CounterValue, float64(w.Unforwarded), ws)
		ch <- prometheus.MustNewConstMetric(c.wCycles, prometheus.CounterValue, float64(w.Cycles), ws)
		ch <- prometheus.MustNewConstMetric(c.wCacheHits, prometheus.CounterValue, float64(w.CacheHits), ws)
		ch <- prometheus.MustNewConstMetric(c.poolFree, prometheus.GaugeValue, float64(w.PoolFree), ws, ns)
		ch <- prometheus.MustNewConstMetric(c.poolSize, prometheus.GaugeValue, float64(w.PoolSize), ws, ns)
		ch <- prometheus.MustNewConstMetric(c.poolFail, prometheus.CounterValue, float64(w.PoolAllocFail), ws, ns)
	}
	b := v.HWBudget
	ch <- prometheus.MustNewConstMetric(c.hwUsed, prometheus.GaugeValue, float64(b.UsedEntries))
	ch <- prometheus.MustNewConstMetric(c.hwMax, prometheus.GaugeValue, float64(b.MaxEntries))
	ch <- prometheus.MustNewConstMetric(c.hwFree, prometheus.GaugeValue, float64(max(0, b.MaxEntries-b.UsedEntries)))
	ch <- prometheus.MustNewConstMetric(c.maskUsed, prometheus.GaugeValue, float64(b.UsedMasks))
	ch <- prometheus.MustNewConstMetric(c.maskFree, prometheus.GaugeValue, float64(max(0, b.MaxMasks-b.UsedMasks)))
	up := 0.0
	if v.HWUp {
		up = 1
	}
	ch <- prometheus.MustNewConstMetric(c.hwUp, prometheus.GaugeValue, up)
	for k, n := range v.HWFailures {
		ch <- prometheus.MustNewConstMetric(c.hwFail, prometheus.CounterValue, float64(n), k.String())
	}
	names := make([]string, 0, len(v.NIC))
	for k := range v.NIC {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, k := range names {
		ch <- prometheus.MustNewConstMetric(c.nic, prometheus.CounterValue, float64(v.NIC[k]), k)
	}
	for k, n := range v.Moves {
		ch <- prometheus.MustNewConstMetric(c.moves, prometheus.CounterValue, float64(n), string(k[0]), string(k[1]))
	}
}

func sourceKind(s string) string {
	for i := 0; i < len(s); i++ {
		if s[i] == ':' {
			return s[:i]
		}
	}
	return s
}

// NewRegistry returns a registry holding the collector and Go runtime and
// process metrics.
func NewRegistry(c *Collector) *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	reg.MustRegister(collectors.NewGoCollector())
	reg.MustRegister(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// Handler serves /metrics for reg, /healthz, and a /readyz with no gate
// (always 200); the agent uses HandlerWithReadiness.
func Handler(reg *prometheus.Registry) http.Handler { return HandlerWithReadiness(reg, nil) }

// Readiness reports whether the agent is ready and, either way, what it is
// waiting for or what is in force.
type Readiness func() (ready bool, detail string)

// HandlerWithReadiness serves /metrics for reg, /healthz (200 while the
// process answers) and /readyz: 200 once ready reports true, 503 before,
// with ready's detail as the body.
func HandlerWithReadiness(reg *prometheus.Registry, ready Readiness) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok\n")) })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, r *http.Request) {
		ok, detail := true, "ok"
		if ready != nil {
			ok, detail = ready()
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if !ok {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		w.Write([]byte(detail + "\n"))
	})
	return mux
}
