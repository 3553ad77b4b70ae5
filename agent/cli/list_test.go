package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/scrubd/scrubd/agent/api"
	"github.com/scrubd/scrubd/agent/dataplane"
	"github.com/scrubd/scrubd/agent/placement"
	"github.com/scrubd/scrubd/agent/protect"
	"github.com/scrubd/scrubd/agent/store"
	"github.com/scrubd/scrubd/internal/cputime"
	"github.com/scrubd/scrubd/swpath/rule"
)

// addRules adds n rules (two kinds of match) through the API at sock.
func addRules(t testing.TB, sock string, n int) {
	t.Helper()
	var b strings.Builder
	b.WriteString("rules:\n")
	for i := 0; i < n; i++ {
		if i%2 == 0 {
			fmt.Fprintf(&b, "  - {id: r%d, priority: %d, action: drop, match: {dst: 203.0.%d.%d/32, proto: udp, src_port: [\"53\", \"123\"], length: \"512-65535\"}}\n", i, i%1000, i/256%256, i%256)
		} else {
			fmt.Fprintf(&b, "  - {id: r%d, action: drop, match: {src: 198.51.%d.%d/32, proto: tcp, tcp_flags: {value: syn, mask: syn}}}\n", i, i/256%256, i%256)
		}
	}
	if _, err := api.NewUnixClient(sock).AddFile(context.Background(), []byte(b.String())); err != nil {
		t.Fatal(err)
	}
}

// reference is what rules list printed before it streamed: every rule
// decoded into api.RuleInfo, then encoded again or laid out in a table.
func reference(t testing.TB, sock string, asJSON bool) string {
	list, _, err := api.NewUnixClient(sock).ListPage(context.Background(), "", 0)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if asJSON {
		enc := json.NewEncoder(&out)
		enc.SetIndent("", "  ")
		enc.Encode(list)
		return out.String()
	}
	tw := tabwriter.NewWriter(&out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSOURCE\tSTATUS\tPATH\tHW PKTS\tSW PKTS\tPPS\tREASON")
	for _, r := range list {
		why := r.Placement
		if r.Status != "active" {
			why = r.Reason
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%.0f\t%s\n", r.Rule.ID, r.Source, r.Status, r.Path, r.HW.Packets, r.SW.Packets, r.PPS, why)
	}
	tw.Flush()
	return out.String()
}

// The streamed list prints byte for byte what decoding every rule and
// printing it again did, as a table and as JSON.
func TestRulesListStreamsSameOutput(t *testing.T) {
	sock := startAPI(t)
	// Empty: a JSON array, not null; the table's header.
	if rc, out, errs := rules("list", "--json", "--socket", sock); rc != 0 || out != "[]\n" {
		t.Fatalf("empty list --json: rc %d %q %q", rc, out, errs)
	}
	addRules(t, sock, 50)
	for _, asJSON := range []bool{false, true} {
		args := []string{"list", "--socket", sock}
		if asJSON {
			args = append(args, "--json")
		}
		rc, out, errs := rules(args...)
		if rc != 0 {
			t.Fatalf("rules %v: rc %d %s", args, rc, errs)
		}
		if want := reference(t, sock, asJSON); out != want {
			t.Errorf("rules %v:\n got %d bytes %.300q\nwant %d bytes %.300q", args, len(out), out, len(want), want)
		}
	}
	// A page: the same rules as the reference's first ten, the next
	// page named on stderr.
	rc, out, errs := rules("list", "--json", "--limit", "10", "--socket", sock)
	var page []api.RuleInfo
	if rc != 0 || json.Unmarshal([]byte(out), &page) != nil || len(page) != 10 || !strings.Contains(errs, "next page with --after "+page[9].Rule.ID) {
		t.Fatalf("one page: rc %d, %d rules, stderr %q", rc, len(page), errs)
	}
}

// serveHandler serves h on a unix socket until the test ends and returns
// the socket's path.
func serveHandler(t testing.TB, h http.Handler) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "api.sock")
	l, err := api.ListenUnix(sock)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- api.Serve(ctx, l, h) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	return sock
}

