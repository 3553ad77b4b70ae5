package daemon

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/scrubd/scrubd/agent/config"
	"github.com/scrubd/scrubd/agent/dataplane"
	"github.com/scrubd/scrubd/internal/syncbuf"
	"github.com/scrubd/scrubd/internal/testenv"
	"github.com/scrubd/scrubd/swpath/rule"
)

// countSW is a software path that holds rules and counts nothing.
type countSW struct {
	mu  sync.Mutex
	set *rule.Set
}

func (s *countSW) Name() string { return "test" }
func (s *countSW) SetRules(set *rule.Set) error {
	s.mu.Lock()
	s.set = set
	s.mu.Unlock()
	return nil
}
func (s *countSW) Stats() dataplane.SWStats { return dataplane.SWStats{At: time.Now()} }
func (s *countSW) Capacity() (int, float64) { return 1, 1e9 }

// testConfig is an agent with no devices, its socket and state in dir.
func testConfig(dir string) *config.Config {
	c := config.Defaults()
	c.StateDir = filepath.Join(dir, "state")
	c.API.Socket = filepath.Join(dir, "api.sock")
	c.Metrics.Listen = ""
	c.Offload.Backend, c.Software.Engine = "none", "none"
	return &c
}

// never is a ticker that does not tick: nothing polls on its own.
func never(time.Duration) (<-chan time.Time, func()) { return nil, func() {} }

// runAgent runs the agent on cfg until stop or the end of the test, and
// returns once every source is up.
func runAgent(t *testing.T, cfg *config.Config, opt Options) (stop func() error) {
	t.Helper()
	r := make(chan struct{})
	opt.Paths = func(context.Context, *config.Config) (Paths, error) { return Paths{SW: &countSW{}}, nil }
	opt.Ticker = never
	opt.Ready = func(*Daemon) { close(r) }
	ctx, cancel := context.WithCancel(context.Background())
	finished := make(chan struct{})
	var runErr error
	go func() { runErr = Run(ctx, cfg, opt); close(finished) }()
	stop = func() error { cancel(); <-finished; return runErr }
	t.Cleanup(func() { stop() })
	select {
	case <-r:
	case <-finished:
		t.Fatalf("agent ended before it was ready: %v", runErr)
	case <-time.After(20 * time.Second):
		t.Fatal("agent not ready after 20 s")
	}
	return stop
}

// SIGHUP with no rule files says there is nothing to reload (it logged
// nothing at all).
func TestReloadWithoutRuleFilesIsLogged(t *testing.T) {
	var logs syncbuf.Buffer
	reload := make(chan struct{}, 1)
	stop := runAgent(t, testConfig(t.TempDir()), Options{Log: slog.New(slog.NewTextHandler(&logs, nil)), Reload: reload})
	reload <- struct{}{}
	want := "no rule files configured (rules.files is empty); nothing to reload"
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(logs.String(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("no %q after a reload:\n%s", want, logs.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

// The rule file is read (and so parsed) once at start: the config check
// and the load share the one reading (it was read by both, and once more
// when the poller started). The kernel counts the opens (inotify
// IN_OPEN). No ticker ticks and no reload is asked for, so every open is
// the start's. Closes are watched too: the kernel merges an event with an
// identical one queued just before it, and open, close, open, close has
// none.
func TestRuleFileReadOnceAtStart(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "rules.yaml")
	if err := os.WriteFile(path, []byte("rules:\n  - {id: a, action: drop, match: {dst: 203.0.113.0/24, proto: udp}}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	opens := testenv.WatchOpens(t, path)
	cfg := testConfig(dir)
	cfg.Rules.Files = []string{path}
	var logs syncbuf.Buffer
	var d *Daemon
	opt := Options{Log: slog.New(slog.NewTextHandler(&logs, nil))}
	got := make(chan struct{})
	opt.Tasks = []func(context.Context, *Daemon) error{func(_ context.Context, dd *Daemon) error { d = dd; close(got); return nil }}
	stop := runAgent(t, cfg, opt)
	<-got
	if _, ok := d.Store.Get("a"); !ok {
		t.Fatalf("the rule file's rule is not in the store:\n%s", logs.String())
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if n := opens(); n != 1 {
		t.Fatalf("the rule file was opened %d times at start, want 1\n%s", n, logs.String())
	}
}

// Told to stop while it reads its rule files (a 100k-rule file takes
// seconds to parse), the agent stops there: Run returns no error, and
// nothing after the config check ran (no listener, no dataplane). The
// context here is done before Run starts, so the parse gives up at its
// first chunk of items.
func TestStopWhileReadingRuleFiles(t *testing.T) {
	dir := t.TempDir()
	var b strings.Builder
	b.WriteString("rules:\n")
	for i := range 5000 {
		fmt.Fprintf(&b, "  - {id: r%d, action: drop, match: {dst: 10.%d.%d.0/24, proto: udp}}\n", i, i/256, i%256)
	}
	file := filepath.Join(dir, "rules.yaml")
	if err := os.WriteFile(file, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(dir)
	cfg.Rules.Files = []string{file}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	built := false
	err := Run(ctx, cfg, Options{Ticker: never, Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Paths: func(context.Context, *config.Config) (Paths, error) { built = true; return Paths{SW: &countSW{}}, nil }})
	if err != nil || built {
		t.Fatalf("stopped while reading the rule files: err %v, dataplane built %v", err, built)
	}
	if _, err := os.Stat(cfg.API.Socket); err == nil {
		t.Fatal("the API socket exists")
	}
}
