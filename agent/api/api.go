// Package api is scrubd's HTTP/JSON rule API and its client. By default it
// listens on a unix socket (access is the socket file's permissions); a TCP
// listener is allowed only with a bearer token.
//
// Endpoints (all JSON):
//
//	GET    /v1/rules          every rule with source, status, placement, reason and hw/sw counters
//	                          (?limit=N&after=ID: one page; NDJSON on request, see below)
//	GET    /v1/rules/{id}     one rule
//	POST   /v1/rules          add one rule (409 if the id exists), or a rule
//	                          file's rules ({"rules": [...]}), all or nothing
//	PUT    /v1/rules/{id}     add or replace one API rule
//	DELETE /v1/rules/{id}     delete one API rule
//	PUT    /v1/rules          replace every API rule: {"rules": [...]}
//	GET    /v1/decisions      recent placement decisions with their inputs
//	GET    /v1/status         summary of both paths
//
// GET /v1/rules answers a JSON array of RuleInfo, or, when the request's
// Accept header names application/x-ndjson, one RuleInfo a line (NDJSON),
// each rule written as it is encoded, whatever the number of rules. Either
// reply carries X-Scrubd-Rules, the number of rules in it (a reply that
// ends with fewer was cut off), and X-Scrubd-Next-After on a page that is
// not the last; an NDJSON reply also carries X-Scrubd-List-Widths, the
// widest value of each column of `scrubd rules list` (Widths), so that the
// table can be printed as the rules arrive.
//
// Rules are in the rule-file shape (rule.Spec). The API writes only the
// "api" source of the store; rules from files and FlowSpec are read-only
// here. Every change is persisted (Persist) before the reply. A rule that
// would not be in force (refused by protection: 422) is not stored, and a
// request with several rules is applied whole or not at all. A request
// body over the limit is refused (413) with the limit named, never cut.
//
// Every listener has timeouts, a connection limit and a header size limit
// (Limits, ServeLimited); the TCP listener may use TLS, with client
// certificates (mutual TLS) when the configuration names a client CA.
package api

import (
	"bufio"
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/scrubd/scrubd/agent/placement"
	"github.com/scrubd/scrubd/agent/store"
	"github.com/scrubd/scrubd/swpath/rule"
)

// Source is the store source tag of API rules.
const Source = "api"

// RuleInfo is one rule as the API shows it.
type RuleInfo struct {
	Rule      rule.Spec `json:"rule"`
	Source    string    `json:"source"`
	Status    string    `json:"status"`
	Reason    string    `json:"reason,omitempty"`
	Path      string    `json:"path"`
	Placement string    `json:"placement_reason,omitempty"`
	HW        Counter   `json:"hw"`
	SW        Counter   `json:"sw"`
	PPS       float64   `json:"pps"`
	AvgFrame  float64   `json:"avg_frame_bytes"`
	Moves     uint64    `json:"moves"`
	StaleAt   string    `json:"stale_at,omitempty"`
}

// Counter is a packet and byte count.
type Counter struct {
	Packets uint64 `json:"packets"`
	Bytes   uint64 `json:"bytes"`
}

// Status summarises both paths.
type Status struct {
	Rules           int     `json:"rules"`
	HWRules         int     `json:"hw_rules"`
	SWRules         int     `json:"sw_rules"`
	HWUp            bool    `json:"hw_up"`
	HWEntriesUsed   int     `json:"hw_entries_used"`
	HWEntriesMax    int     `json:"hw_entries_max"`
	SWLoadPPS       float64 `json:"sw_load_pps"`
	SWCapacityPPS   float64 `json:"sw_capacity_pps"`
	CyclesPerPacket float64 `json:"cycles_per_packet"`
	HWDroppedPPS    float64 `json:"hw_dropped_pps"`
	SWDroppedPPS    float64 `json:"sw_dropped_pps"`
}

// Error is the body of every error reply.
type Error struct {
	Error string `json:"error"`
}

