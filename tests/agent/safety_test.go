package agent_test

// Tests from the outside of the API's limits, TLS, refusals that leave
// nothing behind, and `config check` against `run`: each drives the agent
// through its API, its CLI, or `scrubd config check` / `scrubd run`.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	agentapi "github.com/scrubd/scrubd/agent/api"
	"github.com/scrubd/scrubd/agent/backend"
	"github.com/scrubd/scrubd/agent/cli"
	"github.com/scrubd/scrubd/agent/config"
	"github.com/scrubd/scrubd/agent/daemon"
	"github.com/scrubd/scrubd/agent/placement"
	"github.com/scrubd/scrubd/agent/sim"
	"github.com/scrubd/scrubd/internal/syncbuf"
)

// writeToken writes a bearer token file with mode perm.
func writeToken(t *testing.T, dir, token string, perm os.FileMode) string {
	t.Helper()
	p := filepath.Join(dir, "token")
	if err := os.WriteFile(p, []byte(token+"\n"), perm); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, perm); err != nil { // whatever the umask
		t.Fatal(err)
	}
	return p
}

func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// rawGet sends one keep-alive request on c and reads the reply's status.
func rawGet(c net.Conn, br *bufio.Reader, path, token string) (int, error) {
	req := "GET " + path + " HTTP/1.1\r\nHost: scrubd\r\n"
	if token != "" {
		req += "Authorization: Bearer " + token + "\r\n"
	}
	if _, err := io.WriteString(c, req+"\r\n"); err != nil {
		return 0, err
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return 0, err
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, err
}

// The TCP API could be knocked out: connections that made one request and
// then stayed open were never closed, and enough of them took every file
// descriptor, so /metrics, /readyz, the unix-socket API and rule-file
// reloads failed with them. Here 8 clients hold keep-alive connections
// after one request each (the connection limit) and 1000 more connect
// behind them and send half a request, all on loopback. The agent holds at most the limit of
// them, every other interface keeps answering, and the idle connections
// are closed after the idle timeout.
func TestAPIConnectionFlood(t *testing.T) {
	const (
		limit = 8
		flood = 1000
		idle  = time.Second
		token = "flood-test-token"
	)
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	cfg := simConfig(t, twoHWRules)
	cfg.API.TCP = addr
	cfg.API.TokenFile = writeToken(t, cfg.StateDir, token, 0o600)
	cfg.API.MaxConnections = limit
	cfg.API.IdleTimeout = idle
	cfg.API.ReadHeaderTimeout = 30 * time.Second // the flood below is not timed out meanwhile
	if err := cfg.Validate("test", true); err != nil {
		t.Fatal(err)
	}
	a, _ := startOnSim(t, &cfg, 50)
	waitFor(t, "ready", func() bool { return a.d.Placer.View() != nil && a.d.Placer.View().Ready })

	before := openFDs(t)
	// The holders: one authenticated request each, then idle.
	type held struct {
		c  net.Conn
		br *bufio.Reader
	}
	var holders []held
	for i := 0; i < limit; i++ {
		c, err := net.DialTimeout("tcp", addr, 2*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		br := bufio.NewReader(c)
		c.SetDeadline(time.Now().Add(5 * time.Second))
		if code, err := rawGet(c, br, "/v1/status", token); err != nil || code != http.StatusOK {
			t.Fatalf("holder %d: %d %v", i, code, err)
		}
		holders = append(holders, held{c, br})
	}
	// And one on the metrics listener, which has the same limits.
	mc, err := net.DialTimeout("tcp", a.d.HTTPAddr, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer mc.Close()
	mbr := bufio.NewReader(mc)
	mc.SetDeadline(time.Now().Add(5 * time.Second))
	if code, err := rawGet(mc, mbr, "/healthz", ""); err != nil || code != http.StatusOK {
		t.Fatalf("metrics holder: %d %v", code, err)
	}
	holders = append(holders, held{mc, mbr})
	heldAt := time.Now()
	// The flood: connections that wait behind the holders, each with half
	// a request written (no token, no end of header: nothing the agent
	// could answer).
	var flooders []net.Conn
	defer func() {
		for _, c := range flooders {
			c.Close()
		}
	}()
	for i := 0; i < flood; i++ {
		c, err := net.DialTimeout("tcp", addr, 2*time.Second)
		if err != nil {
			t.Fatalf("flood connection %d: %v", i, err)
		}
		flooders = append(flooders, c)
		io.WriteString(c, "GET /v1/status HTTP/1.1\r\nHost: scrubd\r\n")
	}
	// Descriptors: the test's own limit+flood client ends, and at most
	// limit server ends (those already counted in before plus slack for
	// the runtime's own). Without a limit the agent would hold 1008 more.
	if got, most := openFDs(t)-before, limit+flood+limit+16; got > most {
		t.Fatalf("%d descriptors opened by %d client connections; want at most %d (the agent holds at most %d)", got, limit+flood, most, limit)
	}
	t.Logf("%d connections open to the TCP API, %d new descriptors in the process (clients and agent)", limit+flood, openFDs(t)-before)

	// Everything else still answers.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := agentapi.NewUnixClient(cfg.API.Socket).List(ctx); err != nil {
		t.Fatalf("unix-socket API during the flood: %v", err)
	}
	for _, p := range []string{"/metrics", "/readyz"} {
		hc := &http.Client{Timeout: 5 * time.Second}
		resp, err := hc.Get("http://" + a.d.HTTPAddr + p)
		if err != nil {
			t.Fatalf("%s during the flood: %v", p, err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s during the flood: %d", p, resp.StatusCode)
		}
	}
	if err := os.WriteFile(cfg.Rules.Files[0], []byte(twoHWRules+"  - {id: r-new, action: drop, match: {dst: 203.0.113.70/32, proto: gre}}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	a.reload <- struct{}{}
	waitFor(t, "rule-file reload during the flood", func() bool { _, ok := a.d.Store.Get("r-new"); return ok })

	// The idle keep-alive connections (the API's and the metrics one) are
	// closed by the agent after the idle timeout (read gives EOF, not our
	// deadline).
	for i, h := range holders {
		h.c.SetReadDeadline(heldAt.Add(idle + 10*time.Second))
		_, err := h.br.ReadByte()
		if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) && !isReset(err) {
			t.Fatalf("holder %d: idle connection not closed by the agent: %v", i, err)
		}
	}
	t.Logf("idle connections closed %v after their last request (api.idle_timeout %v)", time.Since(heldAt).Round(10*time.Millisecond), idle)
	// The flood gone, a new client is served.
	for _, c := range flooders {
		c.Close()
	}
	flooders = nil
	tc := agentapi.NewTCPClient(addr, token)
	tc.HTTP.Timeout = 10 * time.Second
	if _, err := tc.Status(context.Background()); err != nil {
		t.Fatalf("TCP API after the flood: %v", err)
	}
}

func isReset(err error) bool {
	return err != nil && strings.Contains(err.Error(), "connection reset")
}

// A body over api.max_body_bytes is refused whole with 413 naming the
// limit, whether it announces its length or not, and nothing is applied; a
// header over api.max_header_bytes is refused too.
func TestAPIBodyLimit(t *testing.T) {
	cfg := simConfig(t, twoHWRules)
	cfg.API.MaxBodyBytes = 4096
	cfg.API.MaxHeaderBytes = 1024
	a, _ := startOnSim(t, &cfg, 50)
	var b strings.Builder
	b.WriteString("rules:\n")
	for i := 0; b.Len() <= 4096; i++ {
		fmt.Fprintf(&b, "  - {id: big-%d, action: drop, match: {dst: 203.0.113.%d/32, proto: udp}}\n", i, i%250)
	}
	hc := agentapi.NewUnixClient(cfg.API.Socket).HTTP
	for _, chunked := range []bool{false, true} {
		var body io.Reader = strings.NewReader(b.String())
		if chunked {
			body = io.MultiReader(body) // no length known: sent chunked
		}
		req, _ := http.NewRequest(http.MethodPut, "http://unix/v1/rules", body)
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		msg, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(string(msg), "4096 bytes (api.max_body_bytes)") {
			t.Fatalf("chunked %v: %d %s", chunked, resp.StatusCode, msg)
		}
	}
	if _, ok := a.d.Store.Get("big-0"); ok {
		t.Fatal("part of an oversized body was applied")
	}
	// A header over api.max_header_bytes: 431 (RFC 6585) naming the limit;
	// one byte less is served. The request as sent, counted by hand:
	// "GET /v1/status HTTP/1.1\r\n" (25), "Host: unix\r\n" (12),
	// "User-Agent: Go-http-client/1.1\r\n" (32), "Accept-Encoding: gzip\r\n"
	// (23), "X-Padding: " + pad + "\r\n" (13 + pad), "\r\n" (2).
	for _, over := range []bool{false, true} {
		pad := cfg.API.MaxHeaderBytes - (25 + 12 + 32 + 23 + 13 + 2)
		if over {
			pad++
		}
		req, _ := http.NewRequest(http.MethodGet, "http://unix/v1/status", nil)
		req.Header.Set("X-Padding", strings.Repeat("p", pad))
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		msg, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		want := http.StatusOK
		if over {
			want = http.StatusRequestHeaderFieldsTooLarge
		}
		if resp.StatusCode != want || (over && !strings.Contains(string(msg), "larger than 1024 bytes (api.max_header_bytes)")) {
			t.Fatalf("header padded with %d bytes: %d %s, want %d", pad, resp.StatusCode, msg, want)
		}
	}
	// So large net/http stops reading: its own 431.
	req, _ := http.NewRequest(http.MethodGet, "http://unix/v1/status", nil)
	req.Header.Set("X-Padding", strings.Repeat("p", cfg.API.MaxHeaderBytes+4097))
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Fatalf("huge header: %d", resp.StatusCode)
	}
}

// tlsFiles writes a CA, a server certificate for 127.0.0.1 and a client
// certificate, both signed by the CA, as PEM files in dir.
func tlsFiles(t *testing.T, dir string) (ca, cert, key, ccert, ckey string) {
	t.Helper()
	newKey := func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	write := func(name, typ string, der []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	now := time.Now()
	caKey := newKey()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "scrubd test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	leaf := func(serial int64, usage x509.ExtKeyUsage, ip net.IP) ([]byte, []byte) {
		k := newKey()
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: fmt.Sprint("leaf ", serial)},
			NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour), KeyUsage: x509.KeyUsageDigitalSignature,
			ExtKeyUsage: []x509.ExtKeyUsage{usage}}
		if ip != nil {
			tmpl.IPAddresses = []net.IP{ip}
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &k.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		kder, err := x509.MarshalECPrivateKey(k)
		if err != nil {
			t.Fatal(err)
		}
		return der, kder
	}
	sder, skey := leaf(2, x509.ExtKeyUsageServerAuth, net.IPv4(127, 0, 0, 1))
	cder, ckeyDER := leaf(3, x509.ExtKeyUsageClientAuth, nil)
	return write("ca.pem", "CERTIFICATE", caDER), write("server.pem", "CERTIFICATE", sder), write("server.key", "EC PRIVATE KEY", skey),
		write("client.pem", "CERTIFICATE", cder), write("client.key", "EC PRIVATE KEY", ckeyDER)
}

// configCheck runs `scrubd config check` on config text written to dir.
func configCheck(t *testing.T, dir, text string) (int, string) {
	t.Helper()
	p := filepath.Join(dir, fmt.Sprintf("scrubd-%d.yaml", time.Now().UnixNano()))
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	rc := cli.Config([]string{"check", p}, &out, &errb)
	return rc, out.String() + errb.String()
}

// The TCP listener: refused beyond loopback without TLS, refused with a
// token file others can read; with TLS and a client CA it serves only
// clients with a certificate the CA signed, `scrubd rules` included.
func TestAPITLS(t *testing.T) {
	dir := t.TempDir()
	ca, cert, key, ccert, ckey := tlsFiles(t, dir)
	tok := writeToken(t, dir, "tls-token", 0o600)
	base := "software: {engine: none}\nstate_dir: " + dir + "\napi: {socket: '', token_file: " + tok
	for _, tc := range []struct{ text, want string }{
		{base + ", tcp: '0.0.0.0:9443'}\n", `api.tcp "0.0.0.0:9443": not a loopback address`},
		{base + ", tcp: '192.0.2.5:9443'}\n", `api.tcp "192.0.2.5:9443": not a loopback address`},
		{base + ", tcp: '0.0.0.0:9443', tls_cert_file: " + cert + "}\n", `api.tls_key_file: required`},
		{base + ", tcp: '0.0.0.0:9443', tls_cert_file: " + cert + ", tls_key_file: " + ca + "}\n", `api.tls_cert_file "` + cert + `"`},
	} {
		if rc, out := configCheck(t, dir, tc.text); rc != 1 || !strings.Contains(out, tc.want) {
			t.Errorf("config check of\n%s: rc %d, want 1 and %q in:\n%s", tc.text, rc, tc.want, out)
		}
	}
	loose := writeToken(t, t.TempDir(), "tls-token", 0o644)
	if rc, out := configCheck(t, dir, "software: {engine: none}\nstate_dir: "+dir+"\napi: {socket: '', tcp: '127.0.0.1:9443', token_file: "+loose+"}\n"); rc != 1 ||
		!strings.Contains(out, `api.token_file "`+loose+`": mode 0644: group or others can read`) {
		t.Errorf("world-readable token file: rc %d:\n%s", rc, out)
	}
	tlsAll := ", tcp: '0.0.0.0:9443', tls_cert_file: " + cert + ", tls_key_file: " + key + ", tls_client_ca_file: " + ca + "}\n"
	if rc, out := configCheck(t, dir, base+tlsAll); rc != 0 {
		t.Errorf("TLS beyond loopback refused: %s", out)
	}

	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	cfg := simConfig(t, twoHWRules)
	cfg.API.TCP, cfg.API.TokenFile = addr, tok
	cfg.API.TLSCertFile, cfg.API.TLSKeyFile, cfg.API.TLSClientCAFile = cert, key, ca
	startOnSim(t, &cfg, 50)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pool := x509.NewCertPool()
	caPEM, _ := os.ReadFile(ca)
	pool.AppendCertsFromPEM(caPEM)
	pair, err := tls.LoadX509KeyPair(ccert, ckey)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := agentapi.NewTCPClient(addr, "tls-token").List(ctx); err == nil {
		t.Fatal("plain HTTP served on the TLS listener")
	}
	if _, err := agentapi.NewTLSClient(addr, "tls-token", &tls.Config{RootCAs: pool}).List(ctx); err == nil {
		t.Fatal("client without a certificate served (mutual TLS)")
	}
	if _, err := agentapi.NewTLSClient(addr, "wrong", &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{pair}}).List(ctx); !isAPICode(err, http.StatusUnauthorized) {
		t.Fatalf("wrong token over TLS: %v", err)
	}
	if _, err := agentapi.NewTLSClient(addr, "tls-token", &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{pair}}).List(ctx); err != nil {
		t.Fatalf("client with certificate and token: %v", err)
	}
	var out, errb bytes.Buffer
	if rc := cli.Rules([]string{"--addr", addr, "--token-file", tok, "--ca-file", ca, "--cert-file", ccert, "--key-file", ckey, "list"}, &out, &errb); rc != 0 || !strings.Contains(out.String(), "r-dns") {
		t.Fatalf("scrubd rules over mutual TLS: rc %d\n%s%s", rc, out.String(), errb.String())
	}
}

