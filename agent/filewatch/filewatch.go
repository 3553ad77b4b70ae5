// Package filewatch feeds rule files into the store: each file is its own
// source ("file:PATH"), read at start, again when its content changes (the
// watcher polls) and on demand (SIGHUP). A file that fails to read or parse
// is refused whole: the rules already in force from it stay, and the error
// is logged and counted. So is a file with a rule the store's guard refuses,
// an empty file and one cut off after "rules:" (rule.Parse).
//
// A file that cannot be read (missing) is logged and counted once when it
// becomes unreadable, not on every poll, and once when it is readable
// again; it is then parsed afresh. A file the caller already read and
// parsed (the agent's start-up check) is given to Preload and not parsed
// again.
package filewatch

import (
	"context"
	"crypto/sha256"
	"errors"
	"io"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/scrubd/scrubd/agent/store"
	"github.com/scrubd/scrubd/swpath/rule"
)

// Source is the store source of a rule file.
func Source(path string) string { return "file:" + path }

// Status is one file's state.
type Status struct {
	Path     string
	Rules    int
	Loaded   time.Time // last successful load
	Err      string    // last refusal, "" after a successful load
	Refusals uint64
}

// Watcher watches rule files.
type Watcher struct {
	files []string
	st    *store.Store
	log   *slog.Logger
	now   func() time.Time

	mu     sync.Mutex
	hashes map[string][32]byte
	status map[string]*Status
	// unreadable holds, per file that could not be read, the error last
	// logged: the same error on the next poll is not logged again.
	unreadable map[string]string
	checked    bool // every file read once (Check or Preload): Run does not start with a read
	reload     chan struct{}
}

// New returns a watcher for files.
func New(files []string, st *store.Store, log *slog.Logger, now func() time.Time) *Watcher {
	w := &Watcher{files: files, st: st, log: log, now: now, hashes: map[string][32]byte{}, status: map[string]*Status{},
		unreadable: map[string]string{}, reload: make(chan struct{}, 1)}
	for _, f := range files {
		w.status[f] = &Status{Path: f}
	}
	return w
}

// Reload asks the watcher to reread every file (SIGHUP).
func (w *Watcher) Reload() {
	select {
	case w.reload <- struct{}{}:
	default:
	}
}

// Status returns every file's status.
func (w *Watcher) Status() []Status {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]Status, 0, len(w.files))
	for _, f := range w.files {
		out = append(out, *w.status[f])
	}
	return out
}

// Check reads every file; force rereads unchanged ones too. It returns the
// number of files refused.
func (w *Watcher) Check(force bool) int {
	bad := 0
	for _, f := range w.files {
		if !w.load(f, force) {
			bad++
		}
	}
	w.mu.Lock()
	w.checked = true
	w.mu.Unlock()
	return bad
}

// Preload loads the rules of files the caller already read and parsed
// (data and set by path; the set passed the store's guard), as Check
// would, without reading or parsing them again; the other files are read
// as by Check(true). It returns the number of files refused.
func (w *Watcher) Preload(data map[string][]byte, sets map[string]*rule.Set) int {
	bad := 0
	for _, f := range w.files {
		set, ok := sets[f]
		if !ok {
			if !w.load(f, true) {
				bad++
			}
			continue
		}
		w.mu.Lock()
		w.hashes[f] = sha256.Sum256(data[f])
		if !w.apply(f, w.status[f], set) {
			bad++
		}
		w.mu.Unlock()
	}
	w.mu.Lock()
	w.checked = true
	w.mu.Unlock()
	return bad
}

func (w *Watcher) load(path string, force bool) bool {
	if !force && w.unchanged(path) {
		w.mu.Lock()
		defer w.mu.Unlock()
		return w.status[path].Err == ""
	}
	data, err := os.ReadFile(path)
	w.mu.Lock()
	defer w.mu.Unlock()
	s := w.status[path]
	if err != nil {
		if w.unreadable[path] == err.Error() {
			return false // logged and counted when it became unreadable
		}
		w.unreadable[path] = err.Error()
		return w.refuse(s, err)
	}
	if _, was := w.unreadable[path]; was {
		delete(w.unreadable, path)
		w.log.Info("rule file readable again", "file", path)
		force = true // its state is the content's again, whatever it was
	}
	h := sha256.Sum256(data)
	if old, ok := w.hashes[path]; ok && old == h && !force {
		return s.Err == ""
	}
	w.hashes[path] = h
	set, err := rule.Parse(path, data, w.now())
	if err == nil {
		// Too broad is a property of the content (kept hash: not
		// re-read until it changes), not a clash that may pass.
		err = w.st.Guard().CheckSet(path, set)
	}
	if err != nil {
		return w.refuse(s, err)
	}
	return w.apply(path, s, set)
}

// unchanged reports whether path reads, streamed through the hash, as the
// content last loaded or refused, and was readable then. The poll (every
// rules.poll) would otherwise read the whole file into memory each time:
// 12.7 MB a second for a 100k-rule file, all garbage.
func (w *Watcher) unchanged(path string) bool {
	w.mu.Lock()
	old, ok := w.hashes[path]
	_, unreadable := w.unreadable[path]
	w.mu.Unlock()
	if !ok || unreadable {
		return false
	}
	f, err := os.Open(path)
	if err != nil {
		return false // load reads it and reports the error
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return false
	}
	var sum [32]byte
	h.Sum(sum[:0])
	return sum == old
}

// apply puts a parsed file's rules in force as the file's source (w.mu
// held).
func (w *Watcher) apply(path string, s *Status, set *rule.Set) bool {
	entries, err := w.st.Replace(Source(path), set.Rules)
	if err != nil {
		if !errors.Is(err, store.ErrTooMany) { // too many: the content, like too broad
			delete(w.hashes, path) // retry when the clash is gone
		}
		return w.refuse(s, err)
	}
	refused := 0
	for _, e := range entries {
		if !e.InForce() {
			refused++
			w.log.Warn("rule refused", "file", path, "rule", e.Rule.ID, "reason", e.Reason)
		}
	}
	s.Rules, s.Loaded, s.Err = len(set.Rules), w.now(), ""
	w.log.Info("rule file loaded", "file", path, "rules", len(set.Rules), "refused_by_protection", refused)
	return true
}

func (w *Watcher) refuse(s *Status, err error) bool {
	s.Err = err.Error()
	s.Refusals++
	w.log.Error("rule file refused; the rules in force stay", "file", s.Path, "err", err)
	return false
}

// Run loads every file, then checks on every tick and every Reload until ctx
// ends. ticks is injected (a time.Ticker's channel in production).
func (w *Watcher) Run(ctx context.Context, ticks <-chan time.Time) error {
	// Files Check or Preload already read (the daemon loads the files
	// before placement starts) are not read again before the first tick:
	// at 100k rules a parse is seconds of the start.
	w.mu.Lock()
	checked := w.checked
	w.mu.Unlock()
	if !checked {
		w.Check(false)
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-ticks:
			w.Check(false)
		case <-w.reload:
			w.log.Info("reloading rule files")
			w.Check(true)
		}
	}
}
