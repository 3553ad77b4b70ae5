package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/scrubd/scrubd/agent/dataplane"
	"github.com/scrubd/scrubd/agent/placement"
	"github.com/scrubd/scrubd/agent/store"
	"github.com/scrubd/scrubd/swpath/rule"
)

// GET /v1/rules streams every rule in the store's order (the client reads
// it one rule at a time), with placements from the view; ?limit=N&after=ID
// pages through the same list, the next page's id in X-Scrubd-Next-After
// and none on the last page; a bad limit or an unknown id is a 400 naming
// it; GET /v1/rules/ID answers one rule without the list.
func TestListStreamedAndPaged(t *testing.T) {
	const n = 2500
	st := store.New(nil, time.Now)
	rules := make([]rule.Rule, n)
	view := &placement.View{}
	var rvs []placement.RuleView
	for i := range rules {
		rules[i] = rule.Rule{ID: fmt.Sprintf("r%05d", i), Priority: 100, Action: rule.Drop,
			Match: rule.Match{Dst: netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(i >> 8), byte(i), 1}), 32)}}
		rvs = append(rvs, placement.RuleView{ID: rules[i].ID, Path: placement.SW, Reason: "software: " + rules[i].ID})
	}
	view.Rules = placement.RuleListOf(rvs...)
	if _, err := st.Replace("api", rules); err != nil {
		t.Fatal(err)
	}
	c := NewUnixClient(serveUnix(t, &Server{Store: st, View: func() *placement.View { return view }, Now: time.Now}))
	ctx := context.Background()
	check := func(what string, got []RuleInfo, from int) {
		t.Helper()
		for i, ri := range got {
			id := fmt.Sprintf("r%05d", from+i)
			if ri.Rule.ID != id || ri.Path != "sw" || ri.Placement != "software: "+id || ri.Rule.Match.Dst != rules[from+i].Match.Dst.String() {
				t.Fatalf("%s: rule %d is %+v, want %s", what, i, ri, id)
			}
		}
	}
	all, err := c.List(ctx)
	if err != nil || len(all) != n {
		t.Fatalf("List: %d rules, %v", len(all), err)
	}
	check("List", all, 0)
	after, pages, got := "", 0, 0
	for {
		page, next, err := c.ListPage(ctx, after, 1000)
		if err != nil {
			t.Fatal(err)
		}
		check(fmt.Sprintf("page %d", pages), page, got)
		got += len(page)
		pages++
		if next == "" {
			break
		}
		if next != page[len(page)-1].Rule.ID {
			t.Fatalf("next %q, want the page's last %q", next, page[len(page)-1].Rule.ID)
		}
		after = next
	}
	if pages != 3 || got != n {
		t.Fatalf("%d pages, %d rules; want 3 and %d", pages, got, n)
	}
	for _, tc := range []struct {
		after string
		limit int
		want  string
	}{{"nosuch", 10, `after "nosuch": no such rule`}} {
		_, _, err := c.ListPage(ctx, tc.after, tc.limit)
		if ae, ok := err.(*APIError); !ok || ae.Code != http.StatusBadRequest || !strings.Contains(ae.Msg, tc.want) {
			t.Errorf("after %q limit %d: %v", tc.after, tc.limit, err)
		}
	}
	var out []RuleInfo
	err = c.do(ctx, http.MethodGet, "/v1/rules?limit=-1", nil, &out)
	if ae, ok := err.(*APIError); !ok || ae.Code != http.StatusBadRequest || !strings.Contains(ae.Msg, `limit "-1": must be a positive integer`) {
		t.Errorf("limit -1: %v", err)
	}
	ri, err := c.Get(ctx, "r01234")
	if err != nil || ri.Rule.ID != "r01234" || ri.Placement != "software: r01234" {
		t.Errorf("Get: %+v %v", ri, err)
	}
	if _, err := c.Get(ctx, "nosuch"); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("Get nosuch: %v", err)
	}
}

// fakeList serves GET /v1/rules with a handler of the test's own, over
// TCP, and returns a client for it.
func fakeList(t *testing.T, h http.HandlerFunc) *Client {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return NewTCPClient(strings.TrimPrefix(srv.URL, "http://"), "")
}

