package cli

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"

	"github.com/scrubd/scrubd/agent/api"
	"github.com/scrubd/scrubd/agent/apisock"
	"github.com/scrubd/scrubd/swpath/rule"
)

// sockEnv is the process as apisock sees it when it looks for the agent
// (the zero value: this process; tests give a user and an environment).
var sockEnv apisock.Env

// Rules is `scrubd rules list|get|add|delete|replace`.
func Rules(args []string, stdout, stderr io.Writer) int {
	return rulesCmd(args, os.Stdin, stdout, stderr)
}

const rulesUsage = `usage: scrubd rules COMMAND [flags]
  list                 every rule with its source, placement, reason and hw/sw counters, as a
                       table, --json (an array) or --ndjson (one rule a line), printed as it arrives
                       (--limit N [--after ID]: one page; the next page's --after is printed on stderr)
  get ID               one rule
  add FILE|-           add the rules of a rule file, all or none (or one rule as YAML/JSON)
  delete ID            delete an API rule
  replace FILE|-       replace every API rule with a rule file's rules
Flags may come before or after COMMAND and its argument.

The agent's socket is the first of: --socket; $SCRUBD_SOCKET; --config's
api.socket; else the first that answers of the socket of 'scrubd run --sim'
(%s for this user) and %s.
Or, over TCP: --addr HOST:PORT --token-file F [--tls] [--ca-file F] [--cert-file F --key-file F].

flags:`

func rulesCmd(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("rules", flag.ContinueOnError)
	sock := fs.String("socket", "", "the agent's API unix `socket` (default: see above)")
	cfgFile := fs.String("config", "", "the agent's config `file`: use the api.socket it names")
	addr := fs.String("addr", "", "API TCP address `host:port` (needs --token-file)")
	tokenFile := fs.String("token-file", "", "`file` holding the API bearer token")
	asJSON := fs.Bool("json", false, "print JSON")
	asNDJSON := fs.Bool("ndjson", false, "list: print one rule a line in compact JSON (NDJSON)")
	limit := fs.Int("limit", 0, "list: at most `N` rules (0: all)")
	after := fs.String("after", "", "list: the rules after this rule `id` (the previous page's last)")
	useTLS := fs.Bool("tls", false, "--addr: TLS, verifying the agent with the system's CAs (implied by --ca-file and --cert-file)")
	caFile := fs.String("ca-file", "", "--addr: TLS, verifying the agent's certificate with this CA `file` (PEM)")
	certFile := fs.String("cert-file", "", "--addr: client certificate `file` (PEM) for mutual TLS")
	keyFile := fs.String("key-file", "", "--addr: the client certificate's key `file` (PEM)")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), rulesUsage+"\n", sockEnv.SimPath(), apisock.Default)
		fs.PrintDefaults()
	}
	rest, code, ok := ParseArgs(fs, args, stdout, stderr)
	if !ok {
		return code
	}
	usageErr := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "scrubd rules: "+format+"\n", a...)
		fs.Usage()
		return ExitUsage
	}
	if len(rest) == 0 {
		return usageErr("a command is required (list, get, add, delete, replace)")
	}
	want := map[string]int{"list": 1, "get": 2, "delete": 2, "add": 2, "replace": 2}
	if n, known := want[rest[0]]; !known {
		return usageErr("unknown command %q", rest[0])
	} else if len(rest) != n {
		return usageErr("%s takes %d argument(s), got %d: %q", rest[0], n-1, len(rest)-1, rest[1:])
	}
	if *limit < 0 {
		return usageErr("--limit %d: must not be negative", *limit)
	}
	if *asNDJSON && (*asJSON || rest[0] != "list") {
		return usageErr("--ndjson is an output of list, and not with --json")
	}
	fail := func(err error) int { fmt.Fprintln(stderr, "scrubd rules:", err); return ExitFail }
	// What the command sends is read and checked before the agent is
	// looked for: a typo in the file is the first thing to hear about.
	var body []byte
	var isFile bool
	switch rest[0] {
	case "add", "replace":
		var err error
		if rest[1] == "-" {
			body, err = io.ReadAll(stdin)
		} else {
			body, err = os.ReadFile(rest[1])
		}
		if err != nil {
			return fail(err)
		}
		name := rest[1]
		if name == "-" {
			name = "stdin"
		}
		if isFile, err = checkRules(name, body, rest[0] == "replace"); err != nil {
			return fail(err)
		}
	}
	var c *api.Client
	if *addr != "" {
		if *tokenFile == "" {
			return usageErr("--addr needs --token-file")
		}
		tok, err := os.ReadFile(*tokenFile)
		if err != nil {
			return fail(fmt.Errorf("--token-file: %w", err))
		}
		token := strings.TrimSpace(string(tok))
		if *useTLS || *caFile != "" || *certFile != "" || *keyFile != "" {
			tc, err := clientTLS(*caFile, *certFile, *keyFile)
			if err != nil {
				return fail(err)
			}
			c = api.NewTLSClient(*addr, token, tc)
		} else {
			c = api.NewTCPClient(*addr, token)
		}
	} else {
		found, err := apisock.Find(apisock.Options{Socket: *sock, Config: *cfgFile, Env: sockEnv})
		if err != nil {
			return fail(err)
		}
		c = api.NewUnixClient(found.Path)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out := func(v any) {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(v)
	}
	switch rest[0] {
	case "list":
		format := listTableFormat
		switch {
		case *asJSON:
			format = listJSONFormat
		case *asNDJSON:
			format = listNDJSONFormat
		}
		next, err := listRules(ctx, c, *after, *limit, format, stdout)
		if err != nil {
			return fail(err)
		}
		if next != "" {
			fmt.Fprintf(stderr, "scrubd rules: more rules follow: next page with --after %s\n", next)
		}
		return ExitOK
	case "get":
		r, err := c.Get(ctx, rest[1])
		if err != nil {
			return fail(err)
		}
		out(r)
		return ExitOK
	case "delete":
		if err := c.Delete(ctx, rest[1]); err != nil {
			return fail(err)
		}
		fmt.Fprintf(stdout, "deleted %s\n", rest[1])
		return ExitOK
	case "add":
		if !isFile {
			r, err := c.Add(ctx, body)
			if err != nil {
				return fail(err)
			}
			fmt.Fprintln(stdout, addedLine(r.Rule.ID, r.Path, r.Placement))
			return ExitOK
		}
		// All or none: the agent adds the file's rules in one step.
		added, err := c.AddFile(ctx, body)
		if err != nil {
			return fail(err)
		}
		for _, ri := range added {
			fmt.Fprintln(stdout, addedLine(ri.Rule.ID, ri.Path, ri.Placement))
		}
		return ExitOK
	default: // replace
		res, err := c.Replace(ctx, body)
		if err != nil {
			return fail(err)
		}
		out(res)
		return ExitOK
	}
}