// Server serves the API.
type Server struct {
	Store *store.Store
	View  func() *placement.View
	// Persist saves the API rules; a failure fails the request (the change
	// stays in force and the error says it was not saved).
	Persist func() error
	Now     func() time.Time
	// Token, when set, is required as "Authorization: Bearer TOKEN".
	Token string
	// MaxBody is the largest request body accepted (0: DefaultMaxBody); a
	// larger one is answered 413 naming the limit, never cut short.
	MaxBody int64
}

func (s *Server) maxBody() int64 {
	if s.MaxBody > 0 {
		return s.MaxBody
	}
	return DefaultMaxBody
}

// Handler returns the API's handler.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	routes := []struct {
		method, path string
		h            http.HandlerFunc
	}{
		{"GET", "/v1/rules", s.list},
		{"GET", "/v1/rules/{id}", s.get},
		{"POST", "/v1/rules", s.add},
		{"PUT", "/v1/rules/{id}", s.put},
		{"DELETE", "/v1/rules/{id}", s.del},
		{"PUT", "/v1/rules", s.replace},
		{"GET", "/v1/decisions", s.decisions},
		{"GET", "/v1/status", s.status},
	}
	var paths []string
	allow := map[string][]string{}
	for _, rt := range routes {
		mux.HandleFunc(rt.method+" "+rt.path, rt.h)
		if allow[rt.path] == nil {
			paths = append(paths, rt.path)
		}
		allow[rt.path] = append(allow[rt.path], rt.method)
	}
	// Every other method on these paths, and every other path, get a JSON
	// error as well (the mux's own replies are plain text).
	for _, path := range paths {
		methods := strings.Join(allow[path], ", ")
		mux.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Allow", methods)
			fail(w, http.StatusMethodNotAllowed, fmt.Errorf("method %s not allowed on %s (allowed: %s)", r.Method, r.URL.Path, methods))
		})
	}
	known := strings.Join(paths, ", ")
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		fail(w, http.StatusNotFound, fmt.Errorf("no such API path %q (the API's paths: %s)", r.URL.Path, known))
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.Token != "" {
			got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
			if !ok || subtle.ConstantTimeCompare([]byte(got), []byte(s.Token)) != 1 {
				// A client without the token keeps no connection open.
				w.Header().Set("Connection", "close")
				reply(w, http.StatusUnauthorized, Error{"missing or wrong bearer token"})
				return
			}
		}
		if r.ContentLength > s.maxBody() {
			w.Header().Set("Connection", "close")
			fail(w, http.StatusRequestEntityTooLarge, s.tooLarge())
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, s.maxBody())
		mux.ServeHTTP(w, r)
	})
}

func (s *Server) tooLarge() error {
	return fmt.Errorf("request body larger than %d bytes (api.max_body_bytes); nothing was applied", s.maxBody())
}

