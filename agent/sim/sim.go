// Package sim is `scrubd run --sim`: the whole agent on a simulated NIC with
// no hardware and no configuration. The hardware path is offload/sim (an
// mlx5-like flow table with a small entry budget) behind agent/hwpath; the
// software path is the real classifier with one worker per simulated Arm
// core; a built-in traffic mix (small-frame floods, large-frame
// amplification, traffic no NIC key can match, legitimate and management
// traffic) runs through both, and built-in demo rules arrive one by one.
//
// What is emulated: packets are sampled, one in Scale, and every counter is
// scaled back up, so the agent sees full-rate figures (tens of Mpps) that a
// laptop could not push through Go code. The software path's capacity comes
// from the regime model (workers x clock / cycles per packet, the BlueField-3
// Direct Verbs figures by default); when the packets reaching software exceed
// it, the excess is lost as out-of-buffer, as on a real NIC whose rings run
// dry. Every sampled packet is also decided by the reference
// ((*rule.Set).Decide) on the rule set in force, so the simulation counts any
// packet an engine dropped that the rules would pass (over-drop), and any
// drop of protected traffic.
package sim

import (
	"context"
	"fmt"
	"math"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/scrubd/scrubd/agent/dataplane"
	"github.com/scrubd/scrubd/agent/hwpath"
	"github.com/scrubd/scrubd/offload"
	"github.com/scrubd/scrubd/offload/compile"
	osim "github.com/scrubd/scrubd/offload/sim"
	"github.com/scrubd/scrubd/swpath/classifier"
	"github.com/scrubd/scrubd/swpath/rule"
)

// Flow is one stream of the traffic mix.
type Flow struct {
	Name      string
	Fields    rule.Fields
	Frame     int     // frame size in bytes
	PPS       float64 // full-rate packets per second
	Protected bool    // traffic the protect list covers
	// Vary spreads source addresses and ports over this many values.
	Vary int
}

// FlowStats are one flow's counters (full-rate, scaled).
type FlowStats struct {
	Name      string
	Sent      uint64
	HWDropped uint64
	SWDropped uint64
	Passed    uint64
	OOB       uint64
	// OverDrop counts packets an engine dropped that the rules pass.
	OverDrop uint64
	// UnderPass counts packets the rules drop that passed (rules not yet in
	// force on a path, or lost to overload are not counted here).
	UnderPass uint64
}

// Options size the simulated NIC.
type Options struct {
	Scale      float64 // sample one packet in Scale (default 2000)
	Workers    int     // default 12
	Hz         float64 // default 2.13e9
	CPP        float64 // cycles per packet, default 297
	HWEntries  int     // hardware entry budget (default 10)
	HWMasks    int     // mask shapes per table (0: device's 15)
	Flows      []Flow  // default DefaultFlows()
	Start      time.Time
	InsertRate float64 // default: mlx5 DMFS 5000/s
}

// NIC is the simulated box: hardware table, software path, traffic.
type NIC struct {
	opt   Options
	clock *osim.FakeClock
	hwNIC *osim.NIC
	hw    dataplane.HW
	sw    *SW

	mu    sync.Mutex
	ref   *rule.Set // the effective set, for the reference decision
	acc   []float64
	stats []flowCounters
	steps uint64
	oob   atomic.Uint64 // samples
	rxPhy atomic.Uint64 // samples
}

type flowCounters struct {
	sent, hw, sw, passed, oob, over, under uint64
}

