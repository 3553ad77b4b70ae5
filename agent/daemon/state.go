package daemon

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/scrubd/scrubd/agent/store"
	"github.com/scrubd/scrubd/swpath/rule"
)

// State is what the agent keeps across restarts: the rules that have no
// other home (API rules) and the rules FlowSpec peers had sent, so a restart
// never drops enforcement while sessions come back.
type State struct {
	Version int                    `json:"version"`
	Saved   time.Time              `json:"saved"`
	Sources map[string][]rule.Spec `json:"sources"`
}

// StateFile is the state file's name inside state_dir.
const StateFile = "state.json"

// persisted: API rules (no other home), FlowSpec rules (held while sessions
// return) and the last good content of each rule file (a file found bad at
// start keeps the rules that were in force).
func persisted(src string) bool {
	return src == "api" || src == "bgp" || strings.HasPrefix(src, "bgp:") || strings.HasPrefix(src, "file:")
}

// SourcesDir is the folder, inside state_dir, of the state: one file per
// persisted source, each a rule file (the plain shape rule.Parse reads a
// chunk at a time) whose first line names its source. A change rewrites
// its own source's file only: an API add at 100k file rules writes the API
// rules, not 100k. StateFile, the whole state in one JSON file, is the
// older layout: it is still read, and removed once the sources are saved.
const SourcesDir = "sources"

// sourceHeader starts every source file: the source, quoted (Go syntax).
const sourceHeader = "# scrubd state of source "

// sourceFile is the file name of source src: its safe characters, then a
// hash of the whole name (two sources never share a file).
func sourceFile(src string) string {
	safe := []byte(src)
	for i, c := range safe {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '-') {
			safe[i] = '_'
		}
	}
	if len(safe) > 64 {
		safe = safe[len(safe)-64:]
	}
	h := sha256.Sum256([]byte(src))
	return fmt.Sprintf("%s-%x.yaml", safe, h[:6])
}

// writeSource writes one source's rules in force to its file atomically
// (temp file, fsync, rename), one rule per line as it goes, with snapshot
// generation gen, and removes the journal of the file it replaces.
func writeSource(dir, src string, rs []*rule.Rule, now time.Time, gen string) error {
	path := filepath.Join(dir, sourceFile(src))
	tmp, err := os.CreateTemp(dir, ".source-*.yaml")
	if err != nil {
		return err
	}
	fail := func(err error) error {
		tmp.Close()
		os.Remove(tmp.Name())
		return err
	}
	w := bufio.NewWriterSize(tmp, 64<<10)
	fmt.Fprintf(w, "%s%s\n# saved %s\n%s%s\nrules:\n", sourceHeader, strconv.Quote(src), now.UTC().Format(time.RFC3339Nano), generationPrefix, gen)
	var line []byte
	for _, r := range rs {
		var err error
		if line, err = appendRule(line[:0], "  - ", r); err != nil {
			return fail(err)
		}
		w.Write(line)
	}
	if len(rs) == 0 { // nothing in force: no file
		if err := fail(nil); err != nil {
			return err
		}
		if err := os.Remove(path); err != nil && !os.IsNotExist(err) {
			return err
		}
		return removeJournal(path)
	}
	if err := w.Flush(); err != nil {
		return fail(err)
	}
	if err := tmp.Sync(); err != nil {
		return fail(err)
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	// The old journal is the old generation's: ignored from here on even
	// if it stays (a crash now), removed so it takes no room.
	return removeJournal(path)
}

// removeJournal removes the journal of source file path, if any.
func removeJournal(path string) error {
	if err := os.Remove(journalPath(path)); err != nil && !os.IsNotExist(err) {
		return err
	}
	return nil
}

// StateSaver saves the persisted sources of a store, each in its own
// file. Its first save writes every persisted source whole, removes files
// of sources the store no longer holds and the older whole-state file.
// From then on it appends the changes since its last save to each changed
// source's journal (store.SourceChanges): one line a rule touched. A
// source is written whole again when its journal grows past the rules of
// its snapshot (and journalMinLines), when a rule comes back in force at
// a place before the last one saved (the journal only appends or
// replaces), when the store's log no longer reaches back to the last
// save, after a failed save, and when its snapshot or journal was removed
// under it (a journal alone restores nothing). It is safe for concurrent
// use (the API persists on its handlers, the saver on a tick).
type StateSaver struct {
	dir string
	st  *store.Store
	now func() time.Time

	mu sync.Mutex
	// ver is the store version the files hold at least (later changes
	// may be in some: replaying them again is no change); srcs is, per
	// persisted source with a file, what the saver knows of it. Both
	// are valid while ok; a failed write clears ok, and the next save
	// writes every source whole.
	ok   bool
	ver  uint64
	srcs map[string]*savedSource
	// journaled and whole count the sources saved each way, failed the
	// saves that returned an error (SaverStats).
	journaled, whole, failed uint64
}

// SaverStats counts what a StateSaver wrote: sources whose changes were
// appended to their journal, sources written whole (a snapshot), and
// saves that failed (the disk full, the directory gone: the changes stay
// in the store, and the next save writes every source whole).
type SaverStats struct {
	Journaled, Whole, Failed uint64
}

// Stats returns what s has written so far.
func (s *StateSaver) Stats() SaverStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return SaverStats{Journaled: s.journaled, Whole: s.whole, Failed: s.failed}
}