func isAPICode(err error, code int) bool {
	var ae *agentapi.APIError
	return errors.As(err, &ae) && ae.Code == code
}

// A rule refused for protection is not stored: not listed, and its id is
// free for a valid rule. `scrubd rules add` of a rule file is all or
// nothing, and so is a replace through the API.
func TestRefusalsLeaveNothing(t *testing.T) {
	cfg := simConfig(t, twoHWRules)
	cfg.Protect = []config.Protect{{Prefix: "192.0.2.1/32", Note: "management"}}
	startOnSim(t, &cfg, 50)
	c := agentapi.NewUnixClient(cfg.API.Socket)
	ctx := context.Background()
	listed := func() map[string]string {
		t.Helper()
		l, err := c.List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]string{}
		for _, r := range l {
			m[r.Rule.ID] = r.Status
		}
		return m
	}
	if _, err := c.Add(ctx, []byte(`{id: kill-mgmt, action: drop, match: {dst: 192.0.2.1/32}}`)); !isAPICode(err, http.StatusUnprocessableEntity) {
		t.Fatalf("protected rule: %v", err)
	}
	if st, ok := listed()["kill-mgmt"]; ok {
		t.Fatalf("refused rule listed (%s)", st)
	}
	if _, err := c.Add(ctx, []byte(`{id: kill-mgmt, action: drop, match: {dst: 203.0.113.7/32, proto: gre}}`)); err != nil {
		t.Fatalf("valid rule with the refused rule's id: %v", err)
	}

	// A three-rule file whose second rule drops only protected traffic.
	file := filepath.Join(t.TempDir(), "add.yaml")
	three := "rules:\n  - {id: add-1, action: drop, match: {dst: 203.0.113.81/32, proto: gre}}\n" +
		"  - {id: add-bad, action: drop, match: {dst: 192.0.2.1/32}}\n" +
		"  - {id: add-2, action: drop, match: {dst: 203.0.113.82/32, proto: gre}}\n"
	if err := os.WriteFile(file, []byte(three), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	rc := cli.Rules([]string{"--socket", cfg.API.Socket, "add", file}, &out, &errb)
	t.Logf("scrubd rules add %s: rc %d: %s", filepath.Base(file), rc, strings.TrimSpace(errb.String()))
	if rc != 1 || !strings.Contains(errb.String(), `rules[1] (id "add-bad"): match:`) {
		t.Fatalf("rules add of a file with a refused rule: rc %d\nstdout %s\nstderr %s", rc, out.String(), errb.String())
	}
	for _, id := range []string{"add-1", "add-bad", "add-2"} {
		if _, ok := listed()[id]; ok {
			t.Fatalf("%s stored from a refused file", id)
		}
	}
	// A file with an id already in use is refused whole too.
	dup := "rules:\n  - {id: add-1, action: drop, match: {dst: 203.0.113.81/32, proto: gre}}\n  - {id: kill-mgmt, action: drop, match: {dst: 203.0.113.9/32, proto: gre}}\n"
	os.WriteFile(file, []byte(dup), 0o644)
	out.Reset()
	errb.Reset()
	if rc := cli.Rules([]string{"--socket", cfg.API.Socket, "add", file}, &out, &errb); rc != 1 || !strings.Contains(errb.String(), `rules[1] (id "kill-mgmt"): id:`) {
		t.Fatalf("rules add with an existing id: rc %d %s", rc, errb.String())
	}
	if _, ok := listed()["add-1"]; ok {
		t.Fatal("add-1 stored from a refused file")
	}
	// Without the refused rule, the file goes in whole.
	os.WriteFile(file, []byte(strings.Replace(three, "  - {id: add-bad, action: drop, match: {dst: 192.0.2.1/32}}\n", "", 1)), 0o644)
	out.Reset()
	errb.Reset()
	if rc := cli.Rules([]string{"--socket", cfg.API.Socket, "add", file}, &out, &errb); rc != 0 {
		t.Fatalf("rules add: rc %d %s", rc, errb.String())
	}
	if m := listed(); m["add-1"] != "active" || m["add-2"] != "active" {
		t.Fatalf("after add: %v", m)
	}
	// Replace with a refused rule: 422, the API's rules unchanged.
	if _, err := c.Replace(ctx, []byte("rules:\n  - {id: rep-1, action: drop, match: {dst: 203.0.113.90/32, proto: gre}}\n  - {id: rep-bad, action: drop, match: {dst: 192.0.2.1/32}}\n")); !isAPICode(err, http.StatusUnprocessableEntity) {
		t.Fatalf("replace with a refused rule: %v", err)
	}
	if m := listed(); m["add-1"] != "active" || m["kill-mgmt"] != "active" || m["rep-1"] != "" || m["rep-bad"] != "" {
		t.Fatalf("after a refused replace: %v", m)
	}
}