// listFormat is how rules list prints.
type listFormat int

const (
	listTableFormat  listFormat = iota
	listJSONFormat              // the agent's JSON array, indented
	listNDJSONFormat            // one rule a line, compact
)

// listRules writes one page of rules as a table, as the agent's JSON array
// indented, or one rule a line, each rule written as it arrives through a
// buffered writer: the list is never held whole (an agent too old to send
// the table's column widths is the exception: its rows are kept to measure
// them). If the listing fails part way, what was written stays, the error
// is returned, and a JSON array is left without its closing bracket, so
// that no JSON reader takes it for the whole list.
func listRules(ctx context.Context, c *api.Client, after string, limit int, format listFormat, w io.Writer) (next string, err error) {
	bw := bufio.NewWriterSize(w, 64<<10)
	switch format {
	case listJSONFormat:
		err = listJSON(ctx, c, after, limit, &next, bw)
	case listNDJSONFormat:
		err = listNDJSON(ctx, c, after, limit, &next, bw)
	default:
		err = listTable(ctx, c, after, limit, &next, bw)
	}
	if ferr := bw.Flush(); err == nil {
		err = ferr
	}
	if err != nil {
		return "", err
	}
	return next, nil
}

// listJSON writes the rules as an indented JSON array, each rule indented
// from the agent's own bytes (not decoded and encoded again) as
// json.Indent would.
func listJSON(ctx context.Context, c *api.Client, after string, limit int, next *string, bw *bufio.Writer) error {
	var ind []byte
	n := 0
	err := c.ListStream(ctx, after, limit, func(h api.ListHead) error { *next = h.Next; return nil }, func(raw []byte) error {
		ind = append(ind[:0], ",\n  "...)
		if n == 0 {
			ind = append(ind[:0], "[\n  "...)
		}
		var err error
		if ind, err = api.AppendIndent(ind, raw, "  ", "  "); err != nil {
			return err
		}
		n++
		_, err = bw.Write(ind)
		return err
	})
	if err != nil {
		return err
	}
	if n == 0 {
		_, err = bw.WriteString("[]\n")
	} else {
		_, err = bw.WriteString("\n]\n")
	}
	return err
}