// savedSource is what a source's file and journal hold.
type savedSource struct {
	path string
	gen  string
	// seqs are the places (store order) of the rules in the file and
	// journal, ascending: what tells a change in place from an append.
	seqs []uint64
	// snap is how many rules the snapshot holds, lines how many lines
	// the journal does.
	snap, lines int
}

// NewStateSaver returns a saver of st's persisted sources into dir.
func NewStateSaver(dir string, st *store.Store, now func() time.Time) *StateSaver {
	return &StateSaver{dir: dir, st: st, now: now}
}

// Save writes what changed since the last Save.
func (s *StateSaver) Save() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	sdir := filepath.Join(s.dir, SourcesDir)
	if err := os.MkdirAll(sdir, 0o750); err != nil {
		s.ok = false
		s.failed++
		return err
	}
	if err := s.save(sdir); err != nil {
		s.ok = false
		s.failed++
		return err
	}
	return nil
}

func (s *StateSaver) save(sdir string) error {
	now := s.now()
	if s.ok {
		if c, ok := s.st.SourceChanges(s.ver); ok {
			if err := s.journal(sdir, c, now); err != nil {
				return err
			}
			s.ver = c.Version
			return nil
		}
	}
	// Every source whole: the first save, after a failed one, or the
	// store's log does not reach back to the last.
	ver := s.st.Version()
	s.srcs = map[string]*savedSource{}
	keep := map[string]bool{}
	for src := range s.st.SourceVersions() {
		if !persisted(src) {
			continue
		}
		keep[sourceFile(src)] = true
		if err := s.writeWhole(sdir, src, now); err != nil {
			return err
		}
	}
	if err := cleanState(s.dir, keep); err != nil {
		return err
	}
	s.ok, s.ver = true, ver
	return nil
}

// writeWhole writes source src whole and records it.
func (s *StateSaver) writeWhole(sdir, src string, now time.Time) error {
	rules, seqs, _ := s.st.SourceState(src)
	gen := newGeneration()
	if err := writeSource(sdir, src, rules, now, gen); err != nil {
		return fmt.Errorf("state: source %s: %w", src, err)
	}
	if len(rules) == 0 {
		delete(s.srcs, src) // no file (writeSource removed it)
		return nil
	}
	s.whole++
	s.srcs[src] = &savedSource{path: filepath.Join(sdir, sourceFile(src)), gen: gen, seqs: seqs, snap: len(rules)}
	return nil
}