// New builds the simulated NIC.
func New(opt Options) (*NIC, error) {
	if opt.Scale <= 0 {
		opt.Scale = 2000
	}
	if opt.Workers <= 0 {
		opt.Workers = 12
	}
	if opt.Hz <= 0 {
		opt.Hz = 2.13e9
	}
	if opt.CPP <= 0 {
		opt.CPP = 297
	}
	if opt.HWEntries <= 0 {
		opt.HWEntries = 10
	}
	if opt.Flows == nil {
		opt.Flows = DefaultFlows()
	}
	if opt.Start.IsZero() {
		opt.Start = time.Now()
	}
	caps := offload.MLX5(osim.DefaultEntries)
	if opt.InsertRate > 0 {
		caps.InsertRate = opt.InsertRate
	}
	clk := osim.NewFakeClock(opt.Start)
	hwNIC := osim.New(osim.Config{Caps: caps, Clock: clk, Dev: "sim0"})
	path := hwpath.New(hwpath.Config{Name: "sim-mlx5", Compile: compile.Config{Caps: caps, Chain: 0, PrioV4: 10, PrioV6: 11},
		Owner: offload.Owner{Chain: 0, PrioLo: 10, PrioHi: 11}, MaxEntries: opt.HWEntries, MaxMasks: opt.HWMasks}, hwNIC)
	sw, err := newSW(opt.Workers, opt.Hz, opt.CPP, opt.Scale)
	if err != nil {
		return nil, err
	}
	n := &NIC{opt: opt, clock: clk, hwNIC: hwNIC, sw: sw, ref: &rule.Set{},
		acc: make([]float64, len(opt.Flows)), stats: make([]flowCounters, len(opt.Flows))}
	n.hw = &scaledHW{HW: path, scale: opt.Scale, nic: n.nicCounters}
	return n, nil
}

// HW is the hardware path (for placement).
func (n *NIC) HW() dataplane.HW { return n.hw }

// SW is the software path (for placement).
func (n *NIC) SW() dataplane.SW { return n.sw }

// Device is the simulated flow table (tests use SetGone and Flush).
func (n *NIC) Device() *osim.NIC { return n.hwNIC }

// Now is the simulation's clock.
func (n *NIC) Now() time.Time { return n.clock.Now() }

// SetReference gives the rule set in force, for the reference decision.
func (n *NIC) SetReference(s *rule.Set) {
	n.mu.Lock()
	n.ref = s
	n.mu.Unlock()
}

// Close releases the workers.
func (n *NIC) Close() { n.sw.close() }

func (n *NIC) nicCounters() map[string]uint64 {
	s := n.opt.Scale
	return map[string]uint64{
		"rx_out_of_buffer": uint64(float64(n.oob.Load()) * s),
		"rx_packets_phy":   uint64(float64(n.rxPhy.Load()) * s),
		"rx_discards_phy":  0,
	}
}

type sample struct {
	flow int
	f    rule.Fields
	drop bool // reference verdict
}

// Step runs dt of traffic: it advances the simulation clock, sends each
// flow's sampled packets through the hardware table and, for what hardware
// passes, through the software path, within its capacity.
func (n *NIC) Step(dt time.Duration) {
	n.clock.Advance(dt)
	n.mu.Lock()
	defer n.mu.Unlock()
	n.steps++
	secs := dt.Seconds()
	if secs <= 0 {
		return
	}
	var toSW []sample
	for i := range n.opt.Flows {
		fl := &n.opt.Flows[i]
		n.acc[i] += fl.PPS * secs / n.opt.Scale
		cnt := int(n.acc[i])
		n.acc[i] -= float64(cnt)
		fc := &n.stats[i]
		for k := 0; k < cnt; k++ {
			f := fl.Fields
			if fl.Vary > 1 {
				v := (n.steps*7919 + uint64(k)) % uint64(fl.Vary)
				if f.Family == rule.IPv6 {
					f.Src.Lo += v
				} else {
					f.Src.Hi += v << 32 // the IPv4 address sits in Hi's top half
				}
			}
			drop := false
			if idx := n.ref.Decide(&f); idx >= 0 && n.ref.Rules[idx].Action == rule.Drop {
				drop = true
			}
			fc.sent++
			n.rxPhy.Add(1)
			if _, hit := n.hwNIC.Process(&f, uint32(fl.Frame)); hit {
				fc.hw++
				if !drop {
					fc.over++
				}
				continue
			}
			toSW = append(toSW, sample{flow: i, f: f, drop: drop})
		}
	}
	// Software capacity: what exceeds it is lost for want of posted buffers.
	capPPS := float64(n.opt.Workers) * n.opt.Hz / n.opt.CPP
	offered := float64(len(toSW)) * n.opt.Scale / secs
	keep := 1.0
	if offered > capPPS {
		keep = capPPS / offered
	}
	var kacc float64
	for j := range toSW {
		s := &toSW[j]
		fl := &n.opt.Flows[s.flow]
		fc := &n.stats[s.flow]
		kacc += keep
		if kacc < 1 {
			fc.oob++
			n.oob.Add(1)
			n.sw.ctr[j%len(n.sw.ctr)].oob.Add(1)
			continue
		}
		kacc--
		v := n.sw.classify(j%len(n.sw.workers), &s.f, uint32(fl.Frame))
		if v == classifier.Drop {
			fc.sw++
			if !s.drop {
				fc.over++
			}
		} else {
			fc.passed++
			if s.drop {
				fc.under++
			}
		}
	}
}

