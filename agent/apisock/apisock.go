// Package apisock says where a scrubd command finds its agent's API socket.
//
// A client command (scrubd rules ...) takes the first of these that is set:
//
//  1. the --socket flag;
//  2. the SCRUBD_SOCKET environment variable;
//  3. --config FILE: the api.socket that config names;
//
// and when none is set it tries, in this order, the first that answers:
//
//  4. the per-user socket that `scrubd run --sim` listens on (SimPath);
//  5. the production default, /run/scrubd/api.sock (Default).
//
// SimPath is /run/scrubd/sim.sock for root; for any other user it is
// $XDG_RUNTIME_DIR/scrubd/sim.sock when XDG_RUNTIME_DIR is set (the
// per-user runtime directory of the XDG Base Directory Specification),
// else /run/user/UID/scrubd/sim.sock when that runtime directory exists,
// else $TMPDIR/scrubd-UID/sim.sock (TMPDIR defaulting to /tmp). The agent
// that listens there makes the directory with PrepareDir, which refuses a
// directory that another user owns or can write to.
//
// When no agent answers, the error (*NotFound) lists every path tried with
// where it came from, and how to choose one.
package apisock

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/scrubd/scrubd/agent/config"
)

// Default is the production agent's socket (api.socket's default).
const Default = "/run/scrubd/api.sock"

// EnvVar names the environment variable that picks the socket.
const EnvVar = "SCRUBD_SOCKET"

// Env is what SimPath reads of the process: the effective user id and the
// environment. Tests set it; nil fields read the process.
type Env struct {
	UID    func() int
	Getenv func(string) string
	// IsDir reports whether a directory exists (for /run/user/UID).
	IsDir func(string) bool
}

func (e Env) uid() int {
	if e.UID != nil {
		return e.UID()
	}
	return os.Geteuid()
}

func (e Env) getenv(k string) string {
	if e.Getenv != nil {
		return e.Getenv(k)
	}
	return os.Getenv(k)
}

func (e Env) isDir(p string) bool {
	if e.IsDir != nil {
		return e.IsDir(p)
	}
	fi, err := os.Stat(p)
	return err == nil && fi.IsDir()
}

// SimPath is the socket that `scrubd run --sim` listens on for the
// current user (see the package doc for the order).
func SimPath() string { return Env{}.SimPath() }

// SimPath is the per-user sim socket as e sees the process.
func (e Env) SimPath() string {
	uid := e.uid()
	if uid == 0 {
		return "/run/scrubd/sim.sock"
	}
	if d := e.getenv("XDG_RUNTIME_DIR"); d != "" && filepath.IsAbs(d) {
		return filepath.Join(d, "scrubd", "sim.sock")
	}
	if d := "/run/user/" + strconv.Itoa(uid); e.isDir(d) {
		return filepath.Join(d, "scrubd", "sim.sock")
	}
	tmp := e.getenv("TMPDIR")
	if tmp == "" || !filepath.IsAbs(tmp) {
		tmp = "/tmp"
	}
	return filepath.Join(tmp, "scrubd-"+strconv.Itoa(uid), "sim.sock")
}

