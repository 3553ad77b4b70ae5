package daemon

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/scrubd/scrubd/swpath/rule"
)

// A source's state is its file (a snapshot: every rule in force, written
// whole) and, beside it, a journal (NAME.journal) of the changes since:
// one line per rule stored ("+ " and the rule as JSON) or removed ("- "
// and the id, quoted), appended and synced before the change is answered.
// A change then writes what it touches: an API add beside 100k API rules
// wrote all 100k (260 ms and 82 MB of garbage a change), now one line.
// The journal is folded into a new snapshot once it holds more lines than
// the snapshot holds rules (and journalMinLines), so replaying it costs
// no more than reading the snapshot, and a whole write is paid for by as
// many changes as it writes rules: amortized, a rule a change. The same design as a database's write-ahead log
// with checkpoints, e.g. the SQLite documentation's "Write-Ahead Logging".
//
// Each snapshot carries a generation, a random number written in its
// header; a journal names the generation it follows and is read only after
// that snapshot: a crash between a new snapshot's rename and the old
// journal's removal leaves a journal that is ignored, never replayed over
// rules it predates. A line cut short by a crash (no newline) was never
// synced, so never answered: it is ignored.

// journalMinLines is the journal length below which it is never folded.
const journalMinLines = 1024

// journalHeader starts every journal: the source, quoted, and the
// generation of the snapshot it follows.
const journalHeader = "# scrubd journal of source "

// generationPrefix starts the snapshot's line that holds its generation.
const generationPrefix = "# generation "

// newGeneration returns a snapshot generation.
func newGeneration() string { return strconv.FormatUint(rand.Uint64(), 16) }

// journalPath is the journal beside source file path.
func journalPath(path string) string { return path + ".journal" }

// appendRule appends to b prefix, rule r as JSON (its Spec: what a rule
// file says) and a newline: a line of a snapshot or a journal.
func appendRule(b []byte, prefix string, r *rule.Rule) ([]byte, error) {
	js, err := json.Marshal(r.Spec())
	if err != nil {
		return b, err
	}
	b = append(b, prefix...)
	b = append(b, js...)
	return append(b, '\n'), nil
}

// journalPut appends to b the journal line of rule r stored.
func journalPut(b []byte, r *rule.Rule) ([]byte, error) { return appendRule(b, "+ ", r) }

// journalDel appends to b the journal line of rule id removed.
func journalDel(b []byte, id string) []byte {
	b = append(b, "- "...)
	b = strconv.AppendQuote(b, id)
	return append(b, '\n')
}

// appendJournal appends lines to the journal at path, first writing its
// header when new is set (the journal is created or truncated then), and
// syncs it. A journal that is not new must exist: one that went (the
// state directory cleaned under the agent) is not created again without
// its header, which would make every line after it unread; the error
// satisfies os.IsNotExist and the caller writes the source whole.
func appendJournal(path, src, gen string, lines []byte, new bool) error {
	flags := os.O_WRONLY | os.O_APPEND
	if new {
		flags |= os.O_CREATE | os.O_TRUNC
	}
	f, err := os.OpenFile(path, flags, 0o640)
	if err != nil {
		return err
	}
	if new {
		lines = append([]byte(journalHeader+strconv.Quote(src)+" generation "+gen+"\n"), lines...)
	}
	if _, err := f.Write(lines); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// snapshotGeneration returns the generation in a snapshot's header (its
// first lines), or "" for a snapshot written before journals.
func snapshotGeneration(data []byte) string {
	for range 4 {
		line, rest, _ := bytes.Cut(data, []byte("\n"))
		if g, ok := bytes.CutPrefix(line, []byte(generationPrefix)); ok {
			return string(g)
		}
		data = rest
	}
	return ""
}

// JournalError says a journal line is not a change: the journal is moved
// aside and the snapshot's rules load without it.
type JournalError struct {
	Path string
	Line int
	Err  error
}

func (e *JournalError) Error() string {
	return fmt.Sprintf("%s: line %d: %v", e.Path, e.Line, e.Err)
}

func (e *JournalError) Unwrap() error { return e.Err }

// replayJournal applies the journal at path (of source src) to rules, the
// snapshot's, when it follows generation gen: a rule stored replaces the
// rule with its id in place or, new, goes after the others; a rule
// removed leaves. A journal of another generation or source, or none, is
// no change. The last line without a newline is ignored. A line that is
// not a change stops the replay: the rules with the lines before it
// applied come back with a *JournalError.
func replayJournal(path, src, gen string, rules []rule.Rule, now time.Time) ([]rule.Rule, error) {
	data, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return rules, nil
	}
	if err != nil {
		return rules, err
	}
	head, body, ok := bytes.Cut(data, []byte("\n"))
	if !ok || gen == "" || string(head) != journalHeader+strconv.Quote(src)+" generation "+gen {
		return rules, nil // an older snapshot's, or cut short in its header
	}
	if i := bytes.LastIndexByte(body, '\n'); i+1 < len(body) {
		body = body[:i+1] // a line cut short: never synced
	}
	rules = slices.Clone(rules)
	at := make(map[string]int, len(rules))
	for i := range rules {
		at[rules[i].ID] = i
	}
	gone := make([]bool, len(rules))
	var bad error
	for ln := 2; len(body) > 0 && bad == nil; ln++ {
		var line []byte
		line, body, _ = bytes.Cut(body, []byte("\n"))
		switch {
		case bytes.HasPrefix(line, []byte("+ ")):
			set, err := rule.Parse(fmt.Sprintf("%s:%d", path, ln), append([]byte("rules:\n  - "), line[2:]...), now)
			switch {
			case err != nil:
				bad = &JournalError{path, ln, err}
			case len(set.Rules) != 1:
				bad = &JournalError{path, ln, fmt.Errorf("%d rules on a line", len(set.Rules))}
			default:
				r := set.Rules[0]
				if i, ok := at[r.ID]; ok {
					rules[i] = r
					continue
				}
				at[r.ID] = len(rules)
				rules = append(rules, r)
				gone = append(gone, false)
			}
		case bytes.HasPrefix(line, []byte("- ")):
			id, err := strconv.Unquote(string(line[2:]))
			if err != nil {
				bad = &JournalError{path, ln, fmt.Errorf("removal %s: %w", line[2:], err)}
				continue
			}
			if i, ok := at[id]; ok {
				gone[i] = true
				delete(at, id)
			}
		default:
			bad = &JournalError{path, ln, fmt.Errorf("not a change: %q", strings.TrimSpace(string(line)))}
		}
	}
	out := rules[:0]
	for i := range rules {
		if !gone[i] {
			out = append(out, rules[i])
		}
	}
	return out, bad
}
