package compile

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/scrubd/scrubd/offload"
	"github.com/scrubd/scrubd/swpath/rule"
)

// DefaultMaxEntriesPerRule bounds the expansion of one rule.
const DefaultMaxEntriesPerRule = 256

// Config is what the compiler compiles for.
type Config struct {
	// Caps are the device's capabilities (only Keys matter here).
	Caps offload.Capabilities
	// Chain and the priorities of the IPv4 and IPv6 tables the entries go
	// to (tc allows one protocol per priority unless the filters use
	// protocol all with an EtherType key; the backend decides).
	Chain          uint32
	PrioV4, PrioV6 uint16
	// PassPrioV4 and PassPrioV6 are the priorities of the pass entries that
	// except an accept rule's packets from every drop (Pass); they must be
	// lower numbers than PrioV4 and PrioV6 so that tc consults them first.
	// 0: no pass entries.
	PassPrioV4, PassPrioV6 uint16
	// MaxEntriesPerRule bounds a rule's expansion; 0 means
	// DefaultMaxEntriesPerRule.
	MaxEntriesPerRule int
	// AddrLadder4 and AddrLadder6, when set, are the only address prefix
	// lengths entries use (ascending): a prefix of another length is split
	// into the prefixes of the next longer length on the ladder. Fewer
	// distinct lengths mean fewer mask shapes (flow groups) at the cost of
	// more entries. A prefix longer than the ladder's last length keeps its
	// own length.
	AddrLadder4, AddrLadder6 []int
}

// ladderPrefixes returns p as prefixes of lengths on the ladder.
func ladderPrefixes(p netip.Prefix, ladder []int) []netip.Prefix {
	if !p.IsValid() {
		return []netip.Prefix{p}
	}
	want := p.Bits()
	for _, l := range ladder {
		if l >= p.Bits() {
			want = l
			break
		}
	}
	if want == p.Bits() {
		return []netip.Prefix{p}
	}
	n := 1 << (want - p.Bits())
	out := make([]netip.Prefix, 0, n)
	a := p.Masked().Addr()
	for range n {
		out = append(out, netip.PrefixFrom(a, want))
		a = addAt(a, want)
	}
	return out
}

// addAt adds one unit of a /bitsN prefix to a (the next prefix of that
// length), with carry toward the top bytes.
func addAt(a netip.Addr, bitsN int) netip.Addr {
	b := a.AsSlice()
	i := (bitsN - 1) / 8
	carry := uint16(1) << (7 - (bitsN-1)%8)
	for ; i >= 0 && carry != 0; i-- {
		v := uint16(b[i]) + carry
		b[i], carry = byte(v), v>>8
	}
	r, _ := netip.AddrFromSlice(b)
	return r
}

// Reason says why a rule is not offloadable.
type Reason uint8

const (
	OK                   Reason = iota
	ReasonAccept                // accept (allow-list) rules stay in software
	ReasonLength                // packet length: no flower key
	ReasonFragment              // fragment condition flower or the device cannot express
	ReasonUnsupportedKey        // the device lacks a key the rule needs
	ReasonL4Zero                // an L4 condition that zeros (no L4 header) satisfy in hardware
	ReasonTooManyEntries        // expansion over MaxEntriesPerRule
	ReasonAllowList             // overlaps an accept rule that decides first
	ReasonNoPackets             // the rule matches no packet; nothing to install
)

var reasonNames = [...]string{"ok", "accept-rule", "packet-length", "fragment", "unsupported-key",
	"l4-zero", "too-many-entries", "allow-list-overlap", "no-packets"}

func (r Reason) String() string {
	if int(r) < len(reasonNames) {
		return reasonNames[r]
	}
	return fmt.Sprintf("reason(%d)", r)
}

// TableMask is a mask shape used in one table.
type TableMask struct {
	Table offload.Table
	Mask  offload.Mask
}

// Result is the compilation of one rule.
type Result struct {
	RuleID      string
	Offloadable bool
	Reason      Reason
	Detail      string       // human text for the reason, naming the field and value
	Missing     offload.Keys // keys the device lacks (ReasonUnsupportedKey, ReasonFragment)
	Entries     []offload.Entry
	Masks       []TableMask // distinct mask shapes the entries need
	// SplitBy lists the accept rules the entries were narrowed around
	// (CompileSet): the entries match exactly the rule's packets that none
	// of these accept rules match.
	SplitBy []string
}

