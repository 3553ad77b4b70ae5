package api

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/scrubd/scrubd/agent/placement"
	"github.com/scrubd/scrubd/agent/store"
	"github.com/scrubd/scrubd/internal/cputime"
	"github.com/scrubd/scrubd/swpath/rule"
)

// apiAt100k serves a store of 100k API rules (and a view placing each) on
// a unix socket and returns a client.
func apiAt100k(b *testing.B) (*Client, *store.Store) {
	const n = 100000
	st := store.New(nil, time.Now)
	rules := make([]rule.Rule, n)
	rvs := make([]placement.RuleView, n)
	for i := range rules {
		rules[i] = rule.Rule{ID: fmt.Sprintf("r%06d", i), Priority: 100, Action: rule.Drop,
			Match: rule.Match{Dst: netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}), 32), Proto: []uint8{rule.ProtoUDP}}}
		rvs[i] = placement.RuleView{ID: rules[i].ID, Path: placement.SW, Reason: "software: hardware table full"}
	}
	view := &placement.View{Rules: placement.RuleListOf(rvs...)}
	if _, err := st.Replace("api", rules); err != nil {
		b.Fatal(err)
	}
	sock := serveUnix(b, &Server{Store: st, View: func() *placement.View { return view }, Persist: func() error { return nil }, Now: time.Now})
	return NewUnixClient(sock), st
}

// BenchmarkAPIListAt100k: GET /v1/rules of 100k rules, read whole by the
// client (ms per list; cpu-ms/list is the CPU time of the process, agent
// and client together, which moves less with the machine's load).
func BenchmarkAPIListAt100k(b *testing.B) {
	c, _ := apiAt100k(b)
	ctx := context.Background()
	var total, cpu time.Duration
	for b.Loop() {
		t0, c0 := time.Now(), cputime.Process()
		list, err := c.List(ctx)
		total, cpu = total+time.Since(t0), cpu+cputime.Process()-c0
		if err != nil || len(list) != 100000 {
			b.Fatalf("%d rules, %v", len(list), err)
		}
	}
	b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "ms/list")
	b.ReportMetric(float64(cpu.Milliseconds())/float64(b.N), "cpu-ms/list")
}

// BenchmarkAPIListServerAt100k: GET /v1/rules of 100k rules with the
// reply read and thrown away, so the figure is the agent's side (the
// store's list, the view's index, the JSON written rule by rule) and the
// socket, not a client's decoding (ms and CPU ms per list, bytes per
// list): as a JSON
// array (what curl gets) and as NDJSON (what the client asks for).
func BenchmarkAPIListServerAt100k(b *testing.B) {
	c, _ := apiAt100k(b)
	ctx := context.Background()
	for _, accept := range []string{"application/json", NDJSON} {
		b.Run(strings.TrimPrefix(accept, "application/"), func(b *testing.B) {
			var total, cpu time.Duration
			var size int64
			for b.Loop() {
				t0, c0 := time.Now(), cputime.Process()
				req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.Base+"/v1/rules", nil)
				if err != nil {
					b.Fatal(err)
				}
				req.Header.Set("Accept", accept)
				resp, err := c.HTTP.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				n, err := io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				total, cpu = total+time.Since(t0), cpu+cputime.Process()-c0
				if err != nil || resp.StatusCode != http.StatusOK || n < 100000*100 {
					b.Fatalf("status %d, %d bytes, %v", resp.StatusCode, n, err)
				}
				size = n
			}
			b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "ms/list")
			b.ReportMetric(float64(cpu.Milliseconds())/float64(b.N), "cpu-ms/list")
			b.ReportMetric(float64(size), "bytes/list")
		})
	}
}

// BenchmarkAPIAddAt100k: POST /v1/rules of one rule into a store holding
// 100k (µs per add, as the client sees it).
func BenchmarkAPIAddAt100k(b *testing.B) {
	c, st := apiAt100k(b)
	ctx := context.Background()
	i := 0
	var total time.Duration
	for b.Loop() {
		body := fmt.Appendf(nil, `{id: add%d, action: drop, match: {dst: 198.51.%d.%d/32}}`, i, i>>8&255, i&255)
		t0 := time.Now()
		if _, err := c.Add(ctx, body); err != nil {
			b.Fatal(err)
		}
		total += time.Since(t0)
		i++
	}
	b.ReportMetric(float64(total.Microseconds())/float64(b.N), "µs/add")
	_ = st
}
