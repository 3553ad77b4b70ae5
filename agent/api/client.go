package api

import (
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

// List returns every rule. The reply is read one rule at a time, whatever
// its size (maxReply bounds the other replies, not this one).
func (c *Client) List(ctx context.Context) ([]RuleInfo, error) {
	out, _, err := c.ListPage(ctx, "", 0)
	return out, err
}

// ListPage returns at most limit rules (0: all) after the rule with id
// after ("" : from the first), and the id to pass as after for the next
// page ("" when this page is the last).
func (c *Client) ListPage(ctx context.Context, after string, limit int) ([]RuleInfo, string, error) {
	var out []RuleInfo
	// Straight into RuleInfo: through a RawMessage each rule would be
	// scanned twice.
	next, err := c.list(ctx, after, limit, func(dec *json.Decoder) error {
		var ri RuleInfo
		if err := dec.Decode(&ri); err != nil {
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
// the agent sent it (a RuleInfo in JSON, valid until fn returns) as it
// arrives, so a caller that prints can do so without holding the list or
// decoding what it does not print. An error from fn stops the listing.
func (c *Client) ListEach(ctx context.Context, after string, limit int, fn func(json.RawMessage) error) (next string, err error) {
	var raw json.RawMessage
	return c.list(ctx, after, limit, func(dec *json.Decoder) error {
		raw = raw[:0]
		if err := dec.Decode(&raw); err != nil {
			return err
		}
		return fn(raw)
	})
}

// list asks for one page of rules and calls each with the decoder at every
// rule of the reply's array, in order; it returns the next page's cursor.
func (c *Client) list(ctx context.Context, after string, limit int, each func(*json.Decoder) error) (next string, err error) {
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
		return "", err
	}
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		var e Error
		if json.Unmarshal(data, &e) != nil || e.Error == "" {
			e.Error = strings.TrimSpace(string(data))
		}
		return "", &APIError{Code: resp.StatusCode, Msg: e.Error}
	}
	dec := json.NewDecoder(resp.Body)
	if t, err := dec.Token(); err != nil || t != json.Delim('[') {
		return "", fmt.Errorf("scrubd API: GET %s: reply is not a JSON array (%v)", path, err)
	}
	n := 0
	for dec.More() {
		if err := each(dec); err != nil {
			return "", fmt.Errorf("scrubd API: GET %s: rule %d of the reply: %w", path, n, err)
		}
		n++
	}
	if _, err := dec.Token(); err != nil {
		return "", fmt.Errorf("scrubd API: GET %s: reply cut off after %d rules: %w", path, n, err)
	}
	return resp.Header.Get(NextAfterHeader), nil
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