func reply(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

func fail(w http.ResponseWriter, code int, err error) { reply(w, code, Error{err.Error()}) }

// placements returns the published placement of each entry of es (nil
// for none, and for a rule not in force, which infoOf shows without one).
// The view lists the rules in force in the store's order (after the
// protect rules), so each is looked for a few places after the last one
// found, and else found by its place in that order (RuleList.Find, a
// binary search): at 100k rules, an index by id built for the purpose was
// a third of the list's time in the agent.
func (s *Server) placements(es []store.Entry) []*placement.RuleView {
	out := make([]*placement.RuleView, len(es))
	if s.View == nil {
		return out
	}
	v := s.View()
	if v == nil {
		return out
	}
	const ahead = 16
	j := 0
	for i := range es {
		if !es[i].InForce() {
			continue
		}
		id := es[i].Rule.ID
		found := false
		for k := j; k < v.Rules.Len() && k < j+ahead; k++ {
			if v.Rules.ID(k) == id {
				out[i], j, found = v.Rules.At(k), k+1, true
				break
			}
		}
		if found {
			continue
		}
		out[i], _ = v.Rules.Find(id, es[i].Seq())
	}
	return out
}

func infoOf(e *store.Entry, rv *placement.RuleView) RuleInfo {
	ri := summaryOf(e, rv)
	ri.Rule = e.Rule.Spec()
	if !e.StaleAt.IsZero() {
		ri.StaleAt = e.StaleAt.UTC().Format(time.RFC3339)
	}
	return ri
}

// summaryOf is infoOf without the rule's spec and stale time: what the
// list's table shows (and its widths are computed from).
func summaryOf(e *store.Entry, rv *placement.RuleView) RuleInfo {
	ri := RuleInfo{Source: e.Source, Status: string(e.Status), Reason: e.Reason, Path: string(placement.None)}
	ri.Rule.ID = e.Rule.ID
	if rv != nil && e.InForce() {
		ri.Path, ri.Placement = string(rv.Path), rv.Reason
		ri.HW, ri.SW = Counter(rv.HW), Counter(rv.SW)
		ri.PPS, ri.AvgFrame, ri.Moves = rv.PPS, rv.AvgFrame, rv.Moves
	}
	return ri
}

// NextAfterHeader carries, on a page of GET /v1/rules?limit=N that is not
// the last, the id to ask for the next page after (?after=ID).
const NextAfterHeader = "X-Scrubd-Next-After"

// CountHeader carries the number of rules in a GET /v1/rules reply, so that
// a client can tell a whole NDJSON reply from one cut off after a line.
const CountHeader = "X-Scrubd-Rules"

// WidthsHeader carries, on an NDJSON list reply, the width in characters
// of the widest value of each column `scrubd rules list` prints (Widths),
// so that the table can be printed as it arrives, aligned.
const WidthsHeader = "X-Scrubd-List-Widths"

// NDJSON is the media type of a list written one rule per line (a
// RuleInfo in compact JSON, then a newline); GET /v1/rules answers it to a
// request whose Accept header names it, else a JSON array.
const NDJSON = "application/x-ndjson"

// list answers every rule (or, with ?limit=N, at most N, after the rule
// ?after=ID in the store's order) as a JSON array or, when the request
// accepts NDJSON, one rule per line, each written as it is encoded: at
// 100k rules no reply-sized value is built in memory.
func (s *Server) list(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	limit := 0
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			fail(w, http.StatusBadRequest, fmt.Errorf("limit %q: must be a positive integer", v))
			return
		}
		limit = n
	}
	es := s.Store.List()
	if after := q.Get("after"); after != "" {
		i := slices.IndexFunc(es, func(e store.Entry) bool { return e.Rule.ID == after })
		if i < 0 {
			fail(w, http.StatusBadRequest, fmt.Errorf("after %q: no such rule (removed since the last page?); list again from the start", after))
			return
		}
		es = es[i+1:]
	}
	if limit > 0 && len(es) > limit {
		es = es[:limit]
		w.Header().Set(NextAfterHeader, es[len(es)-1].Rule.ID)
	}
	rvs := s.placements(es)
	ndjson := strings.Contains(r.Header.Get("Accept"), NDJSON)
	if ndjson {
		var wd Widths
		for i := range es {
			wd.add(&es[i], rvs[i])
		}
		w.Header().Set(WidthsHeader, wd.String())
		w.Header().Set("Content-Type", NDJSON)
	} else {
		w.Header().Set("Content-Type", "application/json")
	}
	w.Header().Set(CountHeader, strconv.Itoa(len(es)))
	w.WriteHeader(http.StatusOK)
	bw := bufio.NewWriterSize(w, 64<<10)
	var b []byte
	for i := range es {
		b = b[:0]
		switch {
		case ndjson:
		case i == 0:
			b = append(b, "[\n"...)
		default:
			b = append(b, ",\n"...)
		}
		ri := infoOf(&es[i], rvs[i])
		b = appendRuleInfo(b, &ri)
		if ndjson {
			b = append(b, '\n')
		}
		if _, err := bw.Write(b); err != nil {
			return
		}
	}
	switch {
	case ndjson:
	case len(es) == 0:
		bw.WriteString("[]\n")
	default:
		bw.WriteString("\n]\n")
	}
	_ = bw.Flush()
}

