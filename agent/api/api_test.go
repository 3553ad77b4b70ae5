package api

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/scrubd/scrubd/agent/protect"
	"github.com/scrubd/scrubd/agent/store"
	"github.com/scrubd/scrubd/swpath/rule"
)

func setup(t *testing.T, token string) (*store.Store, *int) {
	t.Helper()
	now := func() time.Time { return time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC) }
	pl := &protect.List{Entries: []protect.Entry{{Rule: rule.Rule{ID: "mgmt", Action: rule.Accept, Match: rule.Match{Dst: netip.MustParsePrefix("192.0.2.10/32")}}, Note: "mgmt"}}}
	st := store.New(pl, now)
	saves := new(int)
	_ = token
	return st, saves
}

func serve(t testing.TB, l net.Listener, s *Server) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, l, s.Handler()) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
}

// serveUnix serves s on a new unix socket for the test's life and returns
// the socket's path.
func serveUnix(t testing.TB, s *Server) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "api.sock")
	l, err := ListenUnix(sock)
	if err != nil {
		t.Fatal(err)
	}
	serve(t, l, s)
	return sock
}

func TestUnixAPI(t *testing.T) {
	st, saves := setup(t, "")
	sock := serveUnix(t, &Server{Store: st, Persist: func() error { *saves++; return nil }, Now: func() time.Time { return time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC) }})
	if fi, err := os.Stat(sock); err != nil || fi.Mode().Perm() != 0o660 {
		t.Fatalf("socket mode %v %v", fi.Mode(), err)
	}
	// A second listener on the live socket is refused.
	if _, err := ListenUnix(sock); err == nil {
		t.Fatal("second listener accepted")
	}
	c := NewUnixClient(sock)
	ctx := context.Background()
	ri, err := c.Add(ctx, []byte(`{"id": "dns", "action": "drop", "match": {"dst": "203.0.113.0/24", "proto": "udp", "src_port": "53"}}`))
	if err != nil {
		t.Fatal(err)
	}
	if ri.Rule.ID != "dns" || ri.Source != "api" || ri.Status != "active" {
		t.Fatalf("%+v", ri)
	}
	if _, err := c.Add(ctx, []byte(`{id: dns, action: drop, match: {proto: gre}}`)); !isCode(err, http.StatusConflict) {
		t.Fatalf("duplicate add: %v", err)
	}
	if _, err := c.Add(ctx, []byte(`{id: bad, action: explode}`)); !isCode(err, http.StatusBadRequest) {
		t.Fatalf("bad rule: %v", err)
	}
	// Protection: a rule that only drops the management address is refused.
	if _, err := c.Add(ctx, []byte(`{id: mg, action: drop, match: {dst: 192.0.2.10/32}}`)); !isCode(err, http.StatusUnprocessableEntity) {
		t.Fatalf("protected: %v", err)
	}
	// Refused means not stored: not listed, and the id is free.
	if got, err := c.Get(ctx, "mg"); !isCode(err, http.StatusNotFound) {
		t.Fatalf("refused rule stored: %+v %v", got, err)
	}
	if _, err := c.Add(ctx, []byte(`{id: mg, action: drop, match: {dst: 192.0.2.128/25}}`)); err != nil {
		t.Fatalf("valid rule with a refused rule's id: %v", err)
	}
	// File rules are read-only through the API.
	if _, err := st.Replace("file:/etc/r.yaml", []rule.Rule{{ID: "f1", Action: rule.Drop, Priority: 1000, Match: rule.Match{Dst: netip.MustParsePrefix("198.51.100.0/24")}}}); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(ctx, "f1"); !isCode(err, http.StatusConflict) {
		t.Fatalf("delete file rule: %v", err)
	}
	if _, err := c.Put(ctx, "other", []byte(`{id: dns, action: drop, match: {proto: gre}}`)); !isCode(err, http.StatusBadRequest) {
		t.Fatalf("id mismatch: %v", err)
	}
	out, err := c.Replace(ctx, []byte("rules:\n  - {id: r1, action: drop, match: {dst: 203.0.113.0/24, proto: gre}}\n  - {id: r2, action: drop, match: {dst: 198.51.100.0/24}}\n"))
	if err != nil || out["replaced"].(float64) != 2 {
		t.Fatalf("%v %v", out, err)
	}
	list, err := c.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]string{}
	for _, r := range list {
		ids[r.Rule.ID] = r.Source
	}
	if len(ids) != 3 || ids["f1"] != "file:/etc/r.yaml" || ids["r1"] != "api" || ids["dns"] != "" {
		t.Fatalf("%v", ids)
	}
	if err := c.Delete(ctx, "r1"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Get(ctx, "r1"); !isCode(err, http.StatusNotFound) {
		t.Fatalf("get deleted: %v", err)
	}
	// add, add (the refused rule's id), replace, delete; the refusal
	// changed nothing.
	if *saves != 4 {
		t.Fatalf("changes persisted %d times, want 4", *saves)
	}
	if _, err := c.Status(ctx); err != nil {
		t.Fatal(err)
	}
}