const okLine = `{"rule":{"id":"r%d","priority":1,"action":"drop","match":"all"},"source":"api","status":"active","path":"sw","hw":{"packets":0,"bytes":0},"sw":{"packets":0,"bytes":0},"pps":0,"avg_frame_bytes":0,"moves":0}`

// A reply that is cut off, has a broken or empty line, or holds other than
// the rules it announced is an error that says so and how many rules
// came, never a shorter list; an agent's JSON array (an agent that writes
// no NDJSON) is read too, and its cut-off array is an error as well.
func TestListStreamCutOrMalformed(t *testing.T) {
	ndjson := func(count string, body string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			if !strings.Contains(r.Header.Get("Accept"), NDJSON) {
				t.Errorf("Accept %q does not ask for NDJSON", r.Header.Get("Accept"))
			}
			w.Header().Set("Content-Type", NDJSON)
			if count != "" {
				w.Header().Set(CountHeader, count)
			}
			io.WriteString(w, body)
		}
	}
	line := func(i int) string { return fmt.Sprintf(okLine, i) + "\n" }
	for _, tc := range []struct {
		name string
		h    http.HandlerFunc
		want string // "" : no error
		n    int
	}{
		{"whole", ndjson("2", line(0)+line(1)), "", 2},
		{"no count (any number)", ndjson("", line(0)+line(1)+line(2)), "", 3},
		{"fewer than announced", ndjson("3", line(0)+line(1)), "reply cut off: 2 of the 3 rules it announced", 0},
		{"more than announced", ndjson("1", line(0)+line(1)), "reply holds more than the 1 rules it announced", 0},
		{"last line without newline", ndjson("2", line(0)+line(1)[:40]), "reply cut off in rule 1 (after 1 whole rules): 40 bytes without a newline", 0},
		{"malformed line", ndjson("2", line(0)+`{"rule":{"id":"r1"},"hw":`+"\n"), "rule 1 of the reply: unexpected end of JSON input", 0},
		{"empty line", ndjson("2", line(0)+"\n"+line(1)), "rule 1 of the reply: an empty line", 0},
		{"bad count", ndjson("lots", line(0)), `X-Scrubd-Rules "lots" is not a count`, 0},
		{"bad widths", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set(WidthsHeader, "id=3")
			ndjson("1", line(0))(w, r)
		}, `list widths "id=3": source is missing`, 0},
		{"connection dropped mid-rule", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", NDJSON)
			w.Header().Set(CountHeader, "3")
			io.WriteString(w, line(0)+line(1)[:30])
			w.(http.Flusher).Flush()
			conn, _, err := w.(http.Hijacker).Hijack()
			if err != nil {
				t.Error(err)
				return
			}
			conn.Close()
		}, "reply cut off after 1 rules: unexpected EOF", 0},
		{"JSON array", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, "[\n"+line(0)+",\n"+line(1)+"]\n")
		}, "", 2},
		{"JSON array cut off", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, "[\n"+line(0)+",\n"+line(1))
		}, "reply cut off after 2 rules: EOF", 0},
		{"JSON array shorter than announced", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set(CountHeader, "3")
			io.WriteString(w, "[\n"+line(0)+",\n"+line(1)+"]\n")
		}, "reply cut off: 2 of the 3 rules it announced", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			list, err := fakeList(t, tc.h).List(context.Background())
			if tc.want == "" {
				if err != nil || len(list) != tc.n {
					t.Fatalf("%d rules, %v; want %d", len(list), err, tc.n)
				}
				for i, ri := range list {
					if ri.Rule.ID != fmt.Sprintf("r%d", i) || !ri.Rule.Match.All {
						t.Errorf("rule %d: %+v", i, ri)
					}
				}
				return
			}
			before, after, _ := strings.Cut(tc.want, "...")
			if err == nil || !strings.Contains(err.Error(), before) || !strings.Contains(err.Error(), after) || list != nil {
				t.Fatalf("got %d rules, error %v; want the error %q", len(list), err, tc.want)
			}
		})
	}
}