func (s *Server) get(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	e, ok := s.Store.Get(id)
	if !ok {
		fail(w, http.StatusNotFound, fmt.Errorf("rule %q not found", id))
		return
	}
	reply(w, http.StatusOK, s.info(e))
}

// body reads the whole request body; over the limit it answers 413 and
// returns false (the handler's MaxBytesReader stops reading there).
func (s *Server) body(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	data, err := io.ReadAll(r.Body)
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		fail(w, http.StatusRequestEntityTooLarge, s.tooLarge())
		return nil, false
	case err != nil:
		fail(w, http.StatusBadRequest, fmt.Errorf("reading the request body: %w", err))
		return nil, false
	}
	return data, true
}

func (s *Server) persist(w http.ResponseWriter) bool {
	if s.Persist == nil {
		return true
	}
	if err := s.Persist(); err != nil {
		fail(w, http.StatusInternalServerError, fmt.Errorf("rule applied but not saved: %w", err))
		return false
	}
	return true
}

func storeCode(err error) int {
	switch {
	case errors.Is(err, store.ErrProtected), errors.Is(err, store.ErrExpired), errors.Is(err, store.ErrGuard):
		return http.StatusUnprocessableEntity
	case errors.Is(err, store.ErrIDInUse), errors.Is(err, store.ErrExists):
		return http.StatusConflict
	case errors.Is(err, store.ErrTooMany):
		return http.StatusRequestEntityTooLarge
	case errors.Is(err, store.ErrNotFound):
		return http.StatusNotFound
	}
	return http.StatusBadRequest
}

// putRule adds (POST) or adds-or-replaces (PUT) one rule. A rule that would
// not be in force (refused by protection, already expired) is not stored:
// the reply says why and a later valid rule may take its id.
func (s *Server) putRule(w http.ResponseWriter, r *http.Request, wantID string, mustBeNew bool) {
	data, ok := s.body(w, r)
	if !ok {
		return
	}
	if mustBeNew {
		// A rule file is parsed once: a 100k-rule body probed as YAML
		// first cost 2 s and a tree of every rule before the parse. The
		// probe is left to bodies that are not a good rule file, to tell
		// a rule file's error from one rule's.
		set, err := rule.Parse("request", data, s.Now())
		if err == nil {
			s.addFile(w, set)
			return
		}
		if isRuleFile(data) {
			fail(w, http.StatusBadRequest, fmt.Errorf("rule file refused, no rule added: %w", err))
			return
		}
	}
	ru, err := rule.ParseRule("request", data, s.Now())
	if err != nil {
		fail(w, http.StatusBadRequest, err)
		return
	}
	if wantID != "" && ru.ID != wantID {
		fail(w, http.StatusBadRequest, fmt.Errorf("rule id %q does not match the URL's %q", ru.ID, wantID))
		return
	}
	var e store.Entry
	if mustBeNew {
		var es []store.Entry
		if es, err = s.Store.Add(Source, []rule.Rule{ru}); err == nil {
			e = es[0]
		}
	} else {
		e, err = s.Store.PutInForce(Source, ru)
	}
	if err != nil {
		fail(w, storeCode(err), err)
		return
	}
	if !s.persist(w) {
		return
	}
	code := http.StatusOK
	if mustBeNew {
		code = http.StatusCreated
	}
	reply(w, code, s.info(e))
}

// info is the API's view of a stored entry.
func (s *Server) info(e store.Entry) RuleInfo {
	var rv *placement.RuleView
	if s.View != nil {
		if v := s.View(); v != nil {
			rv, _ = v.Rules.Find(e.Rule.ID, e.Seq())
		}
	}
	return infoOf(&e, rv)
}

// isRuleFile reports whether a POST body is a rule file ({"rules": [...]})
// rather than one rule.
func isRuleFile(data []byte) bool {
	var probe map[string]any
	if yaml.Unmarshal(data, &probe) != nil {
		return false
	}
	_, ok := probe["rules"]
	return ok
}