// journal writes the changes c: per source, its lines appended to its
// journal, or the source whole where a journal cannot say them.
func (s *StateSaver) journal(sdir string, c store.SourceChanges, now time.Time) error {
	lines := map[string][]byte{}
	whole := map[string]bool{}
	for _, g := range c.Gone {
		ss := s.srcs[g.Source]
		if !persisted(g.Source) || ss == nil {
			continue // not saved, or no file: nothing to take out
		}
		if i, ok := slices.BinarySearch(ss.seqs, g.Seq); ok {
			ss.seqs = slices.Delete(ss.seqs, i, i+1)
			lines[g.Source] = journalDel(lines[g.Source], g.ID)
		}
	}
	for _, p := range c.Now {
		if !persisted(p.Source) || whole[p.Source] {
			continue
		}
		ss := s.srcs[p.Source]
		if ss == nil {
			whole[p.Source] = true // a new file
			continue
		}
		i, in := slices.BinarySearch(ss.seqs, p.Seq)
		if !in && i < len(ss.seqs) {
			whole[p.Source] = true // back in force before the last rule saved
			continue
		}
		b, err := journalPut(lines[p.Source], p.Rule)
		if err != nil {
			return fmt.Errorf("state: source %s: rule %s: %w", p.Source, p.ID, err)
		}
		lines[p.Source] = b
		if !in {
			ss.seqs = append(ss.seqs, p.Seq)
		}
	}
	for src, b := range lines {
		ss := s.srcs[src]
		n := bytes.Count(b, []byte("\n"))
		switch {
		case whole[src]:
		case len(ss.seqs) == 0:
			whole[src] = true // nothing in force: no file
		case ss.lines+n > max(journalMinLines, ss.snap):
			whole[src] = true // folded into a new snapshot
		case !exists(ss.path):
			// The snapshot went (the state directory cleaned under the
			// agent): a journal alone restores nothing.
			whole[src] = true
		default:
			err := appendJournal(journalPath(ss.path), src, ss.gen, b, ss.lines == 0)
			if os.IsNotExist(err) {
				whole[src] = true // the journal went: see appendJournal
				continue
			}
			if err != nil {
				return fmt.Errorf("state: source %s: %w", src, err)
			}
			ss.lines += n
			s.journaled++
		}
	}
	for src := range whole {
		if err := s.writeWhole(sdir, src, now); err != nil {
			return err
		}
	}
	return nil
}

// exists reports whether a file is at path.
func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// cleanState removes the source files not in keep, with their journals,
// and the older whole-state file, once every source in keep is saved.
func cleanState(dir string, keep map[string]bool) error {
	sdir := filepath.Join(dir, SourcesDir)
	names, err := os.ReadDir(sdir)
	if err != nil {
		return err
	}
	for _, n := range names {
		base, _ := strings.CutSuffix(n.Name(), ".journal")
		if strings.HasSuffix(base, ".yaml") && !keep[base] {
			if err := os.Remove(filepath.Join(sdir, n.Name())); err != nil {
				return err
			}
		}
	}
	if err := os.Remove(filepath.Join(dir, StateFile)); err != nil && !os.IsNotExist(err) {
		return err
	}
	return nil
}

// SaveState writes every persisted source of snap, each to its file, and
// removes the files of sources snap lacks and the older whole-state file.
func SaveState(dir string, snap store.Snapshot, now time.Time) error {
	sdir := filepath.Join(dir, SourcesDir)
	if err := os.MkdirAll(sdir, 0o750); err != nil {
		return err
	}
	bySrc := map[string][]*rule.Rule{}
	for i := range snap.Entries {
		e := &snap.Entries[i]
		if persisted(e.Source) {
			if _, ok := bySrc[e.Source]; !ok {
				bySrc[e.Source] = nil // a source with nothing in force: no file
			}
			if e.InForce() {
				bySrc[e.Source] = append(bySrc[e.Source], &e.Rule)
			}
		}
	}
	keep := map[string]bool{}
	for src, rs := range bySrc {
		keep[sourceFile(src)] = true
		if err := writeSource(sdir, src, rs, now, newGeneration()); err != nil {
			return fmt.Errorf("state: source %s: %w", src, err)
		}
	}
	return cleanState(dir, keep)
}