func (r *Result) refuse(why Reason, missing offload.Keys, format string, a ...any) {
	r.Offloadable, r.Reason, r.Missing, r.Entries, r.Masks = false, why, missing, nil, nil
	r.Detail = fmt.Sprintf(format, a...)
}

// frag classes flower can tell apart
const (
	clsNot   = 1 << iota // offset 0, more-fragments clear
	clsFirst             // offset 0, more-fragments set
	clsLater             // offset != 0
)

type fragOpt struct {
	set     int          // classes matched
	entries []cube       // flags value/mask
	keys    offload.Keys // keys needed
}

var fragOpts = []fragOpt{
	{clsNot | clsFirst | clsLater, []cube{{0, 0}}, 0},
	{clsNot, []cube{{0, uint32(offload.FlagFrag)}}, offload.KeyFrag},
	{clsFirst | clsLater, []cube{{uint32(offload.FlagFrag), uint32(offload.FlagFrag)}}, offload.KeyFrag},
	{clsNot | clsLater, []cube{{0, uint32(offload.FlagFirstFrag)}}, offload.KeyFirstFrag},
	{clsFirst, []cube{{uint32(offload.FlagFrag | offload.FlagFirstFrag), uint32(offload.FlagFrag | offload.FlagFirstFrag)}}, offload.KeyFrag | offload.KeyFirstFrag},
	{clsLater, []cube{{uint32(offload.FlagFrag), uint32(offload.FlagFrag | offload.FlagFirstFrag)}}, offload.KeyFrag | offload.KeyFirstFrag},
	{clsNot | clsFirst, []cube{{0, uint32(offload.FlagFrag)}, {uint32(offload.FlagFrag | offload.FlagFirstFrag), uint32(offload.FlagFrag | offload.FlagFirstFrag)}}, offload.KeyFrag | offload.KeyFirstFrag},
	{0, nil, 0},
}

// fragCells returns, for family fam, the flower classes whose packets all
// satisfy the fragment condition f (req), those none of whose packets do
// (forbid), and whether a class is mixed (some do, some do not).
func fragClasses(f rule.Frag, fam rule.Family) (req, forbid, mixed int) {
	type cell struct {
		mf  bool
		off uint16
		cls int
	}
	cells := []cell{{false, 0, clsNot}, {true, 0, clsFirst}, {true, 8, clsLater}, {false, 8, clsLater}}
	dfs := []bool{false, true}
	if fam == rule.IPv6 {
		dfs = dfs[:1]
	}
	some, none := 0, 0
	for _, c := range cells {
		for _, df := range dfs {
			if f == 0 || f&rule.FragState(df, c.mf, c.off) != 0 {
				some |= c.cls
			} else {
				none |= c.cls
			}
		}
	}
	return some &^ none, none &^ some, some & none
}

func icmpProto(fam rule.Family) uint8 {
	if fam == rule.IPv4 {
		return rule.ProtoICMP
	}
	return rule.ProtoICMPv6
}

// protos returns the protocols entries of family fam must carry: nil for
// "no ip_proto key", an empty non-nil slice when no packet of fam matches.
func protos(m *rule.Match, fam rule.Family) []uint8 {
	var implied []uint8
	has := false
	narrow := func(set []uint8) {
		if !has {
			implied, has = set, true
			return
		}
		var out []uint8
		for _, p := range implied {
			for _, q := range set {
				if p == q {
					out = append(out, p)
				}
			}
		}
		implied = out
		if implied == nil {
			implied = []uint8{}
		}
	}
	if m.SrcPort != nil || m.DstPort != nil || m.Port != nil {
		narrow([]uint8{rule.ProtoTCP, rule.ProtoUDP, rule.ProtoSCTP})
	}
	if m.HasTCPFlags {
		narrow([]uint8{rule.ProtoTCP})
	}
	if m.ICMPType != nil || m.ICMPCode != nil {
		narrow([]uint8{icmpProto(fam)})
	}
	if m.Proto != nil {
		narrow(m.Proto)
	}
	if !has {
		return nil
	}
	return implied
}