// The agent's NDJSON reply announces its rule count and the widths of the
// table's columns (from the same rules: a page's own), and every line is
// one rule as the JSON array has it.
func TestListNDJSONHeads(t *testing.T) {
	st := store.New(nil, time.Now)
	rules := []rule.Rule{
		{ID: "a", Priority: 1, Action: rule.Drop, Match: rule.Match{Dst: netip.MustParsePrefix("10.0.0.1/32")}},
		{ID: "longer-id", Priority: 1, Action: rule.Drop, Match: rule.Match{Dst: netip.MustParsePrefix("10.0.0.2/32")}},
		{ID: "c", Priority: 1, Action: rule.Drop, Match: rule.Match{Dst: netip.MustParsePrefix("10.0.0.3/32")}},
	}
	if _, err := st.Replace("file:/r/règles.yaml", rules); err != nil {
		t.Fatal(err)
	}
	view := &placement.View{Rules: placement.RuleListOf(
		placement.RuleView{ID: "a", Path: placement.HW, HW: dataplane.Counter{Packets: 1234567}, PPS: 99.5},
		placement.RuleView{ID: "longer-id", Path: placement.SW, SW: dataplane.Counter{Packets: 12}, PPS: 100.5},
	)}
	c := NewUnixClient(serveUnix(t, &Server{Store: st, View: func() *placement.View { return view }, Now: time.Now}))
	for _, tc := range []struct {
		after  string
		limit  int
		widths Widths
		ids    []string
	}{
		// "file:/r/règles.yaml" is 19 characters (20 bytes); 99.5 and
		// 100.5 print as 100 (rounded half to even: 100 and 100).
		{"", 0, Widths{ID: 9, Source: 19, Status: 6, Path: 4, HWPackets: 7, SWPackets: 2, PPS: 3}, []string{"a", "longer-id", "c"}},
		{"", 1, Widths{ID: 1, Source: 19, Status: 6, Path: 2, HWPackets: 7, SWPackets: 1, PPS: 3}, []string{"a"}},
		{"longer-id", 0, Widths{ID: 1, Source: 19, Status: 6, Path: 4, HWPackets: 1, SWPackets: 1, PPS: 1}, []string{"c"}},
	} {
		var head ListHead
		var ids []string
		err := c.ListStream(context.Background(), tc.after, tc.limit, func(h ListHead) error { head = h; return nil }, func(raw []byte) error {
			var ri RuleInfo
			if err := json.Unmarshal(raw, &ri); err != nil {
				return err
			}
			ids = append(ids, ri.Rule.ID)
			return nil
		})
		if err != nil || !head.HasWidths || head.Widths != tc.widths || head.Rules != len(tc.ids) || !slices.Equal(ids, tc.ids) {
			t.Errorf("after %q limit %d: head %+v, ids %q, %v; want widths %+v, ids %q", tc.after, tc.limit, head, ids, err, tc.widths, tc.ids)
		}
	}
}