// listNDJSON writes each rule on a line of its own in compact JSON (the
// agent's bytes, checked to be one JSON value; an old agent's array
// elements compacted).
func listNDJSON(ctx context.Context, c *api.Client, after string, limit int, next *string, bw *bufio.Writer) error {
	var line bytes.Buffer
	return c.ListStream(ctx, after, limit, func(h api.ListHead) error { *next = h.Next; return nil }, func(raw []byte) error {
		line.Reset()
		if err := json.Compact(&line, raw); err != nil {
			return err
		}
		line.WriteByte('\n')
		_, err := bw.Write(line.Bytes())
		return err
	})
}

// tableHead is the table's header row; the reason is the last column.
var tableHead = [...]string{"ID", "SOURCE", "STATUS", "PATH", "HW PKTS", "SW PKTS", "PPS", "REASON"}

// table lays out rows as text/tabwriter did with padding 2 (every column
// as wide as its widest cell, header included, plus two spaces; the last
// column as it is), from widths known before the first row.
type table struct {
	cols [len(tableHead) - 1]int
	line []byte
	row  api.ListRow
}

func newTable(wd api.Widths) *table {
	t := &table{}
	for i, v := range [...]int{wd.ID, wd.Source, wd.Status, wd.Path, wd.HWPackets, wd.SWPackets, wd.PPS} {
		t.cols[i] = max(v, len(tableHead[i])) + 2
	}
	return t
}

// cell appends s padded to column i's width (at least two spaces after
// a cell wider than the agent said).
func (t *table) cell(b, s []byte, i int) []byte {
	b = append(b, s...)
	pad := t.cols[i] - utf8.RuneCount(s)
	if pad < 2 {
		pad = 2
	}
	for ; pad > 0; pad-- {
		b = append(b, ' ')
	}
	return b
}

func (t *table) header(bw *bufio.Writer) error {
	b := t.line[:0]
	for i, h := range tableHead[:len(tableHead)-1] {
		b = t.cell(b, []byte(h), i)
	}
	b = append(b, tableHead[len(tableHead)-1]...)
	t.line = append(b, '\n')
	_, err := bw.Write(t.line)
	return err
}

// write decodes one rule and writes its row.
func (t *table) write(bw *bufio.Writer, raw []byte) error {
	r := &t.row
	if err := r.Decode(raw); err != nil {
		return err
	}
	var num [32]byte
	b := t.cell(t.line[:0], r.ID, 0)
	b = t.cell(b, r.Source, 1)
	b = t.cell(b, r.Status, 2)
	b = t.cell(b, r.Path, 3)
	b = t.cell(b, strconv.AppendUint(num[:0], r.HWPackets, 10), 4)
	b = t.cell(b, strconv.AppendUint(num[:0], r.SWPackets, 10), 5)
	b = t.cell(b, strconv.AppendFloat(num[:0], r.PPS, 'f', 0, 64), 6)
	if string(r.Status) == "active" {
		b = append(b, r.Placement...)
	} else {
		b = append(b, r.Reason...)
	}
	t.line = append(b, '\n')
	_, err := bw.Write(t.line)
	return err
}