// addFile adds every rule of a rule file, all or nothing: if one is refused
// (its id exists, protection, expiry), none is added and the error names
// each refused rule and the field at fault.
func (s *Server) addFile(w http.ResponseWriter, set *rule.Set) {
	es, err := s.Store.Add(Source, set.Rules)
	if err != nil {
		fail(w, storeCode(err), fmt.Errorf("no rule added: %w", err))
		return
	}
	if !s.persist(w) {
		return
	}
	out := make([]RuleInfo, 0, len(es))
	rvs := s.placements(es)
	for i := range es {
		out = append(out, infoOf(&es[i], rvs[i]))
	}
	reply(w, http.StatusCreated, map[string]any{"added": out})
}

func (s *Server) add(w http.ResponseWriter, r *http.Request) { s.putRule(w, r, "", true) }
func (s *Server) put(w http.ResponseWriter, r *http.Request) {
	s.putRule(w, r, r.PathValue("id"), false)
}

func (s *Server) del(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if e, ok := s.Store.Get(id); ok && e.Source != Source {
		fail(w, http.StatusConflict, fmt.Errorf("rule %q belongs to source %s; the API deletes only its own rules", id, e.Source))
		return
	}
	if err := s.Store.Delete(Source, id); err != nil {
		fail(w, storeCode(err), err)
		return
	}
	if s.persist(w) {
		reply(w, http.StatusOK, map[string]string{"deleted": id})
	}
}

// replace makes a rule file's rules the API's whole set, all or nothing: a
// rule that would not be in force refuses the request and nothing changes.
func (s *Server) replace(w http.ResponseWriter, r *http.Request) {
	data, ok := s.body(w, r)
	if !ok {
		return
	}
	set, err := rule.Parse("request", data, s.Now())
	if err != nil {
		fail(w, http.StatusBadRequest, err)
		return
	}
	entries, err := s.Store.ReplaceInForce(Source, set.Rules)
	if err != nil {
		fail(w, storeCode(err), fmt.Errorf("nothing replaced: %w", err))
		return
	}
	if !s.persist(w) {
		return
	}
	reply(w, http.StatusOK, map[string]any{"replaced": len(entries)})
}

func (s *Server) decisions(w http.ResponseWriter, r *http.Request) {
	var ds []placement.Decision
	if s.View != nil {
		if v := s.View(); v != nil {
			ds = v.Decisions
		}
	}
	if ds == nil {
		ds = []placement.Decision{}
	}
	reply(w, http.StatusOK, ds)
}

func (s *Server) status(w http.ResponseWriter, r *http.Request) {
	st := Status{Rules: s.Store.Len()}
	if s.View != nil {
		if v := s.View(); v != nil {
			for _, rv := range v.Rules.All() {
				switch rv.Path {
				case placement.HW:
					st.HWRules++
				case placement.SW:
					st.SWRules++
				}
			}
			st.HWUp, st.HWEntriesUsed, st.HWEntriesMax = v.HWUp, v.HWBudget.UsedEntries, v.HWBudget.MaxEntries
			st.SWLoadPPS, st.SWCapacityPPS, st.CyclesPerPacket = v.SWLoadPPS, v.SWCapacityPPS, v.CyclesPerPacket
			st.HWDroppedPPS, st.SWDroppedPPS = v.HWPPS, v.SWPPS
		}
	}
	reply(w, http.StatusOK, st)
}

// ListenUnix listens on a unix socket at path, replacing a stale socket file,
// with mode 0660.
func ListenUnix(path string) (net.Listener, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return nil, err
	}
	if fi, err := os.Lstat(path); err == nil && fi.Mode()&os.ModeSocket != 0 {
		// A socket nobody answers on is left over from a previous run.
		if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
			c.Close()
			return nil, fmt.Errorf("api socket %s: another scrubd is listening", path)
		}
		os.Remove(path)
	}
	l, err := net.Listen("unix", path)
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(path, 0o660); err != nil {
		l.Close()
		return nil, err
	}
	return l, nil
}

// Serve serves h on l within DefaultLimits until ctx ends, then shuts down
// gracefully.
func Serve(ctx context.Context, l net.Listener, h http.Handler) error {
	return ServeLimited(ctx, l, h, DefaultLimits(), nil)
}
