package placement

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/scrubd/scrubd/agent/dataplane"
	"github.com/scrubd/scrubd/agent/protect"
	"github.com/scrubd/scrubd/swpath/rule"
)

// fakes share an op log and check, after every operation, that every wanted
// drop rule is enforced by hardware or software.
type world struct {
	t       *testing.T
	wanted  map[string]bool
	hw      *fakeHW
	sw      *fakeSW
	ops     []string
	clock   time.Time
	checked int
}

func (w *world) now() time.Time { return w.clock }

func (w *world) check(op string) {
	w.ops = append(w.ops, op)
	w.checked++
	for id := range w.wanted {
		if w.hw != nil && w.hw.installed[id] {
			continue
		}
		if w.sw.has(id) {
			continue
		}
		w.t.Fatalf("after %s: rule %s enforced nowhere (ops %v)", op, id, w.ops)
	}
}

type fakeHW struct {
	w         *world
	installed map[string]bool
	max       int
	gone      bool
	stats     map[string]dataplane.Counter
	installs  int
}

func (h *fakeHW) Name() string            { return "fake" }
func (h *fakeHW) Key(r *rule.Rule) string { return r.ID }

func (h *fakeHW) Compile(r *rule.Rule, set *rule.Set) (dataplane.Cost, error) {
	if r.Match.Length != nil {
		return dataplane.Cost{}, &dataplane.HWError{Rule: r.ID, Kind: dataplane.KindUnsupported, Detail: "no packet length key"}
	}
	for _, a := range set.Rules {
		if a.Action == rule.Accept && protect.Overlaps(&a.Match, &r.Match) {
			return dataplane.Cost{}, &dataplane.HWError{Rule: r.ID, Kind: dataplane.KindAcceptOverlap, Detail: "overlaps accept rule " + a.ID}
		}
	}
	return dataplane.Cost{Entries: 1}, nil
}

func (h *fakeHW) Install(ctx context.Context, r *rule.Rule, set *rule.Set) error {
	if h.gone {
		return &dataplane.HWError{Rule: r.ID, Kind: dataplane.KindDeviceGone, Detail: "no such device"}
	}
	if len(h.installed) >= h.max {
		return &dataplane.HWError{Rule: r.ID, Kind: dataplane.KindTableFull, Detail: "ENOSPC"}
	}
	h.installed[r.ID] = true
	h.installs++
	h.w.check("hw+" + r.ID)
	return nil
}

func (h *fakeHW) Remove(ctx context.Context, id string) error {
	if h.gone {
		return &dataplane.HWError{Rule: id, Kind: dataplane.KindDeviceGone}
	}
	delete(h.installed, id)
	h.w.check("hw-" + id)
	return nil
}

func (h *fakeHW) Installed(ctx context.Context) ([]string, error) {
	var ids []string
	for id := range h.installed {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids, nil
}

func (h *fakeHW) Budget(ctx context.Context) (dataplane.Budget, error) {
	if h.gone {
		return dataplane.Budget{}, &dataplane.HWError{Kind: dataplane.KindDeviceGone}
	}
	return dataplane.Budget{MaxEntries: h.max, UsedEntries: len(h.installed)}, nil
}

func (h *fakeHW) Stats(ctx context.Context) (map[string]dataplane.Counter, error) {
	if h.gone {
		return nil, &dataplane.HWError{Kind: dataplane.KindDeviceGone}
	}
	out := map[string]dataplane.Counter{}
	for id := range h.installed {
		out[id] = h.stats[id]
	}
	return out, nil
}

func (h *fakeHW) NICCounters(ctx context.Context) (map[string]uint64, error) {
	return map[string]uint64{"rx_discards_phy": 7}, nil
}

type fakeSW struct {
	w     *world
	set   *rule.Set
	stats dataplane.SWStats // Stats' workers and estimate
	// rules are the per-rule counts Stats returns for the rules of set (by
	// position in it, in one of two buffers written in turn, as engines do).
	rules  map[string]dataplane.Counter
	counts [2][]dataplane.Counter
	turn   int
	// maxRules, when set, makes SetRules refuse larger sets (an engine limit).
	maxRules int
	// workers and hz, when set, are the capacity the engine reports
	// (default 1 core at 1 GHz).
	workers int
	hz      float64
}

func (s *fakeSW) Name() string { return "fakesw" }
func (s *fakeSW) has(id string) bool {
	return s.set != nil && s.set.Index(id) >= 0
}
func (s *fakeSW) SetRules(set *rule.Set) error {
	if s.maxRules > 0 && set.Len() > s.maxRules {
		return fmt.Errorf("fake engine limit: %d rules > %d", set.Len(), s.maxRules)
	}
	s.set = set
	s.w.check(fmt.Sprintf("sw=%d", set.Len()))
	return nil
}
func (s *fakeSW) Stats() dataplane.SWStats {
	st := s.stats
	if s.set != nil {
		s.turn ^= 1
		b := s.counts[s.turn]
		if cap(b) < len(s.set.Rules) {
			b = make([]dataplane.Counter, len(s.set.Rules))
		}
		b = b[:len(s.set.Rules)]
		for i := range s.set.Rules {
			b[i] = dataplane.Counter{}
			if s.set.Live(i) { // a hole counts nothing
				b[i] = s.rules[s.set.Rules[i].ID]
			}
		}
		s.counts[s.turn] = b
		st.Set, st.Counts = s.set, b
	}
	return st
}
func (s *fakeSW) Capacity() (int, float64) {
	if s.workers > 0 {
		return s.workers, s.hz
	}
	return 1, 1e9 // 1 core at 1 GHz
}
func newWorld(t *testing.T, hwMax int) *world {
	w := &world{t: t, wanted: map[string]bool{}, clock: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	w.hw = &fakeHW{w: w, installed: map[string]bool{}, max: hwMax, stats: map[string]dataplane.Counter{}}
	w.sw = &fakeSW{w: w, rules: map[string]dataplane.Counter{}}
	return w
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func drop(id, dst string) rule.Rule {
	return rule.Rule{ID: id, Priority: 1000, Action: rule.Drop, Match: rule.Match{Dst: netip.MustParsePrefix(dst)}}
}

type netipPrefix = netip.Prefix

func mustPrefix(s string) netip.Prefix { return netip.MustParsePrefix(s) }