// Idle advances the simulation clock without traffic.
func (n *NIC) Idle(dt time.Duration) { n.clock.Advance(dt) }

// Stats returns every flow's counters, scaled to full rate.
func (n *NIC) Stats() []FlowStats {
	n.mu.Lock()
	defer n.mu.Unlock()
	up := func(v uint64) uint64 { return uint64(math.Round(float64(v) * n.opt.Scale)) }
	out := make([]FlowStats, len(n.stats))
	for i, c := range n.stats {
		out[i] = FlowStats{Name: n.opt.Flows[i].Name, Sent: up(c.sent), HWDropped: up(c.hw), SWDropped: up(c.sw),
			Passed: up(c.passed), OOB: up(c.oob), OverDrop: up(c.over), UnderPass: up(c.under)}
	}
	return out
}

// ProtectedDrops returns how many packets of protected flows any engine
// dropped (full-rate).
func (n *NIC) ProtectedDrops() uint64 {
	var d uint64
	for i, s := range n.Stats() {
		if n.opt.Flows[i].Protected {
			d += s.HWDropped + s.SWDropped
		}
	}
	return d
}

// Run steps the simulation with real time until ctx ends (the --sim mode).
func (n *NIC) Run(ctx context.Context, every time.Duration) error {
	t := time.NewTicker(every)
	defer t.Stop()
	last := time.Now()
	for {
		select {
		case <-ctx.Done():
			return nil
		case now := <-t.C:
			n.Step(now.Sub(last))
			last = now
		}
	}
}

func v4(s string) rule.Addr { return rule.AddrFrom(netip.MustParseAddr(s)) }

func udp(src, dst string, sp, dp uint16, length uint32) rule.Fields {
	return rule.Fields{Family: rule.IPv4, Proto: rule.ProtoUDP, L4: true, Frag: rule.NotFragment, Src: v4(src), Dst: v4(dst), SrcPort: sp, DstPort: dp, Length: length}
}

func tcp(src, dst string, sp, dp uint16, flags uint8, length uint32) rule.Fields {
	f := udp(src, dst, sp, dp, length)
	f.Proto, f.TCPFlags = rule.ProtoTCP, flags
	return f
}

