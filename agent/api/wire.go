package api

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/scrubd/scrubd/agent/placement"
	"github.com/scrubd/scrubd/agent/store"
	"github.com/scrubd/scrubd/swpath/rule"
)

// The list's wire form is written by hand, without reflection: at 100k
// rules encoding/json's reflection was most of the agent's time per list.
// appendRuleInfo writes exactly what json.Marshal writes for a RuleInfo
// (field order, omitempty, HTML-safe escaping, ES6 number form), so the
// JSON a client reads does not depend on which encoder wrote it; the tests
// hold the two side by side.

// appendRuleInfo appends ri as compact JSON, byte for byte json.Marshal's.
// A non-finite float (which encoding/json refuses) is written as null,
// which decoders read as 0.
func appendRuleInfo(b []byte, ri *RuleInfo) []byte {
	b = append(b, `{"rule":`...)
	b = appendSpec(b, &ri.Rule)
	b = append(b, `,"source":`...)
	b = appendString(b, ri.Source)
	b = append(b, `,"status":`...)
	b = appendString(b, ri.Status)
	if ri.Reason != "" {
		b = append(b, `,"reason":`...)
		b = appendString(b, ri.Reason)
	}
	b = append(b, `,"path":`...)
	b = appendString(b, ri.Path)
	if ri.Placement != "" {
		b = append(b, `,"placement_reason":`...)
		b = appendString(b, ri.Placement)
	}
	b = append(b, `,"hw":`...)
	b = appendCounter(b, ri.HW)
	b = append(b, `,"sw":`...)
	b = appendCounter(b, ri.SW)
	b = append(b, `,"pps":`...)
	b = appendFloat(b, ri.PPS)
	b = append(b, `,"avg_frame_bytes":`...)
	b = appendFloat(b, ri.AvgFrame)
	b = append(b, `,"moves":`...)
	b = strconv.AppendUint(b, ri.Moves, 10)
	if ri.StaleAt != "" {
		b = append(b, `,"stale_at":`...)
		b = appendString(b, ri.StaleAt)
	}
	return append(b, '}')
}

func appendCounter(b []byte, c Counter) []byte {
	b = append(b, `{"packets":`...)
	b = strconv.AppendUint(b, c.Packets, 10)
	b = append(b, `,"bytes":`...)
	b = strconv.AppendUint(b, c.Bytes, 10)
	return append(b, '}')
}

func appendSpec(b []byte, s *rule.Spec) []byte {
	b = append(b, `{"id":`...)
	b = appendString(b, s.ID)
	b = append(b, `,"priority":`...)
	b = strconv.AppendUint(b, uint64(s.Priority), 10)
	b = append(b, `,"action":`...)
	b = appendString(b, s.Action)
	if s.Expires != "" {
		b = append(b, `,"expires":`...)
		b = appendString(b, s.Expires)
	}
	b = append(b, `,"match":`...)
	b = appendMatch(b, &s.Match)
	return append(b, '}')
}

// appendMatch writes rule.MatchSpec as its MarshalJSON does: "all" for a
// match-all, else the mapping with its empty fields left out.
func appendMatch(b []byte, m *rule.MatchSpec) []byte {
	if m.All {
		return appendString(b, rule.MatchAllName)
	}
	b = append(b, '{')
	n := len(b)
	key := func(b []byte, k string) []byte {
		if len(b) > n {
			b = append(b, ',')
		}
		b = append(b, '"')
		b = append(b, k...)
		return append(b, '"', ':')
	}
	if m.Src != "" {
		b = appendString(key(b, "src"), m.Src)
	}
	if m.Dst != "" {
		b = appendString(key(b, "dst"), m.Dst)
	}
	for _, f := range [...]struct {
		k string
		v []string
	}{{"proto", m.Proto}, {"src_port", m.SrcPort}, {"dst_port", m.DstPort}, {"port", m.Port}, {"icmp_type", m.ICMPType}, {"icmp_code", m.ICMPCode}} {
		if len(f.v) > 0 {
			b = appendStrings(key(b, f.k), f.v)
		}
	}
	if m.TCPFlags != nil {
		b = append(key(b, "tcp_flags"), `{"value":`...)
		b = appendStrings(b, m.TCPFlags.Value)
		b = append(b, `,"mask":`...)
		b = appendStrings(b, m.TCPFlags.Mask)
		b = append(b, '}')
	}
	if len(m.Fragment) > 0 {
		b = appendStrings(key(b, "fragment"), m.Fragment)
	}
	if len(m.Length) > 0 {
		b = appendStrings(key(b, "length"), m.Length)
	}
	if len(m.DSCP) > 0 {
		b = append(key(b, "dscp"), '[')
		for i, d := range m.DSCP {
			if i > 0 {
				b = append(b, ',')
			}
			b = strconv.AppendInt(b, int64(d), 10)
		}
		b = append(b, ']')
	}
	return append(b, '}')
}

