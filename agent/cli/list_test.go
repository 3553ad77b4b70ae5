package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"
	"text/tabwriter"

	"github.com/scrubd/scrubd/agent/api"
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

// BenchmarkRulesList: rules list of 10k rules through the API on a unix
// socket, printed (to io.Discard) as the command does (streamed) and as it
// did (every rule decoded, then printed); ns/rule is the cost per rule.
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
			for b.Loop() {
				if tc.old {
					reference(b, sock, tc.asJSON)
					continue
				}
				if _, err := listRules(context.Background(), c, "", 0, tc.asJSON, io.Discard); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/rule")
		})
	}
}
