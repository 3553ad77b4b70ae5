package api

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
)

// Client talks to the API.
type Client struct {
	HTTP  *http.Client
	Base  string // "http://unix" for a socket, or "http://host:port"
	Token string
}

// NewUnixClient returns a client for the socket at path.
func NewUnixClient(path string) *Client {
	tr := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", path)
	}}
	return &Client{HTTP: &http.Client{Transport: tr}, Base: "http://unix"}
}

// maxReply bounds a reply the client reads; a larger one is an error, not
// a truncated answer.
const maxReply = 256 << 20

// NewTCPClient returns a client for host:port with a token.
func NewTCPClient(addr, token string) *Client {
	return &Client{HTTP: &http.Client{}, Base: "http://" + addr, Token: token}
}

// NewTLSClient returns a client for host:port over TLS with a token; tc
// holds the CA to verify the agent with (nil RootCAs: the system's) and,
// for mutual TLS, the client certificate.
func NewTLSClient(addr, token string, tc *tls.Config) *Client {
	tr := &http.Transport{TLSClientConfig: tc, ForceAttemptHTTP2: false}
	return &Client{HTTP: &http.Client{Transport: tr}, Base: "https://" + addr, Token: token}
}

// APIError is an error reply.
type APIError struct {
	Code int
	Msg  string
}

func (e *APIError) Error() string {
	return fmt.Sprintf("scrubd API: %d %s: %s", e.Code, http.StatusText(e.Code), e.Msg)
}

func (c *Client) do(ctx context.Context, method, path string, body []byte, out any) error {
	req, err := http.NewRequestWithContext(ctx, method, c.Base+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxReply+1))
	if err != nil {
		return err
	}
	if len(data) > maxReply {
		return fmt.Errorf("scrubd API: %s %s: reply larger than %d bytes", method, path, maxReply)
	}
	if resp.StatusCode >= 300 {
		var e Error
		if json.Unmarshal(data, &e) != nil || e.Error == "" {
			e.Error = strings.TrimSpace(string(data))
		}
		return &APIError{Code: resp.StatusCode, Msg: e.Error}
	}
	if out != nil {
		return json.Unmarshal(data, out)
	}
	return nil
}

// List returns every rule, whatever their number: the reply is read one
// rule at a time (maxReply bounds the other replies, not this one).
func (c *Client) List(ctx context.Context) ([]RuleInfo, error) {
	out, _, err := c.ListPage(ctx, "", 0)
	return out, err
}

// ListPage returns at most limit rules (0: all) after the rule with id
// after ("" : from the first), and the id to pass as after for the next
// page ("" when this page is the last).
func (c *Client) ListPage(ctx context.Context, after string, limit int) ([]RuleInfo, string, error) {
	var out []RuleInfo
	next, err := c.ListEach(ctx, after, limit, func(raw json.RawMessage) error {
		var ri RuleInfo
		if err := json.Unmarshal(raw, &ri); err != nil {
			return err
		}
		out = append(out, ri)
		return nil
	})
	if err != nil {
		return nil, "", err
	}
	return out, next, nil
}

// ListEach is ListPage one rule at a time: fn gets each rule of the page as
// the agent sent it (a RuleInfo in JSON, valid until fn returns, not yet
// checked to be valid JSON) as it arrives, so a caller that prints can do
// so without holding the list or decoding what it does not print. An
// error from fn stops the listing.
func (c *Client) ListEach(ctx context.Context, after string, limit int, fn func(json.RawMessage) error) (next string, err error) {
	err = c.ListStream(ctx, after, limit, func(h ListHead) error { next = h.Next; return nil }, func(raw []byte) error { return fn(raw) })
	if err != nil {
		return "", err
	}
	return next, nil
}

// ListHead is what a list reply says before its first rule.
type ListHead struct {
	// Rules is the number of rules in the reply, -1 when the agent does
	// not say (an agent older than the count header).
	Rules int
	// Next is the next page's cursor, "" on the last page.
	Next string
	// Widths, when HasWidths, are the widest values of the table's
	// columns in this reply (an NDJSON reply has them).
	Widths    Widths
	HasWidths bool
}

