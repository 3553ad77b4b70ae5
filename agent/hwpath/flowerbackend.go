package hwpath

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/scrubd/scrubd/offload"
	"github.com/scrubd/scrubd/offload/nlerr"
	"github.com/scrubd/scrubd/offload/tcflower"
	"github.com/scrubd/scrubd/swpath/rule"
)

// FlowerClient is the part of *tcflower.Client the backend uses.
type FlowerClient interface {
	Batch(ops []tcflower.Op, o tcflower.BatchOptions) []tcflower.Result
	Dump(q tcflower.DumpQuery) ([]tcflower.Filter, error)
	EnsureQdisc(ifindex int) (tcflower.QdiscState, error)
}

var _ FlowerClient = (*tcflower.Client)(nil)

// FlowerConfig configures a FlowerBackend.
type FlowerConfig struct {
	Client  FlowerClient
	Ifindex int
	Dev     string // device name for errors
	// Caps are the device's capabilities (probed by the caller); KeySCTPPorts
	// is removed since tcflower does not encode SCTP ports.
	Caps offload.Capabilities
	// Flags: tcflower.SkipSW for hardware, tcflower.SkipHW for software
	// flower (lab, tests). tcflower.Verbose may be added.
	Flags tcflower.Flags
	// ProtocolAll installs every filter with protocol ETH_P_ALL.
	ProtocolAll bool
	// Now is the clock for LastUsed; time.Now when nil.
	Now func() time.Time
	// Counters reads the device's own drop counters by name (ethtool -S's
	// names; NICCounters). Nil: the backend reports none.
	Counters func(ctx context.Context) (map[string]uint64, error)
}

// FlowerBackend implements offload.Backend over tc flower
// (offload/tcflower): each offload.Entry becomes one flower filter on the
// ingress hook of a device with a gact drop action carrying the entry's
// 16-byte cookie, in the entry's chain and priority.
//
// Production uses skip_sw (the hardware takes the filter or the install
// fails with the driver's extack, which maps to offload.KindUnsupported or
// KindNoSpace); the kernel lab and tests use skip_hw (software flower).
// Install makes sure the device has an ingress qdisc first (clsact is
// created when missing, an existing one is never deleted), so the backend
// recovers when OVS deletes the qdisc on restart.
//
// Counters: with skip_hw the filter's total counters are reported, else
// the hardware part (TCA_STATS_BASIC_HW). LastUsed comes from the gact
// action's lastuse age (USER_HZ ticks, 100 per second).
//
// The filter protocol is ETH_P_IP or ETH_P_IPV6 by the entry's family, or
// ETH_P_ALL when FlowerConfig.ProtocolAll is set (one priority for both
// families; the EtherType key is always set). Entries need ip_proto != 0
// when they match a protocol (flower cannot match ip_proto 0), and SCTP
// ports are not encoded by tcflower: Capabilities never includes them.
//
// It is safe for concurrent use.
type FlowerBackend struct {
	cfg FlowerConfig
}

var _ offload.Backend = (*FlowerBackend)(nil)

// NewFlowerBackend returns a FlowerBackend.
func NewFlowerBackend(cfg FlowerConfig) *FlowerBackend {
	cfg.Caps.Keys &^= offload.KeySCTPPorts
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Dev == "" {
		cfg.Dev = fmt.Sprintf("ifindex %d", cfg.Ifindex)
	}
	return &FlowerBackend{cfg: cfg}
}

// NICCounters returns the device's drop counters (FlowerConfig.Counters),
// or none when no reader is configured.
func (b *FlowerBackend) NICCounters(ctx context.Context) (map[string]uint64, error) {
	if b.cfg.Counters == nil {
		return nil, nil
	}
	return b.cfg.Counters(ctx)
}

// Capabilities returns the configured capabilities.
func (b *FlowerBackend) Capabilities(ctx context.Context) (offload.Capabilities, error) {
	return b.cfg.Caps, ctx.Err()
}