// portPairs returns the (src, dst) port cubes whose union is exactly the
// port condition of m.
func portPairs(m *rule.Match) [][2]cube {
	const max = 0xffff
	s, d, p := norm(m.SrcPort, max), norm(m.DstPort, max), norm(m.Port, max)
	cross := func(a, b rule.Ranges) [][2]cube {
		if a != nil && len(a) == 0 || b != nil && len(b) == 0 {
			return nil
		}
		var out [][2]cube
		for _, x := range prefixes(a, 16) {
			for _, y := range prefixes(b, 16) {
				out = append(out, [2]cube{x, y})
			}
		}
		return out
	}
	if p == nil {
		return cross(s, d)
	}
	// (S∩P)×D ∪ S×(D∩P); overlap between the two halves is harmless (both
	// drop) but the disjoint forms are sometimes smaller: take the smallest.
	sp, dp := intersect(s, p), intersect(d, p)
	best := append(cross(sp, d), cross(s, dp)...)
	for _, c := range [][][2]cube{
		append(cross(sp, d), cross(subtract(s, sp, max), dp)...),
		append(cross(s, dp), cross(sp, subtract(d, dp, max))...),
	} {
		if len(c) < len(best) {
			best = c
		}
	}
	return best
}

func (c *Config) maxEntries() int {
	if c.MaxEntriesPerRule > 0 {
		return c.MaxEntriesPerRule
	}
	return DefaultMaxEntriesPerRule
}

// Rule compiles one rule on its own (no allow-list context; see CompileSet).
func Rule(cfg *Config, r *rule.Rule) Result {
	res := Result{RuleID: r.ID}
	m := &r.Match
	if r.Action != rule.Drop {
		res.refuse(ReasonAccept, 0, "rule %s: action %s is not a drop (an accept rule's hardware form is its pass entries: Pass)", r.ID, r.Action)
		return res
	}
	if m.Length != nil {
		res.refuse(ReasonLength, 0, "rule %s: length %s: flower has no packet-length key", r.ID, rangesString(m.Length))
		return res
	}
	entries, ok := compileParts(cfg, r, []rule.Match{r.Match}, &res)
	if !ok {
		return res
	}
	if len(entries) == 0 {
		res.refuse(ReasonNoPackets, 0, "rule %s: %s matches no packet", r.ID, m)
		return res
	}
	res.accept(r, entries)
	return res
}

// Pass compiles an accept rule into pass entries (offload.Entry.Pass) at
// PassPrioV4 and PassPrioV6: entries that match exactly the rule's packets
// and, consulted before the drop tables, keep every hardware drop from
// them. The compiler's limits are those of a drop rule (the same keys,
// fragments, L4-zero and entry bounds); a rule that cannot be expressed
// exactly gets no pass entries (Offloadable false, with the reason), and
// the drops that overlap it stay out of hardware.
func Pass(cfg *Config, r *rule.Rule) Result {
	if r.Action != rule.Accept {
		res := Result{RuleID: r.ID}
		res.refuse(ReasonAccept, 0, "rule %s: action %s: only accept rules get pass entries", r.ID, r.Action)
		return res
	}
	if cfg.PassPrioV4 == 0 || cfg.PassPrioV6 == 0 {
		res := Result{RuleID: r.ID}
		res.refuse(ReasonAccept, 0, "rule %s: no priority for pass entries is configured", r.ID)
		return res
	}
	c := *cfg
	c.PrioV4, c.PrioV6 = cfg.PassPrioV4, cfg.PassPrioV6
	d := *r
	d.Action = rule.Drop
	res := Rule(&c, &d)
	if !res.Offloadable {
		return res
	}
	rh := offload.RuleHash(r.ID, &r.Match)
	for i := range res.Entries {
		res.Entries[i].Pass = true
		res.Entries[i].SetCookie(rh)
	}
	return res
}

// compileParts compiles the union of parts (matches standing for r) into
// deduplicated entries.
func compileParts(cfg *Config, r *rule.Rule, parts []rule.Match, res *Result) ([]offload.Entry, bool) {
	limit := cfg.maxEntries()
	var entries []offload.Entry
	seen := map[offload.Entry]bool{}
	for pi := range parts {
		part := *r
		part.Match = parts[pi]
		fams := []rule.Family{rule.IPv4, rule.IPv6}
		if f := part.Match.Family(); f != rule.FamilyAny {
			fams = []rule.Family{f}
		}
		for _, fam := range fams {
			es, ok := compileFamily(cfg, &part, fam, limit-len(entries), res)
			if !ok {
				return nil, false
			}
			for _, e := range es {
				e.Match.Normalize()
				if !seen[e] {
					seen[e] = true
					entries = append(entries, e)
				}
			}
		}
	}
	return entries, true
}

// accept records entries as r's hardware form.
func (res *Result) accept(r *rule.Rule, entries []offload.Entry) {
	rh := offload.RuleHash(r.ID, &r.Match)
	res.Masks = nil
	seen := map[TableMask]bool{}
	for i := range entries {
		e := &entries[i]
		e.RuleID = r.ID
		e.SetCookie(rh)
		tm := TableMask{e.Table(), e.Match.Mask()}
		if !seen[tm] {
			seen[tm] = true
			res.Masks = append(res.Masks, tm)
		}
	}
	res.Offloadable, res.Reason, res.Detail, res.Entries = true, OK, "", entries
}

