package deploy_test

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const unitPath = "systemd/scrubd.service"

// verifyUnit runs `systemd-analyze verify` on unit text inside a throwaway
// root that holds stub executables for the paths the unit names and a copy
// of the host's system units (for the targets it depends on). The unit is
// checked verbatim: nothing in it is rewritten. Any message is a failure:
// systemd-analyze exits 0 on unknown keys and unparsable values, so its
// output, not only its status, decides.
func verifyUnit(t *testing.T, name string, unit []byte) (string, error) {
	t.Helper()
	root := t.TempDir()
	write := func(p string, data []byte, mode os.FileMode) {
		t.Helper()
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, data, mode); err != nil {
			t.Fatal(err)
		}
	}
	write("etc/systemd/system/"+name, unit, 0o644)
	for _, exe := range execPaths(unit) {
		write(exe, []byte("#!/bin/sh\nexit 0\n"), 0o755)
	}
	for _, dir := range []string{"/usr/lib/systemd/system", "/lib/systemd/system"} {
		ents, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		for _, e := range ents {
			if e.Type().IsRegular() {
				data, err := os.ReadFile(filepath.Join(dir, e.Name()))
				if err == nil {
					write(filepath.Join("usr/lib/systemd/system", e.Name()), data, 0o644)
				}
			}
		}
		break
	}
	cmd := exec.Command("systemd-analyze", "verify", "--root="+root, name)
	cmd.Env = append(os.Environ(), "SYSTEMD_LOG_COLOR=0", "SYSTEMD_PAGER=")
	out, err := cmd.CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

// execPaths returns the absolute program paths of the unit's Exec* lines.
func execPaths(unit []byte) []string {
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(unit))
	for sc.Scan() {
		k, v, ok := strings.Cut(strings.TrimSpace(sc.Text()), "=")
		if !ok || !strings.HasPrefix(k, "Exec") {
			continue
		}
		v = strings.TrimLeft(v, "-@:+!")
		if f := strings.Fields(v); len(f) > 0 && strings.HasPrefix(f[0], "/") {
			out = append(out, f[0])
		}
	}
	return out
}

func needSystemdAnalyze(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("systemd-analyze"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("systemd-analyze not found: CI must install the systemd package")
		}
		t.Skip("systemd-analyze not installed (Debian package systemd)")
	}
}

func TestSystemdUnitVerifies(t *testing.T) {
	needSystemdAnalyze(t)
	unit, err := os.ReadFile(unitPath)
	if err != nil {
		t.Fatal(err)
	}
	if out, err := verifyUnit(t, "scrubd.service", unit); err != nil || out != "" {
		t.Fatalf("systemd-analyze verify %s: err=%v\n%s", unitPath, err, out)
	}
}

// The check above must be able to fail: a misspelt key, a bad value and a
// missing program each make it report.
func TestSystemdVerifyCatchesMistakes(t *testing.T) {
	needSystemdAnalyze(t)
	unit, err := os.ReadFile(unitPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ old, new string }{
		{"\nKillMode=mixed\n", "\nKilMode=mixed\n"},
		{"\nRestart=on-failure\n", "\nRestart=onfailure\n"},
		{"ExecReload=/bin/kill", "ExecReload=kill"},
	} {
		if !bytes.Contains(unit, []byte(c.old)) {
			t.Fatalf("unit has no %q to break", c.old)
		}
		bad := bytes.Replace(unit, []byte(c.old), []byte(c.new), 1)
		if out, err := verifyUnit(t, "scrubd.service", bad); err == nil && out == "" {
			t.Errorf("systemd-analyze verify accepted the unit with %q", strings.TrimSpace(c.new))
		}
	}
}

// unitValues returns every value of key in the unit (keys may repeat).
func unitValues(t *testing.T, unit []byte, key string) []string {
	t.Helper()
	var vals []string
	sc := bufio.NewScanner(bytes.NewReader(unit))
	for sc.Scan() {
		l := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(l, "#") {
			continue
		}
		if k, v, ok := strings.Cut(l, "="); ok && k == key {
			vals = append(vals, v)
		}
	}
	return vals
}

// TestSystemdUnitPolicy pins what the runbook promises about the unit: the
// exact capability set (each one is justified in the unit's header), no
// CAP_SYS_ADMIN, SIGHUP reload, SIGTERM stop,
// restart on failure and unlimited locked memory.
func TestSystemdUnitPolicy(t *testing.T) {
	unit, err := os.ReadFile(unitPath)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{
		"CapabilityBoundingSet": {"CAP_NET_ADMIN CAP_BPF CAP_PERFMON CAP_NET_RAW CAP_IPC_LOCK CAP_NET_BIND_SERVICE"},
		"ExecReload":            {"/bin/kill -HUP $MAINPID"},
		"KillSignal":            {"SIGTERM"},
		"Restart":               {"on-failure"},
		"LimitMEMLOCK":          {"infinity"},
		"NoNewPrivileges":       {"yes"},
		"ProtectSystem":         {"strict"},
		"ReadWritePaths":        {"/sys/fs/bpf"},
	}
	for k, v := range want {
		if got := unitValues(t, unit, k); !slices.Equal(got, v) {
			t.Errorf("%s = %q, want %q", k, got, v)
		}
	}
	for _, c := range strings.Fields(unitValues(t, unit, "CapabilityBoundingSet")[0]) {
		if !bytes.Contains(unit, []byte("#   "+c+" ")) {
			t.Errorf("capability %s has no justification line in the unit header", c)
		}
	}
	if strings.Contains(unitValues(t, unit, "CapabilityBoundingSet")[0], "CAP_SYS_ADMIN") {
		t.Error("the unit grants CAP_SYS_ADMIN")
	}
}

// Every capability name in the unit must be one systemd
// knows: systemd-analyze verify silently ignores unknown names.
func TestSystemdCapabilityNames(t *testing.T) {
	needSystemdAnalyze(t)
	out, err := exec.Command("systemd-analyze", "capability").Output()
	if err != nil {
		t.Fatalf("systemd-analyze capability: %v", err)
	}
	known := map[string]bool{}
	for _, l := range strings.Split(string(out), "\n") {
		if f := strings.Fields(l); len(f) == 2 {
			known[strings.ToUpper(f[0])] = true
		}
	}
	for _, p := range []string{unitPath} {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range append(unitValues(t, data, "CapabilityBoundingSet"), unitValues(t, data, "AmbientCapabilities")...) {
			for _, c := range strings.Fields(v) {
				if !known[strings.TrimPrefix(c, "~")] {
					t.Errorf("%s: unknown capability %s", p, c)
				}
			}
		}
	}
}