func ethType(f rule.Family) uint16 {
	if f == rule.IPv6 {
		return tcflower.ProtoIPv6
	}
	return tcflower.ProtoIPv4
}

func addrMask(fam rule.Family, a, m rule.Addr) tcflower.AddrMask {
	if m == (rule.Addr{}) {
		return tcflower.AddrMask{}
	}
	return tcflower.AddrMask{Addr: a.Netip(fam), Mask: m.Netip(fam)}
}

// ToFilter converts an entry to the flower filter the backend installs.
func (b *FlowerBackend) ToFilter(e *offload.Entry) (tcflower.Filter, error) {
	m := e.Match
	m.Normalize()
	if m.Family != rule.IPv4 && m.Family != rule.IPv6 {
		return tcflower.Filter{}, fmt.Errorf("entry %s: family %d is not IP", e.Cookie, m.Family)
	}
	if m.HasProto && m.Proto == 0 {
		return tcflower.Filter{}, fmt.Errorf("entry %s: flower cannot match ip_proto 0", e.Cookie)
	}
	f := tcflower.Filter{
		Ifindex: b.cfg.Ifindex, Chain: e.Chain, Prio: e.Prio, Handle: e.Handle,
		Protocol: ethType(m.Family), Flags: b.cfg.Flags,
		Actions: []tcflower.Action{tcflower.Drop(append([]byte(nil), e.Cookie[:]...))},
	}
	if e.Pass {
		f.Actions[0].Verdict = tcflower.ActOK
	}
	if b.cfg.ProtocolAll {
		f.Protocol = tcflower.ProtoAll
	}
	k := &f.Key
	k.EthType = ethType(m.Family)
	if m.HasProto {
		k.IPProto = m.Proto
	}
	k.Src = addrMask(m.Family, m.Src, m.SrcMask)
	k.Dst = addrMask(m.Family, m.Dst, m.DstMask)
	k.SrcPort = tcflower.PortMask{Port: m.SrcPort, Mask: m.SrcPortMask}
	k.DstPort = tcflower.PortMask{Port: m.DstPort, Mask: m.DstPortMask}
	k.TCPFlags, k.TCPFlagsMask = uint16(m.TCPFlags), uint16(m.TCPFlagsMask)
	k.IPFlags, k.IPFlagsMask = uint32(m.Flags), uint32(m.FlagsMask)
	k.TOS, k.TOSMask = m.TOS, m.TOSMask
	k.ICMPType, k.ICMPTypeMask = m.ICMPType, m.ICMPTypeMask
	k.ICMPCode, k.ICMPCodeMask = m.ICMPCode, m.ICMPCodeMask
	return f, nil
}

