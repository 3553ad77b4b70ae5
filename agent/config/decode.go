package config

import (
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// yamlError turns the decoder's errors into *Errors that name the key by
// its full path (software.ghz, flowspec.neighbors[0].asn) and say what the
// key wants: yaml.v3 reports only a line and Go types ("line 5: cannot
// unmarshal !!str `fast` into float64"), so the key is found again in the
// document's node tree by that line.
func yamlError(file string, data []byte, err error) error {
	var ce *Error
	if errors.As(err, &ce) {
		e := *ce
		e.File = file
		return &e
	}
	var te *yaml.TypeError
	if !errors.As(err, &te) {
		return &Error{File: file, Msg: "not valid YAML: " + err.Error()}
	}
	var doc yaml.Node
	if yaml.Unmarshal(data, &doc) != nil {
		doc = yaml.Node{}
	}
	var errs []error
	for _, m := range te.Errors {
		errs = append(errs, decodeError(file, &doc, m))
	}
	return errors.Join(errs...)
}

var (
	reLine     = regexp.MustCompile(`^line (\d+): (.*)$`)
	reType     = regexp.MustCompile("^cannot unmarshal (!!\\w+)(?: `(.*)`)? into (.+)$")
	reUnknown  = regexp.MustCompile(`^field (\S+) not found in type \S+$`)
	reRepeated = regexp.MustCompile(`^mapping key "(.*)" already defined at line (\d+)$`)
)

// decodeError is one of the decoder's messages as an *Error.
func decodeError(file string, doc *yaml.Node, m string) *Error {
	e := &Error{File: file, Msg: m}
	sm := reLine.FindStringSubmatch(m)
	if sm == nil {
		return e
	}
	e.Line, _ = strconv.Atoi(sm[1])
	e.Msg = sm[2]
	if tm := reType.FindStringSubmatch(e.Msg); tm != nil {
		tag, short, goType := tm[1], tm[2], tm[3]
		path, n := findValue(doc, e.Line, tag, short)
		if n == nil {
			return e
		}
		e.Field = path
		e.Msg = fmt.Sprintf("want %s, got %s", want(goType), got(n))
		return e
	}
	if um := reUnknown.FindStringSubmatch(e.Msg); um != nil {
		e.Field, e.Msg = um[1], "unknown key"
		if path := findKey(doc, e.Line, um[1]); path != "" {
			e.Field = path
		}
		if k := nearestKey(e.Field); k != "" {
			e.Msg += "; did you mean " + k + "?"
		}
		return e
	}
	if rm := reRepeated.FindStringSubmatch(e.Msg); rm != nil {
		e.Field, e.Msg = rm[1], "repeated key (first on line "+rm[2]+")"
		if path := findKey(doc, e.Line, rm[1]); path != "" {
			e.Field = path
		}
	}
	return e
}

// walk calls visit for every value in the tree under n with its key path;
// key is nil for a list item.
func walk(n *yaml.Node, path string, visit func(path string, key, val *yaml.Node)) {
	switch n.Kind {
	case yaml.DocumentNode:
		for _, c := range n.Content {
			walk(c, path, visit)
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			p := k.Value
			if path != "" {
				p = path + "." + k.Value
			}
			visit(p, k, v)
			walk(v, p, visit)
		}
	case yaml.SequenceNode:
		for i, v := range n.Content {
			p := path + "[" + strconv.Itoa(i) + "]"
			visit(p, nil, v)
			walk(v, p, visit)
		}
	}
}

// findValue finds the value the decoder refused: on line, of the tag's
// kind, and (for a scalar) with the value it quoted, which it cuts to 7
// bytes and "..." when longer than 10.
func findValue(doc *yaml.Node, line int, tag, short string) (string, *yaml.Node) {
	var path string
	var found *yaml.Node
	walk(doc, "", func(p string, _, v *yaml.Node) {
		if found != nil || v.Line != line {
			return
		}
		switch tag {
		case "!!map":
			if v.Kind != yaml.MappingNode {
				return
			}
		case "!!seq":
			if v.Kind != yaml.SequenceNode {
				return
			}
		default:
			if v.Kind != yaml.ScalarNode || cut(v.Value) != short {
				return
			}
		}
		path, found = p, v
	})
	return path, found
}

// cut is the decoder's shortening of a value in its messages.
func cut(s string) string {
	if len(s) > 10 {
		return s[:7] + "..."
	}
	return s
}

// findKey is the path of the key named name on line.
func findKey(doc *yaml.Node, line int, name string) string {
	var path string
	walk(doc, "", func(p string, k, _ *yaml.Node) {
		if path == "" && k != nil && k.Line == line && k.Value == name {
			path = p
		}
	})
	return path
}

// want says in words what a Go type takes in YAML.
func want(goType string) string {
	t := strings.TrimLeft(goType, "*")
	switch {
	case t == "float64" || t == "float32":
		return "a number"
	case strings.HasPrefix(t, "int") || strings.HasPrefix(t, "uint"):
		return "a whole number"
	case t == "bool":
		return "true or false"
	case t == "string":
		return "a string"
	case t == "time.Duration":
		return "a duration such as 500ms, 2s or 5m"
	case strings.HasPrefix(t, "[]"):
		return "a list"
	case strings.HasPrefix(t, "map["), strings.HasPrefix(t, "config."):
		return "a mapping"
	}
	return t
}

// got says what the document holds.
func got(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	}
	return strconv.Quote(n.Value)
}

// nearestKey is the key of the config that path's last element most likely
// misspells (at most two edits away, in the same mapping), or "".
func nearestKey(path string) string {
	t := reflect.TypeOf(Config{})
	parts := strings.Split(path, ".")
	for _, p := range parts[:len(parts)-1] {
		p, _, _ = strings.Cut(p, "[")
		f, ok := fieldByKey(t, p)
		if !ok {
			return ""
		}
		t = f.Type
		for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice {
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct {
			return ""
		}
	}
	typo := parts[len(parts)-1]
	best, bestD := "", 3
	for i := 0; i < t.NumField(); i++ {
		k := yamlKey(t.Field(i))
		if k == "" {
			continue
		}
		if d := editDistance(typo, k); d < bestD {
			best, bestD = k, d
		}
	}
	return best
}

func yamlKey(f reflect.StructField) string {
	k, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
	if k == "-" {
		return ""
	}
	return k
}

func fieldByKey(t reflect.Type, key string) (reflect.StructField, bool) {
	for i := 0; i < t.NumField(); i++ {
		if yamlKey(t.Field(i)) == key {
			return t.Field(i), true
		}
	}
	return reflect.StructField{}, false
}

// editDistance is the Levenshtein distance between a and b (bytes).
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			c := prev[j-1]
			if a[i-1] != b[j-1] {
				c++
			}
			cur[j] = min(c, prev[j]+1, cur[j-1]+1)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
