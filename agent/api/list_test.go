package api

import (
	"context"
	"fmt"
	"net/http"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"
	"time"

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
	for i := range rules {
		rules[i] = rule.Rule{ID: fmt.Sprintf("r%05d", i), Priority: 100, Action: rule.Drop,
			Match: rule.Match{Dst: netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(i >> 8), byte(i), 1}), 32)}}
		view.Rules = append(view.Rules, placement.RuleView{ID: rules[i].ID, Path: placement.SW, Reason: "software: " + rules[i].ID})
	}
	if _, err := st.Replace("api", rules); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(t.TempDir(), "api.sock")
	l, err := ListenUnix(sock)
	if err != nil {
		t.Fatal(err)
	}
	serve(t, l, &Server{Store: st, View: func() *placement.View { return view }, Now: time.Now})
	c := NewUnixClient(sock)
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
