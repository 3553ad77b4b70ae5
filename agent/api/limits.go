package api

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log"
	"net"
	"net/http"
	"sync"
	"time"
)

// Limits bound what the clients of one listener can hold: time to send a
// request's header and whole request, time to write a reply, how long an
// idle keep-alive connection stays open, how many connections are open at
// once, and the size of a request's header. The size of a request body is
// the Server's (MaxBody).
type Limits struct {
	ReadHeaderTimeout time.Duration
	ReadTimeout       time.Duration
	WriteTimeout      time.Duration
	IdleTimeout       time.Duration
	// MaxConns: at most this many accepted connections are open; further
	// clients wait in the kernel's accept queue until one closes, so a
	// flood of connections costs the process no more descriptors.
	MaxConns int
	// MaxHeaderBytes: a larger request line and header is answered 431
	// Request Header Fields Too Large (RFC 6585 section 5) with the limit
	// in the body; one so large that net/http stops reading it (4096
	// bytes of slack beyond the limit) gets net/http's own 431.
	MaxHeaderBytes int
	// ErrorLog receives net/http's own errors (failed TLS handshakes);
	// nil: the log package's default logger.
	ErrorLog *log.Logger
}

// DefaultLimits are the configuration's defaults (docs/config.md, api.*).
func DefaultLimits() Limits {
	return Limits{ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 30 * time.Second, WriteTimeout: 30 * time.Second,
		IdleTimeout: 30 * time.Second, MaxConns: 64, MaxHeaderBytes: 16 << 10}
}

// DefaultMaxBody is the default limit of a request body (api.max_body_bytes).
const DefaultMaxBody = 16 << 20

// LimitListener returns a listener that has at most n accepted connections
// open at once: Accept waits for one of them to close. Close ends a
// waiting Accept.
func LimitListener(l net.Listener, n int) net.Listener {
	return &limitListener{Listener: l, sem: make(chan struct{}, n), done: make(chan struct{})}
}

type limitListener struct {
	net.Listener
	sem  chan struct{}
	done chan struct{}
	once sync.Once
}

func (l *limitListener) Accept() (net.Conn, error) {
	select {
	case l.sem <- struct{}{}:
	case <-l.done:
		return nil, net.ErrClosed
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.sem
		return nil, err
	}
	return &limitConn{Conn: c, release: func() { <-l.sem }}, nil
}

func (l *limitListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return l.Listener.Close()
}

type limitConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}

// ServeLimited serves h on l within lim (and over TLS when tc is not nil)
// until ctx ends, then shuts down gracefully. It closes l.
func ServeLimited(ctx context.Context, l net.Listener, h http.Handler, lim Limits, tc *tls.Config) error {
	if lim.MaxConns > 0 {
		l = LimitListener(l, lim.MaxConns)
	}
	if tc != nil {
		l = tls.NewListener(l, tc)
	}
	if lim.MaxHeaderBytes > 0 {
		h = headerLimit(h, lim.MaxHeaderBytes)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: lim.ReadHeaderTimeout, ReadTimeout: lim.ReadTimeout,
		WriteTimeout: lim.WriteTimeout, IdleTimeout: lim.IdleTimeout, MaxHeaderBytes: lim.MaxHeaderBytes, ErrorLog: lim.ErrorLog,
		// No HTTP/2: one request per stream of bytes keeps every limit above
		// in force as written.
		TLSNextProto: map[string]func(*http.Server, *tls.Conn, http.Handler){}}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(l) }()
	select {
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if srv.Shutdown(sctx) != nil {
			srv.Close() // connections still busy after the grace period
		}
		<-errc
		return nil
	case err := <-errc:
		if errors.Is(err, http.ErrServerClosed) {
			return nil
		}
		return err
	}
}

// headerLimit answers 431, naming the limit, a request whose request line
// and header (as sent: "Name: value" lines with their CRLFs) are larger
// than max bytes; net/http has read them already, within its own cap.
func headerLimit(h http.Handler, max int) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := len(r.Method) + 1 + len(r.RequestURI) + 1 + len(r.Proto) + 2 // request line
		if r.Host != "" {
			n += len("Host: ") + len(r.Host) + 2
		}
		for k, vs := range r.Header {
			for _, v := range vs {
				n += len(k) + 2 + len(v) + 2
			}
		}
		n += 2 // the empty line
		if n > max {
			w.Header().Set("Connection", "close")
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusRequestHeaderFieldsTooLarge)
			fmt.Fprintf(w, "{\"error\": \"request line and header of %d bytes, larger than %d bytes (api.max_header_bytes)\"}\n", n, max)
			return
		}
		h.ServeHTTP(w, r)
	})
}