// `config check` refuses what `run` refuses, and `run` refuses it before it
// loads a rule or touches anything, leaving no socket behind; a listener
// that cannot be opened at run time also stops the start before any rule.
func TestCheckAgreesWithRun(t *testing.T) {
	dir := t.TempDir()
	rules := filepath.Join(dir, "rules.yaml")
	if err := os.WriteFile(rules, []byte(twoHWRules), 0o644); err != nil {
		t.Fatal(err)
	}
	empty := writeToken(t, t.TempDir(), "", 0o600)
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	sock := filepath.Join(dir, "api.sock")
	base := "state_dir: " + dir + "/state\nrules: {files: [" + rules + "]}\noffload: {backend: sim, max_entries: 10}\n"
	for _, tc := range []struct {
		name, text, want string
		checkOK          bool // a run-time failure `config check` cannot see (a port in use)
	}{
		// api.tcp names a port (port 0 is refused), one in use: the start
		// must stop at the token before it tries to listen.
		{"missing token file", base + "software: {engine: dv}\napi: {socket: " + sock + ", tcp: '" + busy.Addr().String() + "', token_file: " + dir + "/nonexistent}\n",
			`api.token_file "` + dir + `/nonexistent": stat`, false},
		{"empty token file", base + "software: {engine: dv}\napi: {socket: " + sock + ", tcp: '" + busy.Addr().String() + "', token_file: " + empty + "}\n",
			`api.token_file "` + empty + `": empty`, false},
		{"metrics port out of range", base + "software: {engine: dv}\napi: {socket: " + sock + "}\nmetrics: {listen: '127.0.0.1:99999'}\n",
			`metrics.listen "127.0.0.1:99999"`, false},
		{"engine go", "state_dir: " + dir + "/state\nsoftware: {engine: go}\napi: {socket: " + sock + "}\n",
			`software.engine "go"`, false},
		{"metrics port in use", base + "software: {engine: dv}\napi: {socket: " + sock + "}\nmetrics: {listen: '" + busy.Addr().String() + "'}\n",
			`metrics.listen "` + busy.Addr().String() + `"`, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rc, out := configCheck(t, dir, tc.text)
			if tc.checkOK != (rc == 0) || (!tc.checkOK && !strings.Contains(out, tc.want)) {
				t.Fatalf("config check: rc %d, want %q:\n%s", rc, tc.want, out)
			}
			p := filepath.Join(dir, "run.yaml")
			if err := os.WriteFile(p, []byte(tc.text), 0o644); err != nil {
				t.Fatal(err)
			}
			var so, se syncbuf.Buffer
			done := make(chan int, 1)
			go func() { done <- cli.Run([]string{"--config", p, "--sim-scale", "5000"}, &so, &se) }()
			select {
			case rc = <-done:
			case <-time.After(30 * time.Second):
				t.Fatal("run did not fail")
			}
			if rc == 0 || !strings.Contains(se.String(), tc.want) {
				t.Fatalf("run: rc %d, want %q:\n%s", rc, tc.want, se.String())
			}
			for _, w := range []string{"rule file loaded", "placement", "scrubd running"} {
				if strings.Contains(se.String()+so.String(), w) {
					t.Fatalf("run got as far as %q before failing:\n%s", w, se.String())
				}
			}
			if _, err := os.Lstat(sock); err == nil {
				t.Fatalf("run left the socket %s behind", sock)
			}
			t.Logf("config check rc %d: %s; run rc %d: %s", map[bool]int{true: 0, false: 1}[tc.checkOK], strings.TrimSpace(out), rc, strings.TrimSpace(se.String()))
		})
	}
}

