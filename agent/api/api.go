// Package api is scrubd's HTTP/JSON rule API and its client. By default it
// listens on a unix socket (access is the socket file's permissions); a TCP
// listener is allowed only with a bearer token.
//
// Endpoints (all JSON):
//
//	GET    /v1/rules          every rule with source, status, placement, reason and hw/sw counters
//	GET    /v1/rules/{id}     one rule
//	POST   /v1/rules          add one rule (409 if the id exists)
//	PUT    /v1/rules/{id}     add or replace one API rule
//	DELETE /v1/rules/{id}     delete one API rule
//	PUT    /v1/rules          replace every API rule: {"rules": [...]}
//	GET    /v1/decisions      recent placement decisions with their inputs
//	GET    /v1/status         summary of both paths
//
// Rules are in the rule-file shape (rule.Spec). The API writes only the
// "api" source of the store; rules from files and FlowSpec are read-only
// here. Every change is persisted (Persist) before the reply.
package api

import (
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
	"strings"
	"time"

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
}

// Handler returns the API's handler.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/rules", s.list)
	mux.HandleFunc("GET /v1/rules/{id}", s.get)
	mux.HandleFunc("POST /v1/rules", s.add)
	mux.HandleFunc("PUT /v1/rules/{id}", s.put)
	mux.HandleFunc("DELETE /v1/rules/{id}", s.del)
	mux.HandleFunc("PUT /v1/rules", s.replace)
	mux.HandleFunc("GET /v1/decisions", s.decisions)
	mux.HandleFunc("GET /v1/status", s.status)
	if s.Token == "" {
		return mux
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || subtle.ConstantTimeCompare([]byte(got), []byte(s.Token)) != 1 {
			reply(w, http.StatusUnauthorized, Error{"missing or wrong bearer token"})
			return
		}
		mux.ServeHTTP(w, r)
	})
}

func reply(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

func fail(w http.ResponseWriter, code int, err error) { reply(w, code, Error{err.Error()}) }

func (s *Server) infos() []RuleInfo {
	snap := s.Store.Snapshot()
	byID := map[string]placement.RuleView{}
	if s.View != nil {
		if v := s.View(); v != nil {
			for _, r := range v.Rules {
				byID[r.ID] = r
			}
		}
	}
	out := make([]RuleInfo, 0, len(snap.Entries))
	for _, e := range snap.Entries {
		ri := RuleInfo{Rule: e.Rule.Spec(), Source: e.Source, Status: string(e.Status), Reason: e.Reason, Path: string(placement.None)}
		if !e.StaleAt.IsZero() {
			ri.StaleAt = e.StaleAt.UTC().Format(time.RFC3339)
		}
		if rv, ok := byID[e.Rule.ID]; ok && e.InForce() {
			ri.Path, ri.Placement = string(rv.Path), rv.Reason
			ri.HW, ri.SW = Counter(rv.HW), Counter(rv.SW)
			ri.PPS, ri.AvgFrame, ri.Moves = rv.PPS, rv.AvgFrame, rv.Moves
		}
		out = append(out, ri)
	}
	return out
}

func (s *Server) list(w http.ResponseWriter, r *http.Request) { reply(w, http.StatusOK, s.infos()) }

func (s *Server) get(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	for _, ri := range s.infos() {
		if ri.Rule.ID == id {
			reply(w, http.StatusOK, ri)
			return
		}
	}
	fail(w, http.StatusNotFound, fmt.Errorf("rule %q not found", id))
}

const maxBody = 64 << 20

func (s *Server) body(r *http.Request) ([]byte, error) {
	return io.ReadAll(io.LimitReader(r.Body, maxBody))
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
	case errors.Is(err, store.ErrIDInUse):
		return http.StatusConflict
	case errors.Is(err, store.ErrNotFound):
		return http.StatusNotFound
	case errors.Is(err, store.ErrProtected), errors.Is(err, store.ErrExpired):
		return http.StatusUnprocessableEntity
	}
	return http.StatusBadRequest
}

func (s *Server) putRule(w http.ResponseWriter, r *http.Request, wantID string, mustBeNew bool) {
	data, err := s.body(r)
	if err != nil {
		fail(w, http.StatusBadRequest, err)
		return
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
	if _, exists := s.Store.Get(ru.ID); exists && mustBeNew {
		fail(w, http.StatusConflict, fmt.Errorf("rule %q exists (PUT /v1/rules/%s replaces it)", ru.ID, ru.ID))
		return
	}
	e, err := s.Store.Put(Source, ru)
	if err != nil && e.Rule.ID == "" {
		fail(w, storeCode(err), err)
		return
	}
	if !s.persist(w) {
		return
	}
	if err != nil { // stored but refused (protection): say so
		fail(w, storeCode(err), err)
		return
	}
	code := http.StatusOK
	if mustBeNew {
		code = http.StatusCreated
	}
	for _, ri := range s.infos() {
		if ri.Rule.ID == ru.ID {
			reply(w, code, ri)
			return
		}
	}
	reply(w, code, RuleInfo{Rule: ru.Spec(), Source: Source, Status: string(e.Status), Reason: e.Reason})
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

func (s *Server) replace(w http.ResponseWriter, r *http.Request) {
	data, err := s.body(r)
	if err != nil {
		fail(w, http.StatusBadRequest, err)
		return
	}
	set, err := rule.Parse("request", data, s.Now())
	if err != nil {
		fail(w, http.StatusBadRequest, err)
		return
	}
	entries, err := s.Store.Replace(Source, set.Rules)
	if err != nil {
		fail(w, storeCode(err), err)
		return
	}
	if !s.persist(w) {
		return
	}
	out := map[string]any{"replaced": len(entries)}
	var refused []string
	for _, e := range entries {
		if !e.InForce() {
			refused = append(refused, e.Rule.ID+": "+e.Reason)
		}
	}
	if refused != nil {
		out["refused"] = refused
	}
	reply(w, http.StatusOK, out)
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
			for _, rv := range v.Rules {
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

// Serve serves h on l until ctx ends, then shuts down gracefully.
func Serve(ctx context.Context, l net.Listener, h http.Handler) error {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(l) }()
	select {
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
		<-errc
		return nil
	case err := <-errc:
		if errors.Is(err, http.ErrServerClosed) {
			return nil
		}
		return err
	}
}