func rangesString(rs rule.Ranges) string {
	s := make([]string, len(rs))
	for i, r := range rs {
		s[i] = r.String()
	}
	return strings.Join(s, ",")
}

func compileFamily(cfg *Config, r *rule.Rule, fam rule.Family, budget int, res *Result) ([]offload.Entry, bool) {
	m := &r.Match
	keys := cfg.Caps.Keys
	// fragment classes
	req, forbid, mixed := fragClasses(m.Fragment, fam)
	if m.NeedsL4() {
		// Later fragments have no L4 header: the rule never matches them
		// and no emitted entry does (ZeroL4 entries are refused below).
		req, forbid, mixed = req&^clsLater, forbid&^clsLater, mixed&^clsLater
	}
	if mixed != 0 {
		res.refuse(ReasonFragment, 0, "rule %s: fragment %s: flower's frag/firstfrag bits cannot express it (no dont-fragment or last-fragment key)", r.ID, m.Fragment)
		return nil, false
	}
	var frag *fragOpt
	var needKeys offload.Keys
	for i := range fragOpts {
		o := &fragOpts[i]
		if o.set&req != req || o.set&forbid != 0 {
			continue
		}
		needKeys |= o.keys
		if keys.Has(o.keys) && (frag == nil || len(o.entries) < len(frag.entries)) {
			frag = o
		}
	}
	if frag == nil {
		res.refuse(ReasonFragment, needKeys&^keys, "rule %s: fragment %s needs ip_flags keys the device lacks (%s)", r.ID, m.Fragment, (needKeys &^ keys))
		return nil, false
	}
	if len(frag.entries) == 0 {
		return nil, true // no packet of this family matches
	}
	ps := protos(m, fam)
	if ps != nil && len(ps) == 0 {
		return nil, true
	}
	ladder := cfg.AddrLadder4
	if fam == rule.IPv6 {
		ladder = cfg.AddrLadder6
	}
	var addrs []offload.Match
	for _, sp := range ladderPrefixes(m.Src, ladder) {
		for _, dp := range ladderPrefixes(m.Dst, ladder) {
			a := offload.Match{Family: fam}
			if sp.IsValid() {
				a.Src, a.SrcMask = rule.PrefixAddr(sp)
			}
			if dp.IsValid() {
				a.Dst, a.DstMask = rule.PrefixAddr(dp)
			}
			addrs = append(addrs, a)
			if len(addrs) > budget {
				res.refuse(ReasonTooManyEntries, 0, "rule %s: address ladder needs more than the %d entries allowed per rule", r.ID, cfg.maxEntries())
				return nil, false
			}
		}
	}
	dscp := []cube{{0, 0}}
	if m.DSCP != 0 {
		dscp = coverSet(m.DSCP, 6)
	}
	ports := [][2]cube{{{0, 0}, {0, 0}}}
	if m.SrcPort != nil || m.DstPort != nil || m.Port != nil {
		ports = portPairs(m)
	}
	types, codes := []cube{{0, 0}}, []cube{{0, 0}}
	if m.ICMPType != nil {
		types = prefixes(norm(m.ICMPType, 255), 8)
	}
	if m.ICMPCode != nil {
		codes = prefixes(norm(m.ICMPCode, 255), 8)
	}
	protoList := []int{-1}
	if ps != nil {
		protoList = protoList[:0]
		for _, p := range ps {
			protoList = append(protoList, int(p))
		}
	}
	// count before expanding
	n := uint64(len(frag.entries)) * uint64(len(dscp)) * uint64(len(protoList)) * uint64(len(addrs))
	perProto := uint64(1)
	if m.ICMPType != nil || m.ICMPCode != nil {
		perProto *= uint64(len(types)) * uint64(len(codes))
	}
	perProto *= uint64(len(ports))
	if n*perProto > uint64(budget) {
		res.refuse(ReasonTooManyEntries, 0, "rule %s: needs %d entries, more than the %d allowed per rule", r.ID, n*perProto, cfg.maxEntries())
		return nil, false
	}
	prio := cfg.PrioV4
	if fam == rule.IPv6 {
		prio = cfg.PrioV6
	}
	var out []offload.Entry
	for _, addr := range addrs {
		for _, p := range protoList {
			base := addr
			if p >= 0 {
				base.HasProto, base.Proto = true, uint8(p)
			}
			l4 := []offload.Match{base}
			if m.SrcPort != nil || m.DstPort != nil || m.Port != nil {
				l4 = l4[:0]
				for _, pp := range ports {
					e := base
					e.SrcPort, e.SrcPortMask = uint16(pp[0].v), uint16(pp[0].m)
					e.DstPort, e.DstPortMask = uint16(pp[1].v), uint16(pp[1].m)
					l4 = append(l4, e)
				}
			}
			if m.HasTCPFlags {
				for i := range l4 {
					l4[i].TCPFlags, l4[i].TCPFlagsMask = m.TCPFlags.Value, m.TCPFlags.Mask
				}
			}
			if m.ICMPType != nil || m.ICMPCode != nil {
				var x []offload.Match
				for _, e := range l4 {
					for _, t := range types {
						for _, c := range codes {
							e.ICMPType, e.ICMPTypeMask = uint8(t.v), uint8(t.m)
							e.ICMPCode, e.ICMPCodeMask = uint8(c.v), uint8(c.m)
							x = append(x, e)
						}
					}
				}
				l4 = x
			}
			for _, e := range l4 {
				for _, d := range dscp {
					for _, f := range frag.entries {
						e.TOS, e.TOSMask = uint8(d.v<<2), uint8(d.m<<2)
						e.Flags, e.FlagsMask = uint8(f.v), uint8(f.m)
						e.Normalize()
						if m.NeedsL4() && e.ZeroL4() {
							res.refuse(ReasonL4Zero, 0, "rule %s: %s: in hardware, packets without an L4 header (later fragments, short headers) read as zeros and would match entry %q",
								r.ID, m, e.String())
							return nil, false
						}
						if err := cfg.Caps.Check(&e); err != nil {
							var missing offload.Keys
							if ee, ok := err.(*offload.EntryError); ok {
								missing = ee.Missing
							}
							res.refuse(ReasonUnsupportedKey, missing, "rule %s: entry %q: %s", r.ID, e.String(), errText(err))
							return nil, false
						}
						out = append(out, offload.Entry{Chain: cfg.Chain, Prio: prio, Match: e})
					}
				}
			}
		}
	}
	return out, true
}