// appendStrings writes a []string as encoding/json does: null when nil.
func appendStrings(b []byte, v []string) []byte {
	if v == nil {
		return append(b, "null"...)
	}
	b = append(b, '[')
	for i, s := range v {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, s)
	}
	return append(b, ']')
}

// appendFloat writes f as encoding/json writes a float64 (ECMAScript's
// number to string: plain decimal from 1e-6 to 1e21, else an exponent
// without leading zeros).
func appendFloat(b []byte, f float64) []byte {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return append(b, "null"...)
	}
	abs := math.Abs(f)
	format := byte('f')
	if abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b
}

const hexDigits = "0123456789abcdef"

// jsonSafe marks the ASCII bytes written as they are inside a JSON string
// by encoding/json with HTML escaping (its default): not the controls, the
// quote, the backslash, '<', '>' or '&'.
var jsonSafe = func() (t [utf8.RuneSelf]bool) {
	for c := ' '; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\' && c != '<' && c != '>' && c != '&'
	}
	return t
}()

// appendString writes s as a JSON string as encoding/json does: the short
// escapes, \u00XX for the other controls and for <, > and &, \ufffd for
// each byte of invalid UTF-8, \u2028 and \u2029 escaped.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if jsonSafe[c] {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '\\', '"':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// Widths are the widths in characters (runes) of the widest value of each
// column of `scrubd rules list` in one list reply: the rule id, source,
// status and path as text, the hardware and software packet counts in
// decimal, and the rate in packets per second rounded to an integer (as
// %.0f prints it). The reason, the table's last column, needs none.
type Widths struct {
	ID, Source, Status, Path, HWPackets, SWPackets, PPS int
}

// widthKeys name the fields of Widths in its String form, in order.
var widthKeys = [...]string{"id", "source", "status", "path", "hw_packets", "sw_packets", "pps"}

func (w *Widths) fields() [7]*int {
	return [7]*int{&w.ID, &w.Source, &w.Status, &w.Path, &w.HWPackets, &w.SWPackets, &w.PPS}
}

// String is the header's form: "id=N,source=N,status=N,path=N,
// hw_packets=N,sw_packets=N,pps=N".
func (w Widths) String() string {
	var b []byte
	for i, f := range w.fields() {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, widthKeys[i]...)
		b = append(b, '=')
		b = strconv.AppendInt(b, int64(*f), 10)
	}
	return string(b)
}

// ParseWidths reads Widths' String form; every field is required, once.
func ParseWidths(s string) (Widths, error) {
	var w Widths
	fs := w.fields()
	var seen [len(widthKeys)]bool
	for part := range strings.SplitSeq(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		i := slices.Index(widthKeys[:], k)
		if !ok || i < 0 || seen[i] {
			return Widths{}, fmt.Errorf("list widths %q: %q is not one of %s=N, once each", s, part, strings.Join(widthKeys[:], ", "))
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return Widths{}, fmt.Errorf("list widths %q: %s=%q is not a width", s, k, v)
		}
		*fs[i], seen[i] = n, true
	}
	for i, ok := range seen {
		if !ok {
			return Widths{}, fmt.Errorf("list widths %q: %s is missing", s, widthKeys[i])
		}
	}
	return w, nil
}

// add widens w to hold the row of e placed as rv (as summaryOf shows it).
func (w *Widths) add(e *store.Entry, rv *placement.RuleView) {
	path, hw, sw, pps := string(placement.None), uint64(0), uint64(0), 0.0
	if rv != nil && e.InForce() {
		path, hw, sw, pps = string(rv.Path), rv.HW.Packets, rv.SW.Packets, rv.PPS
	}
	w.grow(utf8.RuneCountInString(e.Rule.ID), utf8.RuneCountInString(e.Source), utf8.RuneCountInString(string(e.Status)),
		utf8.RuneCountInString(path), hw, sw, pps)
}

// AddRow widens w to hold r's values.
func (w *Widths) AddRow(r *ListRow) {
	w.grow(utf8.RuneCount(r.ID), utf8.RuneCount(r.Source), utf8.RuneCount(r.Status), utf8.RuneCount(r.Path),
		r.HWPackets, r.SWPackets, r.PPS)
}

func (w *Widths) grow(id, source, status, path int, hw, sw uint64, pps float64) {
	w.ID = max(w.ID, id)
	w.Source = max(w.Source, source)
	w.Status = max(w.Status, status)
	w.Path = max(w.Path, path)
	w.HWPackets = max(w.HWPackets, digits(hw))
	w.SWPackets = max(w.SWPackets, digits(sw))
	if pps == 0 && !math.Signbit(pps) {
		w.PPS = max(w.PPS, 1) // most rules: no traffic
	} else {
		var tmp [32]byte
		w.PPS = max(w.PPS, len(strconv.AppendFloat(tmp[:0], pps, 'f', 0, 64)))
	}
}

// digits is the number of decimal digits of n.
func digits(n uint64) int {
	d := 1
	for ; n >= 10; n /= 10 {
		d++
	}
	return d
}
