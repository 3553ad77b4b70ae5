package api

import (
	"bytes"
	"fmt"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// ListRow is what `scrubd rules list` shows of a listed rule, read from a
// RuleInfo in JSON by Decode without reflection and without decoding the
// rest (the rule's match): at 100k rules a table is printed in a fraction
// of the time encoding/json takes.
//
// The byte slices point into the JSON given to Decode (or, for a string
// with escapes, into the row's own buffer): they are valid until that JSON
// is reused or Decode is called again.
type ListRow struct {
	ID, Source, Status, Reason, Path, Placement []byte
	HWPackets, SWPackets                        uint64
	PPS                                         float64
	buf                                         []byte
}

// Decode reads one RuleInfo in JSON into r, as json.Unmarshal would into a
// struct of these fields: the whole value is checked to be valid JSON,
// keys match case-insensitively (bytes.EqualFold), a later duplicate key
// wins, null leaves a field as it is, unknown keys are skipped, a value of
// the wrong type is an error, and a string's invalid UTF-8 becomes U+FFFD.
// The error names the byte offset and what was wrong.
func (r *ListRow) Decode(data []byte) error {
	*r = ListRow{buf: r.buf[:0]}
	// Strings with escapes are unquoted into buf; it must not move while
	// earlier fields point into it, so it is sized for the worst case
	// (an escape never decodes longer than it is written, and each byte of
	// invalid UTF-8 becomes 3 bytes).
	if need := 3 * len(data); cap(r.buf) < need {
		r.buf = make([]byte, 0, need)
	}
	d := jdec{b: data, buf: r.buf}
	d.ws()
	if d.lit("null") {
		d.ws()
	} else {
		if err := d.enter(0); err != nil {
			return err
		}
		for n := 0; ; {
			key, ok, err := d.member(&n)
			if err != nil {
				return err
			}
			if !ok {
				break
			}
			if err := r.topField(&d, key); err != nil {
				return err
			}
		}
	}
	if d.i < len(d.b) {
		return d.errf("unexpected %q after the rule's JSON object", d.b[d.i])
	}
	return nil
}

// listRowKeys are the top-level keys ListRow reads, in topField's order.
var listRowKeys = []string{"rule", "source", "status", "reason", "path", "placement_reason", "hw", "sw", "pps"}

func (r *ListRow) topField(d *jdec, key []byte) error {
	var dst *[]byte
	var k int
	switch string(key) { // the agent's spelling, without a loop
	case "rule":
		k = 0
	case "source":
		k = 1
	case "status":
		k = 2
	case "reason":
		k = 3
	case "path":
		k = 4
	case "placement_reason":
		k = 5
	case "hw":
		k = 6
	case "sw":
		k = 7
	case "pps":
		k = 8
	default:
		k = fieldOf(key, listRowKeys...)
	}
	switch k {
	case 0:
		if null, err := d.objectOrNull("rule"); null || err != nil {
			return err
		}
		for n := 0; ; {
			key, ok, err := d.member(&n)
			if err != nil || !ok {
				return err
			}
			if fieldOf(key, "id") == 0 {
				err = d.stringInto("rule.id", &r.ID)
			} else {
				err = d.skip(2)
			}
			if err != nil {
				return err
			}
		}
	case 1:
		dst = &r.Source
	case 2:
		dst = &r.Status
	case 3:
		dst = &r.Reason
	case 4:
		dst = &r.Path
	case 5:
		dst = &r.Placement
	case 6:
		return d.counter("hw", &r.HWPackets)
	case 7:
		return d.counter("sw", &r.SWPackets)
	case 8:
		lit, ok, err := d.number("pps")
		if err != nil || !ok {
			return err
		}
		f, perr := strconv.ParseFloat(string(lit), 64)
		if perr != nil {
			return d.errf("pps: %s out of range", lit)
		}
		r.PPS = f
		return nil
	default:
		return d.skip(1)
	}
	return d.stringInto(listRowKeys[k], dst)
}

// fieldOf is the index of the name key matches (exactly, or else as
// encoding/json does, case-insensitively), -1 for none.
func fieldOf(key []byte, names ...string) int {
	for i, n := range names {
		if string(key) == n {
			return i
		}
	}
	for i, n := range names {
		if bytes.EqualFold(key, []byte(n)) {
			return i
		}
	}
	return -1
}

// plainStr marks the bytes a string holds as they are: ASCII but for the
// controls, the quote and the backslash.
var plainStr = func() (t [256]bool) {
	for c := ' '; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// maxDepth is encoding/json's nesting limit.
const maxDepth = 10000

// jdec reads one JSON text held whole in b.
type jdec struct {
	b   []byte
	i   int
	buf []byte // unquoted strings; never grown past its capacity
}

func (d *jdec) errf(format string, a ...any) error {
	return fmt.Errorf("JSON at byte %d: %s", d.i, fmt.Sprintf(format, a...))
}

func (d *jdec) ws() {
	for d.i < len(d.b) {
		switch d.b[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return
		}
	}
}

// lit consumes the literal s if it is next.
func (d *jdec) lit(s string) bool {
	if bytes.HasPrefix(d.b[d.i:], []byte(s)) {
		d.i += len(s)
		return true
	}
	return false
}

func (d *jdec) peek() byte {
	if d.i < len(d.b) {
		return d.b[d.i]
	}
	return 0
}

func (d *jdec) unexpected(what string) error {
	if d.i >= len(d.b) {
		return d.errf("%s: the JSON ends early", what)
	}
	return d.errf("%s: unexpected %q", what, d.b[d.i])
}

// enter consumes an object's opening brace (at d.i) and the white space
// after it; member then reads its members one by one.
func (d *jdec) enter(depth int) error {
	if depth >= maxDepth {
		return d.errf("nested more than %d deep", maxDepth)
	}
	if d.peek() != '{' {
		return d.unexpected("want an object")
	}
	d.i++
	d.ws()
	return nil
}

// member reads the key of an object's next member, unquoted, and leaves d
// at its value (after white space): the value must be read before member
// is called again (n counts the members, from 0). At the object's end
// (its brace and the white space after it consumed) ok is false.
func (d *jdec) member(n *int) (key []byte, ok bool, err error) {
	if *n > 0 {
		switch d.peek() {
		case ',':
			d.i++
			d.ws()
		case '}':
			d.i++
			d.ws()
			return nil, false, nil
		default:
			return nil, false, d.unexpected("want ',' or '}' in an object")
		}
	} else if d.peek() == '}' {
		d.i++
		d.ws()
		return nil, false, nil
	}
	*n++
	if d.peek() != '"' {
		return nil, false, d.unexpected("want a key")
	}
	if key, err = d.str(); err != nil {
		return nil, false, err
	}
	d.ws()
	if d.peek() != ':' {
		return nil, false, d.unexpected("want ':' after a key")
	}
	d.i++
	d.ws()
	return key, true, nil
}

// objectOrNull reads null (which leaves the fields as they are) or enters
// an object.
func (d *jdec) objectOrNull(what string) (null bool, err error) {
	if d.lit("null") {
		d.ws()
		return true, nil
	}
	if d.peek() != '{' {
		if d.i < len(d.b) && d.validValue() {
			return false, d.errf("%s: want an object", what)
		}
		return false, d.unexpected(what)
	}
	return false, d.enter(1)
}

// validValue reports whether a valid value starts at d.i (for the error
// of a value of the wrong type, which is valid JSON but not wanted).
func (d *jdec) validValue() bool {
	save := d.i
	ok := d.skip(1) == nil
	d.i = save
	return ok
}

func (d *jdec) counter(what string, packets *uint64) error {
	if null, err := d.objectOrNull(what); null || err != nil {
		return err
	}
	for n := 0; ; {
		key, ok, err := d.member(&n)
		if err != nil || !ok {
			return err
		}
		k := fieldOf(key, "packets", "bytes")
		if k < 0 {
			if err := d.skip(2); err != nil {
				return err
			}
			continue
		}
		lit, ok, err := d.number(what)
		if err != nil {
			return err
		}
		if !ok {
			continue
		}
		c, perr := strconv.ParseUint(string(lit), 10, 64)
		if perr != nil {
			return d.errf("%s: %s is not a count", what, lit)
		}
		if k == 0 {
			*packets = c
		}
	}
}

// stringInto reads a string into *dst, or null (leaving *dst).
func (d *jdec) stringInto(what string, dst *[]byte) error {
	if d.lit("null") {
		d.ws()
		return nil
	}
	if d.peek() != '"' {
		if d.i < len(d.b) && d.validValue() {
			return d.errf("%s: want a string", what)
		}
		return d.unexpected(what)
	}
	s, err := d.str()
	if err != nil {
		return err
	}
	*dst = s
	d.ws()
	return nil
}

// number reads a number literal (ok) or null (not ok), and the white space
// after it.
func (d *jdec) number(what string) (lit []byte, ok bool, err error) {
	if d.lit("null") {
		d.ws()
		return nil, false, nil
	}
	start := d.i
	if !d.scanNumber() {
		d.i = start
		if d.i < len(d.b) && d.validValue() {
			return nil, false, d.errf("%s: want a number", what)
		}
		return nil, false, d.unexpected(what)
	}
	lit = d.b[start:d.i]
	d.ws()
	return lit, true, nil
}

// scanNumber consumes a number as JSON's grammar has it (RFC 8259 section 6).
func (d *jdec) scanNumber() bool {
	if d.peek() == '-' {
		d.i++
	}
	switch c := d.peek(); {
	case c == '0':
		d.i++
	case '1' <= c && c <= '9':
		for d.i++; isDigit(d.peek()); d.i++ {
		}
	default:
		return false
	}
	if d.peek() == '.' {
		d.i++
		if !isDigit(d.peek()) {
			return false
		}
		for d.i++; isDigit(d.peek()); d.i++ {
		}
	}
	if c := d.peek(); c == 'e' || c == 'E' {
		d.i++
		if c := d.peek(); c == '+' || c == '-' {
			d.i++
		}
		if !isDigit(d.peek()) {
			return false
		}
		for d.i++; isDigit(d.peek()); d.i++ {
		}
	}
	return true
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// skip consumes any value and the white space after it.
func (d *jdec) skip(depth int) error {
	switch c := d.peek(); {
	case c == '{':
		if err := d.enter(depth); err != nil {
			return err
		}
		for n := 0; ; {
			_, ok, err := d.member(&n)
			if err != nil || !ok {
				return err
			}
			if err := d.skip(depth + 1); err != nil {
				return err
			}
		}
	case c == '[':
		if depth >= maxDepth {
			return d.errf("nested more than %d deep", maxDepth)
		}
		d.i++
		d.ws()
		if d.peek() == ']' {
			d.i++
			d.ws()
			return nil
		}
		for {
			if err := d.skip(depth + 1); err != nil {
				return err
			}
			switch d.peek() {
			case ',':
				d.i++
				d.ws()
			case ']':
				d.i++
				d.ws()
				return nil
			default:
				return d.unexpected("want ',' or ']' in an array")
			}
		}
	case c == '"':
		if _, err := d.str(); err != nil {
			return err
		}
	case c == 't':
		if !d.lit("true") {
			return d.unexpected("want true")
		}
	case c == 'f':
		if !d.lit("false") {
			return d.unexpected("want false")
		}
	case c == 'n':
		if !d.lit("null") {
			return d.unexpected("want null")
		}
	default:
		start := d.i
		if !d.scanNumber() {
			d.i = start
			return d.unexpected("want a value")
		}
	}
	d.ws()
	return nil
}

// str reads a string at d.i and returns it unquoted as encoding/json does
// (short escapes, \uXXXX with surrogate pairs, a lone surrogate or invalid
// UTF-8 as U+FFFD): a slice of the input when it has neither, else of buf.
func (d *jdec) str() ([]byte, error) {
	d.i++ // the opening quote
	start := d.i
	for d.i < len(d.b) {
		for d.i < len(d.b) && plainStr[d.b[d.i]] {
			d.i++
		}
		if d.i == len(d.b) {
			break
		}
		c := d.b[d.i]
		switch {
		case c == '"':
			s := d.b[start:d.i]
			d.i++
			return s, nil
		case c == '\\':
			return d.strSlow(start)
		case c < ' ':
			return nil, d.errf("control character %q in a string", c)
		case c >= utf8.RuneSelf:
			if r, size := utf8.DecodeRune(d.b[d.i:]); r == utf8.RuneError && size == 1 {
				return d.strSlow(start)
			} else {
				d.i += size
			}
		default:
			d.i++
		}
	}
	return nil, d.errf("a string is not closed")
}

func (d *jdec) strSlow(start int) ([]byte, error) {
	out := append(d.buf, d.b[start:d.i]...)
	for d.i < len(d.b) {
		c := d.b[d.i]
		switch {
		case c == '"':
			d.i++
			d.buf = out[len(out):]
			return out[:len(out):len(out)], nil
		case c < ' ':
			return nil, d.errf("control character %q in a string", c)
		case c == '\\':
			if d.i+1 >= len(d.b) {
				return nil, d.errf("a string is not closed")
			}
			switch e := d.b[d.i+1]; e {
			case '"', '\\', '/':
				out = append(out, e)
			case 'b':
				out = append(out, '\b')
			case 'f':
				out = append(out, '\f')
			case 'n':
				out = append(out, '\n')
			case 'r':
				out = append(out, '\r')
			case 't':
				out = append(out, '\t')
			case 'u':
				r := hex4(d.b[d.i+2:])
				if r < 0 {
					return nil, d.errf("bad \\u escape in a string")
				}
				d.i += 6
				if utf16.IsSurrogate(r) {
					if r2 := hex4u(d.b[d.i:]); r2 >= 0 {
						if dec := utf16.DecodeRune(r, r2); dec != utf8.RuneError {
							d.i += 6
							out = utf8.AppendRune(out, dec)
							continue
						}
					}
					r = utf8.RuneError
				}
				out = utf8.AppendRune(out, r)
				continue
			default:
				return nil, d.errf("bad escape \\%c in a string", e)
			}
			d.i += 2
		case c < utf8.RuneSelf:
			out = append(out, c)
			d.i++
		default:
			r, size := utf8.DecodeRune(d.b[d.i:])
			out = utf8.AppendRune(out, r)
			d.i += size
		}
	}
	return nil, d.errf("a string is not closed")
}

// hex4 is the value of 4 hex digits at b's start, -1 if there are none.
func hex4(b []byte) rune {
	if len(b) < 4 {
		return -1
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return -1
		}
		r = r*16 + rune(c)
	}
	return r
}

// hex4u is hex4 of a "\uXXXX" at b's start.
func hex4u(b []byte) rune {
	if len(b) < 6 || b[0] != '\\' || b[1] != 'u' {
		return -1
	}
	return hex4(b[2:])
}

// AppendIndent appends the JSON text src to dst indented as
// json.Indent(dst, src, prefix, indent) indents it (white space before it
// dropped, after it kept), in one pass that also checks that src is one
// valid JSON value; on an error dst is returned as it was. At 100k rules
// it takes a fraction of json.Indent's time, which calls its scanner
// through a function value for every byte.
func AppendIndent(dst, src []byte, prefix, indent string) ([]byte, error) {
	d := jdec{b: src}
	d.ws()
	out, err := d.indent(dst, prefix, indent, 0)
	if err != nil {
		return dst, err
	}
	start := d.i
	d.ws()
	if d.i < len(d.b) {
		return dst, d.errf("unexpected %q after the JSON value", d.b[d.i])
	}
	return append(out, src[start:]...), nil
}

func newline(dst []byte, prefix, indent string, depth int) []byte {
	dst = append(dst, '\n')
	dst = append(dst, prefix...)
	for range depth {
		dst = append(dst, indent...)
	}
	return dst
}

// indent appends the value at d.i indented at depth, and leaves d after
// it (not after the white space that follows).
func (d *jdec) indent(dst []byte, prefix, indent string, depth int) ([]byte, error) {
	var err error
	switch c := d.peek(); c {
	case '{', '[':
		end := byte('}')
		if c == '[' {
			end = ']'
		}
		if depth >= maxDepth {
			return nil, d.errf("nested more than %d deep", maxDepth)
		}
		d.i++
		d.ws()
		if d.peek() == end {
			d.i++
			return append(dst, c, end), nil
		}
		dst = append(dst, c)
		for {
			dst = newline(dst, prefix, indent, depth+1)
			if c == '{' {
				if d.peek() != '"' {
					return nil, d.unexpected("want a key")
				}
				start := d.i
				if err := d.skipStr(); err != nil {
					return nil, err
				}
				dst = append(dst, d.b[start:d.i]...)
				d.ws()
				if d.peek() != ':' {
					return nil, d.unexpected("want ':' after a key")
				}
				d.i++
				d.ws()
				dst = append(dst, ':', ' ')
			}
			if dst, err = d.indent(dst, prefix, indent, depth+1); err != nil {
				return nil, err
			}
			d.ws()
			switch d.peek() {
			case ',':
				d.i++
				d.ws()
				dst = append(dst, ',')
			case end:
				d.i++
				return append(newline(dst, prefix, indent, depth), end), nil
			default:
				return nil, d.unexpected("want ',' or '" + string(end) + "'")
			}
		}
	case '"':
		start := d.i
		if err := d.skipStr(); err != nil {
			return nil, err
		}
		return append(dst, d.b[start:d.i]...), nil
	case 't', 'f', 'n':
		for _, lit := range [...]string{"true", "false", "null"} {
			if d.lit(lit) {
				return append(dst, lit...), nil
			}
		}
		return nil, d.unexpected("want a value")
	}
	start := d.i
	if !d.scanNumber() {
		d.i = start
		return nil, d.unexpected("want a value")
	}
	return append(dst, d.b[start:d.i]...), nil
}

// skipStr consumes a string at d.i, checking its escapes and that it has
// no control characters (any other bytes pass, as they pass json.Indent).
func (d *jdec) skipStr() error {
	d.i++
	for d.i < len(d.b) {
		switch c := d.b[d.i]; {
		case c == '"':
			d.i++
			return nil
		case c < ' ':
			return d.errf("control character %q in a string", c)
		case c == '\\':
			if d.i+1 >= len(d.b) {
				return d.errf("a string is not closed")
			}
			switch d.b[d.i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				d.i += 2
			case 'u':
				if hex4(d.b[d.i+2:]) < 0 {
					return d.errf("bad \\u escape in a string")
				}
				d.i += 6
			default:
				return d.errf("bad escape \\%c in a string", d.b[d.i+1])
			}
		default:
			d.i++
		}
	}
	return d.errf("a string is not closed")
}