// DefaultFlows is the built-in traffic mix (full-rate figures for a 100G
// uplink).
func DefaultFlows() []Flow {
	ip := func(frame int) uint32 { return uint32(frame - 18) } // IP length of an untagged frame
	sctp := udp("198.18.7.1", "203.0.113.40", 5000, 9, ip(128))
	sctp.Proto = rule.ProtoSCTP
	gre := rule.Fields{Family: rule.IPv4, Proto: rule.ProtoGRE, L4: false, Frag: rule.NotFragment, Src: v4("198.18.9.1"), Dst: v4("203.0.113.60"), Length: ip(1400)}
	return []Flow{
		{Name: "syn-flood 64B", Fields: tcp("198.18.1.1", "203.0.113.20", 1024, 80, rule.SYN, ip(64)), Frame: 64, PPS: 60e6, Vary: 64},
		{Name: "udp-flood 64B", Fields: udp("198.18.2.1", "203.0.113.30", 40000, 1500, ip(64)), Frame: 64, PPS: 25e6, Vary: 64},
		{Name: "dns-amp 1500B", Fields: udp("198.18.3.1", "203.0.113.10", 53, 33000, ip(1500)), Frame: 1500, PPS: 5e6, Vary: 64},
		{Name: "ntp-amp 468B", Fields: udp("198.18.4.1", "203.0.113.11", 123, 33001, ip(468)), Frame: 468, PPS: 3e6, Vary: 64},
		{Name: "gre-bulk 1400B", Fields: gre, Frame: 1400, PPS: 2e6, Vary: 16},
		{Name: "tiny-udp 64B", Fields: udp("198.18.5.1", "198.51.100.9", 7000, 7001, ip(64)), Frame: 64, PPS: 6e6, Vary: 64},
		{Name: "sctp-flood 128B", Fields: sctp, Frame: 128, PPS: 2e6, Vary: 16},
		{Name: "udp-to-mgmt-net 64B", Fields: udp("198.18.6.1", "192.0.2.77", 9999, 161, ip(64)), Frame: 64, PPS: 1e6, Vary: 16},
		{Name: "legit https 594B", Fields: tcp("198.19.0.1", "203.0.113.80", 50000, 443, rule.ACK, ip(594)), Frame: 594, PPS: 4e6, Vary: 256},
		{Name: "resolver 512B (allowed)", Fields: udp("198.18.53.53", "203.0.113.10", 53, 40000, ip(512)), Frame: 512, PPS: 0.5e6},
		{Name: "mgmt ssh (protected)", Fields: tcp("198.19.1.1", "192.0.2.1", 40022, 22, rule.ACK, ip(128)), Frame: 128, PPS: 0.02e6, Protected: true},
		{Name: "mgmt snmp (protected)", Fields: udp("198.19.1.2", "192.0.2.1", 40161, 161, ip(128)), Frame: 128, PPS: 0.02e6, Protected: true},
	}
}

// DemoRule is a built-in rule and when it arrives.
type DemoRule struct {
	After time.Duration
	YAML  string
}

// DemoRules are the rules `scrubd run --sim` adds, one by one. Some cannot
// go to hardware (packet length, SCTP ports, an accept rule's overlap) and
// one narrows around the protected management address.
func DemoRules() []DemoRule {
	return []DemoRule{
		{1 * time.Second, `{id: resolver-allow, priority: 10, action: accept, match: {src: 198.18.53.53/32, dst: 203.0.113.10/32, proto: udp, src_port: "53"}}`},
		{2 * time.Second, `{id: gre-bulk, action: drop, match: {dst: 203.0.113.60/32, proto: gre}}`},
		{3 * time.Second, `{id: ntp-amp, action: drop, match: {dst: 203.0.113.0/24, proto: udp, src_port: "123"}}`},
		{4 * time.Second, `{id: dns-amp, action: drop, match: {dst: 203.0.113.0/24, proto: udp, src_port: "53"}}`},
		{5 * time.Second, `{id: tiny-udp, action: drop, match: {dst: 198.51.100.0/24, proto: udp, length: "0-100"}}`},
		{6 * time.Second, `{id: sctp-flood, action: drop, match: {dst: 203.0.113.40/32, proto: sctp, dst_port: "9"}}`},
		{7 * time.Second, `{id: udp-mgmt-net, action: drop, match: {dst: 192.0.2.0/24, proto: udp}}`},
		{8 * time.Second, `{id: udp-flood, action: drop, match: {dst: 203.0.113.30/32, proto: udp, dst_port: "1000-2000"}}`},
		{10 * time.Second, `{id: syn-flood, action: drop, match: {dst: 203.0.113.20/32, proto: tcp, dst_port: "80", tcp_flags: {value: [syn], mask: [syn, ack]}}}`},
	}
}

// ParseDemo parses a demo rule.
func ParseDemo(d DemoRule, now time.Time) (rule.Rule, error) {
	r, err := rule.ParseRule("demo", []byte(d.YAML), now)
	if err != nil {
		return r, fmt.Errorf("demo rule: %w", err)
	}
	return r, nil
}