// ListStream asks for one page of rules (limit 0: all, however many) after
// the rule with id after, calls head once with the reply's head and then
// each with every rule in order as it arrives (one RuleInfo in JSON, valid
// until each returns). It asks for NDJSON and reads an agent's JSON array
// when that is what it answers. A reply cut off, holding a broken line, or
// holding other than the number of rules it announced is an error that
// says how many rules came; an error from head or each stops the listing.
func (c *Client) ListStream(ctx context.Context, after string, limit int, head func(ListHead) error, each func([]byte) error) error {
	// Cancelling stops a body read that waits on the agent when the
	// listing ends early.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	q := url.Values{}
	if after != "" {
		q.Set("after", after)
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	path := "/v1/rules"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.Base+path, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", NDJSON+", application/json")
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		var e Error
		if json.Unmarshal(data, &e) != nil || e.Error == "" {
			e.Error = strings.TrimSpace(string(data))
		}
		return &APIError{Code: resp.StatusCode, Msg: e.Error}
	}
	h := ListHead{Rules: -1, Next: resp.Header.Get(NextAfterHeader)}
	if v := resp.Header.Get(CountHeader); v != "" {
		if h.Rules, err = strconv.Atoi(v); err != nil || h.Rules < 0 {
			return fmt.Errorf("scrubd API: GET %s: %s %q is not a count", path, CountHeader, v)
		}
	}
	if v := resp.Header.Get(WidthsHeader); v != "" {
		if h.Widths, err = ParseWidths(v); err != nil {
			return fmt.Errorf("scrubd API: GET %s: %w", path, err)
		}
		h.HasWidths = true
	}
	if head != nil {
		if err := head(h); err != nil {
			return err
		}
	}
	sp := newSpool(resp.Body)
	defer func() {
		cancel()
		<-sp.done
	}()
	var n int
	if mt, _, _ := strings.Cut(resp.Header.Get("Content-Type"), ";"); strings.TrimSpace(mt) == NDJSON {
		n, err = eachLine(sp, h.Rules, each)
	} else {
		n, err = eachElement(sp, h.Rules, each)
	}
	if err != nil {
		return fmt.Errorf("scrubd API: GET %s: %w", path, err)
	}
	if h.Rules >= 0 && n != h.Rules {
		return fmt.Errorf("scrubd API: GET %s: reply cut off: %d of the %d rules it announced", path, n, h.Rules)
	}
	return nil
}

// spool reads a reply to its end as fast as the agent sends it, in a
// goroutine of its own, and holds what the caller has not read yet. A
// caller that writes to a slow reader (a pager) then does not keep the
// agent writing past its write timeout (api.write_timeout), which would
// cut the reply off: the reply is read whole at the socket's pace, and
// only what waits for the caller is held (all of it, as before streaming,
// when the caller is stalled). The goroutine ends when the body ends or
// fails: cancel the request's context to end it early.
type spool struct {
	mu     sync.Mutex
	more   *sync.Cond
	chunks [][]byte
	err    error // the body's error (io.EOF at its end), after the chunks
	done   chan struct{}
}

func newSpool(r io.Reader) *spool {
	s := &spool{done: make(chan struct{})}
	s.more = sync.NewCond(&s.mu)
	go s.fill(r)
	return s
}

func (s *spool) fill(r io.Reader) {
	defer close(s.done)
	buf := make([]byte, 256<<10)
	for {
		// What each read gives is passed on at once, copied to its size.
		n, err := r.Read(buf)
		s.mu.Lock()
		if n > 0 {
			s.chunks = append(s.chunks, append([]byte(nil), buf[:n]...))
		}
		s.err = err
		s.more.Broadcast()
		s.mu.Unlock()
		if err != nil {
			return
		}
	}
}

func (s *spool) Read(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for len(s.chunks) == 0 && s.err == nil {
		s.more.Wait()
	}
	if len(s.chunks) == 0 {
		return 0, s.err
	}
	n := copy(p, s.chunks[0])
	if s.chunks[0] = s.chunks[0][n:]; len(s.chunks[0]) == 0 {
		s.chunks[0] = nil
		s.chunks = s.chunks[1:]
	}
	return n, nil
}

