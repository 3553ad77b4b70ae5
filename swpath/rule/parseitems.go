package rule

import (
	"bytes"
	"context"
	"time"

	"go.yaml.in/yaml/v3"
)

// itemsPerChunk is how many list items parseItems hands yaml at once.
const itemsPerChunk = 512

// parseItems parses a rule file of the plain shape (a "rules:" line at the
// top, then block list items at one indentation, each item's lines
// indented deeper) a chunk of items at a time, so that the YAML node tree
// of a few hundred rules is in memory at once instead of that of the whole
// file: 100k rules as one node tree take over 500 MB and seconds of
// garbage collection. The rules and errors are those of Parse: each chunk
// is the original lines, so lines and columns are the file's once the
// chunk's first line is added. ok is false when the file is not of that
// shape (anchors, aliases, tags, block scalars, flow lists, other keys, a
// chunk yaml refuses): Parse then reads it whole, with its messages.
//
// It stops between chunks once ctx is done (ok true, ctx's error).
func parseItems(ctx context.Context, name string, data []byte, now time.Time) (set *Set, ok bool, err error) {
	if bytes.ContainsAny(data, "&*!|>%\t\r") || bytes.Contains(data, []byte("---")) || bytes.Contains(data, []byte("...")) {
		return nil, false, nil
	}
	lines := bytes.SplitAfter(data, []byte("\n"))
	skip := func(l []byte) bool {
		t := bytes.TrimLeft(l, " ")
		return len(bytes.TrimSpace(t)) == 0 || t[0] == '#'
	}
	i := 0
	for i < len(lines) && skip(lines[i]) {
		i++
	}
	if i == len(lines) || string(bytes.TrimRight(lines[i], " \n")) != "rules:" {
		return nil, false, nil
	}
	i++
	// Item starts: lines at the first item's indentation beginning "- ".
	indent := -1
	var starts []int
	for j := i; j < len(lines); j++ {
		l := lines[j]
		if skip(l) {
			continue
		}
		n := len(l) - len(bytes.TrimLeft(l, " "))
		isItem := n < len(l) && l[n] == '-' && n+1 < len(l) && (l[n+1] == ' ' || l[n+1] == '\n')
		if indent < 0 {
			if !isItem || n == 0 {
				return nil, false, nil
			}
			indent = n
		}
		switch {
		case n == indent && isItem:
			starts = append(starts, j)
		case n <= indent:
			return nil, false, nil // another key, or a list at another depth
		}
	}
	if len(starts) == 0 {
		return nil, false, nil
	}
	p := &parser{file: name, now: now}
	set = &Set{Rules: make([]Rule, 0, len(starts))}
	seen := make(map[string]int, len(starts))
	for c := 0; c < len(starts); c += itemsPerChunk {
		if err := ctx.Err(); err != nil {
			return nil, true, err
		}
		from := starts[c]
		to := len(lines)
		if c+itemsPerChunk < len(starts) {
			to = starts[c+itemsPerChunk]
		}
		var doc yaml.Node
		if yaml.Unmarshal(bytes.Join(lines[from:to], nil), &doc) != nil || len(doc.Content) != 1 ||
			doc.Content[0].Kind != yaml.SequenceNode {
			return nil, false, nil
		}
		shiftLines(doc.Content[0], from)
		p.rules(doc.Content[0].Content, set, seen)
	}
	if len(p.errs) > 0 {
		return nil, true, p.err()
	}
	return set, true, nil
}

// shiftLines adds off to the line of n and every node under it.
func shiftLines(n *yaml.Node, off int) {
	n.Line += off
	for _, c := range n.Content {
		shiftLines(c, off)
	}
}