func isCode(err error, code int) bool {
	var ae *APIError
	return errors.As(err, &ae) && ae.Code == code
}

func TestTCPNeedsToken(t *testing.T) {
	st, _ := setup(t, "s3cret")
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	serve(t, l, &Server{Store: st, Token: "s3cret", Now: time.Now})
	ctx := context.Background()
	if _, err := NewTCPClient(l.Addr().String(), "wrong").List(ctx); !isCode(err, http.StatusUnauthorized) {
		t.Fatalf("wrong token: %v", err)
	}
	if _, err := NewTCPClient(l.Addr().String(), "").List(ctx); !isCode(err, http.StatusUnauthorized) {
		t.Fatalf("no token: %v", err)
	}
	if _, err := NewTCPClient(l.Addr().String(), "s3cret").List(ctx); err != nil {
		t.Fatal(err)
	}
}

// LimitListener: at most n connections open; Accept waits for one to
// close, and Close ends a waiting Accept.
func TestLimitListener(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := LimitListener(inner, 2)
	var clients []net.Conn
	defer func() {
		for _, c := range clients {
			c.Close()
		}
	}()
	for i := 0; i < 3; i++ {
		c, err := net.Dial("tcp", inner.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		clients = append(clients, c)
	}
	a, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Accept(); err != nil {
		t.Fatal(err)
	}
	third := make(chan error, 1)
	go func() {
		c, err := l.Accept()
		if err == nil {
			c.Close()
		}
		third <- err
	}()
	select {
	case err := <-third:
		t.Fatalf("third connection accepted over the limit of 2 (%v)", err)
	case <-time.After(200 * time.Millisecond):
	}
	a.Close()
	a.Close() // a second close releases nothing more
	if err := <-third; err != nil {
		t.Fatalf("accept after a close: %v", err)
	}
	waiting := make(chan error, 1)
	go func() { _, err := l.Accept(); waiting <- err }() // no client left to accept
	time.Sleep(50 * time.Millisecond)
	l.Close()
	if err := <-waiting; !errors.Is(err, net.ErrClosed) {
		t.Fatalf("waiting Accept after Close: %v", err)
	}
}

// A POST body is a rule file (a top-level rules list: every rule added,
// all or none) or one rule; a bad body gets the error of what it is: a
// rule file's names the file's rule and field, one rule's does not speak
// of a file, and neither adds anything.
func TestAddBodyKinds(t *testing.T) {
	st, saves := setup(t, "")
	c := NewUnixClient(serveUnix(t, &Server{Store: st, Persist: func() error { *saves++; return nil }, Now: func() time.Time { return time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC) }}))
	ctx := context.Background()
	added, err := c.AddFile(ctx, []byte("rules:\n  - {id: f1, action: drop, match: {dst: 203.0.113.0/24}}\n  - {id: f2, action: drop, match: {dst: 198.51.100.0/24, proto: gre}}\n"))
	if err != nil || len(added) != 2 || added[0].Rule.ID != "f1" || added[1].Rule.ID != "f2" {
		t.Fatalf("rule file: %+v %v", added, err)
	}
	var ae *APIError
	_, err = c.AddFile(ctx, []byte("rules:\n  - {id: f3, action: drop, match: {proto: gre}}\n  - {id: f4, action: explode}\n"))
	if !errors.As(err, &ae) || ae.Code != http.StatusBadRequest || !strings.HasPrefix(ae.Msg, "rule file refused, no rule added") || !strings.Contains(ae.Msg, `"explode"`) {
		t.Fatalf("bad rule file: %v", err)
	}
	_, err = c.Add(ctx, []byte(`{id: one, action: explode}`))
	if !errors.As(err, &ae) || ae.Code != http.StatusBadRequest || strings.Contains(ae.Msg, "rule file") || !strings.Contains(ae.Msg, `"explode"`) {
		t.Fatalf("bad rule: %v", err)
	}
	if _, ok := st.Get("f3"); ok || *saves != 1 {
		t.Fatalf("a refused body changed the store (f3 stored %v, saves %d)", ok, *saves)
	}
}