// FromFilter converts a dumped flower filter back to an entry. ok is false
// for a filter that is not an IP drop or pass filter expressible as an entry
// (VLAN keys, other actions, TCP flags beyond 8 bits...); such filters are
// still reported by Dump, with a zero Match, so that nobody removes them.
func FromFilter(f *tcflower.Filter) (e offload.Entry, ok bool) {
	e = offload.Entry{Chain: f.Chain, Prio: f.Prio, Handle: f.Handle}
	if len(f.Actions) > 0 && len(f.Actions[0].Cookie) == len(e.Cookie) {
		copy(e.Cookie[:], f.Actions[0].Cookie)
	}
	k := &f.Key
	var m offload.Match
	switch k.EthType {
	case tcflower.ProtoIPv4:
		m.Family = rule.IPv4
	case tcflower.ProtoIPv6:
		m.Family = rule.IPv6
	default:
		return e, false
	}
	if len(f.Actions) != 1 || f.Actions[0].Kind != "gact" ||
		f.Actions[0].Verdict != tcflower.ActShot && f.Actions[0].Verdict != tcflower.ActOK ||
		k.VLAN != (tcflower.VLANKey{}) || k.TCPFlagsMask > 0xff || k.IPFlagsMask > 3 {
		return e, false
	}
	e.Pass = f.Actions[0].Verdict == tcflower.ActOK
	if k.IPProto != 0 {
		m.HasProto, m.Proto = true, k.IPProto
	}
	conv := func(a tcflower.AddrMask) (rule.Addr, rule.Addr, bool) {
		if !a.Set() {
			return rule.Addr{}, rule.Addr{}, true
		}
		if a.Addr.Is4() != (m.Family == rule.IPv4) {
			return rule.Addr{}, rule.Addr{}, false
		}
		return rule.AddrFrom(a.Addr), rule.AddrFrom(a.Mask), true
	}
	var ok1, ok2 bool
	m.Src, m.SrcMask, ok1 = conv(k.Src)
	m.Dst, m.DstMask, ok2 = conv(k.Dst)
	if !ok1 || !ok2 {
		return e, false
	}
	m.SrcPort, m.SrcPortMask = k.SrcPort.Port, k.SrcPort.Mask
	m.DstPort, m.DstPortMask = k.DstPort.Port, k.DstPort.Mask
	m.TCPFlags, m.TCPFlagsMask = uint8(k.TCPFlags), uint8(k.TCPFlagsMask)
	m.Flags, m.FlagsMask = uint8(k.IPFlags), uint8(k.IPFlagsMask)
	m.TOS, m.TOSMask = k.TOS, k.TOSMask
	m.ICMPType, m.ICMPTypeMask = k.ICMPType, k.ICMPTypeMask
	m.ICMPCode, m.ICMPCodeMask = k.ICMPCode, k.ICMPCodeMask
	e.Match = m
	return e, true
}

// mapErr turns a tcflower result error into an *offload.EntryError that
// keeps the errno and extack.
func (b *FlowerBackend) mapErr(op string, e *offload.Entry, err error) error {
	if err == nil {
		return nil
	}
	kind := offload.KindOther
	switch {
	case nlerr.IsDeviceGone(err):
		kind = offload.KindDeviceGone
	case nlerr.IsNoSpace(err):
		kind = offload.KindNoSpace
	case nlerr.IsExists(err):
		kind = offload.KindExists
	case nlerr.IsNotFound(err):
		kind = offload.KindNotFound
	case nlerr.IsUnsupported(err):
		kind = offload.KindUnsupported
	}
	out := &offload.EntryError{Op: op, Dev: b.cfg.Dev, Kind: kind, Err: err}
	if e != nil {
		out.Entry = fmt.Sprintf("%s chain %d prio %d [%s]", e.Cookie, e.Chain, e.Prio, e.Match.String())
	}
	var ne *nlerr.Error
	if errors.As(err, &ne) {
		out.Errno, out.Extack = ne.Errno, ne.Extack
	}
	return out
}

// Install adds entries in one batch (many requests per sendmsg), after
// making sure the ingress qdisc exists.
func (b *FlowerBackend) Install(ctx context.Context, es []offload.Entry) ([]offload.Result, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if _, err := b.cfg.Client.EnsureQdisc(b.cfg.Ifindex); err != nil {
		return nil, b.mapErr("install", nil, err)
	}
	res := make([]offload.Result, len(es))
	ops := make([]tcflower.Op, 0, len(es))
	idx := make([]int, 0, len(es))
	for i := range es {
		f, err := b.ToFilter(&es[i])
		if err != nil {
			res[i].Err = &offload.EntryError{Op: "install", Dev: b.cfg.Dev, Entry: es[i].Cookie.String(), Kind: offload.KindUnsupported, Err: err}
			continue
		}
		ops = append(ops, tcflower.Op{Kind: tcflower.OpAdd, Filter: f})
		idx = append(idx, i)
	}
	out := b.cfg.Client.Batch(ops, tcflower.BatchOptions{Echo: true})
	for j, r := range out {
		i := idx[j]
		res[i].Handle = r.Filter.Handle
		res[i].Err = b.mapErr("install", &es[i], r.Err)
	}
	return res, nil
}