// PrepareDir makes the directory that will hold the socket at sock (mode
// 0700 when it makes it) and refuses one that is not a directory, that
// another user owns, or that group or others may write to: in a shared
// directory such as /tmp, someone else could otherwise put their socket
// where the user's commands look for their agent.
func PrepareDir(sock string) error {
	dir := filepath.Dir(sock)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("socket directory %s: %w", dir, err)
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("socket directory %s: %w", dir, err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("socket directory %s: not a directory (%v)", dir, fi.Mode().Type())
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Geteuid() {
		return fmt.Errorf("socket directory %s: owned by uid %d, not by this user (uid %d); remove it or choose another socket", dir, st.Uid, os.Geteuid())
	}
	if fi.Mode().Perm()&0o022 != 0 {
		return fmt.Errorf("socket directory %s: mode %v lets others write to it; chmod go-w it or choose another socket", dir, fi.Mode().Perm())
	}
	return nil
}

// Candidate is one socket path and where it came from.
type Candidate struct {
	Path string
	From string // "--socket", "SCRUBD_SOCKET", "--config FILE", "run --sim", "default"
}

// Options are a client command's choices.
type Options struct {
	Socket string // --socket ("" when not given)
	Config string // --config FILE ("" when not given)
	Env    Env
	// Timeout bounds each connection attempt (0: one second).
	Timeout time.Duration
}

// Candidates lists the sockets to try, in order: the chosen one alone when
// --socket, SCRUBD_SOCKET or --config chooses it; else the sim socket and
// the default. The error is a config that cannot be read.
func Candidates(o Options) ([]Candidate, error) {
	switch {
	case o.Socket != "":
		return []Candidate{{o.Socket, "--socket"}}, nil
	case o.Env.getenv(EnvVar) != "":
		return []Candidate{{o.Env.getenv(EnvVar), EnvVar}}, nil
	case o.Config != "":
		data, err := os.ReadFile(o.Config)
		if err != nil {
			return nil, fmt.Errorf("--config: %w", err)
		}
		// Only the socket is needed: the rule, token and TLS files the
		// config names are not read.
		c, err := config.Parse(o.Config, data, false)
		if err != nil {
			return nil, fmt.Errorf("--config: %w", err) // err names the file
		}
		if c.API.Socket == "" {
			return nil, fmt.Errorf("--config %s: api.socket is empty (the agent listens on no socket); use --addr", o.Config)
		}
		return []Candidate{{c.API.Socket, "--config " + o.Config}}, nil
	}
	sim := o.Env.SimPath()
	if sim == Default {
		return []Candidate{{Default, "default"}}, nil
	}
	return []Candidate{{sim, "run --sim"}, {Default, "default"}}, nil
}

// NotFound is the error when no candidate socket answers.
type NotFound struct {
	Tried []Candidate
	Errs  []error // Errs[i] is why Tried[i] did not answer
}

func (e *NotFound) Error() string {
	var b strings.Builder
	b.WriteString("no scrubd agent answers; tried:")
	for i, c := range e.Tried {
		fmt.Fprintf(&b, "\n  %s (%s): %v", c.Path, c.From, e.Errs[i])
	}
	b.WriteString("\nchoose the agent's socket with --socket PATH, SCRUBD_SOCKET=PATH or --config FILE (its api.socket)")
	return b.String()
}

// Find returns the first candidate socket on which an agent accepts a
// connection, or a *NotFound naming each path tried.
func Find(o Options) (Candidate, error) {
	cands, err := Candidates(o)
	if err != nil {
		return Candidate{}, err
	}
	to := o.Timeout
	if to <= 0 {
		to = time.Second
	}
	nf := &NotFound{}
	for _, c := range cands {
		conn, err := net.DialTimeout("unix", c.Path, to)
		if err == nil {
			conn.Close()
			return c, nil
		}
		nf.Tried = append(nf.Tried, c)
		nf.Errs = append(nf.Errs, dialCause(err))
	}
	return Candidate{}, nf
}

// dialCause shortens "dial unix PATH: connect: no such file or directory"
// to its cause: the path is printed beside it.
func dialCause(err error) error {
	var oe *net.OpError
	if errors.As(err, &oe) && oe.Err != nil {
		var se *os.SyscallError
		if errors.As(oe.Err, &se) {
			switch {
			case errors.Is(se.Err, syscall.ENOENT):
				return errors.New("no such socket")
			case errors.Is(se.Err, syscall.ECONNREFUSED):
				return errors.New("nobody listening (a socket left by an agent that stopped?)")
			case errors.Is(se.Err, syscall.EACCES):
				return errors.New("permission denied (run as a user allowed to use the agent's socket)")
			}
			return se.Err
		}
		return oe.Err
	}
	return err
}