// eachLine calls each with every line of an NDJSON reply, without its
// newline; want (when not -1) is how many lines there should be.
func eachLine(r io.Reader, want int, each func([]byte) error) (n int, err error) {
	br := bufio.NewReaderSize(r, 256<<10)
	var long []byte
	for {
		line, err := br.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			// A line longer than the buffer: gather it.
			long = append(long[:0], line...)
			for err == bufio.ErrBufferFull {
				line, err = br.ReadSlice('\n')
				long = append(long, line...)
			}
			line = long
		}
		switch {
		case err == io.EOF && len(line) == 0:
			return n, nil
		case err == io.EOF:
			return n, fmt.Errorf("reply cut off in rule %d (after %d whole rules): %d bytes without a newline", n, n, len(line))
		case err != nil:
			return n, fmt.Errorf("reply cut off after %d rules: %w", n, err)
		}
		line = line[:len(line)-1]
		if want >= 0 && n == want {
			return n, fmt.Errorf("reply holds more than the %d rules it announced", want)
		}
		if len(bytes.TrimSpace(line)) == 0 {
			return n, fmt.Errorf("rule %d of the reply: an empty line", n)
		}
		if err := each(line); err != nil {
			return n, fmt.Errorf("rule %d of the reply: %w", n, err)
		}
		n++
	}
}

// eachElement calls each with every element of a reply that is a JSON
// array (what an agent that does not write NDJSON answers).
func eachElement(r io.Reader, want int, each func([]byte) error) (n int, err error) {
	dec := json.NewDecoder(r)
	if t, err := dec.Token(); err != nil || t != json.Delim('[') {
		return 0, fmt.Errorf("reply is not a JSON array (%v)", err)
	}
	var raw json.RawMessage
	for dec.More() {
		if want >= 0 && n == want {
			return n, fmt.Errorf("reply holds more than the %d rules it announced", want)
		}
		raw = raw[:0]
		if err := dec.Decode(&raw); err != nil {
			return n, fmt.Errorf("rule %d of the reply: %w", n, err)
		}
		if err := each(raw); err != nil {
			return n, fmt.Errorf("rule %d of the reply: %w", n, err)
		}
		n++
	}
	if _, err := dec.Token(); err != nil {
		return n, fmt.Errorf("reply cut off after %d rules: %w", n, err)
	}
	return n, nil
}

// Get returns one rule.
func (c *Client) Get(ctx context.Context, id string) (RuleInfo, error) {
	var out RuleInfo
	return out, c.do(ctx, http.MethodGet, "/v1/rules/"+id, nil, &out)
}

// Add adds one rule given as YAML or JSON.
func (c *Client) Add(ctx context.Context, ruleText []byte) (RuleInfo, error) {
	var out RuleInfo
	return out, c.do(ctx, http.MethodPost, "/v1/rules", ruleText, &out)
}

// AddFile adds every rule of a rule file, all or nothing.
func (c *Client) AddFile(ctx context.Context, ruleFile []byte) ([]RuleInfo, error) {
	var out struct {
		Added []RuleInfo `json:"added"`
	}
	return out.Added, c.do(ctx, http.MethodPost, "/v1/rules", ruleFile, &out)
}

// Put adds or replaces one rule.
func (c *Client) Put(ctx context.Context, id string, ruleText []byte) (RuleInfo, error) {
	var out RuleInfo
	return out, c.do(ctx, http.MethodPut, "/v1/rules/"+id, ruleText, &out)
}

// Delete deletes one API rule.
func (c *Client) Delete(ctx context.Context, id string) error {
	return c.do(ctx, http.MethodDelete, "/v1/rules/"+id, nil, nil)
}

// Replace replaces every API rule with a rule file's rules.
func (c *Client) Replace(ctx context.Context, ruleFile []byte) (map[string]any, error) {
	var out map[string]any
	return out, c.do(ctx, http.MethodPut, "/v1/rules", ruleFile, &out)
}

// Status returns the summary.
func (c *Client) Status(ctx context.Context) (Status, error) {
	var out Status
	return out, c.do(ctx, http.MethodGet, "/v1/status", nil, &out)
}

// Decisions returns recent placement decisions.
func (c *Client) Decisions(ctx context.Context) ([]json.RawMessage, error) {
	var out []json.RawMessage
	return out, c.do(ctx, http.MethodGet, "/v1/decisions", nil, &out)
}
