package apisock

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/scrubd/scrubd/agent/config"
)

// env is a fake process: uid, environment, existing directories.
func env(uid int, vars map[string]string, dirs ...string) Env {
	return Env{
		UID:    func() int { return uid },
		Getenv: func(k string) string { return vars[k] },
		IsDir: func(p string) bool {
			for _, d := range dirs {
				if d == p {
					return true
				}
			}
			return false
		},
	}
}

// The table is the order the package doc promises, written out by hand.
func TestSimPath(t *testing.T) {
	for _, tc := range []struct {
		name string
		e    Env
		want string
	}{
		{"root ignores XDG", env(0, map[string]string{"XDG_RUNTIME_DIR": "/run/user/0"}, "/run/user/0"), "/run/scrubd/sim.sock"},
		{"XDG_RUNTIME_DIR", env(1000, map[string]string{"XDG_RUNTIME_DIR": "/run/user/1000"}), "/run/user/1000/scrubd/sim.sock"},
		{"XDG elsewhere", env(1000, map[string]string{"XDG_RUNTIME_DIR": "/var/run/u1000"}, "/run/user/1000"), "/var/run/u1000/scrubd/sim.sock"},
		{"relative XDG is ignored", env(1000, map[string]string{"XDG_RUNTIME_DIR": "run"}, "/run/user/1000"), "/run/user/1000/scrubd/sim.sock"},
		{"/run/user/UID", env(1000, nil, "/run/user/1000"), "/run/user/1000/scrubd/sim.sock"},
		{"tmp", env(1000, nil), "/tmp/scrubd-1000/sim.sock"},
		{"TMPDIR", env(1001, map[string]string{"TMPDIR": "/var/tmp"}), "/var/tmp/scrubd-1001/sim.sock"},
		{"relative TMPDIR is ignored", env(1001, map[string]string{"TMPDIR": "tmp"}), "/tmp/scrubd-1001/sim.sock"},
	} {
		if got := tc.e.SimPath(); got != tc.want {
			t.Errorf("%s: SimPath() = %q, want %q", tc.name, got, tc.want)
		}
	}
}

// The production default is the config's default api.socket.
func TestDefaultIsTheConfigDefault(t *testing.T) {
	if d := config.Defaults().API.Socket; d != Default {
		t.Fatalf("config default api.socket %q, apisock.Default %q", d, Default)
	}
}

func TestCandidatesOrder(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "scrubd.yaml")
	if err := os.WriteFile(cfg, []byte(minimal+"api:\n  socket: /srv/scrubd/api.sock\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	envSet := map[string]string{EnvVar: "/e.sock", "XDG_RUNTIME_DIR": "/run/user/1000"}
	envUnset := map[string]string{"XDG_RUNTIME_DIR": "/run/user/1000"}
	for _, tc := range []struct {
		name string
		o    Options
		want []Candidate
	}{
		{"flag beats all", Options{Socket: "/f.sock", Config: cfg, Env: env(1000, envSet)}, []Candidate{{"/f.sock", "--socket"}}},
		{"env beats config", Options{Config: cfg, Env: env(1000, envSet)}, []Candidate{{"/e.sock", "SCRUBD_SOCKET"}}},
		{"config", Options{Config: cfg, Env: env(1000, envUnset)}, []Candidate{{"/srv/scrubd/api.sock", "--config " + cfg}}},
		{"sim then default", Options{Env: env(1000, envUnset)}, []Candidate{{"/run/user/1000/scrubd/sim.sock", "run --sim"}, {"/run/scrubd/api.sock", "default"}}},
		{"root", Options{Env: env(0, nil)}, []Candidate{{"/run/scrubd/sim.sock", "run --sim"}, {"/run/scrubd/api.sock", "default"}}},
	} {
		got, err := Candidates(tc.o)
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if len(got) != len(tc.want) {
			t.Errorf("%s: got %v, want %v", tc.name, got, tc.want)
			continue
		}
		for i := range got {
			if got[i] != tc.want[i] {
				t.Errorf("%s: got %v, want %v", tc.name, got, tc.want)
			}
		}
	}
}

func TestCandidatesConfigErrors(t *testing.T) {
	dir := t.TempDir()
	noSock := filepath.Join(dir, "nosock.yaml")
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(noSock, []byte(minimal+"api:\n  socket: \"\"\n"), 0o644)
	os.WriteFile(bad, []byte("api:\n  sockit: /x\n"), 0o644)
	for _, tc := range []struct{ file, want string }{
		{filepath.Join(dir, "missing.yaml"), "no such file"},
		{noSock, "api.socket is empty"},
		{bad, "sockit"},
	} {
		_, err := Candidates(Options{Config: tc.file, Env: env(1000, nil)})
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "--config") {
			t.Errorf("--config %s: err %v, want one naming --config and %q", tc.file, err, tc.want)
		}
	}
}