// everyKindAPI is an agent's API over rules of every status, path and
// reason kind: placed in hardware and in software with counters and
// rates, an accept rule (path none, with its reason), one not placed yet,
// one narrowed and one refused by protection, one refused as expired;
// from a rule file whose path has non-ASCII characters and from the API;
// ids of several lengths.
func everyKindAPI(t testing.TB) *api.Server {
	mg := netip.MustParsePrefix("192.0.2.1/32")
	st := store.New(&protect.List{Entries: []protect.Entry{{Rule: rule.Rule{ID: "p-mgmt", Action: rule.Accept, Match: rule.Match{Dst: mg}}, Note: "mgmt"}}}, time.Now)
	dst := func(s string) rule.Match { return rule.Match{Dst: netip.MustParsePrefix(s)} }
	file := []rule.Rule{
		{ID: "hw-flood", Priority: 10, Action: rule.Drop, Match: rule.Match{Dst: netip.MustParsePrefix("203.0.113.0/24"), Proto: []uint8{rule.ProtoUDP}, SrcPort: rule.Ranges{{Lo: 53, Hi: 53}}}},
		{ID: "sw-a-much-longer-rule-identifier", Priority: 20, Action: rule.Drop, Match: dst("203.0.113.7/32")},
		{ID: "allow", Priority: 5, Action: rule.Accept, Match: dst("198.51.100.0/24")},
		{ID: "narrowed", Priority: 30, Action: rule.Drop, Match: dst("192.0.2.0/24")},
		{ID: "refused", Priority: 30, Action: rule.Drop, Match: dst("192.0.2.1/32")},
		{ID: "expired", Priority: 30, Action: rule.Drop, Expires: time.Now().Add(-time.Hour), Match: dst("203.0.113.9/32")},
	}
	if _, err := st.Replace("file:/etc/scrubd/règles-été.yaml", file); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Replace("api", []rule.Rule{{ID: "new", Action: rule.Drop, Match: dst("203.0.113.10/32")}}); err != nil {
		t.Fatal(err)
	}
	view := &placement.View{Rules: placement.RuleListOf([]placement.RuleView{
		{ID: "p-mgmt", Path: placement.None, Reason: "protect"},
		{ID: "hw-flood", Path: placement.HW, Reason: "flood of small frames: 9.1 Mpps at 64 B", HW: dataplane.Counter{Packets: 18446744073709551615, Bytes: 1 << 50}, PPS: 9123456.5},
		{ID: "sw-a-much-longer-rule-identifier", Path: placement.SW, Reason: "software: large frames (1400 B)", SW: dataplane.Counter{Packets: 42, Bytes: 58800}, PPS: 0.49},
		{ID: "allow", Path: placement.None, Reason: "accept rule: an allow-list entry, in both paths"},
		{ID: "narrowed", Path: placement.SW, Reason: "software: hardware cannot except the protected /32", SW: dataplane.Counter{Packets: 7}, PPS: 2.5},
		// A view older than the store: a rule refused since is shown
		// without its old placement, and its columns count for nothing.
		{ID: "refused", Path: placement.Path("stale-view-path"), Reason: "stale", HW: dataplane.Counter{Packets: 1}, PPS: 1e12},
	}...)}
	return &api.Server{Store: st, View: func() *placement.View { return view }, Now: time.Now}
}