// The default software engine is one `run` can start (xdp): a config that
// names only its interfaces passes check with it; the go engine, which has
// no packet input in `run`, is refused by check.
func TestDefaultEngine(t *testing.T) {
	dir := t.TempDir()
	rc, out := configCheck(t, dir, "state_dir: "+dir+"\nsoftware: {interfaces: [eth0]}\n")
	if rc != 0 || !strings.Contains(out, "software xdp") {
		t.Fatalf("config with only interfaces: rc %d %s", rc, out)
	}
	if rc, out := configCheck(t, dir, "state_dir: "+dir+"\n"); rc != 1 || !strings.Contains(out, "software.interfaces: engine xdp needs at least one interface") {
		t.Fatalf("config without interfaces: rc %d %s", rc, out)
	}
	if rc, out := configCheck(t, dir, "state_dir: "+dir+"\nsoftware: {engine: go}\n"); rc != 1 || !strings.Contains(out, `software.engine "go": the Go classifier has no packet input`) {
		t.Fatalf("engine go: rc %d %s", rc, out)
	}
}

// A corrupt state file no longer stops the agent: it is moved aside with a
// loud log line and a metric, and the agent starts from its rule files.
func TestCorruptStateFile(t *testing.T) {
	cfg := simConfig(t, twoHWRules)
	garbage := []byte(`{"version": 1, "sources": {"api": [{"id": "x"`)
	if err := os.WriteFile(filepath.Join(cfg.StateDir, daemon.StateFile), garbage, 0o600); err != nil {
		t.Fatal(err)
	}
	n, err := sim.New(sim.Options{HWEntries: 50})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	var logs syncbuf.Buffer
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	ready := make(chan *daemon.Daemon, 1)
	go func() {
		done <- daemon.Run(ctx, &cfg, daemon.Options{Log: slog.New(slog.NewTextHandler(&logs, nil)), Paths: backend.Sim(n),
			Ready: func(d *daemon.Daemon) { ready <- d }})
	}()
	var d *daemon.Daemon
	select {
	case d = <-ready:
	case err := <-done:
		t.Fatalf("agent did not start with a corrupt state file: %v", err)
	}
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}()
	waitFor(t, "file rules in hardware", func() bool {
		for _, r := range d.Placer.View().Rules.All() {
			if r.ID == "r-dns" && r.Path == placement.HW {
				return true
			}
		}
		return false
	})
	aside, _ := filepath.Glob(filepath.Join(cfg.StateDir, daemon.StateFile+".corrupt-*"))
	if len(aside) != 1 {
		t.Fatalf("moved-aside files: %v", aside)
	}
	if kept, _ := os.ReadFile(aside[0]); !bytes.Equal(kept, garbage) {
		t.Fatalf("moved-aside file holds %q", kept)
	}
	if !strings.Contains(logs.String(), "level=ERROR msg=\"STATE FILE CORRUPT") || !strings.Contains(logs.String(), aside[0]) {
		t.Fatalf("no loud log line naming %s:\n%s", aside[0], logs.String())
	}
	if code, body := status(t, "http://"+d.HTTPAddr+"/metrics"); code != 200 || !strings.Contains(body, "scrubd_state_file_corrupt_total 1") {
		t.Fatalf("metrics %d lack scrubd_state_file_corrupt_total 1", code)
	}
}

