package placement

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/scrubd/scrubd/agent/dataplane"
	"github.com/scrubd/scrubd/agent/protect"
	"github.com/scrubd/scrubd/agent/store"

	"github.com/scrubd/scrubd/swpath/rule"
)

// swPushes counts the sets pushed to the fake software engine since op i.
func swPushes(w *world, from int) int {
	n := 0
	for _, op := range w.ops[from:] {
		if strings.HasPrefix(op, "sw=") {
			n++
		}
	}
	return n
}

func swIDs(w *world) []string {
	var ids []string
	for _, r := range w.sw.set.Rules {
		ids = append(ids, r.ID)
	}
	return ids
}

// With the backstop, an Apply pushes its set to software once: the set
// before the hardware pass already holds what the pass places, in
// hardware or in software, so the software engine does not compile the
// same set twice. Without it, the set after the pass (hardware rules out)
// is a second push, when it differs from the first: in the second round
// the new rule finds the table full and stays in software, and the set
// after the pass is the set before it. Either way every rule is enforced
// somewhere after every operation (the world's check) and the engine ends
// with the set placement would push now.
func TestOneSoftwarePushPerApplyWithBackstop(t *testing.T) {
	for _, noBackstop := range []bool{false, true} {
		w := newWorld(t, 2)
		c := cfg()
		c.NoBackstop = noBackstop
		p := New(c, w.hw, w.sw, quiet(), w.now)
		rs := []rule.Rule{drop("a", "203.0.113.0/24"), drop("b", "198.51.100.0/24"), drop("c", "198.51.101.0/24")}
		w.want(rs...)
		for round, set := range [][]rule.Rule{rs, append(rs, drop("d", "198.51.102.0/24"))} {
			w.want(set...)
			from := len(w.ops)
			p.Apply(context.Background(), snap(uint64(round+1), set...))
			want := 1
			if noBackstop && round == 0 {
				want = 2
			}
			if got := swPushes(w, from); got != want {
				t.Errorf("backstop %v, round %d: %d software pushes, want %d (ops %v)", !noBackstop, round, got, want, w.ops[from:])
			}
			var now []string
			for _, r := range p.swSet(nil, !noBackstop).Rules {
				now = append(now, r.ID)
			}
			if got := swIDs(w); !slices.Equal(got, now) {
				t.Errorf("backstop %v, round %d: software holds %v, placement's set now is %v", !noBackstop, round, got, now)
			}
		}
		if n := len(w.hw.installed); n != 2 {
			t.Errorf("backstop %v: %d rules in hardware, want 2", !noBackstop, n)
		}
	}
}

// The software engine compiles every set it is given, so a set equal to
// the one it holds is not pushed again: not for a rule put again as it
// was (a FlowSpec route re-announced), not for a snapshot applied twice.
// A rule that does change (here only its expiry) is pushed.
func TestNoPushForAnUnchangedSet(t *testing.T) {
	w := newWorld(t, 1)
	c := cfg()
	c.NoBackstop = false
	p := New(c, w.hw, w.sw, quiet(), w.now)
	st := store.New(&protect.List{}, w.now)
	rs := []rule.Rule{drop("a", "203.0.113.0/24"), drop("b", "198.51.100.0/24")}
	w.want(rs...)
	if _, err := st.Replace("api", rs); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	p.ApplyStore(ctx, st)
	for i, step := range []struct {
		what string
		do   func()
		want int
	}{
		{"b put again", func() { _, _ = st.Put("api", rs[1]) }, 0},
		{"the same snapshot", func() { p.Apply(ctx, st.Effective()) }, 0},
		{"b with an expiry", func() {
			b := rs[1]
			b.Expires = w.clock.Add(time.Hour)
			_, _ = st.Put("api", b)
		}, 1},
	} {
		from := len(w.ops)
		step.do()
		p.ApplyStore(ctx, st)
		if got := swPushes(w, from); got != step.want {
			t.Errorf("step %d (%s): %d software pushes, want %d (ops %v)", i, step.what, got, step.want, w.ops[from:])
		}
	}
}

// slowSW is a software path whose SetRules waits for a release when held:
// a compile in flight.
type slowSW struct {
	mu      sync.Mutex
	sets    []*rule.Set
	hold    chan struct{} // SetRules waits on it while not nil
	entered chan struct{}
}

func (s *slowSW) Name() string { return "slow" }
func (s *slowSW) SetRules(set *rule.Set) error {
	s.mu.Lock()
	hold := s.hold
	s.mu.Unlock()
	if hold != nil {
		s.entered <- struct{}{}
		<-hold
	}
	s.mu.Lock()
	s.sets = append(s.sets, set)
	s.mu.Unlock()
	return nil
}
func (s *slowSW) Stats() dataplane.SWStats { return dataplane.SWStats{} }
func (s *slowSW) Capacity() (int, float64) { return 1, 1e9 }
func (s *slowSW) pushes() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.sets)
}

// At most one software compile is in flight and the latest set wins: the
// placer's goroutine pushes one set at a time, and the store changes made
// while a push is in flight (100 routes put one by one) are placed in
// the next round, from one delta, with one more push that holds them all.
func TestPushesCoalesceWhileOneIsInFlight(t *testing.T) {
	sw := &slowSW{entered: make(chan struct{}, 1)}
	st := store.New(&protect.List{}, time.Now)
	p := New(cfg(), nil, sw, quiet(), time.Now)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx, st, nil) }()
	defer func() {
		cancel()
		<-done
	}()
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		for end := time.Now().Add(10 * time.Second); !ok(); time.Sleep(time.Millisecond) {
			if time.Now().After(end) {
				t.Fatalf("timed out waiting for %s", what)
			}
		}
	}
	waitFor("the first round", func() bool { return p.View().Ready })
	hold := make(chan struct{})
	sw.mu.Lock()
	sw.hold = hold
	sw.mu.Unlock()
	base := sw.pushes()
	if _, err := st.Put("bgp:peer", drop("route0", "198.18.0.0/24")); err != nil {
		t.Fatal(err)
	}
	<-sw.entered // the push of route0 is in flight
	for i := 1; i < 100; i++ {
		if _, err := st.Put("bgp:peer", drop(fmt.Sprintf("route%d", i), fmt.Sprintf("198.18.%d.0/24", i))); err != nil {
			t.Fatal(err)
		}
	}
	sw.mu.Lock()
	sw.hold = nil
	sw.mu.Unlock()
	close(hold)
	waitFor("the last route placed", func() bool { return p.View().StoreVersion == st.Version() })
	if got := sw.pushes() - base; got != 2 {
		t.Errorf("%d software pushes for 100 routes, the last 99 put while the first push was in flight; want 2", got)
	}
	sw.mu.Lock()
	last := sw.sets[len(sw.sets)-1]
	sw.mu.Unlock()
	if len(last.Rules) != 100 {
		t.Errorf("the last set holds %d rules, want 100", len(last.Rules))
	}
	if p.deltas < 2 {
		t.Errorf("%d rounds from a delta, want 2", p.deltas)
	}
}