// rules list prints every kind of rule as the reference (every rule
// decoded, laid out by text/tabwriter, or encoded again) prints it, byte
// for byte, through the NDJSON reply with its widths and through an
// agent that answers a JSON array without them (the rows kept and
// measured first); one page too.
func TestRulesListEveryKind(t *testing.T) {
	srv := everyKindAPI(t)
	sock := serveHandler(t, srv.Handler())
	// An agent from before NDJSON: a JSON array, no count, no widths.
	old := serveHandler(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Header.Del("Accept")
		srv.Handler().ServeHTTP(oldAgent{w}, r)
	}))
	want := map[bool]string{false: reference(t, sock, false), true: reference(t, sock, true)}
	for _, l := range []string{"hw-flood", "sw-a-much-longer-rule-identifier", "accept rule: an allow-list entry", "narrowed: protected traffic excepted",
		"refused: every packet it matches is protected", "refused: already expired", "file:/etc/scrubd/règles-été.yaml", "18446744073709551615", "9123456"} {
		if !strings.Contains(want[false], l) {
			t.Fatalf("the reference table lacks %q:\n%s", l, want[false])
		}
	}
	for _, s := range []string{sock, old} {
		for _, asJSON := range []bool{false, true} {
			args := []string{"list", "--socket", s}
			if asJSON {
				args = append(args, "--json")
			}
			rc, out, errs := rules(args...)
			if rc != 0 || out != want[asJSON] || errs != "" {
				t.Errorf("rules %v: rc %d, stderr %q\n got:\n%s\nwant:\n%s", args, rc, errs, out, want[asJSON])
			}
		}
		// --ndjson: each rule as encoding/json writes it, a line each.
		list, _, err := api.NewUnixClient(sock).ListPage(context.Background(), "", 0)
		if err != nil {
			t.Fatal(err)
		}
		var nd strings.Builder
		for _, ri := range list {
			b, _ := json.Marshal(ri)
			nd.Write(append(b, '\n'))
		}
		if rc, out, errs := rules("list", "--ndjson", "--socket", s); rc != 0 || out != nd.String() || errs != "" {
			t.Errorf("rules list --ndjson from %s: rc %d, stderr %q\n got:\n%s\nwant:\n%s", s, rc, errs, out, nd.String())
		}
		rc, out, errs := rules("list", "--limit", "3", "--after", "hw-flood", "--socket", s)
		lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
		if rc != 0 || len(lines) != 4 || !strings.HasPrefix(lines[1], "sw-a-much-longer-rule-identifier  file:") || !strings.HasPrefix(lines[3], "narrowed  ") ||
			!strings.Contains(errs, "next page with --after narrowed") {
			t.Errorf("a page from %s: rc %d, stderr %q:\n%s", s, rc, errs, out)
		}
	}
}

// oldAgent answers as an agent from before the count header did.
type oldAgent struct{ http.ResponseWriter }

func (w oldAgent) WriteHeader(code int) {
	w.Header().Del(api.CountHeader)
	w.ResponseWriter.WriteHeader(code)
}

// rules list prints a list of any size, with no cap and nothing left out:
// 200k rules (twice the 100k goal) and a rule whose reason is longer than
// the client's read buffer, the table written as the rows arrive.
func TestRulesListAnySize(t *testing.T) {
	const n = 200000
	long := strings.Repeat("why ", 300000) // 1.2 MB
	sock := serveHandler(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", api.NDJSON)
		w.Header().Set(api.CountHeader, fmt.Sprint(n))
		w.Header().Set(api.WidthsHeader, api.Widths{ID: 7, Source: 3, Status: 6, Path: 2, HWPackets: 1, SWPackets: 1, PPS: 1}.String())
		bw := bufio.NewWriter(w)
		for i := range n {
			why := "software"
			if i == n/2 {
				why = long
			}
			fmt.Fprintf(bw, `{"rule":{"id":"r%06d"},"source":"api","status":"active","path":"sw","placement_reason":%q,"hw":{"packets":0},"sw":{"packets":0},"pps":0}`+"\n", i, why)
		}
		bw.Flush()
	}))
	rc, out, errs := rules("list", "--socket", sock)
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if rc != 0 || len(lines) != n+1 {
		t.Fatalf("rc %d, %d lines (want %d), stderr %q", rc, len(lines), n+1, errs)
	}
	for _, i := range []int{0, n / 2, n - 1} {
		why := "software"
		if i == n/2 {
			why = long
		}
		if want := fmt.Sprintf("r%06d  api     active  sw    0        0        0    %s", i, why); lines[i+1] != want {
			t.Errorf("row %d: %.100q, want %.100q", i, lines[i+1], want)
		}
	}
}