// listTable writes the rules as a table, each row as it arrives, aligned
// by the column widths the agent sends with the reply. From an agent that
// does not send them, the rules are kept (as the agent's bytes) and
// measured first.
func listTable(ctx context.Context, c *api.Client, after string, limit int, next *string, bw *bufio.Writer) error {
	var t *table
	var kept []byte
	var ends []int
	err := c.ListStream(ctx, after, limit, func(h api.ListHead) error {
		*next = h.Next
		if !h.HasWidths {
			return nil
		}
		t = newTable(h.Widths)
		return t.header(bw)
	}, func(raw []byte) error {
		if t != nil {
			return t.write(bw, raw)
		}
		kept = append(kept, raw...)
		ends = append(ends, len(kept))
		return nil
	})
	if err != nil || t != nil {
		return err
	}
	var wd api.Widths
	var row api.ListRow
	for i, start := range starts(ends) {
		if err := row.Decode(kept[start:ends[i]]); err != nil {
			return fmt.Errorf("rule %d of the reply: %w", i, err)
		}
		wd.AddRow(&row)
	}
	t = newTable(wd)
	if err := t.header(bw); err != nil {
		return err
	}
	for i, start := range starts(ends) {
		if err := t.write(bw, kept[start:ends[i]]); err != nil {
			return err
		}
	}
	return nil
}

// starts are where the slices that end at ends begin, the first at 0.
func starts(ends []int) []int {
	s := make([]int, len(ends))
	for i := 1; i < len(ends); i++ {
		s[i] = ends[i-1]
	}
	return s
}

// checkRules parses what `rules add` or `rules replace` sends, as the
// agent will, so that an error names the file and the line and leads with
// the real cause. A mapping with a top-level "rules" key is a rule file;
// one with a rule's own keys (id, action, match, priority, expires) is one
// rule (add only); anything else is neither, and the error lists the keys
// found (a misspelt "rules:" lands here, not on "id: required").
func checkRules(name string, data []byte, fileOnly bool) (isFile bool, err error) {
	// A rule file is parsed once: probing a 100k-rule file as a YAML tree
	// first cost seconds and the tree's memory. The probe below is left
	// to what is not a good rule file, to say what it is.
	if _, err := rule.Parse(name, data, time.Now()); err == nil {
		return true, nil
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return false, fmt.Errorf("%s: not valid YAML or JSON: %v", name, err)
	}
	if doc.Kind == 0 || len(doc.Content) == 0 {
		return false, fmt.Errorf("%s: empty (a rule file has a top-level 'rules:' list)", name)
	}
	top := doc.Content[0]
	if top.Kind != yaml.MappingNode {
		return false, fmt.Errorf("%s:%d: a rule file is a mapping with a top-level 'rules:' list", name, top.Line)
	}
	var keys []string
	hasRules, ruleKeys := false, false
	for i := 0; i+1 < len(top.Content); i += 2 {
		k := top.Content[i].Value
		keys = append(keys, k)
		switch k {
		case "rules":
			hasRules = true
		case "id", "action", "match", "priority", "expires":
			ruleKeys = true
		}
	}
	switch {
	case hasRules || (fileOnly && !ruleKeys):
		if _, err := rule.Parse(name, data, time.Now()); err != nil {
			return true, err
		}
		return true, nil
	case fileOnly:
		return false, fmt.Errorf("%s: replace takes a rule file (a top-level 'rules:' list), not one rule", name)
	case ruleKeys:
		_, err := rule.ParseRule(name, data, time.Now())
		return false, err
	}
	return false, fmt.Errorf("%s:%d: neither a rule file (a top-level 'rules:' list) nor one rule (id, action, match, priority, expires): its keys are %s",
		name, top.Line, strings.Join(keys, ", "))
}

// clientTLS is the TLS configuration of `scrubd rules --addr`: the CA that
// signed the agent's certificate (the system's CAs without one) and, for
// mutual TLS, a client certificate and key.
func clientTLS(caFile, certFile, keyFile string) (*tls.Config, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("--ca-file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--ca-file %s: no PEM certificate in it", caFile)
		}
		tc.RootCAs = pool
	}
	if (certFile == "") != (keyFile == "") {
		return nil, fmt.Errorf("--cert-file and --key-file go together")
	}
	if certFile != "" {
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("--cert-file/--key-file: %w", err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc, nil
}

// addedLine reports an added rule: where it was placed and why, or that
// the placer has not placed it yet (it places in rounds; the API answers
// before the next one). An accept rule stays on path "none", with its
// reason.
func addedLine(id, path, why string) string {
	if (path == "" || path == "none") && why == "" {
		return "added " + id + ": not placed yet (scrubd rules list shows where it goes)"
	}
	if why == "" {
		return "added " + id + ": " + path
	}
	return "added " + id + ": " + path + ": " + why
}
