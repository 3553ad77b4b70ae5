package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/scrubd/scrubd/agent/store"
	"github.com/scrubd/scrubd/swpath/rule"
)

// FuzzHandler sends the API arbitrary requests (method, rule id in the URL,
// body) as a misbehaving client would, against a store that holds rules
// of the API and of a rule file. Whatever the request: the handler does
// not panic; it answers 2xx or 4xx (saving never fails here), every error
// as JSON with a message; a refused request leaves every rule in force as
// it was, an accepted one leaves no API rule stored out of force; and no
// request changes a rule of another source.
func FuzzHandler(f *testing.F) {
	// m picks the method (GET, POST, PUT, DELETE, PATCH: m%5) and, for
	// m/5 odd or DELETE, a rule id in the URL.
	f.Add(uint8(1), "", []byte(`{id: a1, action: drop, match: {dst: 203.0.113.0/24, proto: udp, dst_port: 53}}`))
	f.Add(uint8(1), "", []byte("rules:\n  - {id: b1, action: drop, match: {dst: 198.51.100.0/24}}\n  - {id: b2, action: drop, match: {src: 10.0.0.0/8, proto: tcp}}\n"))
	f.Add(uint8(7), "api1", []byte(`{id: api1, action: drop, match: {dst: 203.0.113.7/32, length: 100-200}}`))
	f.Add(uint8(7), "file1", []byte(`{id: file1, action: drop, match: {dst: 192.0.2.0/24}}`))
	f.Add(uint8(3), "api2", []byte(nil))
	f.Add(uint8(3), "file1", []byte(nil))
	f.Add(uint8(2), "", []byte("rules:\n  - {id: c1, action: drop, match: {dst: 192.0.2.10/32}}\n"))
	f.Add(uint8(2), "", []byte("rules:\n  - {id: c2, action: drop, match: {dst: 203.0.113.0/25}}\n"))
	f.Add(uint8(5), "api1", []byte(nil))
	f.Add(uint8(4), "", []byte(nil))
	f.Add(uint8(1), "", []byte(`{id: x, action: drop, match: {dst: 0.0.0.0/0}}`))
	f.Add(uint8(1), "", bytes.Repeat([]byte("a"), 5000))
	methods := []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodDelete, http.MethodPatch}
	now := func() time.Time { return time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC) }
	f.Fuzz(func(t *testing.T, m uint8, id string, body []byte) {
		st, _ := setup(t, "")
		for _, r := range []struct{ src, id, dst string }{{Source, "api1", "203.0.113.0/24"}, {Source, "api2", "198.51.100.0/24"}, {"file:rules.yaml", "file1", "192.0.2.128/25"}} {
			if _, err := st.Put(r.src, rule.Rule{ID: r.id, Action: rule.Drop, Match: rule.Match{Dst: netip.MustParsePrefix(r.dst)}}); err != nil {
				t.Fatal(err)
			}
		}
		s := &Server{Store: st, Persist: func() error { return nil }, Now: now, MaxBody: 4096}
		method := methods[int(m)%len(methods)]
		target := "/v1/rules"
		if int(m)/len(methods)%2 == 1 || method == http.MethodDelete { // with an id in the URL
			target += "/" + url.PathEscape(id)
		}
		req, err := http.NewRequest(method, "http://scrubd"+target, bytes.NewReader(body))
		if err != nil {
			return
		}
		before, others := rulesOf(st, Source), rulesOf(st, "file:rules.yaml")
		all := st.Version()
		w := httptest.NewRecorder()
		s.Handler().ServeHTTP(w, req)
		code := w.Code
		if code >= 500 || code < 200 {
			t.Fatalf("%s %s %q: status %d: %s", method, target, body, code, w.Body)
		}
		if got := rulesOf(st, "file:rules.yaml"); got != others {
			t.Fatalf("%s %s %q (status %d) changed the rule file's rules:\n%s\nto\n%s", method, target, body, code, others, got)
		}
		if code < 400 {
			// The API stores no rule that would not be in force (refused
			// by protection, already expired): it refuses the request.
			for _, e := range st.Source(Source) {
				if !e.InForce() {
					t.Fatalf("%s %s %q (status %d) left rule %s stored but not in force: %s", method, target, body, code, e.Rule.ID, e.Reason)
				}
			}
			return
		}
		var e Error
		if err := json.Unmarshal(w.Body.Bytes(), &e); err != nil || e.Error == "" {
			t.Fatalf("%s %s: status %d without a JSON error: %q (%v)", method, target, code, w.Body, err)
		}
		if got := rulesOf(st, Source); got != before || st.Version() != all {
			t.Fatalf("%s %s %q refused (%d: %s) but changed the API's rules:\n%s\nto\n%s", method, target, body, code, e.Error, before, got)
		}
	})
}

// rulesOf lists src's rules in force, one line each.
func rulesOf(st *store.Store, src string) string {
	var b strings.Builder
	for _, e := range st.Source(src) {
		fmt.Fprintf(&b, "%s %v %s\n", e.Rule.ID, e.Rule.Action, &e.Rule.Match)
	}
	return b.String()
}

// TestJSONErrorsEverywhere: a wrong method on an API path (405, with Allow)
// and a path outside the API (404) answer JSON errors like every other
// error, not the mux's plain text.
func TestJSONErrorsEverywhere(t *testing.T) {
	st, _ := setup(t, "")
	h := (&Server{Store: st}).Handler()
	for _, c := range []struct {
		method, path string
		code         int
		allow        string
	}{
		{http.MethodPatch, "/v1/rules", http.StatusMethodNotAllowed, "GET, POST, PUT"},
		{http.MethodPost, "/v1/rules/x", http.StatusMethodNotAllowed, "GET, PUT, DELETE"},
		{http.MethodDelete, "/v1/status", http.StatusMethodNotAllowed, "GET"},
		{http.MethodGet, "/v2/rules", http.StatusNotFound, ""},
		{http.MethodGet, "/", http.StatusNotFound, ""},
	} {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(c.method, c.path, nil))
		var e Error
		if w.Code != c.code || w.Header().Get("Allow") != c.allow || json.Unmarshal(w.Body.Bytes(), &e) != nil || !strings.Contains(e.Error, c.path) {
			t.Errorf("%s %s: %d, Allow %q, body %q; want %d, Allow %q and a JSON error naming the path", c.method, c.path, w.Code, w.Header().Get("Allow"), w.Body, c.code, c.allow)
		}
	}
}