// A reply cut off or holding a malformed rule fails the command (exit 1)
// with an error that names where the list stopped; the rows printed before
// stay, and a --json array is left unclosed, so no JSON reader takes it
// for the whole list.
func TestRulesListCutOrMalformed(t *testing.T) {
	row := func(i int) string {
		return fmt.Sprintf(`{"rule":{"id":"r%d"},"source":"api","status":"active","path":"sw","hw":{"packets":0,"bytes":0},"sw":{"packets":0,"bytes":0},"pps":0}`+"\n", i)
	}
	for _, tc := range []struct {
		name, count, body, want string
		rows                    int
	}{
		{"cut off", "5", row(0) + row(1) + row(2), "scrubd rules: scrubd API: GET /v1/rules: reply cut off: 3 of the 5 rules it announced\n", 3},
		{"cut off in a rule", "5", row(0) + row(1) + row(2)[:20], "scrubd rules: scrubd API: GET /v1/rules: reply cut off in rule 2 (after 2 whole rules): 20 bytes without a newline\n", 2},
		{"malformed", "3", row(0) + row(1) + `{"rule":{"id":"r2"},"hw":{"packets":-}}` + "\n", "scrubd rules: scrubd API: GET /v1/rules: rule 2 of the reply: ", 2},
	} {
		sock := serveHandler(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", api.NDJSON)
			w.Header().Set(api.CountHeader, tc.count)
			w.Header().Set(api.WidthsHeader, "id=2,source=3,status=6,path=2,hw_packets=1,sw_packets=1,pps=1")
			io.WriteString(w, tc.body)
		}))
		rc, out, errs := rules("list", "--socket", sock)
		if rc != 1 || !strings.HasPrefix(errs, tc.want) || strings.Count(out, "\n") != 1+tc.rows || !strings.HasPrefix(out, "ID  SOURCE") ||
			!strings.HasSuffix(out, fmt.Sprintf("r%d  api     active  sw    0        0        0    \n", tc.rows-1)) {
			t.Errorf("%s: rc %d, stderr %q (want %q), stdout:\n%s", tc.name, rc, errs, tc.want, out)
		}
		rc, out, errs = rules("list", "--json", "--socket", sock)
		var v any
		if rc != 1 || !strings.HasPrefix(errs, tc.want) || json.Unmarshal([]byte(out), &v) == nil || !strings.HasPrefix(out, "[\n  {") {
			t.Errorf("%s --json: rc %d, stderr %q, stdout %q", tc.name, rc, errs, out)
		}
		rc, out, errs = rules("list", "--ndjson", "--socket", sock)
		if rc != 1 || !strings.HasPrefix(errs, tc.want) || out != row(0)+row(1)+row(2)[:len(row(2))*(tc.rows/3)] {
			t.Errorf("%s --ndjson: rc %d, stderr %q, stdout %q", tc.name, rc, errs, out)
		}
	}
}

// BenchmarkRulesList: rules list of 10k rules through the API on a unix
// socket, printed (to io.Discard) as the command does (streamed) and as it
// did (every rule decoded, then printed); ns/rule is the time per rule,
// cpu-ns/rule the process's CPU time (agent and client together) per rule.
func BenchmarkRulesList(b *testing.B) {
	const n = 10000
	sock := startAPI(b)
	addRules(b, sock, n)
	c := api.NewUnixClient(sock)
	for _, tc := range []struct {
		name   string
		asJSON bool
		old    bool
	}{{"table", false, false}, {"table-decode-all", false, true}, {"json", true, false}, {"json-decode-all", true, true}} {
		b.Run(tc.name, func(b *testing.B) {
			var cpu time.Duration
			for b.Loop() {
				c0 := cputime.Process()
				if tc.old {
					reference(b, sock, tc.asJSON)
					cpu += cputime.Process() - c0
					continue
				}
				format := listTableFormat
				if tc.asJSON {
					format = listJSONFormat
				}
				if _, err := listRules(context.Background(), c, "", 0, format, io.Discard); err != nil {
					b.Fatal(err)
				}
				cpu += cputime.Process() - c0
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/rule")
			b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N)/n, "cpu-ns/rule")
		})
	}
}