// Remove deletes entries by chain, priority and handle; an entry without a
// handle is looked up by cookie in a dump first.
func (b *FlowerBackend) Remove(ctx context.Context, es []offload.Entry) ([]offload.Result, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	res := make([]offload.Result, len(es))
	type key struct {
		t offload.Table
		c offload.Cookie
	}
	var byCookie map[key]uint32
	ops := make([]tcflower.Op, 0, len(es))
	idx := make([]int, 0, len(es))
	for i := range es {
		e := es[i]
		if e.Handle == 0 {
			if byCookie == nil {
				d, err := b.Dump(ctx)
				if err != nil {
					return nil, err
				}
				byCookie = map[key]uint32{}
				for _, x := range d {
					byCookie[key{x.Table(), x.Cookie}] = x.Handle
				}
			}
			h, ok := byCookie[key{e.Table(), e.Cookie}]
			if !ok {
				res[i].Err = offload.NewError("remove", b.cfg.Dev, e.Cookie.String(), offload.KindNotFound, "no filter with this cookie in its table")
				continue
			}
			e.Handle = h
		}
		f, err := b.ToFilter(&e)
		if err != nil {
			// a foreign filter we could not convert is never ours to remove
			res[i].Err = &offload.EntryError{Op: "remove", Dev: b.cfg.Dev, Entry: e.Cookie.String(), Kind: offload.KindOther, Err: err}
			continue
		}
		ops = append(ops, tcflower.Op{Kind: tcflower.OpDelete, Filter: f})
		idx = append(idx, i)
	}
	out := b.cfg.Client.Batch(ops, tcflower.BatchOptions{})
	for j, r := range out {
		i := idx[j]
		res[i].Handle = ops[j].Filter.Handle
		res[i].Err = b.mapErr("remove", &es[i], r.Err)
	}
	return res, nil
}

func (b *FlowerBackend) dump(ctx context.Context, terse bool) ([]tcflower.Filter, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	fs, err := b.cfg.Client.Dump(tcflower.DumpQuery{Ifindex: b.cfg.Ifindex, AllChain: true, Terse: terse})
	if err != nil {
		return nil, b.mapErr("dump", nil, err)
	}
	return fs, nil
}

// Dump reads back every flower filter on the device's ingress hook.
func (b *FlowerBackend) Dump(ctx context.Context) ([]offload.Installed, error) {
	fs, err := b.dump(ctx, false)
	if err != nil {
		return nil, err
	}
	out := make([]offload.Installed, 0, len(fs))
	for i := range fs {
		e, _ := FromFilter(&fs[i])
		out = append(out, offload.Installed{Entry: e, InHW: fs[i].Flags&tcflower.InHW != 0,
			NotInHW: fs[i].Flags&tcflower.NotInHW != 0, InHWCount: fs[i].InHWCount})
	}
	return out, nil
}

// userHZ is the clock_t rate of tcf_t ages (USER_HZ on x86-64 and arm64).
const userHZ = 100

// Stats reads every filter's counters with a terse dump.
func (b *FlowerBackend) Stats(ctx context.Context) ([]offload.Stats, error) {
	fs, err := b.dump(ctx, true)
	if err != nil {
		return nil, err
	}
	now := b.cfg.Now()
	out := make([]offload.Stats, 0, len(fs))
	for i := range fs {
		f := &fs[i]
		st := offload.Stats{Table: offload.Table{Chain: f.Chain, Prio: f.Prio}, Handle: f.Handle}
		if len(f.Actions) > 0 {
			a := &f.Actions[0]
			if len(a.Cookie) == len(st.Cookie) {
				copy(st.Cookie[:], a.Cookie)
			}
			st.Packets, st.Bytes = a.Stats.HWPackets, a.Stats.HWBytes
			if b.cfg.Flags&tcflower.SkipHW != 0 {
				st.Packets, st.Bytes = a.Stats.Packets, a.Stats.Bytes
			}
			if st.Packets > 0 {
				st.LastUsed = now.Add(-time.Duration(a.Times.LastUse) * time.Second / userHZ)
			}
		}
		out = append(out, st)
	}
	return out, nil
}