// The default engine runs: the defaults' software section with only the
// interface named starts, on veth, and drops what the rule says.
func TestDefaultEngineRuns(t *testing.T) {
	needRootNetns(t)
	p := newNetnsPair(t)
	cfg := testConfig(t, "rules:\n- {id: dns-flood, action: drop, match: {proto: udp, dst_port: 53, dst: 203.0.113.0/24}}\n", func(c *config.Config) {
		c.Software = config.Defaults().Software
		c.Software.Interfaces = []string{p.ifB}
		c.Software.XDPPinPath = xdpPin(t)
		c.Software.CyclesPerPacket = 297
	})
	d, stop := startRealAgent(t, &cfg, p)
	defer stop()
	dropped := func() uint64 {
		for _, r := range d.Placer.View().Rules.All() {
			if r.ID == "dns-flood" && r.Path == placement.SW {
				return r.SW.Packets
			}
		}
		return 0
	}
	waitFor(t, "dns-flood in software", func() bool {
		for _, r := range d.Placer.View().Rules.All() {
			if r.ID == "dns-flood" && r.Path == placement.SW {
				return true
			}
		}
		return false
	})
	p.sendUDP(t, 53, 100)
	waitFor(t, "100 drops by the default engine", func() bool { return dropped() >= 100 })
	if n := dropped(); n != 100 || cfg.Software.Engine != "xdp" {
		t.Fatalf("engine %s dropped %d, want xdp and 100", cfg.Software.Engine, n)
	}
}