func errText(err error) string {
	if ee, ok := err.(*offload.EntryError); ok && ee.Extack != "" {
		return ee.Extack
	}
	return err.Error()
}

// Set compiles every rule of s, in order. A drop rule that overlaps an
// accept rule deciding before it is split around it exactly when
// subtractAccept can (SplitBy names the accept rules), and otherwise kept
// in software (ReasonAllowList): hardware only holds drop entries, and must
// never drop a packet the allow-list passes.
func Set(cfg *Config, s *rule.Set) []Result {
	out := make([]Result, len(s.Rules))
	for i := range s.Rules {
		out[i] = Rule(cfg, &s.Rules[i])
	}
	var accepts []int
	for j := range s.Rules {
		if s.Rules[j].Action == rule.Accept {
			accepts = append(accepts, j)
		}
	}
	for i := range s.Rules {
		if !out[i].Offloadable {
			continue
		}
		d := &s.Rules[i]
		parts := []rule.Match{d.Match}
		var by []string
		for _, j := range accepts {
			a := &s.Rules[j]
			if !rule.Before(a, s.Key(j), d, s.Key(i)) || !Overlap(&a.Match, &d.Match) {
				continue
			}
			var next []rule.Match
			for k := range parts {
				ms, ok := subtractAccept(&parts[k], &a.Match)
				if !ok {
					out[i].refuse(ReasonAllowList, 0, "rule %s overlaps accept rule %s (priority %d), which decides first, and cannot be split around it exactly", d.ID, a.ID, a.Priority)
					break
				}
				next = append(next, ms...)
			}
			if !out[i].Offloadable {
				break
			}
			parts = next
			by = append(by, a.ID)
		}
		if !out[i].Offloadable || len(by) == 0 {
			continue
		}
		entries, ok := compileParts(cfg, d, parts, &out[i])
		switch {
		case !ok:
			out[i].refuse(ReasonAllowList, out[i].Missing, "rule %s split around accept rules %v: %s", d.ID, by, out[i].Detail)
		case len(entries) == 0:
			out[i].refuse(ReasonAllowList, 0, "rule %s lies entirely inside accept rules %v, which decide first", d.ID, by)
		default:
			out[i].accept(d, entries)
			out[i].SplitBy = by
		}
	}
	return out
}