// placements finds each entry's placement as an index by id does, however
// the view's order differs from the store's: protect rules first, rules
// the placer has not seen yet, rules it still has after their removal, a
// replaced rule moved to the end, a view in reverse, no view.
func TestPlacementsAsByID(t *testing.T) {
	const n = 200
	st := store.New(nil, time.Now)
	rules := make([]rule.Rule, n)
	for i := range rules {
		rules[i] = rule.Rule{ID: fmt.Sprintf("r%03d", i), Priority: 100, Action: rule.Drop,
			Match: rule.Match{Dst: netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 1, byte(i >> 8), byte(i)}), 32)}}
	}
	// r007 expired: refused, shown without a placement even if the view has one.
	rules[7].Expires = time.Now().Add(-time.Hour)
	if _, err := st.Replace("api", rules); err != nil {
		t.Fatal(err)
	}
	es := st.List()
	rv := func(id string) placement.RuleView {
		return placement.RuleView{ID: id, Path: placement.SW, Reason: "for " + id}
	}
	inOrder := func(skip func(i int) bool) []placement.RuleView {
		var out []placement.RuleView
		for i := range rules {
			if !skip(i) {
				out = append(out, rv(rules[i].ID))
			}
		}
		return out
	}
	views := map[string][]placement.RuleView{
		"same order":               inOrder(func(int) bool { return false }),
		"protect first":            append([]placement.RuleView{rv("protect-0"), rv("protect-1")}, inOrder(func(int) bool { return false })...),
		"new rules not placed yet": inOrder(func(i int) bool { return i%40 >= 20 }),
		"removed rules still there": append(inOrder(func(int) bool { return false })[:50],
			append([]placement.RuleView{rv("gone-1"), rv("gone-2"), rv("gone-3")}, inOrder(func(int) bool { return false })[50:]...)...),
		"a rule moved to the end": append(inOrder(func(i int) bool { return i == 3 }), rv("r003")),
		"reversed": func() []placement.RuleView {
			v := inOrder(func(int) bool { return false })
			slices.Reverse(v)
			return v
		}(),
		"a long gap": func() []placement.RuleView {
			v := inOrder(func(int) bool { return false })
			gap := make([]placement.RuleView, 40)
			for i := range gap {
				gap[i] = rv(fmt.Sprintf("other-%d", i))
			}
			return append(append(v[:100:100], gap...), v[100:]...)
		}(),
	}
	for name, rules := range views {
		view := &placement.View{Rules: placement.RuleListOf(rules...)}
		s := &Server{Store: st, View: func() *placement.View { return view }}
		got := s.placements(es)
		for i := range es {
			var want *placement.RuleView
			for k := range rules {
				if rules[k].ID == es[i].Rule.ID && es[i].InForce() {
					want = view.Rules.At(k)
				}
			}
			if (got[i] == nil) != (want == nil) || (want != nil && *got[i] != *want) {
				t.Errorf("%s: entry %d (%s): placement %v, want %v", name, i, es[i].Rule.ID, got[i], want)
			}
		}
	}
	if got := (&Server{Store: st}).placements(es); len(got) != n || slices.ContainsFunc(got, func(p *placement.RuleView) bool { return p != nil }) {
		t.Errorf("no view: %v", got)
	}
}

// A caller that prints to a slow reader (a pager the user has not
// scrolled yet) still gets the whole list: the client reads the reply as
// the agent writes it, so the agent's write timeout does not cut it off.
func TestListSlowReaderGetsWholeList(t *testing.T) {
	const n = 5000 // about 1.5 MB: more than the socket buffers hold
	st := store.New(nil, time.Now)
	rules := make([]rule.Rule, n)
	for i := range rules {
		rules[i] = rule.Rule{ID: fmt.Sprintf("r%05d", i), Priority: 100, Action: rule.Drop,
			Match: rule.Match{Dst: netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 2, byte(i >> 8), byte(i)}), 32)}}
	}
	if _, err := st.Replace("api", rules); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(t.TempDir(), "api.sock")
	l, err := ListenUnix(sock)
	if err != nil {
		t.Fatal(err)
	}
	lim := DefaultLimits()
	lim.WriteTimeout = 2 * time.Second // ample to write it all (-race included)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ServeLimited(ctx, l, (&Server{Store: st, Now: time.Now}).Handler(), lim, nil) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	got := 0
	err = NewUnixClient(sock).ListStream(context.Background(), "", 0, nil, func(raw []byte) error {
		if got == 0 {
			time.Sleep(3 * time.Second) // the reader stalls past the write timeout
		}
		got++
		return nil
	})
	if err != nil || got != n {
		t.Fatalf("%d of %d rules, %v", got, n, err)
	}
}

// A listing its caller stops returns at once, though the agent still has
// more to send, and leaves no goroutine reading the reply.
func TestListStreamStopsEarly(t *testing.T) {
	release := make(chan struct{})
	c := fakeList(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", NDJSON)
		fmt.Fprintf(w, okLine+"\n"+okLine+"\n", 0, 1)
		w.(http.Flusher).Flush()
		select { // an agent that has more to say, later
		case <-release:
		case <-r.Context().Done():
		}
	})
	defer close(release)
	stop := errors.New("enough")
	t0 := time.Now()
	err := c.ListStream(context.Background(), "", 0, nil, func(raw []byte) error { return stop })
	if !errors.Is(err, stop) || time.Since(t0) > 5*time.Second {
		t.Fatalf("%v after %v", err, time.Since(t0))
	}
}