// minimal is the smallest valid config: no engine at all.
const minimal = "software:\n  engine: none\n"

// listen serves nothing but accepts connections on path until the test ends.
func listen(t *testing.T, path string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
}

func TestFindSimSocket(t *testing.T) {
	xdg := t.TempDir()
	e := env(1000, map[string]string{"XDG_RUNTIME_DIR": xdg})
	sim := filepath.Join(xdg, "scrubd", "sim.sock")
	listen(t, sim)
	c, err := Find(Options{Env: e})
	if err != nil {
		t.Fatal(err)
	}
	if c.Path != sim || c.From != "run --sim" {
		t.Fatalf("Find = %+v, want %s from run --sim", c, sim)
	}
}

func TestFindNoAgent(t *testing.T) {
	xdg := t.TempDir()
	e := env(1000, map[string]string{"XDG_RUNTIME_DIR": xdg})
	// A socket file nobody listens on, as a killed agent leaves it.
	stale := filepath.Join(xdg, "scrubd", "sim.sock")
	os.MkdirAll(filepath.Dir(stale), 0o700)
	if err := syscall.Bind(mustSocket(t), &syscall.SockaddrUnix{Name: stale}); err != nil {
		t.Fatal(err)
	}
	_, err := Find(Options{Env: e})
	var nf *NotFound
	if !errors.As(err, &nf) {
		t.Fatalf("Find with no agent: %v, want *NotFound", err)
	}
	msg := err.Error()
	for _, want := range []string{stale + " (run --sim): nobody listening", "(default)", "--socket", "SCRUBD_SOCKET", "--config"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q lacks %q", msg, want)
		}
	}
	if len(nf.Tried) != 2 || nf.Tried[1].Path != Default {
		t.Errorf("tried %v, want the sim socket then %s", nf.Tried, Default)
	}
	// An explicit socket is the only one tried.
	_, err = Find(Options{Socket: filepath.Join(xdg, "none.sock"), Env: e})
	if !errors.As(err, &nf) || len(nf.Tried) != 1 || !strings.Contains(err.Error(), "none.sock (--socket): no such socket") {
		t.Errorf("Find --socket none.sock: %v", err)
	}
}

// mustSocket is an unbound unix socket closed when the test ends.
func mustSocket(t *testing.T) int {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Close(fd) })
	return fd
}

func TestPrepareDir(t *testing.T) {
	base := t.TempDir()
	sock := filepath.Join(base, "scrubd-1000", "sim.sock")
	if err := PrepareDir(sock); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Dir(sock))
	if err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("made %v (%v), want mode 0700", fi.Mode(), err)
	}
	if err := PrepareDir(sock); err != nil {
		t.Fatalf("second PrepareDir: %v", err)
	}
	open := filepath.Join(base, "open")
	os.Mkdir(open, 0o700)
	os.Chmod(open, 0o777)
	if err := PrepareDir(filepath.Join(open, "sim.sock")); err == nil || !strings.Contains(err.Error(), "others write") {
		t.Errorf("world-writable dir: %v", err)
	}
	file := filepath.Join(base, "file")
	os.WriteFile(file, nil, 0o600)
	if err := PrepareDir(filepath.Join(file, "sim.sock")); err == nil {
		t.Errorf("a file as the directory: accepted")
	}
}

// Another user's directory is refused. Changing a directory's owner needs
// root; CI runs as root.
func TestPrepareDirOtherOwner(t *testing.T) {
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("CI=true: this test needs root (chown)")
		}
		t.Skip("needs root to chown a directory")
	}
	theirs := filepath.Join(t.TempDir(), "theirs")
	os.Mkdir(theirs, 0o700)
	if err := os.Chown(theirs, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	if err := PrepareDir(filepath.Join(theirs, "sim.sock")); err == nil || !strings.Contains(err.Error(), "owned by uid 65534") {
		t.Errorf("another user's directory: %v", err)
	}
}