// CorruptStateError says the state file was not state (not JSON, or cut
// short) and where it was moved: the agent starts from its sources (rule
// files, FlowSpec peers) and the file is kept for inspection.
type CorruptStateError struct {
	Path    string
	MovedTo string
	Err     error
}

func (e *CorruptStateError) Error() string {
	return fmt.Sprintf("state file %s is corrupt (%v); moved aside to %s", e.Path, e.Err, e.MovedTo)
}

func (e *CorruptStateError) Unwrap() error { return e.Err }

// LoadState reads the state: the older whole-state file if there is one,
// then each source's file (which wins over the older file's copy). A
// missing state is an empty one. A file that is not state (the whole-state
// file not JSON, a source file without its header or a rules list the
// rule parser cannot read as one) is renamed to NAME.corrupt-TIME and a
// *CorruptStateError returned for the first such file, with the sources
// read from the others (the caller starts the lost sources from scratch).
// A source whose rules the rule parser refuses is reported in the list of
// errors, and the others load.
func LoadState(dir string, now time.Time) (map[string][]rule.Rule, []error, error) {
	out := map[string][]rule.Rule{}
	var errs []error
	var corrupt error
	aside := func(path string, err error) error {
		to := path + ".corrupt-" + now.UTC().Format("20060102T150405.000000000Z")
		if rerr := os.Rename(path, to); rerr != nil {
			return fmt.Errorf("state file %s is corrupt (%v) and could not be moved aside: %w", path, err, rerr)
		}
		if corrupt == nil {
			corrupt = &CorruptStateError{Path: path, MovedTo: to, Err: err}
		}
		return nil
	}
	path := filepath.Join(dir, StateFile)
	data, err := os.ReadFile(path)
	switch {
	case os.IsNotExist(err):
	case err != nil:
		return nil, nil, err
	default:
		var st State
		if err := json.Unmarshal(data, &st); err != nil {
			if ferr := aside(path, err); ferr != nil {
				return nil, nil, ferr
			}
			break
		}
		for src, specs := range st.Sources {
			body, _ := json.Marshal(map[string]any{"rules": specs})
			set, err := rule.Parse(path+" ("+src+")", body, now)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			out[src] = set.Rules
		}
	}
	sdir := filepath.Join(dir, SourcesDir)
	names, err := os.ReadDir(sdir)
	if err != nil && !os.IsNotExist(err) {
		return nil, nil, err
	}
	for _, n := range names {
		if !strings.HasSuffix(n.Name(), ".yaml") || strings.HasPrefix(n.Name(), ".") {
			continue
		}
		p := filepath.Join(sdir, n.Name())
		data, err := os.ReadFile(p)
		if err != nil {
			return nil, nil, err
		}
		first, _, _ := strings.Cut(string(data), "\n")
		q, ok := strings.CutPrefix(first, sourceHeader)
		src, uerr := strconv.Unquote(q)
		if !ok || uerr != nil || sourceFile(src) != n.Name() {
			if ferr := aside(p, fmt.Errorf("first line %q does not name the source of %s", first, n.Name())); ferr != nil {
				return nil, nil, ferr
			}
			continue
		}
		set, err := rule.Parse(p, data, now)
		if err != nil {
			var re *rule.Error
			if errors.As(err, &re) && re.Line == 0 { // not rules at all (cut short, not YAML)
				if ferr := aside(p, err); ferr != nil {
					return nil, nil, ferr
				}
				continue
			}
			errs = append(errs, fmt.Errorf("source %s: %w", src, err))
			continue
		}
		rules, err := replayJournal(journalPath(p), src, snapshotGeneration(data), set.Rules, now)
		if err != nil {
			var je *JournalError
			if !errors.As(err, &je) {
				return nil, nil, err
			}
			// The changes before the bad line stand; the journal is kept
			// aside for inspection.
			if ferr := aside(journalPath(p), err); ferr != nil {
				return nil, nil, ferr
			}
		}
		out[src] = rules
	}
	if len(out) == 0 {
		out = nil
	}
	return out, errs, corrupt
}
