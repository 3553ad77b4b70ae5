package daemon

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
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

// SaveState writes the persisted sources atomically (temp file + rename).
func SaveState(dir string, snap store.Snapshot, now time.Time) error {
	st := State{Version: 1, Saved: now.UTC(), Sources: map[string][]rule.Spec{}}
	for _, e := range snap.Entries {
		if persisted(e.Source) && e.InForce() {
			st.Sources[e.Source] = append(st.Sources[e.Source], e.Rule.Spec())
		}
	}
	data, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, ".state-*.json")
	if err != nil {
		return err
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return err
	}
	tmp.Close()
	return os.Rename(tmp.Name(), filepath.Join(dir, StateFile))
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

// LoadState reads the state file; a missing file is an empty state. A file
// that is not JSON is renamed to state.json.corrupt-TIME and a
// *CorruptStateError returned with no state (the caller starts from its
// sources). Each source's rules are parsed with the rule parser (a damaged
// entry refuses that source, reported, and the others load).
func LoadState(dir string, now time.Time) (map[string][]rule.Rule, []error, error) {
	data, err := os.ReadFile(filepath.Join(dir, StateFile))
	if os.IsNotExist(err) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	var st State
	if err := json.Unmarshal(data, &st); err != nil {
		path := filepath.Join(dir, StateFile)
		aside := path + ".corrupt-" + now.UTC().Format("20060102T150405.000000000Z")
		if rerr := os.Rename(path, aside); rerr != nil {
			return nil, nil, fmt.Errorf("state file %s is corrupt (%v) and could not be moved aside: %w", path, err, rerr)
		}
		return nil, nil, &CorruptStateError{Path: path, MovedTo: aside, Err: err}
	}
	out := map[string][]rule.Rule{}
	var errs []error
	for src, specs := range st.Sources {
		body, _ := json.Marshal(map[string]any{"rules": specs})
		set, err := rule.Parse(filepath.Join(dir, StateFile)+" ("+src+")", body, now)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out[src] = set.Rules
	}
	return out, errs, nil
}
